"""The memory log: an append-only stream of `MemoryEvent` rows.

Nothing here edits or deletes an event. That is what makes the log safe to merge
between devices (insert-if-absent on the event id, never a conflict) and an
honest record of what was known when. A database trigger backs the promise up.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, cast, overload

from sqlalchemy import Index, String, Text, UniqueConstraint, func, select
from sqlalchemy import text as sql_text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from pixie.device.errors import BadInput, DataDirError
from pixie.device.store import statedigest
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.db import Base, Database, driver_of

# Re-exported: the log's callers name the kinds from here.
from pixie.device.store.kinds import CHAT_KINDS as CHAT_KINDS  # noqa: PLC0414
from pixie.device.store.kinds import SEARCHABLE_KINDS as SEARCHABLE_KINDS  # noqa: PLC0414
from pixie.device.store.kinds import EventKind as EventKind  # noqa: PLC0414
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.digest import event_item
from pixie.protocol.ids import IdMinter, minter_for
from pixie.protocol.validate import has_lone_surrogate

MAX_TEXT_CHARS = 65_536
MAX_REF_CHARS = 200
PROGRESS_EVENTS = 4096  # events between two calls of an append's progress hook
# From this many events, an append takes the ids it is given to be new (see
# `MemoryLog.append_in`): an import of a new export skips a lookup per event.
# (`pixie import` writes batches of 2,048.)
OPTIMISTIC_EVENTS = 1024


# The memory log is append-only by construction (the store has no edit or delete
# path) and by the database itself: these triggers refuse any UPDATE or DELETE,
# whoever issues it.
MEMLOG_DDL = (
    """CREATE TRIGGER IF NOT EXISTS memory_event_no_update
       BEFORE UPDATE ON memory_event
       BEGIN SELECT RAISE(ABORT, 'memory_event is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS memory_event_no_delete
       BEFORE DELETE ON memory_event
       BEGIN SELECT RAISE(ABORT, 'memory_event is append-only'); END""",
)


# The kinds live in a module of their own, which a quick command (`pixie
# grep` on a current mirror) imports without this module's ORM mapping.
# An email event's text: "Subject: ..." on its first line, then, for mail no
# person wrote (a mailing list, bulk mail, a no-reply sender), a line that
# starts with this mark and says why ("Automated mail (mailing list)"), then
# the body. The importer writes it; distillation reads it.
MAIL_AUTOMATED_MARK = "Automated mail"

# Each kind's stored text, by kind: a dict lookup per appended event instead
# of the enum's slower `.value`.
_KIND_TEXT: dict[EventKind, str] = {kind: kind.value for kind in EventKind}


class MemoryEvent(Base):
    __tablename__ = "memory_event"

    # Local append order. Never synced; the text mirror uses it as a watermark
    # ("everything up to n is indexed") because rows are never removed.
    n: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    origin: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int]
    kind: Mapped[str] = mapped_column(String(20))
    at: Mapped[int]  # microseconds since the epoch, UTC
    contact_id: Mapped[str | None] = mapped_column(String(32))
    thread: Mapped[str | None] = mapped_column(String(MAX_REF_CHARS))
    source: Mapped[str | None] = mapped_column(String(MAX_REF_CHARS))
    from_me: Mapped[bool | None]
    text: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("origin", "seq", name="uq_event_origin_seq"),
        Index("ix_event_thread_at", "thread", "at"),
        # The account's membership records, read after every sync that took
        # anything in (`account_records`): a few rows among millions.
        Index("ix_event_membership", "n", sqlite_where=sql_text("kind = 'membership'")),
        # The contacts identity events name (`identities.FROM_ME_SQL`): read by
        # every read that reports from_me.
        Index("ix_event_identity", "contact_id", sqlite_where=sql_text("kind = 'identity'")),
    )


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A validated event that has not been written yet (no origin or sequence)."""

    kind: EventKind
    at: int
    text: str
    contact: str | None = None  # display name; resolved (or created) on write
    thread: str | None = None
    source: str | None = None
    from_me: bool | None = None
    id: str | None = None  # given by an import or a pin; minted otherwise
    # The id an earlier scheme of the importer gave the same record: an import
    # skips the event if the log holds either (see `MemoryLog.held_in`).
    legacy_id: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event as stored and as exchanged between replicas."""

    id: str
    origin: str
    seq: int
    kind: EventKind
    at: int
    contact_id: str | None
    thread: str | None
    source: str | None
    from_me: bool | None
    text: str


@dataclass(frozen=True, slots=True)
class AppendResult:
    ids: tuple[str, ...]
    skipped: int  # events whose id was already in the log
    new_contacts: int


def check_text(text: object) -> str:
    if not isinstance(text, str):
        raise BadInput("text must be a string")
    if not text.strip():
        raise BadInput("text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise BadInput(f"text is longer than {MAX_TEXT_CHARS} characters")
    if "\x00" in text:
        raise BadInput("text contains a NUL character")
    if has_lone_surrogate(text):
        raise BadInput(SURROGATE_MESSAGE.format(what="text"))
    return text


def check_ref(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{what} must be a non-empty string")
    if len(value) > MAX_REF_CHARS or _LINE_BREAK.search(value):
        raise BadInput(f"{what} must be one line of at most {MAX_REF_CHARS} characters")
    if has_lone_surrogate(value):
        raise BadInput(SURROGATE_MESSAGE.format(what=what))
    return value


_LINE_BREAK = re.compile("[\n\r\x00]")
SURROGATE_MESSAGE = "{what} is not valid Unicode (a lone surrogate)"


_KINDS = {k.value: k for k in EventKind}


def parse_kind(value: object) -> EventKind:
    # A dict lookup: calling EventKind(value) costs several microseconds a
    # time, which an import or a sync of a million events feels.
    kind = _KINDS.get(value) if isinstance(value, str) else None
    if kind is not None:
        return kind
    names = ", ".join(k.value for k in EventKind)
    raise BadInput(f"unknown kind {value!r:.40} (one of: {names})")


# A stored row in `COLUMNS` order; the bulk paths work on these tuples directly.
Row = tuple[int, str, str, int, str, int, str | None, str | None, str | None, bool | None, str]
# An event as replicas exchange it: a row without its local number.
Event = tuple[str, str, int, str, int, str | None, str | None, str | None, bool | None, str]
COLUMNS = (
    "n",
    "id",
    "origin",
    "seq",
    "kind",
    "at",
    "contact_id",
    "thread",
    "source",
    "from_me",
    "text",
)
Listener = Callable[[Sequence[Row]], None]


def _always() -> bool:
    return True


class MemoryLog:
    """Append and insert-if-absent; there is deliberately no other write path.

    New event ids come from ``ids`` (by default the minter for ``clock`` and
    ``entropy``), and an append given no ``now`` reads ``clock``.
    """

    def __init__(
        self,
        db: Database,
        origin: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        entropy: Entropy = SYSTEM_ENTROPY,
        ids: IdMinter | None = None,
    ) -> None:
        self.db = db
        self.origin = origin
        self.clock = clock
        self.ids = ids if ids is not None else minter_for(clock, entropy)
        self._listeners: list[Listener] = []
        self._wanting: list[Callable[[], bool]] = []

    def subscribe(
        self, listener: Listener, *, wants_rows: Callable[[], bool] | None = None
    ) -> None:
        """Call ``listener`` with the rows of each committed write, in ``n`` order.

        ``wants_rows``, if given, says whether the listener would do anything
        with rows now (a derived index not built yet would not: it reads the
        log when it is built); when no listener does, `committed_after` does
        not read a long import's rows back at all."""
        self._listeners.append(listener)
        self._wanting.append(wants_rows if wants_rows is not None else _always)

    def append(
        self,
        events: Sequence[NewEvent],
        *,
        now: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> AppendResult:
        """Write a batch of new events in one durable transaction.

        Events that carry an id already present (in the log or earlier in the
        batch) are skipped, so re-importing a file is harmless. Sequence numbers
        are given only to rows actually written, keeping each origin's sequence
        gap-free. ``now`` dates the contacts the batch creates (the log's
        clock if not given). ``progress`` hears (events done, events in all)
        now and then; it reaches the total only once the batch is committed.
        """
        with self.db.writing() as session:
            result, rows = self.append_in(session, events, now=now, progress=progress)
        self.committed(rows)
        if progress is not None:
            progress(len(events), len(events))
        return result

    def append_in(
        self,
        session: Session,
        events: Sequence[NewEvent],
        *,
        now: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> tuple[AppendResult, list[Row]]:
        """`append` inside a caller's write transaction (a pin writes a note and
        its event together). The caller passes the rows to `committed` after
        its commit.

        A batch of `OPTIMISTIC_EVENTS` or more takes the ids its events carry
        to be new to the log unless its first or last id is there already (a
        re-import, a grown export), and so looks none of them up: the unique
        index refuses a repeat in the insert itself, and should one be there
        all the same, the batch is rolled back to a savepoint and written
        again, looking each id up."""
        if now is None:
            now = self.clock.now_us()
        given = [e.id for e in events if e.id is not None]
        if len(events) >= OPTIMISTIC_EVENTS and not _existing_ids(session, given[:1] + given[-1:]):
            try:
                with session.begin_nested():
                    return self._append_rows(session, events, set(), now, progress, strict=True)
            except _AlreadyThere:
                pass  # back at the savepoint: contacts and rows of the try are gone
        return self._append_rows(
            session, events, _existing_ids(session, given), now, progress, strict=False
        )

    def _append_rows(
        self,
        session: Session,
        events: Sequence[NewEvent],
        seen: set[str],
        now: int,
        progress: Callable[[int, int], None] | None,
        *,
        strict: bool,
    ) -> tuple[AppendResult, list[Row]]:
        """Write ``events`` but those whose id is in ``seen`` or earlier in the
        batch; ``strict``: an id the log holds, or one the batch repeats,
        raises `_AlreadyThere` (the caller writes the batch again, not strict)."""
        rows: list[Row] = []
        skipped = 0
        new_contacts = 0
        fresh = iter(self.ids.new_ids(sum(1 for e in events if e.id is None)))
        names: dict[str, str] = {}
        # The two tops on the driver: through the ORM they cost more than a
        # small append's insert.
        driver = driver_of(session, flush=False)
        n = driver.execute(TOP_SQL).fetchone()[0] or 0
        seq = driver.execute(TOP_SEQ_SQL, (self.origin,)).fetchone()[0] or 0
        origin = self.origin
        total = len(events)
        kind_text = _KIND_TEXT
        if strict:
            # Every event is taken to be new (the unique index refuses a repeat,
            # one earlier in the batch included), so a row is one expression of
            # its event: the contacts first, in the order the batch names them.
            for name in dict.fromkeys(e.contact for e in events if e.contact is not None):
                names[name], created = ContactBook.ensure_in(session, name, now)
                new_contacts += created
            contact_of = names.get
            for start in range(0, total, PROGRESS_EVENTS):
                if progress is not None:
                    progress(start, total)
                rows += [
                    (
                        n + i,
                        ev.id if ev.id is not None else next(fresh),
                        origin,
                        seq + i,
                        kind_text[ev.kind],
                        ev.at,
                        None if ev.contact is None else contact_of(ev.contact),
                        ev.thread,
                        ev.source,
                        ev.from_me,
                        ev.text,
                    )
                    for i, ev in enumerate(events[start : start + PROGRESS_EVENTS], start + 1)
                ]
            try:
                _insert(session, rows)
            except IntegrityError:
                raise _AlreadyThere from None
            return AppendResult(tuple(r[1] for r in rows), 0, new_contacts), rows
        add_row = rows.append
        # In slices between progress calls: the loop is most of what an
        # import adds to the bare insert.
        for start in range(0, total, PROGRESS_EVENTS):
            if progress is not None:
                progress(start, total)
            for ev in events[start : start + PROGRESS_EVENTS]:
                event_id = ev.id
                contact = ev.contact
                if event_id is None:
                    event_id = next(fresh)
                elif event_id in seen:
                    skipped += 1
                    continue
                else:
                    seen.add(event_id)
                contact_id = None
                if contact is not None:
                    contact_id = names.get(contact)
                    if contact_id is None:
                        contact_id, created = ContactBook.ensure_in(session, contact, now)
                        names[contact] = contact_id
                        new_contacts += created
                n += 1
                seq += 1
                add_row(
                    (
                        n,
                        event_id,
                        origin,
                        seq,
                        kind_text[ev.kind],
                        ev.at,
                        contact_id,
                        ev.thread,
                        ev.source,
                        ev.from_me,
                        ev.text,
                    )
                )
        _insert(session, rows)
        return AppendResult(tuple(r[1] for r in rows), skipped, new_contacts), rows

    def insert_if_absent(self, records: Sequence[EventRecord]) -> int:
        """Merge events from another replica: insert those whose id is new.

        Idempotent by id; the records keep their own origin and sequence.
        Returns how many rows were written.
        """
        with self.db.writing() as session:
            rows = self.insert_in(session, records)
        self.committed(rows)
        return len(rows)

    @staticmethod
    def insert_in(session: Session, records: Sequence[EventRecord]) -> Sequence[Row]:
        """`insert_if_absent` inside the caller's write transaction; the caller
        passes the returned rows to `committed` once that transaction commits."""
        events = [as_row(0, r)[1:] for r in records]
        return MemoryLog.insert_columns_in(session, list(zip(*events, strict=True)))

    @staticmethod
    def insert_columns_in(
        session: Session, columns: Sequence[Sequence[Any]], id_bytes: bytes | None = None
    ) -> Sequence[Row]:
        """`insert_in` for events the caller has checked, given as columns: one
        sequence per field in `Event` order (``kind`` as its text). The bulk path
        of a sync. An id already in the log, or earlier in the columns, is
        skipped; any other conflict (another event at the same origin and
        sequence number) raises IntegrityError. ``id_bytes``, if the caller has
        them: the ids as 16 bytes each, in order."""
        count = len(columns[0]) if columns else 0
        if not count:
            return []
        conn = session.connection()
        top = conn.exec_driver_sql(TOP_SQL).scalar() or 0
        # Straight to the driver's cursor, one row at a time out of the columns
        # (zip hands the driver each row in turn, so no list of rows is built);
        # a driver error comes out as SQLAlchemy's, like any other statement's.
        # No row numbers given: SQLite gives each inserted row max(n) + 1, so
        # the rows that land are numbered top + 1, top + 2, ... in order.
        cursor = cast(sqlite3.Connection, conn.connection.driver_connection).cursor()
        try:
            cursor.executemany(_INSERT_NEW_SQL, zip(*columns, strict=True))
            landed = cursor.rowcount
        except sqlite3.Error as exc:
            raise DBAPIError.instance(_INSERT_NEW_SQL, None, exc, sqlite3.Error) from None
        finally:
            cursor.close()
        rows: Sequence[Row]
        if landed == count:
            rows = NumberedRows(top + 1, columns)
            if id_bytes is not None:
                items = [b"E" + id_bytes[i : i + 16] for i in range(0, len(id_bytes), 16)]
            else:
                items = _event_items(columns[0])
        else:
            first: dict[str, Event] = {}
            for e in zip(*columns, strict=True):
                first.setdefault(e[0], e)
            rows = [(n, *first[i]) for n, i in conn.exec_driver_sql(_LANDED_SQL, (top,))]
            items = _event_items([r[1] for r in rows])
        statedigest.update(session, add=items)
        return rows

    @staticmethod
    def held_in(session: Session, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` the log holds, inside the caller's transaction."""
        return _existing_ids(session, ids)

    @staticmethod
    def top_in(session: Session) -> int:
        """The local number of the newest row (0 for an empty log)."""
        return int(session.connection().exec_driver_sql(TOP_SQL).scalar() or 0)

    def committed_after(self, top: int, batch: int = PROGRESS_EVENTS) -> None:
        """Tell listeners about every row numbered above ``top``, read back in
        batches: how a long import, which keeps no rows in memory, reports
        what it wrote once it has committed."""
        if not any(wants() for wants in self._wanting):
            return
        while True:
            with self.db.reading() as session:
                found = session.connection().exec_driver_sql(_AFTER_SQL, (top, batch)).all()
            # from_me is stored as 0/1; listeners see it as the bool it was
            rows = [cast(Row, (*r[:9], None if r[9] is None else bool(r[9]), r[10])) for r in found]
            if not rows:
                return
            self.committed(rows)
            top = rows[-1][0]

    def committed(self, rows: Sequence[Row]) -> None:
        """Tell listeners (the text mirror) about rows that are now durable."""
        if rows:
            for listener in self._listeners:
                listener(rows)

    def count(self) -> int:
        with self.db.reading() as session:
            return session.scalar(select(func.count()).select_from(MemoryEvent)) or 0

    def get(self, event_id: str) -> EventRecord | None:
        with self.db.reading() as session:
            row = session.scalar(select(MemoryEvent).where(MemoryEvent.id == event_id))
            return None if row is None else to_record(row)

    def all_records(self) -> list[EventRecord]:
        with self.db.reading() as session:
            rows = session.scalars(select(MemoryEvent).order_by(MemoryEvent.n))
            return [to_record(r) for r in rows]

    def last_records(self, count: int) -> list[EventRecord]:
        """The newest ``count`` rows as written (by local row number), oldest first."""
        with self.db.reading() as session:
            rows = session.scalars(
                select(MemoryEvent).order_by(MemoryEvent.n.desc()).limit(max(0, count))
            )
            return [to_record(r) for r in reversed(list(rows))]


class NumberedRows(Sequence[Row]):
    """Rows just written, numbered on from ``first`` in order, kept as the
    columns they were written from: a tuple is made for each row only when a
    listener reads it (the text mirror reads none until it is built), not
    thousands per batch for the collector to walk."""

    __slots__ = ("_columns", "_first")

    def __init__(self, first: int, columns: Sequence[Sequence[Any]]) -> None:
        self._first = first
        self._columns = columns

    def __len__(self) -> int:
        return len(self._columns[0])

    def __iter__(self) -> Iterator[Row]:
        numbers = range(self._first, self._first + len(self))
        return cast(Iterator[Row], zip(numbers, *self._columns, strict=True))

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        i = range(len(self))[index]  # negative indexes, and IndexError past the end
        return cast(Row, (self._first + i, *(column[i] for column in self._columns)))


def as_row(n: int, r: EventRecord) -> Row:
    """A record as the row it is stored as, local row number ``n`` first."""
    return (
        n,
        r.id,
        r.origin,
        r.seq,
        r.kind.value,
        r.at,
        r.contact_id,
        r.thread,
        r.source,
        r.from_me,
        r.text,
    )


def to_record(row: MemoryEvent) -> EventRecord:
    kind = _KINDS.get(row.kind)
    if kind is None:
        # Every write path checks the kind, so only damage puts another here.
        raise DataDirError(f"event {row.id!r:.40} has no known kind: the database is damaged")
    return EventRecord(
        id=row.id,
        origin=row.origin,
        seq=row.seq,
        kind=kind,
        at=row.at,
        contact_id=row.contact_id,
        thread=row.thread,
        source=row.source,
        from_me=row.from_me,
        text=row.text,
    )


_ID_CHUNK = 500  # SQLite bounds the parameters of one statement
_EXISTING_SQL = "SELECT id FROM memory_event WHERE id IN ({})"


class _AlreadyThere(Exception):
    """An append that took its ids to be new met one the log holds."""


def _existing_ids(session: Session, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` the log already holds. Asked of the driver in chunks:
    building a SQLAlchemy IN clause per chunk costs more than the lookups."""
    found: set[str] = set()
    wanted = list(ids)
    conn = session.connection()
    for i in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[i : i + _ID_CHUNK]
        sql = _EXISTING_SQL.format(",".join("?" * len(chunk)))
        found.update(r[0] for r in conn.exec_driver_sql(sql, tuple(chunk)))
    return found


# The bulk write goes to the driver's executemany with positional rows: the
# statement is generated once from the typed table, and skipping per-row dict
# handling is what keeps an import within reach of raw sqlite3.
_INSERT_SQL = "INSERT INTO memory_event ({}) VALUES ({})".format(
    ", ".join(MemoryEvent.__table__.c[name].name for name in COLUMNS), ", ".join("?" * len(COLUMNS))
)


_INSERT_NEW_SQL = "INSERT INTO memory_event ({}) VALUES ({}) ON CONFLICT (id) DO NOTHING".format(
    ", ".join(MemoryEvent.__table__.c[name].name for name in COLUMNS[1:]),
    ", ".join("?" * (len(COLUMNS) - 1)),
)
_LANDED_SQL = "SELECT n, id FROM memory_event WHERE n > ? ORDER BY n"
# The local number of the newest row (NULL for an empty log).
TOP_SQL = "SELECT max(n) FROM memory_event"
# The highest sequence number of one origin (NULL for none).
TOP_SEQ_SQL = "SELECT max(seq) FROM memory_event WHERE origin = ?"
_AFTER_SQL = "SELECT {} FROM memory_event WHERE n > ? ORDER BY n LIMIT ?".format(
    ", ".join(MemoryEvent.__table__.c[name].name for name in COLUMNS)
)


def _insert(session: Session, rows: Sequence[Row]) -> None:
    if rows:
        session.connection().exec_driver_sql(_INSERT_SQL, list(rows))
        statedigest.update(session, add=_event_items([r[1] for r in rows]))


def _event_items(ids: Sequence[str]) -> list[bytes]:
    """The digest items of events by id (`event_item` of each), in one pass over
    the ids rather than one parse each."""
    n, joined, raw = len(ids), "".join(ids), b""
    # Canonical 8-4-4-4-12 text: four dashes in each id, each in its place.
    if (
        len(joined) == 36 * n
        and joined.count("-") == 4 * n
        and all(joined[i::36] == "-" * n for i in (8, 13, 18, 23))
    ):
        with suppress(ValueError):
            raw = bytes.fromhex(joined.replace("-", ""))
    if len(raw) != 16 * n:
        return [event_item(i) for i in ids]  # the slow way, which names a bad id
    return [b"E" + raw[i : i + 16] for i in range(0, len(raw), 16)]


_ACCOUNT_SQL = "SELECT text FROM memory_event WHERE kind = 'membership' ORDER BY n"


def account_records(db: Database) -> list[str]:
    """The texts of the account's membership records in the log, as written
    or merged (`pixie.protocol.membership` reads them)."""
    with db.reading(plain=True) as conn:
        return [str(row[0]) for row in conn.execute(_ACCOUNT_SQL)]
