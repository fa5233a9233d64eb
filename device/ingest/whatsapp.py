"""WhatsApp chat exports: the ``.txt`` a phone writes ("Export chat"), or the
``.zip`` holding it with the media.

One message a line, led by a timestamp whose layout depends on the phone and
its locale::

    14/03/2025, 21:05 - Priya: see you at 8          (Android)
    3/14/25, 9:05\u202fPM - Priya: see you at 8        (Android, en_US)
    [14/03/25, 21:05:09] Priya: see you at 8         (iOS)
    14.03.25, 21:05 - Priya: bis später              (German)

A line without a timestamp continues the message before it. A line with a
timestamp but no "Name: " is a system line (the encryption notice, "Priya
created group", "You added Ana") and is skipped; so is an iOS line whose text
starts with a left-to-right mark and is no attachment (iOS writes its system
lines that way, under the chat's name).

Dates say neither which of day and month comes first nor the zone. The order
is inferred from the whole file by a first pass that reads only the line
heads (a first field over 12 means day first, a second field over 12 month
first, neither means day first); the second pass builds the items. Both passes
stream, so an export of any size is read in bounded memory. Times are read in
``options.tz``.

Ids come from what the file says: the chat, the message's minute, the
sender, the text, and how many identical (minute, sender, text) came
earlier, so "ok" twice in a minute is two events and an export that grew
gives its old messages the same ids.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    DAY_FIRST,
    MONTH_FIRST,
    ImportOptions,
    Item,
    LocalTimes,
    Progress,
    Skipped,
    clean_text,
    fit_text,
    id_from_digest,
    id_hasher,
)
from pixie.device.ingest.whatsappfile import CHAT_MEMBER, Source, chat_member, chat_name
from pixie.device.store.contacts import ContactCard, clean_name, phone_alias
from pixie.device.store.memlog import MAX_REF_CHARS, MAX_TEXT_CHARS, EventKind, NewEvent

SNIFF_BYTES = 4096
THREAD_PREFIX = "whatsapp:"

_SP = "[ \u00a0\u202f]"
# The head of a message line: an optional mark, an optional "[", a date, a
# time with optional seconds and AM/PM, then "] " (iOS) or " - " (Android).
_HEAD_PATTERN = (
    r"[\u200e\u200f\ufeff]*\[?"
    r"(?P<a>\d{1,4})(?P<sep>[./-])(?P<b>\d{1,2})(?P=sep)(?P<c>\d{2,4})\.?"
    rf",?{_SP}"
    r"(?P<h>\d{1,2})[:.](?P<mi>\d{2})(?:[:.](?P<s>\d{2}))?"
    rf"(?:{_SP}?(?P<ampm>[AaPp])\.?{_SP}?[Mm]\.?)?"
    rf"(?:\]{_SP}?|{_SP}[-\u2013\u2014]{_SP})"
)
_HEAD = re.compile(_HEAD_PATTERN)
# Every head line of a block of lines, for the first pass: (a, sep, b, c, h,
# mi, s, ampm, the rest of the line).
_HEAD_LINES = re.compile(rf"^{_HEAD_PATTERN}(?P<rest>.*)", re.MULTILINE)
# Where each head line of a block starts, for the second pass.
_HEAD_STARTS = re.compile(rf"^{_HEAD_PATTERN}", re.MULTILINE)
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_LRM = "\u200e"
_MEDIA_OMITTED = re.compile(
    r"<(?:Media omitted|Medien ausgeschlossen|Multimedia omitido|Médias omis"
    r"|Media weggelaten|Mídia oculta|Media omessi)>",
    re.IGNORECASE,
)
_ATTACHED = re.compile(
    r"<(?:attached|Anhang|adjunto|anexado|allegato|pièce jointe)\s?:\s*(?P<file>[^<>]+)>",
    re.IGNORECASE,
)
_FILE_ATTACHED = re.compile(
    r"(?P<file>\S.*?)\s\((?:file attached|Datei angehängt|archivo adjunto|arquivo anexado)\)",
    re.IGNORECASE,
)
_IOS_OMITTED = re.compile(r".*\b(?:omitted|weggelassen|omitido|omis|omesso)", re.IGNORECASE)
_EDITED = re.compile(r"\s*\u200e?<(?:This message was edited|Nachricht bearbeitet)>$")
_DELETED = re.compile(
    r"(?:This message was deleted\.?|You deleted this message\.?"
    r"|Diese Nachricht wurde gelöscht\.?|Du hast diese Nachricht gelöscht\.?)",
    re.IGNORECASE,
)
_GROUP_SYSTEM = re.compile(
    r"\b(?:created group|added|removed|left|joined using|changed the subject"
    r"|changed this group|changed the group)\b"
)
# What the attachment, media and edit patterns above need in a first line:
# "<", "(" or a bidi mark. A line without is plain text (or, if short, a
# deleted message's placeholder).
_MARKED = re.compile("[<(\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_DELETED_CHARS = 40  # longer than any placeholder _DELETED knows


@dataclass(frozen=True, slots=True)
class _Head:
    """The parts of a line's head, as written."""

    a: str
    b: str
    c: str
    hour: int
    minute: int
    second: int
    ampm: str | None
    rest: str


