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

import sqlite3
from collections.abc import Iterator, Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pixie.device.errors import BadInput
from pixie.device.store import itemindex, statedigest
from pixie.device.store.contactbook import Contact, ContactAlias, contact_items, put_detail_in
from pixie.device.store.contacts import (
    clean_detail,
    clean_name,
    contact_id_for,
    name_key,
)
from pixie.device.store.db import Database, driver_of, peek
from pixie.device.store.itemindex import StoredItems
from pixie.device.store.memlog import (
    MemoryEvent,
    MemoryLog,
    Row,
)
from pixie.device.store.notes import (
    Zone,
)
from pixie.device.store.notetable import Note, record_marks
from pixie.device.store.replicamerge import (
    _NOWHERE,
    _check_events,
    _checked_note,
    _Held,
    _held_seq,
    _resident_body,
    _write,
)
from pixie.device.store.replicarows import (
    _ALIAS,
    _ALL_ALIASES_SQL,
    _ALL_CONTACTS_SQL,
    _ALL_DETAILS_SQL,
    _ALL_MARKS_SQL,
    _CONTACT,
    _DIGEST_SQL,
    _EVENTS_AFTER,
    _EVENTS_BY_ID,
    _HELD_NOTES_SQL,
    _ID_CHUNK,
    _LOG_MARK,
    _NOTE_MARK,
    _NOTES_AFTER,
    _NOTES_BY_ID,
    _PAGE,
    _chunked,
    _event_rows,
    _every_item,
    _note_rows,
    _Part,
    _version_order,
    _wire_note,
    log,
)
from pixie.protocol.clock import Clock
from pixie.protocol.digest import (
    Fingerprint,
    alias_item,
    contact_item,
    detail_item,
    event_item,
    item_hash,
)
from pixie.protocol.errors import ProtocolError
from pixie.protocol.hlc import HybridClock, Stamp
from pixie.protocol.ids import id_text
from pixie.protocol.reconcile import range_fingerprint
from pixie.protocol.syncmessages import (
    MAX_ALIASES,
    MAX_DETAIL_AT,
    ContactEntry,
    DetailEntry,
    EventColumns,
    Marks,
    NoteVersion,
    Records,
)


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
        rows = peek(self.db, _DIGEST_SQL, (statedigest.DIGEST_KEY,))
        fp = Fingerprint.decode(rows[0][0]) if rows and rows[0][0] else Fingerprint()
        return fp.digest(), fp.count

    def marks(self) -> Marks:
        # One statement (so one snapshot) on the plain driver connection: the
        # log's marks, the note marks and the contact book's digest items,
        # each row tagged with what it is.
        log: list[tuple[str, int]] = []
        notes: list[tuple[str, str]] = []
        contacts: list[bytes] = []
        for tag, a, b, c, d in peek(self.db, _ALL_MARKS_SQL):
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
        with self.db.reading(plain=True) as conn:
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
        with self.db.reading(plain=True) as conn:
            for item in _every_item(conn):
                yield item[:17], item_hash(item)

    def item_index(self) -> StoredItems:
        # The index kept on every write; a data dir made before it existed
        # gets it built here, once, in one write transaction.
        if not itemindex.is_built(self.db):
            with self.db.writing() as session:
                conn = driver_of(session, flush=False)
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
        conn = driver_of(session, flush=False)
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


def recompute_digest(db: Database) -> Fingerprint:
    """The state digest rebuilt from every event, note version and contact
    row through the ORM, independently of the one kept on every write and of
    the replica's own reads (a check of both)."""
    with db.reading() as session:
        fingerprint = Fingerprint.of(event_item(i) for i in session.scalars(select(MemoryEvent.id)))
        for row in session.scalars(select(Note)):
            fingerprint = fingerprint.add(statedigest.note_version(row))
        # contacts, their aliases and their details, as the replica lists them
        fingerprint = fingerprint.update(add=list(contact_items(session)))
    return fingerprint


__all__ = ["NodeReplica", "recompute_digest"]
