"""Reading contact cards from vCard files (.vcf): address books from phones,
Google Contacts, Outlook and Apple Contacts.

The file is streamed a line at a time through vobject's line reader, which
unfolds continued lines and joins vCard 2.1 quoted-printable soft breaks, and
its line parser (groups such as ``item1.EMAIL``, parameters). The values are
decoded here rather than by vobject's vCard behaviours, which keep only the
first of several comma-separated values ("NICKNAME:Kathy,KJ" would lose KJ,
and an unescaped comma in a name would cut it short).

Each card gives one `ContactCard`: its name from FN, else N, else ORG, else
its first email address; nicknames, email addresses and phone numbers as
aliases; organisation, title, birthday and note as details. vCard 2.1, 3.0
and 4.0 are read alike; photos and other binary data are passed over.
"""

from __future__ import annotations

import datetime as dt
import os
import quopri
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from vobject.base import (
    ParseError,
    parseLine,
)

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    ContactCard,
    ImportOptions,
    Item,
    Progress,
    Skipped,
    clean_text,
    where,
)
from pixie.device.store.contacts import MAX_NAME_CHARS, phone_alias
from pixie.protocol.syncmessages import MAX_NOTE_DETAIL_CHARS, MAX_SHORT_CHARS

SUFFIXES = (".vcf", ".vcard")
SNIFF_BYTES = 4096
MAGIC = b"BEGIN:VCARD"
MAX_FILE_BYTES = 64 * 1024 * 1024
PROGRESS_CARDS = 256  # cards between two calls of the progress hook
# Properties whose value is binary data; a line after one that does not
# parse is taken for more of that data (old exporters do not fold it).
_BINARY = frozenset({"PHOTO", "LOGO", "SOUND", "KEY"})
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED = {"n": "\n", "N": "\n"}


