"""What the web page reads from the store: pages of live clear notes, the
events a note's source reference names, one event, who has a page, and the
dated notes ahead.

Every note query filters to the clear zone and to live notes first; nothing
here can read a sealed row. (`pixie.device.web.reads` shapes what these
return for the page.)
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, or_, select

from pixie.device.store.db import Database
from pixie.device.store.memlog import (
    SEARCHABLE_KINDS,
    EventKind,
    EventRecord,
    MemoryEvent,
    to_record,
)
from pixie.device.store.notes import ClearNote, NoteKind, Zone
from pixie.device.store.notetable import Note, to_clear_note


def _live_clear() -> ColumnElement[bool]:
    return and_(Note.zone == Zone.CLEAR.value, Note.deleted.is_(False))


# Kinds with an identity and one note per person, source or title: a group of
# these is read through the identity index (`uq_note_identity`) and sorted,
# because walking the whole Notebook newest first to find a few hundred of
# them would touch every row. The digests and pins are most of the Notebook,
# and are read newest first straight off the stamp index until a page is full.
_FEW_PER_KIND = frozenset({NoteKind.PERSON, NoteKind.ABOUT_YOU, NoteKind.GUIDANCE})


def clear_notes_page(
    db: Database,
    kinds: tuple[NoteKind, ...] | None,
    *,
    contact_id: str | None = None,
    limit: int,
    offset: int = 0,
) -> tuple[list[ClearNote], bool]:
    """Live clear notes of ``kinds`` (all kinds if None), newest first, one
    page, and whether another page follows."""
    conditions = [_live_clear()]
    stmt = select(Note)
    if kinds is not None:
        conditions.append(Note.kind.in_([k.value for k in kinds]))
    if contact_id is not None:
        conditions.append(Note.contact_id == contact_id)  # ix_note_contact_updated
    elif kinds is not None and _FEW_PER_KIND.issuperset(kinds):
        conditions.append(Note.identity_key.is_not(None))  # every such note has one
    else:
        stmt = stmt.with_hint(Note, "INDEXED BY ix_note_updated_at", "sqlite")
    stmt = (
        stmt.where(*conditions)
        .order_by(Note.updated_at.desc(), Note.id.desc())
        .limit(limit + 1)
        .offset(offset)
    )
    with db.reading() as session:
        notes = [to_clear_note(row) for row in session.scalars(stmt)]
    return notes[:limit], len(notes) > limit


def upcoming_notes(
    db: Database, since_us: int, *, limit: int, offset: int = 0
) -> tuple[list[ClearNote], bool]:
    """Live clear notes about a day at or after ``since_us``, soonest first
    (ties newest written first), one page, and whether another page follows.

    No index covers ``about_date`` for every kind (only the series digests'
    partial one), so this is a scan of the clear notes: one pass, a small
    sort of the dated ones ahead."""
    stmt = (
        select(Note)
        .where(_live_clear(), Note.about_date.is_not(None), Note.about_date >= since_us)
        .order_by(Note.about_date, Note.updated_at.desc(), Note.id)
        .limit(limit + 1)
        .offset(offset)
    )
    with db.reading() as session:
        notes = [to_clear_note(row) for row in session.scalars(stmt)]
    return notes[:limit], len(notes) > limit


_SEARCHABLE = sorted(k.value for k in SEARCHABLE_KINDS)


def referenced_events(
    db: Database, ref: str, *, limit: int, offset: int = 0
) -> tuple[list[EventRecord], bool]:
    """The searchable events a note's ``source_ref`` names, newest first,
    one page, and whether another follows: ``event:ID``, ``thread:ID``,
    ``contact:ID`` (messages filed with no thread), or a post's or call's
    own source id (or a thread id)."""
    prefix, _, rest = ref.partition(":")
    where: ColumnElement[bool]
    if prefix == "event" and rest:
        where = MemoryEvent.id == rest
    elif prefix == "thread" and rest:
        where = MemoryEvent.thread == rest
    elif prefix == "contact" and rest:
        where = and_(
            MemoryEvent.thread.is_(None),
            MemoryEvent.kind == EventKind.MESSAGE.value,
            MemoryEvent.contact_id == rest,
        )
    else:
        where = or_(MemoryEvent.source == ref, MemoryEvent.thread == ref)
    stmt = (
        select(MemoryEvent)
        .where(where, MemoryEvent.kind.in_(_SEARCHABLE))
        .order_by(MemoryEvent.at.desc(), MemoryEvent.id.desc())
        .limit(limit + 1)
        .offset(offset)
    )
    with db.reading() as session:
        events = [to_record(row) for row in session.scalars(stmt)]
    return events[:limit], len(events) > limit


def searchable_event(db: Database, event_id: str) -> EventRecord | None:
    """One searchable event by id (the agent chat transcript is not shown)."""
    with db.reading() as session:
        row = session.scalar(
            select(MemoryEvent).where(MemoryEvent.id == event_id, MemoryEvent.kind.in_(_SEARCHABLE))
        )
        return None if row is None else to_record(row)


def people_with_pages(db: Database) -> set[str]:
    """The contacts that have a live person page in the clear zone."""
    with db.reading() as session:
        found = session.scalars(
            select(Note.contact_id)
            .where(_live_clear(), Note.kind == NoteKind.PERSON.value)
            .where(Note.contact_id.is_not(None))
        )
        return {cid for cid in found if cid is not None}


__all__ = [
    "clear_notes_page",
    "people_with_pages",
    "referenced_events",
    "searchable_event",
    "upcoming_notes",
]
