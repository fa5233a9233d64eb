"""What the page reads, in pages: clear notes by group, and the memory log.

Everything here is synchronous (the store is synchronous SQLAlchemy); the app
calls it through its one worker-thread lane. Every note query filters to the
clear zone and to live notes before anything else, as `ClearNotebook` does,
and this module imports nothing that could open a sealed note.

The log timeline is grep_memory's own machinery: the query is compiled by
`compile_query` (RE2, falling back to literal text), matched over the text
mirror, and snippets are clipped by `snippet_of`. With no query the timeline
is the same scan with a pattern that matches every line, so the order (time,
then id, newest first) is the order grep's hits come in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2
from sqlalchemy import ColumnElement, and_, or_, select

from pixie.device.agent.grep import compile_query, snippet_of
from pixie.device.store.db import Database
from pixie.device.store.memlog import (
    SEARCHABLE_KINDS,
    EventKind,
    EventRecord,
    MemoryEvent,
    to_record,
)
from pixie.device.store.mirror import Matcher, MemoryTextMirror, mirror_line
from pixie.device.store.notes import ClearNote, NoteKind, Zone
from pixie.device.store.notetable import Note, to_clear_note

PAGE_NOTES = 50
PAGE_EVENTS = 50
SECTION_NOTES = 12  # notes each group shows on the Notebook page before "all N"
MAX_PAGE = 10_000  # past this a page number is a typo; refusing it bounds the scan


@dataclass(frozen=True, slots=True)
class Group:
    """One of the Notebook's sections, as the specification groups the kinds."""

    slug: str
    title: str
    kinds: tuple[NoteKind, ...]
    blurb: str


GROUPS: tuple[Group, ...] = (
    Group("people", "People", (NoteKind.PERSON,), "One page per person in your life."),
    Group("about", "About you", (NoteKind.ABOUT_YOU,), "What the agent has gathered about you."),
    Group("guidance", "Guidance", (NoteKind.GUIDANCE,), "Your standing instructions."),
    Group(
        "digests",
        "Digests",
        (NoteKind.CONVERSATION_DIGEST, NoteKind.POST_DIGEST, NoteKind.CALL_DIGEST),
        "A short summary per conversation, post or call.",
    ),
    Group("pins", "Pins", (NoteKind.SPARKED,), "Moments you chose to remember."),
)
GROUP_BY_SLUG = {g.slug: g for g in GROUPS}


def _live_clear() -> ColumnElement[bool]:
    return and_(Note.zone == Zone.CLEAR.value, Note.deleted.is_(False))


# Kinds with an identity and one note per person, source or title: a group of
# these is read through the identity index (`uq_note_identity`) and sorted,
# because walking the whole Notebook newest first to find a few hundred of
# them would touch every row. The digests and pins are most of the Notebook,
# and are read newest first straight off the stamp index until a page is full.
_FEW_PER_KIND = frozenset({NoteKind.PERSON, NoteKind.ABOUT_YOU, NoteKind.GUIDANCE})


def clear_page(
    db: Database,
    kinds: tuple[NoteKind, ...] | None,
    *,
    contact_id: str | None = None,
    limit: int = PAGE_NOTES,
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


def group_counts(kind_counts: dict[str, int]) -> dict[str, int]:
    """Live clear notes per group, from `ClearNotebook.counts` (per kind)."""
    return {g.slug: sum(kind_counts.get(k.value, 0) for k in g.kinds) for g in GROUPS}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One event on the timeline: a grep hit, clipped as grep clips it."""

    event_id: str
    kind: EventKind
    at: int
    contact: str | None
    from_me: bool
    snippet: str


class PersonLines:
    """A grep matcher narrowed to one contact's lines.

    The mirror starts each line with the contact's name (`mirror_line`), so
    RE2 first finds the next line that starts with that name, and the query's
    own matcher then runs over that whole line, as grep would run it. Lines
    of other people are skipped by RE2, not by a loop here.
    """

    def __init__(self, inner: Matcher, name: str) -> None:
        self._inner = inner
        self._lines, _ = compile_query("^" + re2.escape(mirror_line(name, "")[0]))

    def search(self, text: bytes, pos: int | None = None, endpos: int | None = None) -> object:
        at = pos or 0
        end = len(text) if endpos is None else endpos
        while at <= end:
            line: Any = self._lines.search(text, at, end)
            if line is None:
                return None
            start = line.span()[0]
            newline = text.find(b"\n", start, end)
            stop = end if newline < 0 else newline
            found = self._inner.search(text, start, stop)
            if found is not None:
                return found
            if newline < 0:
                return None
            at = newline + 1
        return None


def timeline(
    mirror: MemoryTextMirror,
    query: str | None,
    person: str | None,
    *,
    limit: int = PAGE_EVENTS,
    offset: int = 0,
) -> tuple[list[LogLine], bool, bool]:
    """One page of the log, newest first: grep hits for ``query`` (every
    searchable event when None), only ``person``'s lines when a name is given.
    Returns the lines, whether more follow, and whether the query ran as
    literal text (it was not a valid pattern)."""
    matcher, literal = compile_query(query if query is not None else "^")
    narrowed: Matcher = PersonLines(matcher, person) if person is not None else matcher
    hits = mirror.search(narrowed, offset + limit + 1)
    if person is not None:  # the line prefix is matched ignoring case; the name is not
        hits = [h for h in hits if h.contact == person]
    lines = [
        LogLine(h.event_id, h.kind, h.at, h.contact, h.from_me, snippet_of(h))
        for h in hits[offset : offset + limit]
    ]
    return lines, len(hits) > offset + limit, literal


@dataclass(frozen=True, slots=True)
class SourceView:
    """Where a note came from: the events its source reference names."""

    events: list[EventRecord]
    more: bool
    person: str | None  # a contact id, when the reference names a person instead


_SEARCHABLE = sorted(k.value for k in SEARCHABLE_KINDS)


def source_events(
    db: Database, ref: str, *, limit: int = PAGE_EVENTS, offset: int = 0
) -> SourceView:
    """The log events a note's ``source_ref`` points back to, newest first.

    Distillation files a digest under ``thread:ID``, ``contact:ID`` (messages
    filed with no thread), the post's or call's own source id, or
    ``event:ID``; a pin under ``event:ID``; a clear huddle note under
    ``huddle:CONTACT`` (a person rather than events).
    """
    prefix, _, rest = ref.partition(":")
    if prefix == "huddle" and rest:
        return SourceView([], False, rest)
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
    return SourceView(events[:limit], len(events) > limit, None)


def event(db: Database, event_id: str) -> EventRecord | None:
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
    "GROUPS",
    "GROUP_BY_SLUG",
    "Group",
    "LogLine",
    "PersonLines",
    "SourceView",
    "clear_page",
    "event",
    "group_counts",
    "people_with_pages",
    "source_events",
    "timeline",
]
