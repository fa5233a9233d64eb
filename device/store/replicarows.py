"""The node's rows as sync records: the SQL that reads events, notes and
contacts for the wire, and the chunker that cuts them into batches bounded by
`BATCH_BYTES` and `BATCH_RECORDS`."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

from sqlalchemy import Table, bindparam, select

from pixie.device.store.contactbook import Contact, ContactAlias, ContactDetail
from pixie.device.store.contacts import (
    ALIASES_SQL,
    CONTACTS_SQL,
    DETAILS_SQL,
    contact_items_of,
)
from pixie.device.store.db import Database, Meta, driver_sql, peek
from pixie.device.store.holdings import Holding
from pixie.device.store.memlog import (
    MemoryEvent,
)
from pixie.device.store.notes import (
    STAMP_ORIGIN_AT,
    Zone,
)
from pixie.device.store.notetable import Note, NoteMark
from pixie.protocol.digest import (
    event_item,
    note_item,
)
from pixie.protocol.syncmessages import (
    ClearFields,
    ContactEntry,
    EventColumns,
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
    `peek`), each only wrapped as an `_EventRow`."""
    return list(map(_EventRow._make, peek(db, sql, params)))


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
    return list(map(_NoteRow._make, peek(db, sql, params)))


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


__all__ = ["BATCH_BYTES", "BATCH_RECORDS"]
