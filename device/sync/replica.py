"""A replica's side of sync: what the session asks of the store, over SQLite.

`NodeReplica` answers a `pixie.protocol.sync.SyncSession`: the digest, the
marks, the records a sibling lacks, and the merge of what a sibling sends.

The merge rules, each a join (the result does not depend on the order or the
number of times records arrive):

- Log events: insert-if-absent on id. Events are never edited, so there is
  nothing to decide. An event that reuses another's (origin, seq) is a lie.
- Note versions: the greater of (user_edited, stamp) wins, where a stamp is
  the hybrid logical clock value (wall time, counter, origin). The user's own
  edits (and deletions) come first, so a distillation on one device that had
  not yet seen an edit made on another can never overwrite it, whatever the
  clocks say; between two edits, or two distillations, the later stamp wins,
  and the origin in the stamp breaks the last tie, so any two versions compare
  and every replica picks the same one. Tombstones are versions like any other.
- Contacts: a grow-only set by id (ids derive from the normalised name); of two
  spellings of one name the smaller wins. Aliases: by alias, the smaller
  contact id wins. Details (organisation, title, birthday, note): by contact
  and field, the greater (time written, value) wins, a last-writer-wins
  register that every replica settles the same way.

Where a note's body lives, marks, watermarks, settings and keys are local and
never leave. A batch is applied in one transaction, so a refused batch leaves
nothing behind.
"""

from __future__ import annotations

import enum
import json
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pixie.device.errors import BadInput
from pixie.device.notebook.store import sealed_hash
from pixie.device.store import itemindex, statedigest
from pixie.device.store.contactbook import Contact, ContactAlias, ContactDetail, put_detail_in
from pixie.device.store.contacts import (
    ALIASES_SQL,
    CONTACTS_SQL,
    DETAILS_SQL,
    clean_detail,
    clean_name,
    contact_id_for,
    contact_items_of,
    name_key,
)
from pixie.device.store.db import Database, Meta, driver_sql
from pixie.device.store.holdings import RELEASE_LATER_SQL, Holding
from pixie.device.store.itemindex import StoredItems
from pixie.device.store.memlog import (
    MAX_REF_CHARS,
    MAX_TEXT_CHARS,
    TOP_SEQ_SQL,
    MemoryEvent,
    MemoryLog,
    Row,
    check_ref,
    check_text,
    parse_kind,
)
from pixie.device.store.notes import (
    STAMP_ORIGIN_AT,
    NoteKind,
    Zone,
    clean_tags,
    content_hash,
    tags_json,
)
from pixie.device.store.notetable import Note, NoteMark, record_marks
from pixie.protocol.clock import Clock
from pixie.protocol.digest import (
    Fingerprint,
    alias_item,
    contact_item,
    detail_item,
    event_item,
    item_hash,
    note_item,
)
from pixie.protocol.errors import ProtocolError
from pixie.protocol.hlc import HybridClock, Stamp
from pixie.protocol.ids import id_text
from pixie.protocol.reconcile import range_fingerprint
from pixie.protocol.syncwire import (
    MAX_ALIASES,
    MAX_DETAIL_AT,
    ClearFields,
    ContactEntry,
    DetailEntry,
    EventColumns,
    Marks,
    NoteVersion,
    Records,
)

log = logging.getLogger("pixie.sync")
# A batch is cut once its records reach about this many encoded bytes; with one
# maximal record on top it stays under syncwire.MAX_MESSAGE_BYTES.
BATCH_BYTES = 480 * 1024
BATCH_RECORDS = 10_000
_PAGE = 2_000


class _EventRow(NamedTuple):
    """An event as a batch reads it from the log: the `LogEvent` fields, in order.

    The select below is built from these names. Events are read straight from
    the driver and go into a batch's columns as they are: loading ORM objects
    cost more than everything else on the sending side together, so a row is
    the driver's tuple, only made a `_EventRow` (one `_make` each) to be read
    by name.
    """

    id: str
    origin: str
    seq: int
    kind: str
    at: int
    contact_id: str | None
    thread: str | None
    source: str | None
    from_me: int | None  # SQLite hands booleans back as 0/1: see `_FROM_ME`
    text: str


