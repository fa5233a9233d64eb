"""What sync sessions say (`Hello`, `Batch`, `Check`, `Repair`, `Ack`, `Abort`),
the records a batch carries (log events by columns, note versions, contacts),
the marks a Hello gives, and every bound they are held to. Encoding and
decoding are in `pixie.protocol.syncwire`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, overload

from .errors import ProtocolError, shown
from .reconcile import FINGERPRINT_BYTES, Range

SESSION_BYTES = 8
DIGEST_BYTES = 32
MAX_ORIGINS = 64
MAX_RECORDS = 20_000  # per message, of each kind
MAX_RANGES = 4_096
MAX_NEED = 4_096
MAX_TEXT_CHARS = 65_536
MAX_BODY_CHARS = 32_768
MAX_SHORT_CHARS = 200
MAX_TAGS = 32
MAX_TAG_CHARS = 40
MAX_KIND_CHARS = 24
MAX_ALIASES = 64
MAX_REASON_CHARS = 300
# A contact's details and the longest value of each: a note may run over
# lines, the others are one line (the store checks the shape, see
# `pixie.device.store.contacts.clean_detail`).
MAX_NOTE_DETAIL_CHARS = 2_000
DETAIL_CHARS: dict[str, int] = {
    "org": MAX_SHORT_CHARS,
    "title": MAX_SHORT_CHARS,
    "birthday": MAX_SHORT_CHARS,
    "note": MAX_NOTE_DETAIL_CHARS,
    # As the address book writes them: "mobile +44 7700 900123; work 0113 ...".
    "phone": MAX_SHORT_CHARS,
    "address": MAX_SHORT_CHARS,
}
DETAIL_FIELDS = tuple(DETAIL_CHARS)
MAX_DETAIL_FIELD_CHARS = max(map(len, DETAIL_FIELDS))
# When a detail was written (microseconds since the epoch), bounded like an event's time.
MAX_DETAIL_AT = 1 << 62
# Sequence numbers stop far below SQLite's 2**63 - 1: the log appends at the
# highest seq of an origin plus one, so a sibling's event at the very top
# (for this replica's own origin) would make every later append overflow.
MAX_SEQ = 1 << 62
MAX_CIPHERTEXT = 4 * MAX_BODY_CHARS + 64 * 1024
MAX_BIN = max(MAX_CIPHERTEXT, 16 * MAX_RECORDS)  # a sealed note, or the ids of a batch
# Padded into an envelope, the largest message still fits a 1 MiB relay frame.
MAX_MESSAGE_BYTES = 768 * 1024


# -- records ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogEvent:
    id: str
    origin: str
    seq: int
    kind: str
    at: int
    contact_id: str | None
    thread: str | None
    source: str | None
    from_me: bool | None
    text: str


@dataclass(frozen=True, slots=True)
class ClearFields:
    kind: str
    identity_key: str | None
    title: str
    # None: the sender's body is parked with a holder (offloaded). Where a body
    # lives is not part of a version, so the receiver takes the body it already
    # has under the same content hash (its own copy, or the holding it keeps).
    body: str | None
    contact_id: str | None
    tags: tuple[str, ...]
    source_ref: str | None
    about_date: int | None
    created_at: int


@dataclass(frozen=True, slots=True)
class NoteVersion:
    """One note as it stands on a replica: its version key and its content.

    A clear note carries ``clear``; a sealed one ``nonce`` and ``ciphertext``,
    which the receiving side stores and never opens.
    """

    id: str
    stamp: str
    content_hash: str
    user_edited: bool
    deleted: bool
    clear: ClearFields | None = None
    nonce: bytes | None = None
    ciphertext: bytes | None = None

    @property
    def sealed(self) -> bool:
        return self.clear is None


@dataclass(frozen=True, slots=True)
class DetailEntry:
    """One detail of a contact (``field`` one of `DETAIL_FIELDS`), the value
    and when it was written: of two values, the greater (at, value) wins."""

    field: str
    value: str
    at: int


@dataclass(frozen=True, slots=True)
class ContactEntry:
    id: str
    name: str
    aliases: tuple[str, ...]
    # Each field at most once. On the wire a fourth item of the contact, sent
    # only when there are details: a contact without any is the three items a
    # peer from before details decodes.
    details: tuple[DetailEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class EventColumns(Sequence[LogEvent]):
    """Log events held field by field: item ``i`` of every column is event ``i``.

    A sequence of `LogEvent` to whoever reads it one event at a time; the
    columns themselves for the bulk paths (the codec, a store's insert).
    """

    ids: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    seqs: tuple[int, ...] = ()
    kinds: tuple[str, ...] = ()
    ats: tuple[int, ...] = ()
    contact_ids: tuple[str | None, ...] = ()
    threads: tuple[str | None, ...] = ()
    sources: tuple[str | None, ...] = ()
    from_me: tuple[bool | None, ...] = ()
    texts: tuple[str, ...] = ()
    # The ids as 16 bytes each, set by the decoder, which has them already: a
    # cache of `id_bytes`, outside equality, and never carried over by
    # `dataclasses.replace` (it is no argument of the constructor).
    id_blob: bytes | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if any(len(column) != n for column in self.columns()):
            raise ValueError("event columns of different lengths")

    @classmethod
    def of(cls, events: Iterable[LogEvent]) -> EventColumns:
        """Columns from events one by one (the convenient, not the fast, way in)."""
        rows = [
            (
                e.id,
                e.origin,
                e.seq,
                e.kind,
                e.at,
                e.contact_id,
                e.thread,
                e.source,
                e.from_me,
                e.text,
            )
            for e in events
        ]
        return cls(*zip(*rows, strict=True)) if rows else NO_EVENTS

    def columns(self) -> tuple[tuple[Any, ...], ...]:
        """Every column, in `LogEvent` field order."""
        return (
            self.ids,
            self.origins,
            self.seqs,
            self.kinds,
            self.ats,
            self.contact_ids,
            self.threads,
            self.sources,
            self.from_me,
            self.texts,
        )

    def id_bytes(self) -> bytes:
        """The ids as one string of 16 bytes each, or `ProtocolError`."""
        if self.id_blob is not None:
            return self.id_blob
        n = len(self.ids)
        joined = "".join(self.ids)
        if len(joined) == 36 * n and all(joined[i::36] == "-" * n for i in (8, 13, 18, 23)):
            try:
                raw = bytes.fromhex(joined.replace("-", ""))
            except ValueError:
                raw = b""
            if len(raw) == 16 * n:
                return raw
        return b"".join(_id16(i) for i in self.ids)  # names the bad id

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[LogEvent]:
        return map(LogEvent, *self.columns())

    @overload
    def __getitem__(self, index: int) -> LogEvent: ...

    @overload
    def __getitem__(self, index: slice) -> EventColumns: ...

    def __getitem__(self, index: int | slice) -> LogEvent | EventColumns:
        if isinstance(index, slice):
            return EventColumns(*(column[index] for column in self.columns()))
        return LogEvent(*(column[index] for column in self.columns()))


NO_EVENTS = EventColumns()


@dataclass(frozen=True, slots=True)
class Records:
    """What one batch carries. ``events`` may be given as any sequence of
    `LogEvent`; it is held as `EventColumns` (see `event_columns`)."""

    contacts: tuple[ContactEntry, ...] = ()
    events: Sequence[LogEvent] = NO_EVENTS
    notes: tuple[NoteVersion, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.events, EventColumns):
            object.__setattr__(self, "events", EventColumns.of(self.events))

    @property
    def event_columns(self) -> EventColumns:
        return cast(EventColumns, self.events)  # made so by __post_init__

    def __len__(self) -> int:
        return len(self.contacts) + len(self.events) + len(self.notes)


@dataclass(frozen=True, slots=True)
class Marks:
    """A compact summary of what a replica holds.

    ``log``: per origin, the highest sequence number held (events of an origin
    are held as a prefix 1..n). ``notes``: per origin, the newest stamp of that
    origin seen. ``contacts``: a fingerprint of the contacts and aliases.
    """

    log: tuple[tuple[str, int], ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    contacts: bytes = bytes(FINGERPRINT_BYTES)

    def log_mark(self, origin: str) -> int:
        return dict(self.log).get(origin, 0)

    def note_mark(self, origin: str) -> str | None:
        return dict(self.notes).get(origin)


# -- messages -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """Round one: my digest and what I hold. ``reply`` marks the answer; in it,
    ``streaming`` says whether batches follow, and ``repair`` holds the first
    ranges of a repair when the marks agree but the digests do not (nothing to
    stream either way). On the wire ``repair`` is a sixth item, sent only when
    there are ranges: a Hello without is the five items it always was."""

    session: bytes
    reply: bool
    digest: bytes
    count: int
    marks: Marks
    streaming: bool = True
    repair: tuple[Range, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """Records the peer lacks, numbered from 0 in each direction; ``last`` ends the stream."""

    session: bytes
    number: int
    last: bool
    records: Records


@dataclass(frozen=True, slots=True)
class Check:
    """My digest after applying everything the peer sent (and the end of my stream)."""

    session: bytes
    digest: bytes
    count: int


@dataclass(frozen=True, slots=True)
class Repair:
    """A turn of reconciliation (see `reconcile.py`): ranges to compare, and the
    tags (8 bytes each) of the sibling's items whose records I need.

    Type code 7: the key-range repair of earlier versions was code 4, which a
    peer now refuses as an unknown type (as an older peer refuses this one)."""

    session: bytes
    ranges: tuple[Range, ...]
    need: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Ack:
    """Flow control: every batch up to ``number`` is applied (and committed)."""

    session: bytes
    number: int


@dataclass(frozen=True, slots=True)
class Abort:
    session: bytes
    reason: str


SyncMessage = Hello | Batch | Check | Repair | Abort | Ack
_CODES: dict[type, int] = {Hello: 1, Batch: 2, Check: 3, Repair: 7, Abort: 5, Ack: 6}


# -- encoding -----------------------------------------------------------------------------


def _id16(text: str) -> bytes:
    try:
        raw = bytes.fromhex(text.replace("-", ""))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ProtocolError(f"not a 128-bit id: {shown(text, 60)}")
    return raw