def _head(line: str) -> _Head | None:
    m = _HEAD.match(line)
    if m is None:
        return None
    ampm = m.group("ampm")
    return _Head(
        m.group("a"),
        m.group("b"),
        m.group("c"),
        int(m.group("h")),
        int(m.group("mi")),
        int(m.group("s") or 0),
        ampm.lower() if ampm else None,
        line[m.end() :],
    )


def _sender(rest: str) -> tuple[str, str] | None:
    """(name, text) of a message line's remainder; None for a system line."""
    name, sep, text = rest.partition(": ")
    if not sep:
        if rest.endswith(":") and 0 < len(rest) <= 101 and ": " not in rest:
            name, text = rest[:-1], ""
        else:
            return None
    name = _BIDI.sub("", name).strip()
    if not name or len(name) > 100 or any(q in name for q in '"“”'):
        return None
    if text.startswith(_LRM) and not _is_media(text[1:]):
        return None  # iOS writes its system lines under the chat's name, marked
    return name, text


def _is_media(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    return bool(_ATTACHED.fullmatch(first) or _IOS_OMITTED.fullmatch(first))


@dataclass(slots=True)
class _Survey:
    """What the first pass learns: the order of day and month, who speaks,
    and the name iOS writes its system lines under (the chat's)."""

    day_first: bool = True
    others: frozenset[str] = frozenset()
    group: bool = False
    senders: frozenset[str] = frozenset()  # everyone who speaks, the user too
    system_name: str | None = None


def _survey(source: Source, options: ImportOptions, progress: Progress | None) -> _Survey:
    # Only the heads matter here, a block of lines at a time: a pattern finds
    # every head line of a block at once, and what is looked at per line is
    # the date's first two fields and the sender's name.
    fields: set[tuple[str, str]] = set()  # the (first, second) of dates not year-first
    names: set[str] = set()  # what stands before ": " on message lines
    group = False
    seen_head = False
    system_name: str | None = None
    for number, block in source.blocks(progress, 2 * source.size):
        if not seen_head:
            for offset, line in enumerate(block.split("\n")):
                if line.strip():
                    if _head(line) is None:
                        raise BadInput(
                            f"{source.at(number + offset)}: not a WhatsApp chat line (no timestamp)"
                        )
                    seen_head = True
                    break
        for a, _, b, _, _, _, _, _, rest in _HEAD_LINES.findall(block):
            if len(a) != 4:
                fields.add((a, b))
            name, sep, text = rest.partition(": ")
            if sep and not text.startswith(_LRM):
                names.add(name)
            elif (said := _sender(rest)) is not None:
                names.add(said[0])
            else:
                if sep and system_name is None:
                    system_name = " ".join(_BIDI.sub("", name).split()) or None
                group = group or bool(_GROUP_SYSTEM.search(rest))
    if not seen_head:
        raise BadInput(f"{source.path.name}: no WhatsApp messages")
    others: set[str] = set()
    senders: set[str] = set()
    for raw in names:
        said = _sender(raw + ": ")
        if said is None:  # not a name after all: a system line with ": " in it
            group = group or bool(_GROUP_SYSTEM.search(raw))
        else:
            senders.add(said[0])
            if not options.is_me(said[0]):
                others.add(said[0])
    day_first = _date_order(source, options, fields) == DAY_FIRST
    return _Survey(
        day_first, frozenset(others), group or len(others) > 1, frozenset(senders), system_name
    )


def _date_order(source: Source, options: ImportOptions, fields: set[tuple[str, str]]) -> str:
    """The order of day and month in the file's dates: a first field over 12
    says day-first, a second field over 12 month-first (both: refused);
    ``--date-order`` decides otherwise, and with neither the dates are read
    day-first and the user hears so."""
    day_first = any(int(a) > 12 for a, _ in fields)
    month_first = any(int(b) > 12 for _, b in fields)
    if day_first and month_first:
        _refuse_mixed_orders(source)
    if options.date_order is not None:
        return options.date_order
    if month_first:
        return MONTH_FIRST
    if not day_first and fields and options.notice is not None:
        options.notice(
            f"{source.path.name}: no date in it says whether the day or the month comes"
            f" first; read as {DAY_FIRST} (--date-order {MONTH_FIRST} reads it the other way)"
        )
    return DAY_FIRST


def _refuse_mixed_orders(source: Source) -> None:
    """Name the first line proving each order of day and month."""
    first_day: int | None = None
    first_month: int | None = None
    for number, line in source.lines(None, 0, 0):
        head = _head(line)
        if head is None or len(head.a) == 4:
            continue
        if int(head.a) > 12 and first_day is None:
            first_day = number
        if int(head.b) > 12 and first_month is None:
            first_month = number
        if first_day is not None and first_month is not None:
            raise BadInput(
                f"{source.at(max(first_day, first_month))}: dates are written both"
                f" day-first (line {first_day}) and month-first (line {first_month})"
            )


def _day(source: Source, number: int, head: _Head, day_first: bool) -> dt.date:
    if len(head.a) == 4:
        year, month, day = int(head.a), int(head.b), int(head.c)
    else:
        first, second = int(head.a), int(head.b)
        day, month = (first, second) if day_first else (second, first)
        if len(head.c) == 3:
            raise BadInput(f"{source.at(number)}: the year {head.c} is not a year")
        year = int(head.c) + (2000 if len(head.c) == 2 else 0)
    try:
        return dt.date(year, month, day)
    except ValueError:
        raise BadInput(f"{source.at(number)}: no such date or time") from None


def _hour(source: Source, number: int, head: _Head) -> int:
    """The head's hour on a 24-hour clock; its minute and second checked."""
    hour = head.hour
    if head.ampm is not None:
        if not 1 <= hour <= 12:
            raise BadInput(f"{source.at(number)}: {hour} is not an hour of a 12-hour clock")
        hour = hour % 12 + (12 if head.ampm == "p" else 0)
    if hour > 23 or head.minute > 59 or head.second > 59:
        raise BadInput(f"{source.at(number)}: no such date or time")
    return hour


def _moment(source: Source, number: int, head: _Head, day_first: bool) -> dt.datetime:
    day = _day(source, number, head, day_first)
    return dt.datetime.combine(day, dt.time(_hour(source, number, head), head.minute, head.second))


def _message_text(text: str) -> str | None:
    """The text to store for a message as written; None for a deleted one."""
    first, sep, more = text.partition("\n")
    if not _MARKED.search(first):  # most messages: nothing to recognise
        if not more and len(first) <= _DELETED_CHARS and _DELETED.fullmatch(first.strip()):
            return None
        return clean_text(text)
    first = _EDITED.sub("", first)
    bare = _BIDI.sub("", first).strip()
    if (m := _ATTACHED.fullmatch(bare)) or (m := _FILE_ATTACHED.fullmatch(bare)):
        first = f"[attached: {m.group('file').strip()}]"
    elif _MEDIA_OMITTED.fullmatch(bare) or (
        first.startswith(_LRM) and _IOS_OMITTED.fullmatch(bare)
    ):
        first = "[media omitted]"
    elif not more and _DELETED.fullmatch(bare):
        return None
    return clean_text(first + sep + more)


class _Pending:
    """A message whose continuation lines are still being read."""

    __slots__ = ("chars", "head", "lines", "name", "number")

    def __init__(self, number: int, head: _Head, name: str, first: str) -> None:
        self.number = number
        self.head = head
        self.name = name
        self.lines = [first]
        self.chars = len(first)

    def add(self, text: str) -> None:
        """Continuation lines, joined by "\n": each kept while the message
        holds at most `MAX_TEXT_CHARS` before it (beyond, fit_text cuts it
        anyway), as if given one at a time; a line's trailing "\r" dropped."""
        room = MAX_TEXT_CHARS - self.chars
        if room < 0:
            return
        if "\r" in text:
            text = "\n".join(line.rstrip("\r") for line in text.split("\n"))
        cut = text.find("\n", room)
        taken = text if cut < 0 else text[:cut]
        self.lines.append(taken)
        self.chars += len(taken) + 1


@dataclass(frozen=True, slots=True)
class _Who:
    """A sender as the events name it: their name, whether it is the user,
    and the contact their messages belong to."""

    name: str
    mine: bool
    contact: str | None


_DAY_US = 86_400_000_000


class _Occurrences:
    """How many identical (minute, sender, text) came before, remembering a
    day behind the latest minute (an export is in time order, give or take
    a clock that stepped back)."""

    def __init__(self) -> None:
        self.by_minute: dict[int, dict[bytes, int]] = {}
        self.latest = 0

    def count(self, minute: int, key: bytes) -> int:
        """``key``: a hash of the sender and the text (and the minute)."""
        seen = self.by_minute.setdefault(minute, {})
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if minute > self.latest:
            self.latest = minute
            if len(self.by_minute) > 2048:
                for old in [m for m in self.by_minute if m < minute - _DAY_US]:
                    del self.by_minute[old]
        return occurrence


def _stamp(head: _Head) -> str:
    """A message's timestamp as the file writes it, in one spelling: the
    date's three fields in their order, the time with its seconds and AM/PM."""
    return f"{head.a}/{head.b}/{head.c} {head.hour}:{head.minute:02d}:{head.second:02d}" + (
        head.ampm or ""
    )


def _message_id(
    ids: hashlib._Hash, seen: _Occurrences, at: int, stamp: str | int, sender: str, text: str
) -> str:
    """The id of a message: ``ids`` (fed the chat) and the message's
    ``stamp``, sender, text, and how many identical ones came before it
    (counted in ``seen``); ``at`` gives the id its time."""
    # One hash over the text serves both the repeat count (the hash of the
    # id's parts so far) and the id (the same, with the count).
    hasher = ids.copy()
    parts = f"\x1f{stamp}\x1f{sender}\x1f{text}"  # as id_parts writes them
    hasher.update(parts.encode("utf-8", "surrogatepass"))
    occurrence = seen.count(at - at % 60_000_000, hasher.digest())
    hasher.update(b"\x1f%d" % occurrence)
    return id_from_digest(hasher.digest(), at)


def _chat_of(source: Source, survey: _Survey) -> str:
    """The chat's name, which names the thread and leads every id: the one
    the file's name gives ("WhatsApp Chat with Ada.txt", the .zip's or, for
    a bare ``_chat.txt``, its folder's); else, for a ``_chat.txt``, the name
    iOS writes its system lines under (the chat's), else its speakers' names
    in order ("Ada, Sam"); else the file's own name without its suffix. So a
    .zip and the ``_chat.txt`` unpacked from it are one chat."""
    chat = source.named
    if chat is None and source.bare_chat:
        chat = survey.system_name or ", ".join(sorted(survey.senders))
    if chat is None:
        chat = Path(source.member or source.path.name).stem
    return " ".join(_BIDI.sub("", chat).split()) or "chat"


def _legacy_chat(source: Source) -> str:
    """The chat's name as imports named it before the .zip and its
    ``_chat.txt`` were made one chat: the name of the file, of the .zip or of
    a ``_chat.txt``'s folder (whatever that folder was called)."""
    chat = chat_name(source.path.name)
    if chat is None and source.member is None and source.path.name == CHAT_MEMBER:
        chat = chat_name(source.path.parent.name)
    if chat is None:
        stem = Path(source.member or source.path.name).stem
        if stem == "_chat":
            stem = source.path.parent.name if source.member is None else source.path.stem
        chat = stem or "chat"
    return " ".join(_BIDI.sub("", chat).split()) or "chat"


class WhatsappImporter:
    """A WhatsApp chat export, Android or iOS, any common locale."""

    name = "whatsapp"
    units = ("message", "messages")

    def sniff(self, path: Path) -> bool:
        """A regular .txt whose first non-blank line within its first 4 KiB
        is a WhatsApp message line, or a .zip holding a WhatsApp chat."""
        suffix = path.suffix.lower()
        if suffix not in (".txt", ".zip"):
            return False
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return False  # opening a pipe would wait for, or take, its bytes
            if suffix == ".zip":
                with zipfile.ZipFile(path) as archive:
                    return chat_member(archive.namelist()) is not None
            with path.open("rb") as stream:
                start = stream.read(SNIFF_BYTES)
        except (OSError, zipfile.BadZipFile, ValueError):
            return False
        text = start.decode("utf-8", errors="replace").removeprefix("\ufeff")
        for line in text.splitlines():
            if line.strip():
                return _head(line) is not None
        return False

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every message of the chat, a contact card before each sender's first."""
        source = Source(path)
        survey = _survey(source, options, progress)
        chat = _chat_of(source, survey)
        thread = (THREAD_PREFIX + chat)[:MAX_REF_CHARS]
        named = source.named or (survey.system_name if source.bare_chat else None)
        other: str | None = None
        if not survey.group:
            if len(survey.others) == 1:
                other = next(iter(survey.others))
            elif named is not None:
                other = named
        who: dict[str, _Who] = {}  # a chat has few senders and many messages
        days: dict[tuple[str, str, str], dt.date] = {}
        times = LocalTimes(options.tz)
        walls = LocalTimes(dt.UTC)  # the time as written, for the id's time
        ids = id_hasher(self.name, chat)
        occurrences = _Occurrences()
        legacy_ids = id_hasher(self.name, _legacy_chat(source))
        legacy_occurrences = _Occurrences()

        def finish(pending: _Pending) -> Item:
            text = _message_text("\n".join(pending.lines))
            if text is None:
                return Skipped("deleted message")
            if not text:
                return Skipped("empty message")
            text = fit_text(text)
            sender = who.get(pending.name)
            if sender is None:
                sender = who[pending.name] = self._who(source, pending, options, other)
            head = pending.head
            day = days.get((head.a, head.b, head.c))
            if day is None:
                day = _day(source, pending.number, head, survey.day_first)
                days[(head.a, head.b, head.c)] = day
            hour = _hour(source, pending.number, head)
            at = times.us(day, hour, head.minute, head.second)
            wall = walls.us(day, hour, head.minute, head.second)
            return NewEvent(
                kind=EventKind.MESSAGE,
                at=at,
                text=text,
                contact=sender.contact,
                thread=thread,
                source=self.name,
                from_me=sender.mine,
                id=_message_id(ids, occurrences, wall, _stamp(head), sender.name, text),
                legacy_id=_message_id(
                    legacy_ids, legacy_occurrences, at, at - at % 60_000_000, sender.name, text
                ),
            )

        carded: set[str] = set()

        def emit(pending: _Pending) -> Iterator[Item]:
            item = finish(pending)
            if isinstance(item, NewEvent) and item.contact not in carded:
                contact = item.contact
                if contact is not None:
                    carded.add(contact)
                    if not options.is_me(contact):
                        alias = phone_alias(contact)
                        yield ContactCard(name=contact, aliases=(alias,) if alias else ())
            yield item

        pending: _Pending | None = None
        total = 2 * source.size
        # A block of whole lines at a time: the head lines are found by one
        # pattern, and the lines between two heads go to the message before
        # as one piece, so a run of continuation (or blank) lines costs what
        # scanning its bytes costs.
        for first, block in source.blocks(progress, total, done=source.size):
            number = first  # of the line at ``counted``
            counted = 0
            last = 0  # where the text no head line has taken yet starts
            for found in _HEAD_STARTS.finditer(block):
                start = found.start()
                if start > last and pending is not None:
                    pending.add(block[last : start - 1])
                number += block.count("\n", counted, start)
                counted = start
                end = block.index("\n", start)
                head = _head(block[start:end].rstrip("\r"))
                assert head is not None  # the same pattern found it
                last = end + 1
                if pending is not None:
                    yield from emit(pending)
                    pending = None
                said = _sender(head.rest)
                if said is None:
                    _day(source, number, head, survey.day_first)
                    _hour(source, number, head)
                    yield Skipped("system message")
                    continue
                pending = _Pending(number, head, said[0], said[1])
            if last < len(block) and pending is not None:
                pending.add(block[last:-1])
        if pending is not None:
            yield from emit(pending)
        if progress is not None:
            progress(total, total)

    @staticmethod
    def _who(source: Source, pending: _Pending, options: ImportOptions, other: str | None) -> _Who:
        try:
            sender = clean_name(pending.name, "sender name")
            mine = options.is_me(sender)
            contact = other if mine else sender
            if contact is not None:
                contact = clean_name(_BIDI.sub("", contact), "contact name")
        except BadInput as exc:
            raise BadInput(f"{source.at(pending.number)}: {exc}") from None
        return _Who(sender, mine, contact)


def bare_parse(path: Path) -> int:
    """How many messages ``path`` holds, parsed as any reader of the format
    must: each line's head matched, its date and time made a datetime
    (day first), its sender split off, and continuation lines joined to their
    message. No order inference, no ids, no items: the floor an import's
    throughput is measured against. Returns the number of messages."""
    source = Source(path)
    count = 0
    lines: list[str] = []
    for number, line in source.lines(None, 0, 0):
        head = _head(line)
        if head is None:
            lines.append(line)
            continue
        _ = "\n".join(lines)
        _moment(source, number, head, day_first=True)
        said = _sender(head.rest)
        if said is not None:
            count += 1
            lines = [said[1]]
    return count


IMPORTER = WhatsappImporter()

__all__ = ["IMPORTER", "WhatsappImporter", "bare_parse"]
