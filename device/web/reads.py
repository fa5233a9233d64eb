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

from pixie.device.agent.grep import compile_query, snippet_of
from pixie.device.store import pagereads
from pixie.device.store.db import Database
from pixie.device.store.memlog import (
    EventKind,
    EventRecord,
)
from pixie.device.store.mirror import Matcher, MemoryTextMirror, mirror_line
from pixie.device.store.notes import ClearNote, NoteKind

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
    return pagereads.clear_notes_page(db, kinds, contact_id=contact_id, limit=limit, offset=offset)


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
    events, more = pagereads.referenced_events(db, ref, limit=limit, offset=offset)
    return SourceView(events, more, None)


def event(db: Database, event_id: str) -> EventRecord | None:
    """One searchable event by id (the agent chat transcript is not shown)."""
    return pagereads.searchable_event(db, event_id)


def upcoming(
    db: Database, since_us: int, *, limit: int = PAGE_NOTES, offset: int = 0
) -> tuple[list[ClearNote], bool]:
    """Notes about a day at or after ``since_us``, soonest first, one page,
    and whether another page follows."""
    return pagereads.upcoming_notes(db, since_us, limit=limit, offset=offset)


def people_with_pages(db: Database) -> set[str]:
    """The contacts that have a live person page in the clear zone."""
    return pagereads.people_with_pages(db)


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
    "upcoming",
]
