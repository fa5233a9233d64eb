"""A mail message's parts as the mbox importer reads them: its headers
(decoded words, addresses, ids, dates, the thread's subject), and its body
(the text part, or HTML turned into text, with the quoted reply trimmed)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from email.errors import HeaderParseError
from email.header import decode_header
from email.message import EmailMessage, Message
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser

from pixie.device.ingest.base import (
    clean_text,
    to_us,
)
from pixie.protocol.syncmessages import MAX_SHORT_CHARS
from pixie.protocol.timestamps import MAX_US, MIN_US

# --- headers -------------------------------------------------------------------------


def _one_line(value: object, limit: int = MAX_SHORT_CHARS) -> str:
    text = " ".join(clean_text(str(value)).split())
    return text[:limit].rstrip()


# Headers are read from their raw text: the parsed header objects of
# ``policy.default`` are rebuilt on every access and cost more than the parse.


# Of an address header, the characters read and the people kept.
MAX_ADDRESS_CHARS = 64 * 1024
MAX_PEOPLE = 500


def _raw_all(message: Message, name: str) -> list[str]:
    """Every value of a header as written, unfolded."""
    lowered = name.lower()
    return [" ".join(str(v).split()) for k, v in message.raw_items() if k.lower() == lowered]


def _raw_header(message: Message, name: str) -> str:
    """A header's first value as written (for dates and ids: no decoding wanted)."""
    values = _raw_all(message, name)
    return values[0] if values else ""


def _eight_bit(value: str) -> str:
    """Raw 8-bit bytes in a header (which no standard allows and many mailers
    write; the parser keeps them as surrogate escapes) read as UTF-8, else as
    Windows-1252."""
    if not _SURROGATE.search(value):
        return value
    data = value.encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


_SURROGATE = re.compile("[\udc80-\udcff]")


def decode_words(value: str) -> str:
    """A header's text with RFC 2047 encoded words decoded (an unknown charset
    read as UTF-8, bytes that do not fit replaced), as one line."""
    value = _eight_bit(value)
    if "=?" not in value:
        return _one_line(value, 4096)
    try:
        chunks = decode_header(value)
    except (HeaderParseError, ValueError, UnicodeError):
        return _one_line(value, 4096)
    out = []
    for chunk, charset in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
            continue
        # Text between encoded words comes back as "raw-unicode-escape" bytes.
        codec = charset or "raw-unicode-escape"
        try:
            out.append(chunk.decode(codec, "replace"))
        except LookupError:
            out.append(chunk.decode("utf-8", "replace"))
    return _one_line("".join(out), 4096)


def _header(message: Message, name: str) -> str:
    """A text header's first value (Subject), decoded, one line ("" when missing)."""
    return decode_words(_raw_header(message, name))


_MSG_ID = re.compile(r"<([^<>\s]+)>")


def _ids(value: str) -> list[str]:
    """The message ids of a header, normalised (no angle brackets, lower case)."""
    found = [m.lower() for m in _MSG_ID.findall(value)]
    if not found:
        bare = value.strip().strip("<>").strip()
        if bare and " " not in bare:
            found = [bare.lower()]
    return found


_SUBJECT_PREFIX = re.compile(
    r"^\s*(?:(?:re|fwd?|aw|wg|sv|vs|tr|antw|rif)\s*(?:\[\d+\]|\(\d+\))?\s*:\s*)+", re.IGNORECASE
)


def _thread_subject(subject: str) -> str:
    """A subject as threads compare it: reply and forward prefixes gone,
    spacing and case folded."""
    return " ".join(_SUBJECT_PREFIX.sub("", subject).split()).casefold()


class _Person:
    __slots__ = ("address", "name")

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address