class _Lines:
    """The file's lines as text for vobject's reader: each decoded as UTF-8,
    or as Windows-1252 (then Latin-1) when it is not, as old exports write;
    the bytes read so far are counted for the progress hook."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.read = 0
        self.first = True

    def readline(self) -> str:
        raw = self.stream.readline()
        self.read += len(raw)
        if self.first:
            self.first = False
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        return _decode(raw)


_QP = "quoted-printable"


def logical_lines(lines: _Lines) -> Iterator[tuple[str, int]]:
    """The file's logical lines and where each starts, as vobject's
    ``getLogicalLines(..., allowQP=True)`` gives them: folded lines joined, a
    quoted-printable value whose line ends in "=" continued on the next, a
    blank line ending one. Written here because vobject looks at the whole
    logical line again for every physical line added to it, so a card of
    many thousand soft line breaks took time growing with their square; this
    keeps the parts and what it needs to know of them as it goes."""
    parts: list[str] = []
    tail = ""  # the logical line's last characters, folded: a match may span a join
    quoted = False  # "quoted-printable" is in the logical line
    continued = False  # a quoted-printable value goes on on the next line
    number = start = 0
    while True:
        line = lines.readline()
        if line == "":
            break
        line = line.rstrip("\r\n")
        number += 1
        if line.rstrip() == "":
            if parts:
                yield "".join(parts), start
            start = number
            parts, tail, quoted, continued = [], "", False, False
            continue
        if continued:
            added = "\n" + line
            continued = False
        elif line[0] in " \t":
            added = line[1:]
        else:
            if parts:
                yield "".join(parts), start
                start = number
            parts, tail, quoted = [], "", False
            added = line
        parts.append(added)
        seen = (tail + added).lower()
        quoted = quoted or _QP in seen
        tail = seen[-len(_QP) :]
        if tail.endswith("=") and quoted:
            continued = True
    if parts:
        yield "".join(parts), start


def _decode(raw: bytes, charset: str = "utf-8") -> str:
    for encoding in (charset, "utf-8", "cp1252"):
        try:
            return raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    return raw.decode("latin-1")


class _Property:
    """One content line of a card: its name, parameters and decoded text."""

    __slots__ = ("name", "params", "value")

    def __init__(self, name: str, params: dict[str, list[str]], value: str) -> None:
        self.name = name
        self.params = params
        self.value = value


def _property(text: str, number: int) -> _Property:
    name, raw_params, value, _group = parseLine(text, number)
    params: dict[str, list[str]] = {}
    for param in raw_params:
        if len(param) == 1:  # vCard 2.1: "TEL;WORK;VOICE", "ENCODING" left implicit
            params.setdefault("TYPE", []).append(str(param[0]).upper())
        else:
            params.setdefault(str(param[0]).upper(), []).extend(str(v) for v in param[1:])
    encodings = {v.upper() for v in params.get("ENCODING", [])} | set(params.get("TYPE", []))
    if "QUOTED-PRINTABLE" in encodings:
        charset = (params.get("CHARSET") or ["utf-8"])[0]
        value = _decode(quopri.decodestring(value.encode("utf-8")), charset)
    return _Property(str(name).upper(), params, str(value))


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(1)), value)


def _split(value: str, separator: str) -> list[str]:
    """``value`` cut at each ``separator`` not escaped by a backslash, each
    part unescaped."""
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == separator:
            parts.append(_unescape("".join(current)))
            current = []
        else:
            current.append(ch)
    parts.append(_unescape("".join(current) + ("\\" if escaped else "")))
    return parts


def _line(value: str, limit: int = MAX_SHORT_CHARS) -> str:
    """One line: spacing collapsed, control characters dropped, cut at ``limit``."""
    return " ".join(clean_text(value).split())[:limit].rstrip()


_BDAY = re.compile(
    r"(?:(?P<year>\d{4})-?|--)(?P<month>\d{2})-?(?P<day>\d{2})(?:T[\d:]*(?:Z|[+-]\d{2}:?\d{2})?)?"
)


def _birthday(prop: _Property) -> str | None:
    """A BDAY as "YYYY-MM-DD", or "--MM-DD" without a year; None if it is no
    date (vCard 4 allows free text). Apple marks an unknown year by writing
    the year it omits (X-APPLE-OMIT-YEAR)."""
    shape = _BDAY.fullmatch(prop.value.strip())
    if shape is None:
        return None
    year, month, day = shape.group("year"), shape.group("month"), shape.group("day")
    if year is not None and year in prop.params.get("X-APPLE-OMIT-YEAR", []):
        year = None
    try:
        dt.date(int(year or 2000), int(month), int(day))  # 2000 has a 29 February
    except ValueError:
        return None
    return f"{year}-{month}-{day}" if year else f"--{month}-{day}"


def _card(props: list[_Property]) -> ContactCard | None:
    """The card these properties describe, or None if nothing names it."""
    fn = ""
    n = ""
    org = ""
    title = None
    birthday = None
    note = None
    nicknames: list[str] = []
    emails: list[str] = []
    phones: list[str] = []
    written: list[str] = []  # phone numbers as the card writes them, with their kind
    postal = None
    for prop in props:
        if prop.name == "FN" and not fn:
            fn = _line(_unescape(prop.value), MAX_NAME_CHARS)
        elif prop.name == "N" and not n:
            parts = [" ".join(_split(p, ",")) for p in _split(prop.value, ";")]
            family, given, additional, _prefix, suffix = (parts + [""] * 5)[:5]
            n = _line(" ".join((given, additional, family, suffix)), MAX_NAME_CHARS)
        elif prop.name == "ORG" and not org:
            org = _line(", ".join(p.strip() for p in _split(prop.value, ";") if p.strip()))
        elif prop.name == "TITLE" and title is None:
            title = _line(_unescape(prop.value)) or None
        elif prop.name == "BDAY" and birthday is None:
            birthday = _birthday(prop)
        elif prop.name == "NOTE" and note is None:
            note = clean_text(_unescape(prop.value))[:MAX_NOTE_DETAIL_CHARS].strip() or None
        elif prop.name == "NICKNAME":
            nicknames.extend(_line(nick, MAX_NAME_CHARS) for nick in _split(prop.value, ","))
        elif prop.name == "EMAIL":
            address = "".join(_unescape(prop.value).split()).lower().removeprefix("mailto:")
            if "@" in address and len(address) <= MAX_NAME_CHARS:
                emails.append(address)
        elif prop.name == "TEL":
            phone = phone_alias(_unescape(prop.value))
            if phone is not None:
                phones.append(phone)
                shown = _line(_unescape(prop.value).removeprefix("tel:"), 40)
                kind = _phone_kind(prop)
                written.append(f"{kind} {shown}" if kind else shown)
        elif prop.name == "ADR" and postal is None:
            parts = [" ".join(_split(p, ",")) for p in _split(prop.value, ";")]
            postal = _line(", ".join(p.strip() for p in parts if p.strip())) or None
    name = fn or n or org or (emails[0] if emails else "")
    if not name:
        return None
    aliases = tuple(dict.fromkeys(a for a in (*nicknames, *emails, *phones) if a))
    return ContactCard(
        name=name,
        aliases=aliases,
        org=org or None,
        title=title,
        birthday=birthday,
        note=note,
        phone=_fit("; ".join(dict.fromkeys(written))) or None,
        address=postal,
    )


_PHONE_KINDS = ("cell", "mobile", "iphone", "home", "work", "main", "fax", "pager")


def _phone_kind(prop: _Property) -> str:
    """A number's kind from its TYPE ("CELL", "type=WORK,VOICE", vCard 2.1's
    bare "WORK"): mobile, home, work, ...; "" when it names none."""
    values = {
        part.strip().casefold()
        for key, vs in prop.params.items()
        for v in (*vs, key)
        for part in v.split(",")
    }
    for kind in _PHONE_KINDS:
        if kind in values:
            return "mobile" if kind in ("cell", "iphone") else kind
    return ""


def _fit(text: str) -> str:
    """Within a short detail's bound, cut at a "; " if it must be cut."""
    if len(text) <= MAX_SHORT_CHARS:
        return text
    return text[:MAX_SHORT_CHARS].rsplit("; ", 1)[0]


