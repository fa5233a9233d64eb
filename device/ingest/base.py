"""What every importer shares: the options a user gives, the items an importer
yields, and the stable ids that make importing the same export twice harmless.

An importer reads one path (a file, or for the journal a folder) and yields,
in order:

- `NewEvent`s for the memory log, each with a stable ``id`` derived from the
  source's own identity (`stable_id`), so a second import of the same export,
  or of an export that grew, adds only what is new;
- `ContactCard`s for the people it meets (an email's From/To/Cc, a vCard), each
  yielded before the first event that names one of its aliases, so the event
  resolves to the contact the card merged into;
- `Skipped` for a record it understood but chose not to import (a service
  message, an event without a start), with a short reason the summary counts.

A record it cannot understand raises `BadInput` naming the file and the line
or record; the import then writes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pixie.device.store.contacts import ContactCard, phone_alias
from pixie.device.store.memlog import MAX_REF_CHARS, MAX_TEXT_CHARS, NewEvent
from pixie.protocol.ids import id_text

# Hears (bytes read so far, bytes in all) now and then and once at the end.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record the importer understood and left out, and why (a short phrase
    the summary counts: "service message", "event without a start")."""

    reason: str


Item = NewEvent | ContactCard | Skipped

DAY_FIRST = "day-first"
MONTH_FIRST = "month-first"
DATE_ORDERS = (DAY_FIRST, MONTH_FIRST)


def _me_key(value: str) -> str:
    text = unicodedata.normalize("NFKC", " ".join(value.split())).casefold()
    return phone_alias(text) or text


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """What the user told `pixie import`.

    ``me``: the user's own addresses, phone numbers and names (``--me``, the
    data dir's ``me`` setting and the identities ``pixie contacts me`` logged),
    which decide ``from_me``; ``tz``: the zone for times written without an
    offset (``--tz``, default the machine's); ``now_us``: the moment the
    import runs, for windows such as a calendar's recurrence horizon;
    ``date_order``: `DAY_FIRST` or `MONTH_FIRST` for dates that do not say
    (``--date-order``; None: decided from the file); ``notice``: hears one
    line for the user about a choice the import made on its own (an
    ambiguous date order), None to say nothing.
    """

    me: tuple[str, ...] = ()
    tz: dt.tzinfo = dt.UTC
    now_us: int = 0
    date_order: str | None = None
    notice: Callable[[str], None] | None = field(default=None, compare=False)
    _keys: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keys", frozenset(_me_key(m) for m in self.me if m.strip()))

    def is_me(self, *values: str | None) -> bool:
        """Whether any of ``values`` (an address, a phone number, a display
        name) is one the user gave as theirs; case and spacing are ignored,
        and phone numbers are compared by their digits."""
        return any(v is not None and v.strip() and _me_key(v) in self._keys for v in values)