def _people(message: Message, name: str) -> list[_Person]:
    """The people of an address header (From, To, Cc): those with an address,
    at most `MAX_PEOPLE`, read from at most `MAX_ADDRESS_CHARS` of the header
    (the standard library's parser takes time and memory growing faster than
    the header: a To of a million addresses took gigabytes)."""
    values, budget = [], MAX_ADDRESS_CHARS
    for value in _raw_all(message, name):
        if len(value) > budget:
            cut = value.rfind(",", 0, budget)
            if cut > 0:
                values.append(value[:cut])
            break
        values.append(value)
        budget -= len(value)
    found: list[_Person] = []
    for raw_name, raw_address in getaddresses(values):
        if len(found) >= MAX_PEOPLE:
            break
        spec = "".join(_eight_bit(raw_address).split()).lower()
        if "@" not in spec or spec.startswith("@") or len(spec) > MAX_SHORT_CHARS:
            continue
        display = _one_line(decode_words(raw_name))
        if not display or display.lower() == spec:
            display = _one_line(spec.split("@", 1)[0]) or spec
        found.append(_Person(display, spec))
    return found


def _date(message: Message, postmark: bytes, tz: dt.tzinfo) -> int | None:
    """The email's time: its Date header, else its postmark's date."""
    raw = _raw_header(message, "date")
    if raw:
        try:
            moment = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError, OverflowError):
            moment = None
        if moment is not None:
            # Only "-0000" gives no zone; it means UTC (RFC 5322), whatever --tz says.
            us = to_us(moment, dt.UTC)
            if MIN_US <= us < MAX_US:
                return us
    return _postmark_date(postmark, tz)


_POSTMARK_DATE = re.compile(
    r"([A-Za-z]{3})\s+(\d{1,2})\s+(\d{1,2}):(\d{2})(?::(\d{2}))?\s+(?:([+-]\d{4})\s+)?(\d{4})"
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}


def _postmark_date(postmark: bytes, tz: dt.tzinfo) -> int | None:
    """The date of a "From sender Sat Jan  3 01:05:34 1996" line (an offset
    before the year, as Gmail writes, honoured; none means ``tz``)."""
    found = _POSTMARK_DATE.search(postmark.decode("ascii", "replace"))
    if found is None:
        return None
    month_name, day, hour, minute, second, offset, year = found.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        return None
    zone = tz
    if offset:
        sign = -1 if offset[0] == "-" else 1
        zone = dt.timezone(sign * dt.timedelta(hours=int(offset[1:3]), minutes=int(offset[3:])))
    try:
        moment = dt.datetime(
            int(year), month, int(day), int(hour), int(minute), int(second or 0), tzinfo=zone
        )
    except ValueError:
        return None
    us = to_us(moment, tz)
    return us if MIN_US <= us < MAX_US else None


# --- body ----------------------------------------------------------------------------

_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt fieldset figcaption figure footer form"
    " h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section table tbody td tfoot th thead"
    " tr ul".split()
)
_HIDDEN = frozenset({"script", "style", "head", "title", "template", "noscript"})


class _HtmlText(HTMLParser):
    """HTML reduced to text: scripts and styles dropped, block elements as
    line breaks, spacing collapsed, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        lines = [" ".join(line.split()) for line in "".join(self.parts).split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str) -> str:
    """``html`` as plain text (see `_HtmlText`)."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return parser.text()


_CHARSET = re.compile(r"""charset\s*=\s*["']?([^"';\s]+)""", re.IGNORECASE)
_NAMED = re.compile(r"name\s*\*?\s*=", re.IGNORECASE)


def _content_type(part: Message) -> str:
    """A part's content type from its raw header (the parsed one costs more
    than it tells): text/plain when it has none, or one without a slash."""
    value = _raw_header(part, "content-type").split(";", 1)[0].strip().lower()
    return value if "/" in value else "text/plain"