class VcardImporter:
    """vCard address books: a contact card for each card with a name."""

    name = "vcf"
    units = ("contact", "contacts")

    def sniff(self, path: Path) -> bool:
        """A name ending .vcf or .vcard, or a regular file that starts (after
        a byte order mark and blank space) with BEGIN:VCARD. A pipe or a
        device is never read: its bytes belong to the import."""
        if path.suffix.lower() in SUFFIXES:
            return True
        try:
            # Checked before opening: opening a named pipe would wait for a writer.
            if not stat.S_ISREG(path.stat().st_mode):
                return False
            with path.open("rb") as stream:
                head = stream.read(SNIFF_BYTES)
        except OSError:
            return False
        head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
        return head[: len(MAGIC)].upper() == MAGIC

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every card of ``path``, streamed: a `ContactCard` for each, or a
        `Skipped` for one without a name."""
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
        with stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise BadInput(
                    f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB,"
                    " too large for an address book"
                )
            lines = _Lines(stream)
            try:
                yield from self._cards(path, lines, size, progress)
            except OSError as exc:
                raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
            if progress is not None:
                progress(lines.read, max(size, lines.read))

    def _cards(
        self, path: Path, lines: _Lines, size: int, progress: Progress | None
    ) -> Iterator[Item]:
        number = 0  # cards begun
        depth = 0  # components open: a 2.1 AGENT may hold a card of its own
        props: list[_Property] = []
        previous = ""
        start = 0
        for text, counted in logical_lines(lines):
            line_number = counted or 1  # the reader counts the first line as 0, the others from 1
            if lines.read > MAX_FILE_BYTES:
                raise BadInput(
                    f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB,"
                    " too large for an address book"
                )
            place = f"card {number}, line {line_number}" if depth else f"line {line_number}"
            try:
                prop = _property(text, line_number)
            except ParseError:
                if depth and previous in _BINARY:
                    continue  # unfolded binary data of a photo or a key
                raise BadInput(where(path, f"{place}: not a vCard line")) from None
            previous = prop.name
            if prop.name == "BEGIN":
                if depth == 0:
                    if prop.value.strip().upper() != "VCARD":
                        raise BadInput(where(path, f"{place}: not a vCard"))
                    number += 1
                    props = []
                    start = line_number
                depth += 1
            elif prop.name == "END":
                if depth == 0:
                    raise BadInput(where(path, f"{place}: END without BEGIN"))
                depth -= 1
                if depth == 0:
                    card = _card(props)
                    yield card if card is not None else Skipped("card without a name")
                    if progress is not None and number % PROGRESS_CARDS == 0:
                        progress(lines.read, max(size, lines.read))
            elif depth == 0:
                raise BadInput(where(path, f"{place}: outside any card (no BEGIN:VCARD)"))
            elif depth == 1:
                props.append(prop)
        if depth:
            raise BadInput(where(path, f"card {number} (line {start}) never ends (no END:VCARD)"))
        if number == 0:
            raise BadInput(where(path, "no vCard in the file"))


IMPORTER = VcardImporter()

__all__ = ["IMPORTER", "MAX_FILE_BYTES", "SUFFIXES", "VcardImporter"]