_EVENT_COLUMNS = ", ".join(_EventRow._fields)
_EVENTS_AFTER = (
    f"SELECT {_EVENT_COLUMNS} FROM memory_event WHERE origin = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_EVENTS_BY_ID = f"SELECT {_EVENT_COLUMNS} FROM memory_event WHERE id IN ({{}})"
_ID_CHUNK = 500
# What a merge reads of a stored note (`_Held`), and the statements it uses.
_HELD_COLUMNS = (
    "n",
    "id",
    "zone",
    "updated_at",
    "content_hash",
    "user_edited",
    "deleted",
    "body",
    "holder",
)
_HELD_NOTES_SQL = f"SELECT {', '.join(_HELD_COLUMNS)} FROM note WHERE id IN ({{}})"
_ITEM_PAGE = 10_000


# The reads of every session (digest and marks), and what the items of the
# state digest are made of (see `statedigest.note_version`, `contact_items`).
_DIGEST_SQL = driver_sql(select(Meta.value).where(Meta.key == bindparam("key")))
_NOTE_MARKS_SQL = driver_sql(select(NoteMark.origin, NoteMark.stamp))
_EVENT_IDS = driver_sql(select(MemoryEvent.id))
_HOLDING_BODY_SQL = driver_sql(
    select(Holding.body).where(
        Holding.note_id == bindparam("note_id"), Holding.content_hash == bindparam("hash")
    )
)
# What `_all_contacts` sends: every contact, its aliases and details, in order.
_ALL_CONTACTS_SQL = driver_sql(select(Contact.id, Contact.name).order_by(Contact.id))
_ALL_ALIASES_SQL = driver_sql(
    select(ContactAlias.contact_id, ContactAlias.alias).order_by(ContactAlias.alias_key)
)
_ALL_DETAILS_SQL = driver_sql(
    select(
        ContactDetail.contact_id, ContactDetail.field, ContactDetail.value, ContactDetail.at
    ).order_by(ContactDetail.contact_id, ContactDetail.field)
)
_NOTE_VERSIONS = driver_sql(
    select(Note.id, Note.updated_at, Note.content_hash, Note.user_edited, Note.deleted)
)


_FROM_ME = {None: None, 0: False, 1: True}  # SQLite hands booleans back as 0/1


def _every_item(conn: sqlite3.Connection) -> Iterator[bytes]:
    """Every item the digest sums, read on a driver connection inside its
    transaction: only the columns an item is made of (a rebuild reads every
    event, and ORM rows, each note with its body, cost several times the
    hashing)."""
    cursor = conn.cursor()
    try:
        cursor.execute(_EVENT_IDS)
        while rows := cursor.fetchmany(_ITEM_PAGE):
            for (event_id,) in rows:
                yield event_item(event_id)
        cursor.execute(_NOTE_VERSIONS)
        for note_id, stamp, digest, user_edited, deleted in cursor.fetchall():
            yield note_item(note_id, stamp, digest, bool(user_edited), bool(deleted))
        yield from contact_items_of(cursor)
    finally:
        cursor.close()


# What a record costs encoded, at most, besides its strings: fixed-width fields
# and msgpack headers (ids, hashes and ints at their widest, a kind of up to 24
# ASCII characters). `_Chunker` adds the UTF-8 of *every* string (a note's origin
# is inside its stamp), so it never under-counts: counting only the text let
# short messages with long thread and source refs (or notes with long
# identities, sources and tags) make batches several times over
# syncwire.MAX_MESSAGE_BYTES, which the sender could then never send.
_NOTE_FIXED = 160
_SEALED_FIXED = 96
_CONTACT_FIXED = 32
# A detail: its list header, the field's name and the header of its value, and its time.
_DETAIL_FIXED = 24
# An event in the columns: its 16-byte id, an index into each of the four
# tables (origin, kind, contact, thread) and seq and time as integers, each at
# its widest, from_me, and the headers of its source and text. A value's first
# use in a batch adds it to that table: `_ENTRY` plus its UTF-8 (or
# `_CONTACT_ENTRY` for a contact id).
_EVENT_FIXED = 16 + 4 * 3 + 2 * 9 + 1 + 5 + 5
_ENTRY = 5
_CONTACT_ENTRY = 2 + 16


def _utf8(text: str | None) -> int:
    return 0 if text is None else len(text.encode())


def _size(record: NoteVersion | ContactEntry) -> int:
    """Encoded bytes, at most: see `_NOTE_FIXED`."""
    if isinstance(record, ContactEntry):
        return (
            _CONTACT_FIXED
            + _utf8(record.name)
            + sum(3 + _utf8(a) for a in record.aliases)
            + sum(_DETAIL_FIXED + _utf8(d.value) for d in record.details)
        )
    c = record.clear
    if c is None:
        return _SEALED_FIXED + len(record.stamp) + len(record.ciphertext or b"")
    return (
        _NOTE_FIXED
        + len(record.stamp)
        + _utf8(c.body)
        + _utf8(c.title)
        + _utf8(c.identity_key)
        + _utf8(c.source_ref)
        + sum(2 + _utf8(t) for t in c.tags)
    )


# Driver rows of events, read by name.
_EventRows: TypeAlias = list[_EventRow]
_Part: TypeAlias = ContactEntry | NoteVersion | _EventRows


class _Chunker:
    """Cuts a stream of records into bounded `Records`."""

    def __init__(self) -> None:
        self.contacts: list[ContactEntry] = []
        self.notes: list[NoteVersion] = []
        self.events: _EventRows = []
        # The values already in this batch's event tables, each counted once.
        self.tables: tuple[set[Any], set[Any], set[Any], set[Any]] = (set(), set(), set(), set())
        self.bytes = self.count = 0

    def add(self, record: ContactEntry | NoteVersion) -> Records | None:
        if isinstance(record, ContactEntry):
            self.contacts.append(record)
        else:
            self.notes.append(record)
        self.bytes += _size(record)
        self.count += 1
        return self._full()

    def add_events(self, rows: _EventRows) -> Iterator[Records]:
        """Take a page of event rows, yielding every batch they fill."""
        origins, kinds, contacts, threads = self.tables
        texts = [len(r.text.encode()) for r in rows]
        start = 0
        for i, row in enumerate(rows):
            size = _EVENT_FIXED + texts[i] + _utf8(row.source)
            if row.origin not in origins:
                origins.add(row.origin)
                size += _ENTRY + _utf8(row.origin)
            if row.kind not in kinds:
                kinds.add(row.kind)
                size += _ENTRY + _utf8(row.kind)
            if row.contact_id not in contacts:
                contacts.add(row.contact_id)
                size += _CONTACT_ENTRY
            if row.thread not in threads:
                threads.add(row.thread)
                size += _ENTRY + _utf8(row.thread)
            self.bytes += size
            self.count += 1
            if self.bytes >= BATCH_BYTES or self.count >= BATCH_RECORDS:
                self.events += rows[start : i + 1]
                start = i + 1
                yield self._cut()
                origins, kinds, contacts, threads = self.tables
        self.events += rows[start:]

    def _full(self) -> Records | None:
        if self.bytes >= BATCH_BYTES or self.count >= BATCH_RECORDS:
            return self._cut()
        return None

    def flush(self) -> Records | None:
        if not (self.contacts or self.events or self.notes):
            return None
        return self._cut()

    def _cut(self) -> Records:
        out = Records(tuple(self.contacts), _columns(self.events), tuple(self.notes))
        self.contacts, self.events, self.notes = [], [], []
        self.tables = (set(), set(), set(), set())
        self.bytes = self.count = 0
        return out


def _columns(rows: _EventRows) -> EventColumns:
    """Event columns from event rows, each column by its field's name."""
    if not rows:
        return EventColumns()
    by_field = zip(_EventRow._fields, zip(*rows, strict=True), strict=True)
    c: dict[str, tuple[Any, ...]] = dict(by_field)
    return EventColumns(
        ids=c["id"],
        origins=c["origin"],
        seqs=c["seq"],
        kinds=c["kind"],
        ats=c["at"],
        contact_ids=c["contact_id"],
        threads=c["thread"],
        sources=c["source"],
        from_me=tuple(map(_FROM_ME.__getitem__, c["from_me"])),
        texts=c["text"],
    )


def _chunked(parts: Iterable[_Part]) -> Iterator[Records]:
    chunker = _Chunker()
    for part in parts:
        if isinstance(part, list):
            yield from chunker.add_events(part)
            continue
        full = chunker.add(part)
        if full is not None:
            yield full
    last = chunker.flush()
    if last is not None:
        yield last


def _event_rows(db: Database, sql: str, params: Sequence[Any]) -> _EventRows:
    """Rows straight from the driver (one statement, one read transaction:
    `Database.peek`), each only wrapped as an `_EventRow`."""
    return list(map(_EventRow._make, db.peek(sql, params)))


class _NoteRow(NamedTuple):
    """A note as a batch reads it: the columns `_wire_note` uses, read
    straight from the driver like events (see `_EventRow`); booleans come
    back as 0/1, and `_wire_note` makes them booleans again."""

    id: str
    zone: str
    updated_at: str
    content_hash: str
    user_edited: int
    deleted: int
    nonce: bytes | None
    ciphertext: bytes | None
    kind: str | None
    identity_key: str | None
    title: str | None
    body: str | None
    contact_id: str | None
    tags: str | None
    source_ref: str | None
    about_date: int | None
    created_at: int | None


_NOTE_TABLE = cast(Table, Note.__table__)
_NOTE_COLUMNS = ", ".join(_NOTE_TABLE.c[name].name for name in _NoteRow._fields)
_UPDATED_AT = _NOTE_TABLE.c.updated_at.name
# A page of one origin's note versions newer than a stamp (the stamp's origin
# is its tail, see `STAMP_ORIGIN_AT`), in stamp order.
_NOTES_AFTER = (
    f"SELECT {_NOTE_COLUMNS} FROM {_NOTE_TABLE.name} WHERE {_UPDATED_AT} > ? "
    f"AND substr({_UPDATED_AT}, {STAMP_ORIGIN_AT + 1}) = ? ORDER BY {_UPDATED_AT} LIMIT ?"
)
_NOTES_BY_ID = (
    f"SELECT {_NOTE_COLUMNS} FROM {_NOTE_TABLE.name} WHERE {_NOTE_TABLE.c.id.name} IN ({{}})"
)


def _note_rows(db: Database, sql: str, params: Sequence[Any]) -> list[_NoteRow]:
    return list(map(_NoteRow._make, db.peek(sql, params)))


def _wire_note(row: Note | _NoteRow) -> NoteVersion:
    if row.zone == Zone.SEALED.value:
        return NoteVersion(
            row.id,
            row.updated_at,
            row.content_hash,
            bool(row.user_edited),
            bool(row.deleted),
            nonce=row.nonce,
            ciphertext=row.ciphertext,
        )
    # An offloaded note goes without its body (None): residency is not part of
    # a version, and its holder (normally the receiver) holds the same bytes.
    clear = ClearFields(
        kind=row.kind or "",
        identity_key=row.identity_key,
        title=row.title or "",
        body=row.body,
        contact_id=row.contact_id,
        tags=tuple(json.loads(row.tags)) if row.tags else (),
        source_ref=row.source_ref,
        about_date=row.about_date,
        created_at=row.created_at or 0,
    )
    return NoteVersion(
        row.id,
        row.updated_at,
        row.content_hash,
        bool(row.user_edited),
        bool(row.deleted),
        clear=clear,
    )


def _version_order(user_edited: bool, stamp: str) -> tuple[bool, str]:
    # Why this order: see the module docstring. Stamps compare as text because
    # their fixed-width encoding sorts in clock order, origin last.
    return (user_edited, stamp)


# Each origin's highest sequence number. A skip-scan over the (origin, seq)
# unique index: one index seek per origin for the next origin and one for its
# maximum, so the cost follows the number of origins (a handful), where
# GROUP BY would read every row of the log (~0.1 s at a million events).
# `NodeReplica.marks` reads them in one statement with the note marks and the
# contact book's rows (what its digest items are made of, `contact_items_of`),
# each row tagged with what it is.
_LOG_MARK, _NOTE_MARK, _CONTACT, _ALIAS, _DETAIL = range(5)
_ALL_MARKS_SQL = f"""
WITH RECURSIVE origins(origin) AS (
    SELECT (SELECT min(origin) FROM memory_event)
    UNION ALL
    SELECT (SELECT min(origin) FROM memory_event WHERE origin > origins.origin)
    FROM origins WHERE origins.origin IS NOT NULL
)
SELECT {_LOG_MARK}, origin,
    (SELECT max(seq) FROM memory_event WHERE memory_event.origin = origins.origin), NULL, NULL
FROM origins WHERE origin IS NOT NULL
UNION ALL SELECT {_NOTE_MARK}, *, NULL, NULL FROM ({_NOTE_MARKS_SQL})
UNION ALL SELECT {_CONTACT}, *, NULL, NULL FROM ({CONTACTS_SQL})
UNION ALL SELECT {_ALIAS}, *, NULL FROM ({ALIASES_SQL})
UNION ALL SELECT {_DETAIL}, * FROM ({DETAILS_SQL})
"""


class NodeReplica:
    """The `Replica` a sync session runs against, for one data dir."""

    def __init__(
        self, db: Database, log: MemoryLog, origin: str, *, clock: Clock | None = None
    ) -> None:
        """``clock`` is where this replica reads the time (the log's, unless
        given): its stamps' wall part and the date of a queued release.
        ``self.clock`` is the hybrid clock made from it, which may be replaced."""
        self.db = db
        self.log = log
        self.origin = origin
        self.wall_clock: Clock = log.clock if clock is None else clock
        self.clock = HybridClock(origin, clock=self.wall_clock)

    # -- what I hold --------------------------------------------------------------------

    # Both run in every session, an in-sync one included: through the driver,
    # each in one read transaction (see `driver_sql`).

    def state(self) -> tuple[bytes, int]:
        rows = self.db.peek(_DIGEST_SQL, (statedigest.DIGEST_KEY,))
        fp = Fingerprint.decode(rows[0][0]) if rows and rows[0][0] else Fingerprint()
        return fp.digest(), fp.count

    def marks(self) -> Marks:
        # One statement (so one snapshot) on the plain driver connection: the
        # log's marks, the note marks and the contact book's digest items,
        # each row tagged with what it is.
        log: list[tuple[str, int]] = []
        notes: list[tuple[str, str]] = []
        contacts: list[bytes] = []
        for tag, a, b, c, d in self.db.peek(_ALL_MARKS_SQL):
            if tag == _LOG_MARK:
                log.append((str(a), int(b)))
            elif tag == _NOTE_MARK:
                notes.append((str(a), str(b)))
            elif tag == _CONTACT:
                contacts.append(contact_item(a, b))
            elif tag == _ALIAS:
                contacts.append(alias_item(a, b, c))
            else:
                contacts.append(detail_item(a, b, c, d))
        fp = Fingerprint.of(contacts)
        return Marks(
            tuple(sorted(log)), tuple(sorted(notes)), range_fingerprint(fp.total, fp.count)
        )

    # -- what a sibling lacks -----------------------------------------------------------

    def missing(self, peer: Marks) -> Iterator[Records]:
        return _chunked(self._missing_parts(peer))

    def _missing_parts(self, peer: Marks) -> Iterator[_Part]:
        mine = self.marks()
        if mine.contacts != peer.contacts:
            yield from self._all_contacts()
        for origin, high in mine.log:
            after = peer.log_mark(origin)
            while after < high:
                rows = _event_rows(self.db, _EVENTS_AFTER, (origin, after, _PAGE))
                if not rows:
                    break
                # Stop at a gap in this replica's copy of the log (events that
                # came by repair, in a session cut before the rest): a sibling
                # takes a stream only in sequence order, so it would refuse the
                # batch past the gap, and every later session with it. Repair
                # sends what lies beyond. (Sequence numbers are distinct and
                # ascending, so the last one tells whether any is missing.)
                run = len(rows)
                if rows[-1].seq != after + run:
                    run = next(i for i, r in enumerate(rows) if r.seq != after + 1 + i)
                if run:
                    yield rows[:run]
                if run < len(rows):
                    break
                after = rows[-1].seq
        for origin, newest in mine.notes:
            after_stamp = peer.note_mark(origin) or ""
            while after_stamp < newest:
                note_rows = _note_rows(self.db, _NOTES_AFTER, (after_stamp, origin, _PAGE))
                notes = [_wire_note(r) for r in note_rows]
                if not notes:
                    break
                yield from notes
                after_stamp = notes[-1].stamp

    def _all_contacts(self) -> list[ContactEntry]:
        # Three reads in one read transaction, on the driver (see `driver_sql`).
        with self.db.snapshot() as conn:
            cursor = conn.cursor()
            try:
                contacts = cursor.execute(_ALL_CONTACTS_SQL).fetchall()
                aliases: dict[str, list[str]] = {}
                for cid, alias in cursor.execute(_ALL_ALIASES_SQL).fetchall():
                    aliases.setdefault(cid, []).append(alias)
                details: dict[str, list[DetailEntry]] = {}
                for cid, field, value, at in cursor.execute(_ALL_DETAILS_SQL).fetchall():
                    details.setdefault(cid, []).append(DetailEntry(field, value, at))
            finally:
                cursor.close()
        # The codec takes at most MAX_ALIASES aliases per entry and the book has
        # no such bound: a contact with more goes out as several entries (the
        # merge takes each in turn), never as one the sibling must refuse.
        # Its details ride with the first.
        out: list[ContactEntry] = []
        for c, n in contacts:
            held = aliases.get(c, [])
            for i in range(0, max(len(held), 1), MAX_ALIASES):
                extra = tuple(details.get(c, ())) if i == 0 else ()
                out.append(ContactEntry(c, n, tuple(held[i : i + MAX_ALIASES]), extra))
        return out

    # -- repair ---------------------------------------------------------------------------

    def items(self) -> Iterator[tuple[bytes, int]]:
        """Every (key, item hash) the digest sums, read from the rows."""
        with self.db.snapshot() as conn:
            for item in _every_item(conn):
                yield item[:17], item_hash(item)

    def item_index(self) -> StoredItems:
        # The index kept on every write; a data dir made before it existed
        # gets it built here, once, in one write transaction.
        if not itemindex.is_built(self.db):
            with self.db.writing() as session:
                conn = cast(sqlite3.Connection, session.connection().connection.driver_connection)
                if not itemindex.is_built_on(conn):  # read again, under the write lock
                    itemindex.rebuild(conn, list(_every_item(conn)))
        return StoredItems(self.db)

    def records_for(self, keys: Sequence[bytes]) -> Iterator[Records]:
        return _chunked(self._records_for(keys))

    def _records_for(self, keys: Sequence[bytes]) -> Iterator[_Part]:
        by_kind: dict[bytes, list[bytes]] = {}
        for key in keys:
            by_kind.setdefault(key[:1], []).append(key[1:])
        if b"C" in by_kind or b"A" in by_kind or b"D" in by_kind:
            yield from self._all_contacts()
        event_ids = [id_text(raw) for raw in by_kind.get(b"E", [])]
        for i in range(0, len(event_ids), _ID_CHUNK):
            chunk = event_ids[i : i + _ID_CHUNK]
            sql = _EVENTS_BY_ID.format(",".join("?" * len(chunk)))
            rows = _event_rows(self.db, sql, chunk)
            if rows:
                yield rows
        note_ids = [id_text(raw) for raw in by_kind.get(b"N", [])]
        for i in range(0, len(note_ids), _ID_CHUNK):
            chunk = note_ids[i : i + _ID_CHUNK]
            sql = _NOTES_BY_ID.format(",".join("?" * len(chunk)))
            versions = [_wire_note(r) for r in _note_rows(self.db, sql, chunk)]
            yield from versions

    # -- merging --------------------------------------------------------------------------

    def apply(self, records: Records, *, in_order: bool) -> int:
        events = records.event_columns
        try:
            _check_events(events)
            notes = [_checked_note(n) for n in records.notes]
            for n in notes:
                self.clock.observe(Stamp.decode(n.stamp))
        except BadInput as exc:
            raise ProtocolError(f"refused a record: {exc}") from None
        changed = 0
        rows: Sequence[Row] = ()
        with self.db.writing() as session:
            # The constraint failure is caught inside the transaction: once it
            # leaves `writing()`, db.py has already turned it (a DatabaseError)
            # into DataDirError ("damaged"), which no session expects. Raising
            # ProtocolError from here still rolls the whole batch back.
            try:
                changed += self._merge_contacts(session, records.contacts)
                rows = self._merge_events(session, events, in_order=in_order)
                changed += len(rows)
                changed += self._merge_notes(session, notes)
                session.flush()  # anything still pending fails here, not at commit
            except (IntegrityError, sqlite3.IntegrityError) as exc:
                # The ORM's error wraps the driver's; the merge of notes raises
                # the driver's own.
                cause = exc.orig if isinstance(exc, IntegrityError) else exc
                raise ProtocolError(
                    f"a batch contradicts what this replica holds ({cause})"
                ) from None
        self.log.committed(rows)
        return changed

    def _merge_contacts(self, session: Session, contacts: Sequence[ContactEntry]) -> int:
        changed = 0
        for entry in contacts:
            try:
                name = clean_name(entry.name)
                aliases = [clean_name(a, "alias") for a in entry.aliases]
                for d in entry.details:
                    # Only a value in its stored form: cleaning it here would
                    # make a value the sender's digest does not hold.
                    if clean_detail(d.field, d.value) != d.value:
                        raise BadInput(f"contact {d.field} is not in its stored form")
                    if not -MAX_DETAIL_AT <= d.at <= MAX_DETAIL_AT:
                        raise BadInput(f"contact {d.field} has a time out of range")
            except BadInput as exc:
                raise ProtocolError(f"refused a contact: {exc}") from None
            if contact_id_for(name) != entry.id:
                raise ProtocolError(f"contact {entry.id} does not match its name")
            row = session.get(Contact, entry.id)
            if row is None:
                session.add(Contact(id=entry.id, name=name, name_key=name_key(name), created_at=0))
                session.flush()
                statedigest.update(session, add=[contact_item(entry.id, name)])
                changed += 1
            elif name < row.name:
                statedigest.update(
                    session,
                    add=[contact_item(entry.id, name)],
                    remove=[contact_item(entry.id, row.name)],
                )
                row.name = name
                changed += 1
            for alias in aliases:
                key = name_key(alias)
                held = session.get(ContactAlias, key)
                if held is None:
                    session.add(ContactAlias(alias_key=key, contact_id=entry.id, alias=alias))
                    session.flush()
                    statedigest.update(session, add=[alias_item(key, entry.id, alias)])
                    changed += 1
                elif (entry.id, alias) < (held.contact_id, held.alias):
                    statedigest.update(
                        session,
                        add=[alias_item(key, entry.id, alias)],
                        remove=[alias_item(key, held.contact_id, held.alias)],
                    )
                    held.contact_id, held.alias = entry.id, alias
                    changed += 1
            for d in entry.details:
                changed += put_detail_in(session, entry.id, d.field, d.value, d.at, from_sync=True)
        return changed

    def _merge_events(
        self, session: Session, events: EventColumns, *, in_order: bool
    ) -> Sequence[Row]:
        if not events:
            return ()
        if in_order:
            by_origin: dict[str, list[int]]
            if len(set(events.origins)) == 1:  # the usual stream: one origin at a time
                by_origin = {events.origins[0]: list(events.seqs)}
            else:
                by_origin = {}
                for origin, seq in zip(events.origins, events.seqs, strict=True):
                    by_origin.setdefault(origin, []).append(seq)
            for origin, seqs in by_origin.items():
                if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
                    raise ProtocolError(f"events of {origin} are not in sequence order")
                held = _held_seq(session, origin)
                if seqs[0] > held + 1:
                    raise ProtocolError(
                        f"events of {origin} start at {seqs[0]} but this replica holds {held}"
                    )
        return self.log.insert_columns_in(session, events.columns(), events.id_bytes())

    def _merge_notes(self, session: Session, notes: Sequence[NoteVersion]) -> int:
        if not notes:
            return 0
        # On the driver, inside the session's transaction: the rows in hand
        # first (one query per chunk, not one per note), each version written
        # with one statement, then one digest update for the whole batch. The
        # ORM's unit of work cost several times the statements.
        conn = cast(sqlite3.Connection, session.connection().connection.driver_connection)
        held: dict[str, _Held] = {}
        ids = list({n.id for n in notes})
        for i in range(0, len(ids), _ID_CHUNK):
            chunk = ids[i : i + _ID_CHUNK]
            sql = _HELD_NOTES_SQL.format(", ".join("?" * len(chunk)))
            held.update((r[1], _Held(*r)) for r in conn.execute(sql, chunk))
        added: list[bytes] = []
        removed: list[bytes] = []
        seen: list[str] = []
        for version in notes:
            row = held.get(version.id)
            body = _resident_body(conn, version, row)
            if body is _NOWHERE:
                # A body parked with a holder this replica is not (and not held
                # here): nothing to store it with. The version stays missing and
                # the digests say so; the sibling that holds the body can send it.
                log.warning("note %s arrived without its body; not applied", version.id)
                continue
            seen.append(version.stamp)
            if row is not None:
                if (row.zone == Zone.SEALED.value) != version.sealed:
                    raise ProtocolError(f"note {version.id} changed zone")
                mine = _version_order(bool(row.user_edited), row.updated_at)
                theirs = _version_order(version.user_edited, version.stamp)
                if theirs == mine:
                    if row.content_hash != version.content_hash or bool(row.deleted) != (
                        version.deleted
                    ):
                        raise ProtocolError(f"two different notes {version.id} share one stamp")
                    continue
                if theirs < mine:
                    continue
                removed.append(row.item())
            row = _write(conn, row, version, body, self.wall_clock)
            held[version.id] = row
            added.append(row.item())
        statedigest.update(session, add=added, remove=removed)
        record_marks(session, seen)
        return len(added)


def _held_seq(session: Session, origin: str) -> int:
    """The highest sequence number of ``origin`` this replica holds (0 for
    none), read on the session's driver connection inside its transaction;
    what the session has pending is flushed first, as an ORM read would."""
    if session.autoflush:
        session.flush()
    cursor = session.connection().connection.cursor()
    try:
        row = cursor.execute(TOP_SEQ_SQL, (origin,)).fetchone()
    finally:
        cursor.close()
    return int(row[0] or 0) if row else 0


def _check_events(events: EventColumns) -> None:
    """What the log demands of an event (`parse_kind`, `check_ref`, `check_text`),
    of a whole batch at once: over the distinct values of a column where values
    repeat, over the column in one pass where they do not. Raises BadInput (or
    ProtocolError for an id that is not one)."""
    events.id_bytes()
    for kind in set(events.kinds):
        parse_kind(kind)
    for thread in set(events.threads):
        check_ref(thread, "thread")
    sources = events.sources
    if not _all_refs(sources):
        for source in sources:
            check_ref(source, "source")
    texts = events.texts
    if not _all_texts(texts):
        for text in texts:
            check_text(text)


def _all_refs(values: Sequence[str | None]) -> bool:
    """Whether every value passes `check_ref`, without a call per value."""
    try:
        present = [v for v in values if v is not None]
        joined = "".join(present)
    except TypeError:
        return False
    return (
        all(map(str.strip, present))
        and max(map(len, present), default=0) <= MAX_REF_CHARS
        and not ("\n" in joined or "\r" in joined or "\x00" in joined)
    )


def _all_texts(texts: Sequence[str]) -> bool:
    """Whether every text passes `check_text`, without a call per text."""
    try:
        joined = "".join(texts)
    except TypeError:
        return False
    return (
        all(map(str.strip, texts))
        and max(map(len, texts), default=0) <= MAX_TEXT_CHARS
        and "\x00" not in joined
    )


def _checked_note(n: NoteVersion) -> NoteVersion:
    if n.clear is not None:
        try:
            NoteKind(n.clear.kind)
        except ValueError:
            raise BadInput(f"unknown note kind {n.clear.kind!r:.40}") from None
        if clean_tags(list(n.clear.tags)) != n.clear.tags:
            raise BadInput("note tags are not in their stored form")
        if n.clear.body is not None and content_hash(n.clear.body) != n.content_hash:
            raise BadInput(f"note {n.id}: the body does not match its content hash")
    elif sealed_hash(n.nonce or b"", n.ciphertext or b"") != n.content_hash:
        raise BadInput(f"sealed note {n.id}: the ciphertext does not match its hash")
    return n


class _Body(enum.Enum):
    NOWHERE = "no body to be had for this version"
    PARKED = "the row's own parked body is this version's"


_NOWHERE, _KEEP_PARKED = _Body.NOWHERE, _Body.PARKED


class _Held:
    """A stored note as the merge reads and writes it (`_HELD_COLUMNS`)."""

    __slots__ = _HELD_COLUMNS

    def __init__(
        self,
        n: int,
        id: str,
        zone: str,
        updated_at: str,
        content_hash: str,
        user_edited: bool | int,
        deleted: bool | int,
        body: str | None,
        holder: str | None,
    ) -> None:
        self.n, self.id, self.zone = n, id, zone
        self.updated_at, self.content_hash = updated_at, content_hash
        self.user_edited, self.deleted = user_edited, deleted
        self.body, self.holder = body, holder

    def item(self) -> bytes:
        """The state digest's item of this version (`statedigest.note_version`)."""
        return note_item(
            self.id, self.updated_at, self.content_hash, bool(self.user_edited), bool(self.deleted)
        )


def _resident_body(
    conn: sqlite3.Connection, v: NoteVersion, row: _Held | None
) -> str | _Body | None:
    """The body to store for version ``v`` (None for a sealed note), or one of
    the two markers above. A version that came without its body takes the one
    this replica already has under the same hash."""
    if v.clear is None:
        return None
    if v.clear.body is not None:
        return v.clear.body
    if row is not None and row.content_hash == v.content_hash:
        if row.body is not None:
            return row.body
        if row.holder is not None:
            return _KEEP_PARKED
    found = conn.execute(_HOLDING_BODY_SQL, (v.id, v.content_hash)).fetchone()
    if found is not None and found[0] is not None:
        body = bytes(found[0]).decode("utf-8", errors="replace")
        if content_hash(body) == v.content_hash:
            return body
    return _NOWHERE


def _write(
    conn: sqlite3.Connection,
    row: _Held | None,
    v: NoteVersion,
    body: str | _Body | None,
    clock: Clock,
) -> _Held:
    """Store version ``v`` over ``row`` (or as a new row), and return the row
    as it now stands. What it sets is what a version carries; a body kept
    parked (`_KEEP_PARKED`) keeps the row's body column and holder."""
    holder = None if row is None else row.holder
    if v.clear is not None and body is not _KEEP_PARKED and holder is not None:
        # A newer version with a body of its own makes the note resident here;
        # the holding the row pointed at is released on this device's word,
        # the release dated by ``clock``.
        assert row is not None
        conn.execute(RELEASE_LATER_SQL, (row.id, row.content_hash, holder, clock.now_us()))
        holder = None
    stored_body = None if row is None else row.body
    columns: dict[str, Any] = {
        "updated_at": v.stamp,
        "content_hash": v.content_hash,
        "user_edited": v.user_edited,
        "deleted": v.deleted,
        "holder": holder,
    }
    if v.clear is None:
        columns.update(zone=Zone.SEALED.value, nonce=v.nonce, ciphertext=v.ciphertext)
    else:
        c = v.clear
        if not isinstance(body, _Body):
            stored_body = body
        columns.update(
            zone=Zone.CLEAR.value,
            kind=c.kind,
            identity_key=c.identity_key,
            title=c.title,
            body=stored_body,
            contact_id=c.contact_id,
            tags=tags_json(c.tags),
            source_ref=c.source_ref,
            about_date=c.about_date,
            created_at=c.created_at,
            updated_wall=Stamp.decode(v.stamp).wall_ms * 1000,
        )
    names = list(columns)
    if row is None:
        cursor = conn.execute(
            f"INSERT INTO note (id, {', '.join(names)}) "
            f"VALUES ({', '.join('?' * (len(names) + 1))})",
            (v.id, *columns.values()),
        )
        n = cast(int, cursor.lastrowid)
    else:
        n = row.n
        conn.execute(
            f"UPDATE note SET {', '.join(f'{name} = ?' for name in names)} WHERE n = ?",
            (*columns.values(), n),
        )
    return _Held(
        n,
        v.id,
        columns["zone"],
        v.stamp,
        v.content_hash,
        v.user_edited,
        v.deleted,
        stored_body,
        holder,
    )


__all__ = ["BATCH_BYTES", "NodeReplica"]