def _decoded(part: Message) -> str:
    """A text part's content: transfer encoding undone, charset decoded (an
    unknown one read as UTF-8), with replacement for bytes that do not fit."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    found = _CHARSET.search(_raw_header(part, "content-type"))
    charset = found.group(1) if found else "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")


def _leaves(part: Message, attached: bool = False) -> Iterator[tuple[Message, str, bool]]:
    """Every part that holds content, with its content type and whether it
    is (or is inside) an attachment; an attached email (message/rfc822)
    is one leaf, not opened."""
    kind = _content_type(part)
    attached = attached or _raw_header(part, "content-disposition").lower().startswith("attachment")
    if kind.startswith("message/"):
        yield part, kind, True
        return
    # Asked only of a multipart: a leaf's get_payload() decodes its text.
    if kind.startswith("multipart/") and part.is_multipart():
        for sub in part.get_payload():
            if isinstance(sub, Message):
                yield from _leaves(sub, attached)
        return
    yield part, kind, attached


def _attachment_name(part: Message, kind: str) -> str:
    named = _NAMED.search(_raw_header(part, "content-disposition")) or _NAMED.search(
        _raw_header(part, "content-type")
    )
    name = None
    if named:
        try:
            name = part.get_filename()
        except Exception:  # a mangled parameter: the file stays unnamed
            name = None
    if name:
        return _one_line(decode_words(name), 120)
    if kind.startswith("message/"):
        return "forwarded email"
    return f"unnamed {kind}"


def _body(message: EmailMessage) -> tuple[str, list[str]]:
    """The email's body text (untrimmed) and its attachments' file names:
    the first text/plain part that is not an attachment, else the first
    text/html one reduced to text; every other part with a file name, or
    marked as an attachment, is an attachment."""
    leaves = list(_leaves(message))
    body = next((leaf for leaf in leaves if leaf[1] == "text/plain" and not leaf[2]), None)
    if body is None:
        body = next((leaf for leaf in leaves if leaf[1] == "text/html" and not leaf[2]), None)
    text = ""
    if body is not None:
        text = _decoded(body[0])
        if body[1] == "text/html":
            text = html_to_text(text)
    names: list[str] = []
    for part, kind, attached in leaves:
        if body is not None and part is body[0]:
            continue
        named_file = bool(_NAMED.search(_raw_header(part, "content-disposition")))
        # A name on the content type alone marks a file unless it is text
        # (some mailers name their inline text parts too).
        named_file = named_file or (
            not kind.startswith("text/") and bool(_NAMED.search(_raw_header(part, "content-type")))
        )
        if attached or named_file:
            names.append(_attachment_name(part, kind))
    return clean_text(text), [n for n in names if n]


_ATTRIBUTION = re.compile(
    r"\b(?:wrote|writes|schrieb|écrit|escribió|skrev|kirjoitti|scrisse|schreef)\b[^\n]*:\s*$",
    re.IGNORECASE,
)
_ATTRIBUTION_START = re.compile(r"^\s*(?:On|Am|Le|El|Il|Op|Den|På)\s", re.IGNORECASE)
_ORIGINAL = re.compile(
    r"^\s*-{2,}\s*(?:Original Message|Ursprüngliche Nachricht|Message d'origine"
    r"|Forwarded message|Weitergeleitete Nachricht)\s*-{2,}\s*$",
    re.IGNORECASE,
)
_OUTLOOK_RULE = re.compile(r"^\s*_{10,}\s*$")
_OUTLOOK_FROM = re.compile(r"^\s*(?:From|Von|De|Da):\s", re.IGNORECASE)


def trim_reply(text: str) -> str:
    """The new part of an email body: quoted lines (">") and the attribution
    line before them, Outlook's original-message blocks, and everything from
    the signature separator ("-- ") on, left out."""
    lines = text.split("\n")
    kept: list[str] = []
    for index, line in enumerate(lines):
        bare = line.rstrip()
        if bare == "--" or _ORIGINAL.match(line):
            break
        if _OUTLOOK_RULE.match(line) and any(
            _OUTLOOK_FROM.match(following) for following in lines[index + 1 : index + 3]
        ):
            break
        if line.lstrip().startswith(">"):
            _drop_attribution(kept)
            continue
        kept.append(line)
    return re.sub(r"\n\s*\n(?:\s*\n)+", "\n\n", "\n".join(kept)).strip()


def _drop_attribution(kept: list[str]) -> None:
    """Remove the "On ... wrote:" line (one or two, when wrapped) that ends
    ``kept`` (blank lines after it too), if it does."""
    end = len(kept)
    while end and not kept[end - 1].strip():
        end -= 1
    if not end or not _ATTRIBUTION.search(kept[end - 1]):
        return
    start = end - 1
    if (
        not _ATTRIBUTION_START.match(kept[start])
        and start
        and _ATTRIBUTION_START.match(kept[start - 1])
    ):
        start -= 1
    del kept[start:]