class Importer(Protocol):
    """One format the memory can be filled from."""

    @property
    def name(self) -> str:
        """What ``--format`` calls it: "mbox", "ics", "whatsapp", ..."""
        ...

    @property
    def units(self) -> tuple[str, str]:
        """How the summary counts its events, singular and plural: ("email", "emails")."""
        ...

    def sniff(self, path: Path) -> bool:
        """Whether ``path`` looks like this format. Cheap, never raises, and
        never reads from anything but a regular file or a folder (a pipe's
        bytes belong to the import)."""
        ...

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every item of ``path``, streaming: memory stays bounded whatever
        the size of the file. Raises `BadInput` naming the file and where in
        it for anything it cannot read."""
        ...


def stable_id(source: str, *parts: str | int | None, at_us: int = 0) -> str:
    """An event id derived from the source's own identity: the same parts give
    the same id on every device and in every run.

    ``source`` names the format ("mbox", "whatsapp", ...) so two formats never
    share an id; ``parts`` are what identifies the record within it (a
    Message-ID; a UID and its recurrence; a chat, a time, a sender, a text and
    its occurrence). The id is an RFC 9562 version 8 UUID: the event's
    millisecond time first (ids of one export sort by time, which keeps the
    index's inserts local), then 74 bits of a SHA-256 of the parts.
    """
    hasher = id_hasher(source)
    hasher.update(id_parts(*parts))
    return id_from_digest(hasher.digest(), at_us)


# `stable_id` in steps, for an importer that derives many ids sharing leading
# parts (a chat's name) or that needs the hash of the first parts on its way
# (to count repeats): hashing in pieces gives the same digest as hashing the
# joined whole, so the ids are the same.


def id_hasher(source: str, *parts: str | int | None) -> hashlib._Hash:
    """A SHA-256 fed with ``source`` and the leading ``parts`` of an id;
    `copy()` it and feed it the rest with `id_parts`."""
    return hashlib.sha256(b"pixie-import\0" + source.encode() + id_parts(*parts))


def id_parts(*parts: str | int | None) -> bytes:
    """The bytes an id's parts add to its hash: each follows a 0x1f
    separator, None written 0x1e."""
    joined = "".join(["\x1f" + ("\x1e" if part is None else str(part)) for part in parts])
    return joined.encode("utf-8", "surrogatepass")


def id_from_digest(digest: bytes, at_us: int) -> str:
    """The UUIDv8 text of a parts hash's ``digest`` for an event at ``at_us``."""
    # ms (48 bits) | version 8 | 12 bits of the digest | variant 0b10 | 62 bits
    ms = max(0, at_us // 1000) & ((1 << 48) - 1)
    version = bytes((0x80 | digest[0] & 0x0F, digest[1], 0x80 | digest[2] & 0x3F))
    return id_text(ms.to_bytes(6, "big") + version + digest[3:10])


def to_us(moment: dt.datetime, tz: dt.tzinfo) -> int:
    """Microseconds since the epoch for ``moment``; a naive one is read in ``tz``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


class LocalTimes:
    """Wall-clock times read in one zone, made microseconds since the epoch as
    `to_us` makes them, for an import of many records: the zone's offset is
    looked up once per hour of a day instead of once per record. An hour
    whose first and last second have different offsets (a zone changing its
    offset within the hour) is not cached; its times are converted one by
    one."""

    def __init__(self, tz: dt.tzinfo) -> None:
        self.tz = tz
        self._offsets: dict[tuple[int, int], int | None] = {}

    def us(self, day: dt.date, hour: int, minute: int, second: int) -> int:
        key = (day.toordinal(), hour)
        offset = self._offsets.get(key, -1)
        if offset == -1:
            offset = self._offset(day, hour)
            if len(self._offsets) > 100_000:
                self._offsets.clear()
            self._offsets[key] = offset
        if offset is None:
            return to_us(dt.datetime.combine(day, dt.time(hour, minute, second)), self.tz)
        wall = (key[0] - _EPOCH_DAY) * 86_400 + hour * 3_600 + minute * 60 + second
        return (wall - offset) * 1_000_000

    def _offset(self, day: dt.date, hour: int) -> int | None:
        start = dt.datetime.combine(day, dt.time(hour), tzinfo=self.tz).utcoffset()
        end = dt.datetime.combine(day, dt.time(hour, 59, 59), tzinfo=self.tz).utcoffset()
        if start is None or start != end or start.microseconds:
            return None
        return start.days * 86_400 + start.seconds


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text as the log stores it: control characters (but tab and line
    breaks) and lone surrogates dropped, line ends made "\\n", outer blank
    lines trimmed."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text).strip()


TRUNCATED = "\n[truncated]"


def fit_text(text: str) -> str:
    """``text`` cut to what one event holds (`MAX_TEXT_CHARS`), marked where cut:
    a very long email is kept in part rather than refused."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[: MAX_TEXT_CHARS - len(TRUNCATED)].rstrip() + TRUNCATED


def ref(prefix: str, key: str, suffix: str = "") -> str:
    """``prefix + key + suffix`` as an event's thread or source: one line of
    at most `MAX_REF_CHARS`, the key replaced by a hash of it when it would not
    fit or is not one printable line."""
    plain = prefix + key + suffix
    if len(plain) <= MAX_REF_CHARS and key.isprintable():
        return plain
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return (prefix + digest + suffix)[:MAX_REF_CHARS]


def where(path: Path, place: str | None = None) -> str:
    """How an error names the spot: "file.txt, line 12"."""
    return f"{path.name}, {place}" if place else path.name


__all__ = [
    "DATE_ORDERS",
    "DAY_FIRST",
    "MONTH_FIRST",
    "ContactCard",
    "ImportOptions",
    "Importer",
    "Item",
    "LocalTimes",
    "Progress",
    "Skipped",
    "clean_text",
    "fit_text",
    "id_from_digest",
    "id_hasher",
    "id_parts",
    "ref",
    "stable_id",
    "to_us",
    "where",
]
