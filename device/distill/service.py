"""NotetakingService: the distill loop that writes the Notebook's clear zone.

A pass finds the sources that gained material since their watermark, and for
each asks the model `LLMRouter` resolves for a small structured result:

* a conversation thread (messages), at most its MAX_LINES most recent
  messages: a conversation digest, and for a one-to-one thread a person page
  for the contact;
* a post, or a call transcript or voicemail (everything filed under one
  source id): a post or call digest, with a reference back to the source;
* a journal entry (everything filed under one source id): a dated journal
  digest; a calendar entry: an appointment note whose title and tags carry
  its day in the words people ask with ("2026-03-14", "saturday", "march");
* from any of them, durable facts the user stated about themselves, merged
  into the about_you singleton: the newest fact of a kind that holds one value
  (home, work, ...) replaces an older one, other facts accumulate.

A person page (`pages`) has three sections: who they are (dated facts, and
their contact card's details), your read on the relationship, and open
threads. A one-to-one thread rewrites the read and the open threads; any
source whose one other person already has a page (a call, a post, a calendar
entry) adds the facts it states to that page. Facts already on a page are
merged with new ones, never dropped for want of repetition: a pass shows a
model only a thread's newest lines, plus the older new lines that state a
fact (`make_request`'s ``earlier``).

A request carries one source's events and nothing else: no other thread, no
note, nothing sealed (this module never reads the sealed zone; it writes clear
notes only, through `ClearNotebookStore.upsert_with`). Every result lands by
identity (a digest by its source id, a person page by its contact), so a
re-run updates in place, leaves identical notes untouched and never writes over
a note the user edited.

Watermarks are local row numbers of the memory log (rows are never removed,
and a row merged from a sibling gets a new, higher number, so "new since" is a
plain comparison). Each source's mark commits in the same transaction as the
notes derived from it: a crash mid-pass redoes at most the source it was in,
and never skips one. A pass with a backlog (more than GROUP_BACKLOG sources,
as after an import) and only the built-in distiller commits its sources in
groups of up to MAX_GROUP instead: each source is still read, distilled and
merged against the notes as the sources before it left them, and its mark
commits with exactly its notes, but a crash redoes at most the group it was
in (`NotetakingService.distill_group`). A second mark, the scan watermark,
lets a pass look only at rows it has not yet looked at; it moves only after a
pass in which every source succeeded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import trio
from sqlalchemy import select
from sqlalchemy.orm import Session

from pixie.device.distill.contract import (
    MAX_EARLIER_LINES,
    MAX_FACT_CHARS,
    MAX_LINES,
    MAX_OCCURRENCES,
    ME,
    Backend,
    DistillRequest,
    DistillResult,
    Fact,
    FactKind,
    Line,
    NoBackendAnswered,
    SourceKind,
    make_request,
)
from pixie.device.distill.extract import (
    EMAIL_ADDRESS,
    FIRST_PERSON,
    MONTHS,
    SECOND_PERSON,
    appointment_in,
    card_facts,
    date_words,
    day_start_us,
    facts_in,
    identity_statements,
)
from pixie.device.distill.http import ChatCompletionsBackend
from pixie.device.distill.offline import (
    OfflineDistiller,
    day_label,
    is_automated,
    mail_subject,
    person_in_group,
)
from pixie.device.distill.pages import (
    PersonPage,
    day_of,
    merge_about_you,
    merge_page,
    parse_day,
    parse_person_page,
    render_about_you,
    render_person_page,
    short_day,
)
from pixie.device.distill.prompt import parse_result
from pixie.device.distill.router import LLMRouter, Routed
from pixie.device.distill.series import DAY_US, rhythm, series_of
from pixie.device.distill.settings import LLMSettings
from pixie.device.errors import BadInput
from pixie.device.notebook import nearby
from pixie.device.notebook.clear import (
    ClearNotebookStore,
    Distilled,
    UpsertOutcome,
    UpsertResult,
    identity_for,
)
from pixie.device.store import config
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import name_key, name_tag, name_words
from pixie.device.store.db import Database
from pixie.device.store.marks import DistillMark
from pixie.device.store.notes import (
    ABOUT_YOU_KEY,
    MAX_BODY_CHARS,
    MAX_IDENTITY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    NoteKind,
    clean_tags,
    clean_text,
    clean_title,
    kept_up_identity,
    tags_json,
)
from pixie.protocol.timestamps import now_us

if TYPE_CHECKING:
    from pixie.device.node.clear import ClearNode

log = logging.getLogger("pixie.distill")

T = TypeVar("T")

SCAN_KEY = "*scan"  # the scan watermark's row; no source key starts with '*'
ABOUT_YOU_TITLE = "About you"
MAX_TITLE_NAMES = 4
EARLIER_SCAN = 5_000  # older new rows of a thread looked at for facts, newest first

# Mail, journal and calendar notes are filed as conversation digests: the
# Notebook has no kind of its own for them (yet), and a digest with a source
# reference is what they are.
_DIGEST_KIND = {
    SourceKind.CONVERSATION: NoteKind.CONVERSATION_DIGEST,
    SourceKind.POST: NoteKind.POST_DIGEST,
    SourceKind.CALL: NoteKind.CALL_DIGEST,
    SourceKind.JOURNAL: NoteKind.CONVERSATION_DIGEST,
    SourceKind.CALENDAR: NoteKind.CONVERSATION_DIGEST,
    SourceKind.MAIL: NoteKind.CONVERSATION_DIGEST,
}
_EVENT_KINDS = {"message": SourceKind.CONVERSATION, "post": SourceKind.POST}
_EVENT_KINDS |= {"call": SourceKind.CALL, "voicemail": SourceKind.CALL}
_EVENT_KINDS |= {"journal": SourceKind.JOURNAL, "calendar": SourceKind.CALENDAR}
_EVENT_KINDS |= {"email": SourceKind.MAIL}
_SOURCE_ORDER = {kind: i for i, kind in enumerate(SourceKind)}
_DISTILLED_KINDS = "('message', 'post', 'call', 'voicemail', 'journal', 'calendar', 'email')"
# The log kind a thread's rows have, for the sources read by thread: a chat,
# a mail thread, and every occurrence of a repeating calendar entry.
_THREAD_KIND = {
    SourceKind.CONVERSATION: "message",
    SourceKind.MAIL: "email",
    SourceKind.CALENDAR: "calendar",
}


@dataclass(frozen=True, slots=True)
class Source:
    """Where distilled material comes from: a thread (or, for messages filed
    without one, the implicit thread with their contact), or a post, call,
    journal or calendar source id (or, without one, the event itself)."""

    kind: SourceKind
    key: str  # the digest's identity key and its reference back to the source
    thread: str | None = None
    contact_id: str | None = None
    source: str | None = None
    event_id: str | None = None
    # Read again although its watermark covers it: a repeating entry whose
    # next occurrence has passed (`DUE_SERIES_SQL`).
    again: bool = False

    @property
    def mark_key(self) -> str:
        return f"{self.kind.value}|{self.key}"


def _ref(prefix: str, value: str) -> str:
    ref = f"{prefix}:{value}"
    if len(ref) <= MAX_IDENTITY_CHARS:
        return ref
    return f"{prefix}-sha256:{hashlib.sha256(value.encode()).hexdigest()}"


def source_of(
    kind: str, event_id: str, thread: str | None, contact_id: str | None, source: str | None
) -> Source | None:
    """The source an event belongs to, or None if it is not distilled."""
    family = _EVENT_KINDS.get(kind)
    if family is SourceKind.CONVERSATION:
        if thread is not None:
            return Source(family, _ref("thread", thread), thread=thread)
        if contact_id is not None:
            return Source(family, f"contact:{contact_id}", contact_id=contact_id)
        return None
    if family is None:
        return None
    if family is SourceKind.MAIL and thread is not None:
        # A mail thread is one digest, however many replies it gathers.
        return Source(family, _ref("mail", thread), thread=thread)
    if family is SourceKind.CALENDAR and thread is not None:
        # Every occurrence of a repeating entry shares its thread: one note
        # for the series, not one per week that would fill a search's places.
        return Source(family, _ref("series", thread), thread=thread)
    if source is not None:
        return Source(family, source[:MAX_IDENTITY_CHARS], source=source)
    return Source(family, f"event:{event_id}", event_id=event_id)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A source's newest events, read in one snapshot with what they need."""

    source: Source
    rows: tuple[tuple[int, str, int, str | None, bool, str], ...]  # n, kind, at, cid, me, text
    newest_n: int  # the newest row of the source, whether or not it is in ``rows``
    names: dict[str, str]  # contact id -> display name
    participants: tuple[str, ...]  # contact ids in the source, ordered by name
    one_to_one: str | None  # the contact, when the source is a thread with one other person
    earlier: tuple[Row, ...] = ()  # older new rows that state a fact, oldest first
    details: tuple[tuple[str, str], ...] = ()  # the one other person's contact card
    occurrences: tuple[int, ...] = ()  # a repeating calendar entry's starts, earliest first
    now: int = 0  # for a repeating entry: when the pass read it
    # For a thread longer than one request: each month with new messages and
    # its newest messages, oldest first (see `month_items`).
    months: tuple[tuple[str, tuple[Row, ...]], ...] = ()


@dataclass
class PassReport:
    distilled: Counter[str] = field(default_factory=Counter)  # sources, by kind
    skipped: int = 0  # candidates their watermark already covered
    failed: int = 0
    fallbacks: int = 0  # sources a later backend had to answer
    model_calls: dict[str, int] = field(default_factory=dict)  # answers asked for, by backend
    notes: Counter[str] = field(default_factory=Counter)  # by UpsertOutcome
    seconds: float = 0.0
    embedded: int = 0  # notes given a meaning vector after the pass

    @property
    def sources(self) -> int:
        return sum(self.distilled.values())

    @property
    def calls(self) -> int:
        return sum(self.model_calls.values())

    @property
    def written(self) -> int:
        return self.notes[UpsertOutcome.CREATED] + self.notes[UpsertOutcome.UPDATED]

    def as_json(self) -> dict[str, Any]:
        return {
            "distilled": self.sources,
            "threads": self.distilled[SourceKind.CONVERSATION],
            "posts": self.distilled[SourceKind.POST],
            "calls": self.distilled[SourceKind.CALL],
            "journals": self.distilled[SourceKind.JOURNAL],
            "calendar": self.distilled[SourceKind.CALENDAR],
            "mail": self.distilled[SourceKind.MAIL],
            "model_calls": self.calls,
            "calls_by_backend": dict(sorted(self.model_calls.items())),
            "fallbacks": self.fallbacks,
            "failed": self.failed,
            "notes_written": self.written,
            "notes": {o.value: self.notes[o] for o in UpsertOutcome},
            "embedded": self.embedded,
            "seconds": round(self.seconds, 3),
        }

    def render(self) -> str:
        if not self.sources and not self.failed:
            return f"nothing new to distill ({self.calls} model calls, 0 notes written)"
        by = ", ".join(f"{n} {name}" for name, n in sorted(self.model_calls.items()))
        kept = self.notes[UpsertOutcome.KEPT_USER_EDIT]
        text = (
            f"distilled {_count(self.distilled[SourceKind.CONVERSATION], 'thread')}, "
            f"{_count(self.distilled[SourceKind.POST], 'post')}, "
            f"{_count(self.distilled[SourceKind.CALL], 'call')}, "
            f"{_count(self.distilled[SourceKind.JOURNAL], 'journal entry', 'journal entries')}, "
            f"{_count(self.distilled[SourceKind.CALENDAR], 'calendar entry', 'calendar entries')}"
            " and "
            f"{_count(self.distilled[SourceKind.MAIL], 'mail thread')}"
            " with "
            f"{_count(self.calls, 'model call')} ({by}); notes: {self.written} written "
            f"({self.notes[UpsertOutcome.CREATED]} new, {self.notes[UpsertOutcome.UPDATED]} "
            f"updated), {self.notes[UpsertOutcome.UNCHANGED]} unchanged, "
            f"{kept} kept as you edited them"
        )
        if self.fallbacks:
            text += f"; {_count(self.fallbacks, 'source')} fell back to a later backend"
        if self.failed:
            text += f"; {self.failed} failed (see the log) and will be tried again"
        return text


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# -- from a source to a request and back to notes (no I/O) ------------------------------


def build_request(loaded: Loaded) -> DistillRequest:
    """What the model is shown: this source's own lines, nothing else."""
    src, names = loaded.source, loaded.names
    others = tuple(names.get(c, "someone") for c in loaded.participants)

    def line(row: Row) -> Line:
        _, kind, at, cid, me, text = row
        me = me or kind == "journal"  # a journal is the user's own, however it was filed
        return Line(at, ME if me else names.get(cid or "", "someone"), me, text, kind)

    lines = [line(r) for r in loaded.rows]
    person = names.get(loaded.one_to_one) if loaded.one_to_one else None
    if src.kind is SourceKind.CONVERSATION:
        title = (
            f"conversation with {person} (one-to-one)"
            if person
            else f"group conversation with {_names(others) or 'nobody else'}"
        )
    elif src.kind is SourceKind.POST:
        first = loaded.rows[0]
        title = "a post by the user" if first[4] else f"a post by {lines[0].speaker}"
    elif src.kind is SourceKind.JOURNAL:
        title = "the user's journal"
    elif src.kind is SourceKind.CALENDAR:
        what = "a repeating calendar entry" if len(loaded.occurrences) > 1 else "a calendar entry"
        title = f"{what}{' with ' + _names(others) if others else ''}"
    elif src.kind is SourceKind.MAIL:
        title = f"an email thread{' with ' + _names(others) if others else ''}"
    else:
        what = "voicemail from" if loaded.rows[0][1] == "voicemail" else "call with"
        title = f"a {what} {_names(others) or 'someone'}"
    earlier = [line(r) for r in loaded.earlier]
    # A card's numbers and address reach the person's page from the card
    # itself (`card_facts`); a model, perhaps a remote one, is not shown them.
    details = tuple((f, v) for f, v in loaded.details if f not in _NOT_FOR_MODELS)
    return make_request(
        src.kind,
        title,
        person,
        others,
        lines,
        earlier,
        details,
        loaded.occurrences,
        loaded.now,
    )


def note_title(loaded: Loaded, request: DistillRequest) -> str:
    """A digest's title: made from the source, never from a model's answer."""
    src = loaded.source
    if src.kind is SourceKind.CONVERSATION:
        if request.person:
            return _fit_title(request.person)
        return _fit_title(f"{_names(request.participants) or 'Just you'} (group)")
    first = request.lines[0]
    day = day_label(first.at)
    if src.kind is SourceKind.POST:
        who = "You" if first.from_me else first.speaker
        return _fit_title(f"{who[:1].upper()}{who[1:]}, {day}: {' '.join(first.text.split())}")
    if src.kind is SourceKind.JOURNAL:
        newest = request.lines[-1].at
        return _fit_title(f"Journal, {date_words(_iso(newest))[2]}")
    if src.kind is SourceKind.CALENDAR:
        repeating = series_of(first.text, first.at, request.occurrences)
        if repeating is not None:
            return _fit_title(f"{repeating.appointment.what} — {rhythm(repeating)}")
        return _fit_title(_calendar_title(request.lines[-1]))
    if src.kind is SourceKind.MAIL:
        subject = mail_subject(first.text) or "(no subject)"
        who = _names(request.participants)
        return _fit_title(f"Email: {subject}{' — ' + who if who else ''}")
    if first.kind == "voicemail":
        return _fit_title(f"Voicemail from {_names(request.participants) or 'someone'}, {day}")
    # "Call with": the word a question about a call asks with, in the title.
    return _fit_title(f"Call with {_names(request.participants) or 'someone'}, {day}")


def _calendar_title(line: Line) -> str:
    """ "Dentist check-up — Saturday 14 March 2026, 10:00": what, and the day
    in words, so that a question naming the day or the month finds it."""
    found = appointment_in(line.text, line.at)
    if found is None:
        first = line.text.strip().splitlines()[0] if line.text.strip() else "(untitled)"
        return f"{first} — {day_label(line.at)}"
    when = date_words(found.day)[2] + (f", {found.time}" if found.time else "")
    return f"{found.what} — {when}"


def _date_facets(loaded: Loaded, request: DistillRequest) -> tuple[tuple[str, ...], int | None]:
    """Tags naming the day a journal entry or an appointment is about (its ISO
    date, weekday and month, lower case) and that day (with its start time)."""
    src = loaded.source
    if src.kind is SourceKind.JOURNAL:
        day = _iso(request.lines[-1].at)
        weekday, month, _ = date_words(day)
        return ("journal", day, weekday.casefold(), month.casefold()), None
    if src.kind is SourceKind.CALENDAR:
        first = request.lines[0]
        repeating = series_of(first.text, first.at, request.occurrences)
        if repeating is not None:
            weekday = (repeating.weekday or "").casefold()
            facets = ("calendar", "series", repeating.cadence, weekday)
            # The series is about its next occurrence when the pass ran (a
            # search of the days ahead finds it), else its last one, on the
            # wall clock as a one-off appointment's day is.
            upcoming = [at for at in request.occurrences if at >= request.now]
            when = upcoming[0] if upcoming and request.now else request.occurrences[-1]
            return tuple(t for t in facets if t), repeating.local_start(when)
        line = request.lines[-1]
        found = appointment_in(line.text, line.at)
        if found is None:
            return ("calendar",), None
        weekday, month, _ = date_words(found.day)
        start = day_start_us(found.day)
        if found.time:
            hours, minutes = found.time.split(":")
            start += (int(hours) * 60 + int(minutes)) * 60_000_000
        return ("appointment", "calendar", found.day, weekday.casefold(), month.casefold()), start
    if src.kind is SourceKind.MAIL:
        return ("email",), None
    return (), None


def digest_items(loaded: Loaded, request: DistillRequest, result: DistillResult) -> list[Distilled]:
    """The digest of the source (the person page is `person_items`)."""
    src = loaded.source
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    contact = loaded.one_to_one
    if src.kind is not SourceKind.CONVERSATION and len(loaded.participants) == 1:
        contact = loaded.participants[0]
    facets, about = _date_facets(loaded, request)
    tags = tuple(dict.fromkeys((*facets, *result.tags, *_people_tags(loaded, contact))))
    tags = tags[:MAX_TAGS]
    identity = src.key
    if src.kind is SourceKind.POST:
        identity = post_identity(loaded.rows[0])
    return [
        Distilled(
            kind=_DIGEST_KIND[src.kind],
            identity_key=identity,
            title=note_title(loaded, request),
            body=result.summary,
            contact_id=contact,
            tags=tags,
            source_ref=src.key,
            about_date=about if about is not None else newest,
        )
    ]


MAX_PEOPLE_TAGS = 4  # names tagged on a digest of several people's source


def _people_tags(loaded: Loaded, contact: str | None) -> list[str]:
    """The names of the people in a source with several (a group chat, a
    meeting, a mail to three people), as tags: a search filtered to one of
    them finds it although no single contact owns it. None when the source
    has more than MAX_PEOPLE_TAGS others (a mailing list, a big party)."""
    names = [loaded.names.get(c, "") for c in loaded.participants]
    if loaded.source.kind is SourceKind.CALENDAR and loaded.rows:
        # An event's contact is its first attendee; the rest are named on
        # its "With:" line.
        found = appointment_in(loaded.rows[0][5], loaded.rows[0][2])
        if found is not None:
            names = list(dict.fromkeys([*names, *found.with_]))
    if len(names) > MAX_PEOPLE_TAGS:
        return []
    own = name_tag(loaded.names.get(contact, "")) if contact else ""
    return [t for t in dict.fromkeys(name_tag(n)[:MAX_TAG_CHARS] for n in names) if t and t != own]


# -- near-identical posts -----------------------------------------------------------
#
# The same post made again with another number or hashtag ("Porto rain, day 3",
# "Porto rain, day 5 #porto") is one note, not one per post: a digest per copy
# would fill a search's eight places with one thing said eight times. A post's
# digest is therefore filed under its gist (its author and its words, numbers
# and hashtags aside), and the note keeps the days it was posted; its title,
# text and source reference are the newest copy's. Merging happens here, on
# the write path, where the stored note can be read under the write lock; a
# re-run that adds a day already listed writes nothing, and a note the user
# edited is left as they made it.

_GIST_DROP = re.compile(r"#[^\W_][\w-]*|https?://\S+")
_GIST_WORD = re.compile(r"[^\W\d_]+")
_POSTED = re.compile(r"^Posted (\d+) times: (.+)\.$")
_TITLE_DAY = re.compile(r", (\d{1,2} [A-Z][a-z]{2} \d{4}): ")


def post_gist(text: str) -> str:
    """A post's words without its numbers, hashtags and links, folded."""
    return " ".join(_GIST_WORD.findall(_GIST_DROP.sub(" ", text).casefold()))


def post_identity(root: Row) -> str:
    """The identity of a post's digest: its author and its gist."""
    _, _, _, cid, me, text = root
    author = "me" if me else cid or "someone"
    digest = hashlib.sha256(f"{author}\x00{post_gist(text)}".encode()).hexdigest()[:32]
    return f"post-gist:{digest}"


def merge_post(session: Session, item: Distilled, posted: int) -> Distilled:
    """``item`` (one post's digest, posted at ``posted``) merged with the note
    already filed under the same gist, if there is one."""
    row = _stored(session, NoteKind.POST_DIGEST, item.identity_key)
    if row is None or row.user_edited or row.body is None:
        return item  # new, the user's (the upsert keeps it), or parked on the Homebase
    stored_days, stored_text = _posted_days(row.body)
    if not stored_days:  # one post so far: its day is in its title
        match = _TITLE_DAY.search(row.title or "")
        day = parse_day(match.group(1)) if match else None
        stored_days = {day} if day is not None else set()
    day = day_of(posted)
    days = stored_days | {day}
    newer = (day, item.source_ref or "") >= (max(stored_days, default=0), row.source_ref or "")
    base = item if newer else _as_distilled(row, item)
    text = item.body if newer else stored_text
    if len(days) > 1:
        listed = [short_day(d) for d in sorted(days)]
        shown = ", ".join(listed[:-1]) + " and " + listed[-1]
        text = f"{text}\nPosted {len(days)} times: {shown}."
    return Distilled(
        base.kind,
        base.identity_key,
        base.title,
        text,
        base.contact_id,
        base.tags,
        base.source_ref,
        base.about_date,
    )


def _posted_days(body: str) -> tuple[set[int], str]:
    lines = body.splitlines()
    match = _POSTED.match(lines[-1]) if lines else None
    if match is None:
        return set(), body
    days = set()
    for label in re.split(r", | and ", match.group(2)):
        at = parse_day(label)
        if at is not None:
            days.add(at)
    return days, "\n".join(lines[:-1])


def _as_distilled(row: _Stored, item: Distilled) -> Distilled:
    tags = tuple(json.loads(row.tags)) if row.tags else ()
    return Distilled(
        item.kind,
        item.identity_key,
        row.title or item.title,
        row.body or item.body,
        row.contact_id,
        tags,
        row.source_ref,
        row.about_date,
    )


# -- the week of a journal -----------------------------------------------------------
#
# Besides its own dated digest, every journal entry adds a line to the note of
# its ISO week ("Journal, week of Monday 2 March 2026"): what each day of the
# week was about, in one place, for questions about a week or a weekend. A
# line is keyed by its day and a short reference to its entry, so an entry
# distilled again replaces its own line and two entries of one day keep one
# line each; lines are in date order, whatever order the entries came in.

MAX_WEEK_LINE = 240
MAX_WEEK_BODY = 16_000
"""Characters of a week note's body. It is an overview (each entry has a note
of its own); a week of a great many entries shortens every line alike, then
leaves out its earliest ones, counted, rather than outgrow what the Notebook
takes (which would refuse the entry's notes altogether)."""
MIN_WEEK_GIST = 40
_WEEK_LINE = re.compile(r"^- [A-Z][a-z]+ (\d{4}-\d{2}-\d{2}): .*\[([0-9a-f]{6})\]$")
_WEEK_LEFT_OUT = re.compile(r"^- (\d+) earlier entr(?:y|ies) not listed$")
_WEEK_GIST = re.compile(r"^(- [A-Z][a-z]+ \d{4}-\d{2}-\d{2}: )(.*)( \[[0-9a-f]{6}\])$")


def _fit_week(lines: list[str], left_out: int, room: int) -> tuple[list[str], int]:
    """The week's lines within ``room`` characters: each gist cut to an even
    share (at least `MIN_WEEK_GIST`), then the earliest lines left out and
    counted, if need be."""

    def size(kept: list[str]) -> int:
        return sum(len(line) + 1 for line in kept) + 40  # and the line that counts

    if size(lines) <= room:
        return lines, left_out
    share = max(MIN_WEEK_GIST, room // max(1, len(lines)) - 30)
    cut = []
    for line in lines:
        match = _WEEK_GIST.match(line)
        if match is not None and len(match.group(2)) > share:
            gist = match.group(2)[: share - 1].rstrip() + "…"
            cut.append(match.group(1) + gist + match.group(3))
        else:
            cut.append(line)
    while cut and size(cut) > room:
        cut.pop(0)
        left_out += 1
    return cut, left_out


def merge_week(session: Session, loaded: Loaded, result: DistillResult) -> Distilled:
    """The week note of a journal entry's week, with the entry's line in it."""
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    day = _iso(newest)
    date = dt.date.fromisoformat(day)
    year, week, _ = date.isocalendar()
    monday = date - dt.timedelta(days=date.weekday())
    identity = f"journal-week:{year}-W{week:02d}"
    ref = hashlib.sha256(loaded.source.key.encode()).hexdigest()[:6]
    gist = result.summary.split(". ", 1)[1] if result.summary.startswith("Journal, ") else ""
    gist = " ".join((gist or result.summary).split())
    if len(gist) > MAX_WEEK_LINE:
        gist = gist[: MAX_WEEK_LINE - 1].rstrip() + "…"
    weekday = date_words(day)[0]
    lines = {(day, ref): f"- {weekday} {day}: {gist} [{ref}]"}
    left_out = 0  # earlier entries of the week its note no longer lists
    row = _stored(session, NoteKind.CONVERSATION_DIGEST, identity)
    if row is not None and row.body is not None and not row.user_edited:
        for line in row.body.splitlines():
            match = _WEEK_LINE.match(line)
            if match is not None:
                lines.setdefault((match.group(1), match.group(2)), line)
            elif (more := _WEEK_LEFT_OUT.match(line)) is not None:
                left_out = int(more.group(1))
    days = sorted({d for d, _ in lines})
    named = [date_words(d) for d in days]
    tags = ["journal", "week", f"{year}-w{week:02d}"]
    tags += [weekday.casefold() for weekday, _, _ in named]
    tags += [month.casefold() for _, month, _ in named]
    if any(w in ("Saturday", "Sunday") for w, _, _ in named):
        tags.append("weekend")
    entries = len(lines) + left_out
    head = f"Journal, week of {date_words(monday.isoformat())[2]}: {entries} " + (
        "entry." if entries == 1 else "entries."
    )
    room = MAX_WEEK_BODY - len(head) - 1
    listed, left_out = _fit_week([lines[k] for k in sorted(lines)], left_out, room)
    if left_out:
        noun = "entry" if left_out == 1 else "entries"
        listed = [f"- {left_out} earlier {noun} not listed", *listed]
    body = "\n".join([head, *listed])
    return Distilled(
        kind=NoteKind.CONVERSATION_DIGEST,
        identity_key=identity,
        title=_fit_title(f"Journal, week of {date_words(monday.isoformat())[2]}"),
        body=body,
        tags=tuple(dict.fromkeys(tags))[:MAX_PAGE_TAGS],
        source_ref=identity,
        about_date=day_start_us(days[-1]),
    )


def person_items(
    session: Session, loaded: Loaded, request: DistillRequest, result: DistillResult
) -> list[Distilled]:
    """The person page a result writes or adds to, read and merged under the
    write lock: for a one-to-one thread its contact's page (created if need
    be), for any other source with one other person the facts it states, added
    to that person's page if they have one."""
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    facts = _dated(result.person_facts, newest)
    if loaded.one_to_one and request.person:
        facts = [*card_facts(loaded.details), *facts]
        contact = loaded.one_to_one
        stored = _stored_page(session, contact)
        page = merge_page(
            _page_base(session, contact, stored),
            facts,
            # An answer without a read keeps the stored one.
            read=[result.person] if result.person else None,
            threads=result.open_threads,
        )
        return [_page_item(contact, request.person, page, result.tags)]
    if loaded.source.kind is SourceKind.CALL and len(loaded.participants) == 1:
        name = loaded.names.get(loaded.participants[0], "")
        facts += [
            Fact(FactKind.NOTE, f"{GOES_BY}{label}{IN_CALLS}", newest)
            for label in call_names(loaded.rows, name)
        ]
    if not facts or loaded.source.kind is SourceKind.CONVERSATION or len(loaded.participants) != 1:
        return []
    added = _added_to_page(session, loaded, loaded.participants[0], facts)
    return [added] if added is not None else []


def _added_to_page(
    session: Session, loaded: Loaded, contact: str, facts: Sequence[Fact]
) -> Distilled | None:
    """``facts`` merged into the page ``contact`` already has (its title, tags
    and source kept); None when they have none, or its body is parked on the
    Homebase: a source about someone does not make them a page."""
    stored = _stored_page(session, contact)
    if stored is None or stored.body is None:
        return None
    page = _cap_agent_facts(merge_page(_page_base(session, contact, stored), facts))
    return _page_item(
        contact,
        stored.title or loaded.names.get(contact, "someone"),
        page,
        tuple(json.loads(stored.tags)) if stored.tags else (),
        stored.source_ref,
        keep_tags=True,
    )


def other_pages(
    session: Session, loaded: Loaded, result: DistillResult, written: Sequence[Distilled]
) -> list[Distilled]:
    """What a source says about people it names besides its own (the
    answer's ``others``), added to the page of the contact each name
    resolves to, when they have one; never to the source's own people, whose
    pages the source writes in its own right."""
    by_contact: dict[str, list[Fact]] = {}
    own = {*loaded.participants, *(p.identity_key for p in written)}
    newest = max(r[2] for r in loaded.rows)
    for name, said in result.others:
        (fact,) = _dated([said], newest)  # an undated fact is the source's, not the card's
        try:
            contact = ContactBook.resolve_in(session, name, loose=True)
        except BadInput:
            contact = None
        if contact is None or contact in own:
            continue
        by_contact.setdefault(contact, []).append(fact)
    added = (_added_to_page(session, loaded, c, facts) for c, facts in by_contact.items())
    return [item for item in added if item is not None]


def _page_item(
    contact: str,
    name: str,
    page: PersonPage,
    tags: Sequence[str],
    source_ref: str | None = None,
    *,
    keep_tags: bool = False,
) -> Distilled:
    kinds = (
        () if keep_tags else tuple(_PAGE_TAGS[f.kind] for f in page.facts if f.kind in _PAGE_TAGS)
    )
    # A gift idea tags the page whoever's source it came from (a page kept
    # as it was still gains them), ahead of the topics: "present ideas for
    # Callum" should find it among a dozen other tags.
    gifts = WISH_TAGS if any(f.kind is FactKind.WISH for f in page.facts) else ()
    aliases = alias_tags(page, name)
    return Distilled(
        kind=NoteKind.PERSON,
        identity_key=contact,
        title=_fit_title(name),
        body=render_person_page(page),
        contact_id=contact,
        tags=tuple(dict.fromkeys((*aliases, *gifts, *tags, *kinds)))[:MAX_PAGE_TAGS],
        source_ref=source_ref,
    )


# -- what the agent told the user about someone ------------------------------------------
#
# The agent's own answers are never searched (grep_memory leaves them out) and
# are not distilled as a source. One kind of sentence in them is kept all the
# same: "<name> is <the contact's name>, <who they are>" ("Mum is Maria Silva,
# your mother in Coimbra."), or "<a name the contact book knows> is <what>".
# It goes to that contact's page as a dated note that says whose words it is
# ("Note: Pixie told you: Mum is Maria Silva, your mother in Coimbra; as of
# 26 Dec 2023"), at most MAX_AGENT_SAID per page (the newest), and the name it
# used becomes a tag of the page (at most MAX_ALIAS_TAGS), which is how
# check_notebook finds "Mum" when the contact book knows only "Maria Silva".
# The first form is checked against the contact book (the contact's own name
# must follow "is"); a sentence naming nobody the book knows is dropped.

AGENT_SAID = "Pixie told you: "
AGENT_SAID_KEY = "*agent-said"  # its watermark's row: the newest agent answer looked at
AGENT_SAID_REF = "agent-chat"
GOES_BY = "Goes by “"  # a call transcript's name for them: "Goes by “Mum” in your calls"
IN_CALLS = "” in your calls"
MAX_AGENT_SAID = 3
MAX_ALIAS_TAGS = 3
AGENT_SCAN = 5_000  # agent answers looked at per pass (the rest wait for the next)
_AGENT_SQL = (
    "SELECT n, at, text FROM memory_event WHERE kind = 'agent_chat_agent' AND n > ? "
    f"ORDER BY n LIMIT {AGENT_SCAN}"
)


def alias_tags(page: PersonPage, name: str) -> list[str]:
    """The names a page's notes say the person goes by (the agent's answers,
    the call transcripts), other than the page's own name, as tags (newest
    note first)."""
    own = name_tag(name)[:MAX_TAG_CHARS]
    out: list[str] = []
    for fact in sorted(_agent_facts(page.facts), key=lambda f: -(f.at or 0)):
        if fact.text.startswith(AGENT_SAID):
            said_as = fact.text[len(AGENT_SAID) :].split(" is ", 1)[0]
        else:
            said_as = fact.text[len(GOES_BY) : -len(IN_CALLS)]
        tag = name_tag(said_as)[:MAX_TAG_CHARS]
        if tag and tag != own and tag not in out:
            out.append(tag)
    return out[:MAX_ALIAS_TAGS]


def call_names(rows: Iterable[Row], name: str) -> list[str]:
    """The speaker labels of a one-to-one call's transcript ("Mum: ...") for
    the other person, where they are not already words of the contact's name
    ("Dr. Nowak" for "Dr. Tomasz Nowak" is not news): the names the user's
    own transcripts call them by. At most MAX_ALIAS_TAGS."""
    own = set(name_words(name))
    out: list[str] = []
    for row in rows:
        for turn in row[5].splitlines():
            match = _SPEAKER.match(turn.strip())
            if match is None:
                continue
            label = " ".join(match.group(1).split())
            words = name_words(label)
            if label.casefold() in _MINE or not words or set(words) <= own:
                continue
            if label not in out:
                out.append(label)
    return out[:MAX_ALIAS_TAGS]


_SPEAKER = re.compile(r"^([^:\n]{1,40}):\s")
_MINE = frozenset({"me", "you", "i"})


def _agent_facts(facts: Iterable[Fact]) -> list[Fact]:
    return [
        f
        for f in facts
        if f.kind is FactKind.NOTE
        and (
            f.text.startswith(AGENT_SAID)
            or (f.text.startswith(GOES_BY) and f.text.endswith(IN_CALLS))
        )
    ]


def _cap_agent_facts(page: PersonPage) -> PersonPage:
    """At most MAX_AGENT_SAID of the agent's notes and as many "goes by" notes
    on a page, the newest."""
    dropped: set[Fact] = set()
    for prefix in (AGENT_SAID, GOES_BY):
        said = [f for f in _agent_facts(page.facts) if f.text.startswith(prefix)]
        ranked = sorted(said, key=lambda f: (f.at or 0, f.text), reverse=True)
        dropped.update(ranked[MAX_AGENT_SAID:])
    if not dropped:
        return page
    return PersonPage(tuple(f for f in page.facts if f not in dropped), page.read, page.threads)


@dataclass(frozen=True, slots=True)
class AgentSaid:
    """What the agent's answers said about one contact, and those answers."""

    contact_id: str
    name: str  # the contact's display name
    lines: tuple[Line, ...]
    facts: tuple[Fact, ...]

    @property
    def participants(self) -> tuple[str, ...]:
        return (self.name,)


def agent_statements(
    rows: Iterable[tuple[int, int, str]], names: dict[str, str], known: dict[str, str]
) -> list[AgentSaid]:
    """The statements about contacts in agent answers ``rows`` (n, at, text).
    ``names``: contact id -> display name; ``known``: the `name_key` of every
    display name and alias -> contact id."""
    by_name = {name_key(n): cid for cid, n in names.items()}
    found: dict[str, tuple[list[Line], list[Fact]]] = {}
    for _, at, text in rows:
        for said_as, what in identity_statements(text):
            contact = by_name.get(name_key(what.split(",", 1)[0]))
            if contact is None:
                contact = known.get(name_key(said_as))
            if contact is None:
                continue
            lines, facts = found.setdefault(contact, ([], []))
            if not lines or lines[-1].at != at:
                lines.append(Line(at, "Pixie", False, text, "agent_chat_agent"))
            facts.append(Fact(FactKind.NOTE, f"{AGENT_SAID}{said_as} is {what}", at))
    return [
        AgentSaid(cid, names[cid], tuple(lines), tuple(facts))
        for cid, (lines, facts) in sorted(found.items())
    ]


_PAGE_TAGS = {
    FactKind.WORK: "work",
    FactKind.ROLE: "work",
    FactKind.HOME: "home",
    FactKind.FAMILY: "family",
    FactKind.BIRTHDAY: "birthdays",
    FactKind.PET: "pets",
    FactKind.PLAN: "plans",
}
WISH_TAGS = ("gift ideas", "presents")  # a page with a wish: the words people ask with
MAX_PAGE_TAGS = 12


@dataclass(frozen=True, slots=True)
class _Stored:
    """What the merges need of a stored clear note (read without the ORM:
    a pass reads one per source)."""

    title: str | None
    body: str | None  # None when parked on the Homebase
    tags: str | None  # JSON
    contact_id: str | None
    source_ref: str | None
    about_date: int | None
    user_edited: bool


_STORED_SQL = (
    "SELECT title, body, tags, contact_id, source_ref, about_date, user_edited FROM note "
    "WHERE zone = 'clear' AND kind = ? AND identity_key = ?"
)


def _stored(session: Session, kind: NoteKind, identity: str) -> _Stored | None:
    group: _Group | None = session.info.get(_GROUP)
    if group is not None:
        return group.stored(session, kind, identity)
    return _stored_row(session, kind, identity)


def _stored_row(session: Session, kind: NoteKind, identity: str) -> _Stored | None:
    row = _driver(session).execute(_STORED_SQL, (kind.value, identity)).fetchone()
    if row is None:
        return None
    title, body, tags, contact_id, source_ref, about_date, edited = row
    return _Stored(title, body, tags, contact_id, source_ref, about_date, bool(edited))


def _stored_page(session: Session, contact: str) -> _Stored | None:
    return _stored(session, NoteKind.PERSON, contact)


def _page_base(session: Session, contact: str, stored: _Stored | None) -> PersonPage:
    """What a pass merges its findings into: the stored page, or, when the
    user has edited it, distillation's own page beside it (the user's page is
    theirs; the upsert writes what it does not say to the page beside)."""
    if stored is not None and stored.user_edited:
        stored = _stored(session, NoteKind.PERSON, kept_up_identity(contact))
        if stored is not None and stored.user_edited:
            return PersonPage()  # nothing distillation writes would land there
    if stored is None or stored.body is None:
        return PersonPage()
    return parse_person_page(stored.body)


def _dated(facts: Sequence[Fact], at: int) -> list[Fact]:
    """Facts an answer left undated, dated by the source's newest line."""
    return [f if f.at is not None else Fact(f.kind, f.text, at) for f in facts]


def merge_facts(body: str | None, facts: Sequence[Fact]) -> tuple[list[Fact], bool]:
    """The about_you facts after adding ``facts`` (see `pages.merge_about_you`),
    and whether that changed them."""
    merged = merge_about_you(body, facts)
    return merged, render_about_you(merged) != (body or "")


def _iso(at: int) -> str:
    return dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).date().isoformat()


def _names(names: Sequence[str]) -> str:
    shown = list(names[:MAX_TITLE_NAMES])
    if len(names) > MAX_TITLE_NAMES:
        shown.append(f"{len(names) - MAX_TITLE_NAMES} others")
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _fit_title(title: str) -> str:
    title = " ".join(title.split())
    limit = min(MAX_TITLE_CHARS, 120)
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"


# -- the service -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scan:
    since: int  # the scan watermark the pass started from
    top: int  # the newest log row when it looked
    candidates: tuple[tuple[Source, tuple[int, ...]], ...]  # with their new rows (posts, calls)


_SCAN_SQL = (
    "SELECT n, id, kind, thread, contact_id, source FROM memory_event "
    f"WHERE n > ? AND kind IN {_DISTILLED_KINDS} ORDER BY n"
)
_ROW_COLUMNS = "n, kind, at, contact_id, from_me, text"
_THREAD_SQL = {
    family: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = '{kind}' "
        f"ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
    )
    for family, kind in _THREAD_KIND.items()
}
_THREAD_TOP_SQL = {
    family: f"SELECT max(n) FROM memory_event WHERE thread = ? AND kind = '{kind}'"
    for family, kind in _THREAD_KIND.items()
}
_THREAD_NEW_SQL = {
    family: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = '{kind}' "
        f"AND n > ? ORDER BY at DESC, n DESC LIMIT {EARLIER_SCAN}"
    )
    for family, kind in _THREAD_KIND.items()
}
# Repeating entries whose note is about an occurrence more than a day past
# while the log has a later one: the note named it as the next, and is
# written again ("Next: ..."). A day either way covers the note's day being
# on the calendar's wall clock and the log's times in UTC; a daily series in
# a zone far from UTC may so keep a stale "Next" until its next change.
SERIES_PREFIX = "series:"
DUE_SERIES_SQL = (
    "SELECT note.source_ref FROM note WHERE note.zone = 'clear' AND NOT note.deleted "
    f"AND note.kind = 'conversation_digest' AND note.source_ref LIKE '{SERIES_PREFIX}%' "
    "AND NOT note.user_edited AND note.body IS NOT NULL "
    "AND note.about_date < ? AND EXISTS (SELECT 1 FROM memory_event e "
    f"WHERE e.thread = substr(note.source_ref, {len(SERIES_PREFIX) + 1}) "
    f"AND e.kind = 'calendar' AND e.at > note.about_date + {DAY_US}) LIMIT 1000"
)
# The occurrences of a repeating calendar entry, the newest MAX_OCCURRENCES
# (a daily entry over the importer's eleven years has four thousand: the
# newest say what is next, the oldest only since when).
_SERIES_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = 'calendar' "
    f"ORDER BY at DESC, n DESC LIMIT {MAX_OCCURRENCES}"
)
_DIRECT_NEW_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread IS NULL AND kind = 'message' "
    f"AND contact_id = ? AND n > ? ORDER BY at DESC, n DESC LIMIT {EARLIER_SCAN}"
)
# A card's email addresses: the contact book keeps those as names a contact
# is known by, so they are read from its aliases as one "email" detail
# (``{}``: which contacts). GROUP BY, not HAVING alone: older SQLite refuses
# HAVING without it.
_EMAILS_SQL = (
    "SELECT contact_id, group_concat(alias, ', ') AS emails FROM (SELECT contact_id, alias "
    "FROM contact_alias WHERE contact_id {} AND alias LIKE '%@%' ORDER BY contact_id, alias) "
    "GROUP BY contact_id"
)
_DETAILS_SQL = (
    "SELECT field, value FROM contact_detail WHERE contact_id = ? "
    "UNION ALL SELECT 'email', emails FROM (" + _EMAILS_SQL.format("= ?") + ")"
)
_CARD_ORDER = ("org", "title", "birthday", "phone", "email", "address", "note")
MAX_CARD_EMAILS = 3  # of a contact's email addresses on their page
_NOT_FOR_MODELS = frozenset({"phone", "email", "address"})
_THREAD_PEOPLE_SQL = {
    family: (
        "SELECT DISTINCT contact_id FROM memory_event "
        f"WHERE thread = ? AND kind = '{kind}' AND contact_id IS NOT NULL LIMIT 64"
    )
    for family, kind in _THREAD_KIND.items()
}
_DIRECT_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread IS NULL AND kind = 'message' "
    f"AND contact_id = ? ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
)
_DIRECT_TOP_SQL = (
    "SELECT max(n) FROM memory_event WHERE thread IS NULL AND kind = 'message' AND contact_id = ?"
)
_BY_SOURCE_SQL = {
    SourceKind.POST: f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'post'",
    SourceKind.CALL: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? "
        "AND kind IN ('call', 'voicemail')"
    ),
    SourceKind.JOURNAL: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'journal'"
    ),
    SourceKind.CALENDAR: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'calendar'"
    ),
    SourceKind.MAIL: f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'email'",
}
_BY_ID_SQL = f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE id = ?"
_BY_N_SQL = f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE n IN ({{}})"
# Rows (0), watermark (1), names (2: id, name) and the other people's cards
# (3: field, contact id, value) of a source whose rows are all new, as one
# statement: see `_peek_filed`.
_FILED_SQL = (
    f"WITH r AS (SELECT {_ROW_COLUMNS} FROM memory_event WHERE n IN ({{}})) "
    f"SELECT 0, {_ROW_COLUMNS} FROM r "
    "UNION ALL SELECT 1, seen_n, NULL, NULL, NULL, NULL, NULL FROM distill_mark WHERE source = ? "
    "UNION ALL SELECT 2, NULL, id, NULL, NULL, NULL, name FROM contact "
    "WHERE id IN (SELECT contact_id FROM r) "
    "UNION ALL SELECT 3, NULL, field, NULL, contact_id, NULL, value FROM contact_detail "
    "WHERE contact_id IN (SELECT contact_id FROM r WHERE NOT from_me) "
    "UNION ALL SELECT 3, NULL, 'email', NULL, contact_id, NULL, emails FROM ("
    + _EMAILS_SQL.format("IN (SELECT contact_id FROM r WHERE NOT from_me)")
    + ")"
)
_MARK_READ_SQL = "SELECT seen_n FROM distill_mark WHERE source = ?"
_MARK_SQL = (
    "INSERT INTO distill_mark (source, seen_n) VALUES (?, ?) "
    "ON CONFLICT (source) DO UPDATE SET seen_n = excluded.seen_n"
)
_CHUNK = 500
# A pass with more sources than GROUP_BACKLOG to look at (an import, a first
# pass) commits them in groups of up to MAX_GROUP sources, each group holding
# the write lock for about MAX_GROUP_SECONDS at most (see `distill_group`).
GROUP_BACKLOG = 32
MAX_GROUP = 64
MAX_GROUP_SECONDS = 0.05

Row = tuple[int, str, int, str | None, bool, str]


class _Conflict(Exception):
    """A source in a group transaction reads a note that a source before it
    in the group wrote in a way `_Group` does not follow: it waits for the
    next group, which starts with it."""


class _Group:
    """What the sources before this one in a group transaction wrote (see
    `NotetakingService.distill_group`), so that the merges of a source read
    the notes as those sources left them, exactly as if each had committed
    on its own.

    A note is worked out when a source reads it, from the stored row and the
    items written over it in turn, where the upsert's outcome is plain: the
    note was new, or distillation's own and resident, so it then holds the
    item as the Notebook cleans it. Anything else (the user's note, and so a
    page beside an edited one, a body parked on the Homebase, an item the
    Notebook would refuse) ends the group before the source that reads it
    (`_Conflict`)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[Distilled]] = {}  # by (kind, identity)
        self.beside: dict[tuple[str, str], tuple[str, str]] = {}  # kept-up page -> page
        self.after: dict[tuple[str, str], tuple[int, _Stored | None]] = {}  # items worked out

    def wrote(self, items: Sequence[Distilled]) -> None:
        for item in items:
            key = (item.kind.value, item.identity_key)
            self.items.setdefault(key, []).append(item)
            if item.kind is NoteKind.PERSON:
                self.beside[(key[0], kept_up_identity(item.identity_key))] = key

    def stored(self, session: Session, kind: NoteKind, identity: str) -> _Stored | None:
        key = (kind.value, identity)
        page = self.beside.get(key)
        if page is not None:
            self._after(session, page)  # the page's own items all landed on it
        if key not in self.items:
            return _stored_row(session, kind, identity)
        return self._after(session, key)

    def _after(self, session: Session, key: tuple[str, str]) -> _Stored | None:
        items = self.items[key]
        done, row = self.after.get(key, (0, None))
        if done == len(items):
            return row
        if not done:
            row = _stored_row(session, items[0].kind, items[0].identity_key)
        for item in items[done:]:
            if row is not None and (row.user_edited or row.body is None):
                raise _Conflict
            try:
                title = clean_title(item.title)
                body = clean_text(item.body, "body", MAX_BODY_CHARS)
                tags = tags_json(clean_tags(item.tags))
                identity = identity_for(item.kind, item.identity_key, title)
            except BadInput:
                raise _Conflict from None
            if identity != item.identity_key:
                raise _Conflict
            row = _Stored(
                title, body, tags, item.contact_id, item.source_ref, item.about_date, False
            )
        self.after[key] = (len(items), row)
        return row


_GROUP = "pixie_distill_group"
_Answered = dict[str, tuple[Loaded, Routed]]


@dataclass
class _Done:
    """What `NotetakingService.distill_now` did with one source."""

    loaded: Loaded | None = None  # None: its watermark covered it
    routed: Routed | None = None
    results: list[UpsertResult] = field(default_factory=list)
    failed: str | None = None  # why nothing was written, for the log


def _driver(session: Session) -> sqlite3.Connection:
    """The session's driver connection, inside its transaction (kept in the
    session's info: a pass asks for it a few times a source, and a session's
    own lookup costs more than the small statements it runs)."""
    conn = session.info.get(_DRIVER)
    if conn is None:
        conn = session.connection().connection.driver_connection
        session.info[_DRIVER] = conn
    return cast(sqlite3.Connection, conn)


_DRIVER = "pixie_distill_driver"


def _load(
    conn: sqlite3.Connection,
    source: Source,
    new_rows: tuple[int, ...],
    since: int,
    everything: bool,
    now: int = 0,
) -> Loaded | None:
    """`NotetakingService.load`, inside a transaction of the caller's (a few
    small statements: on a connection already in a transaction they cost
    less than the one statement `_peek_filed` makes of them)."""
    found = conn.execute(_MARK_READ_SQL, (source.mark_key,)).fetchone()
    mark: int | None = found[0] if found is not None else None
    people: list[str] = []
    fresh: list[Row] = []
    occurrences: tuple[int, ...] = ()
    months: tuple[tuple[str, tuple[Row, ...]], ...] = ()
    if source.thread is not None:
        family = source.kind
        top = conn.execute(_THREAD_TOP_SQL[family], (source.thread,)).fetchone()[0]
        if top is None:
            return None
        if mark is not None and mark >= top and not everything and not source.again:
            return None
        if family is SourceKind.CALENDAR:
            every = _rows(conn.execute(_SERIES_SQL, (source.thread,)))
            every.reverse()
            occurrences = tuple(r[2] for r in every)
            rows = series_lines(every)
        else:
            rows = _rows(conn.execute(_THREAD_SQL[family], (source.thread,)))
            rows.sort(key=lambda r: (r[2], r[0]))
        people = [r[0] for r in conn.execute(_THREAD_PEOPLE_SQL[family], (source.thread,))]
        if family is SourceKind.CONVERSATION:
            since_n = 0 if everything or mark is None else mark
            fresh = _rows(conn.execute(_THREAD_NEW_SQL[family], (source.thread, since_n)))
            months = _months(conn, source.thread, rows, fresh)
    elif source.contact_id is not None:
        top = conn.execute(_DIRECT_TOP_SQL, (source.contact_id,)).fetchone()[0]
        if top is None or (mark is not None and mark >= top and not everything):
            return None
        rows = _rows(conn.execute(_DIRECT_SQL, (source.contact_id,)))
        rows.sort(key=lambda r: (r[2], r[0]))
        people = [source.contact_id]
        since_n = 0 if everything or mark is None else mark
        fresh = _rows(conn.execute(_DIRECT_NEW_SQL, (source.contact_id, since_n)))
    else:
        if mark is not None and since > 0:
            # Filed under a source distilled before: its older rows are not
            # among the new ones, so read them all.
            if source.event_id is not None:
                rows = _rows(conn.execute(_BY_ID_SQL, (source.event_id,)))
            else:
                rows = _rows(conn.execute(_BY_SOURCE_SQL[source.kind], (source.source,)))
        else:
            rows = []
            for i in range(0, len(new_rows), _CHUNK):
                chunk = new_rows[i : i + _CHUNK]
                sql = _BY_N_SQL.format(",".join("?" * len(chunk)))
                rows += _rows(conn.execute(sql, chunk))
        shaped = _filed(source, rows, mark, everything)
        if shaped is None:
            return None
        rows, top, people = shaped
    names = _contact_names(conn, set(people) | {r[3] for r in rows if r[3] is not None})
    card: dict[str, str] = {}
    if len(people) == 1:
        card = dict(conn.execute(_DETAILS_SQL, (people[0], people[0])).fetchall())
    loaded = _loaded(source, rows, top, people, fresh, names, card)
    if occurrences or months:
        loaded = replace(
            loaded, occurrences=occurrences, now=now if occurrences else 0, months=months
        )
    return loaded


# -- a long thread, month by month ------------------------------------------------------
#
# A thread's digest covers its newest MAX_LINES messages: a year of chat with
# a partner keeps only its last few weeks there, and the person page keeps
# facts, not what was said. So a thread longer than one request also gets a
# digest per calendar month (UTC) that has new messages: "Callum Reid — May
# 2026", made by the built-in distiller from that month's newest MAX_LINES
# messages (a model is not asked again for each month), filed under the
# thread with the month in its identity, so a re-run rewrites the month in
# place. A month with fewer than MIN_MONTH_MESSAGES messages gets none: the
# thread digest and the person page hold what little it says.

MIN_MONTH_MESSAGES = 5
MAX_MONTHS = 24  # months written by one pass of one thread (the newest)
_MONTH_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = 'message' "
    f"AND at >= ? AND at < ? ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
)
_THREAD_COUNT_SQL = "SELECT count(*) FROM memory_event WHERE thread = ? AND kind = 'message'"


def _months(
    conn: sqlite3.Connection, thread: str, rows: Sequence[Row], fresh: Sequence[Row]
) -> tuple[tuple[str, tuple[Row, ...]], ...]:
    """The months of a long thread that have new messages, each with its
    newest messages, oldest first; none for a thread one request holds."""
    if len(rows) < MAX_LINES:
        return ()
    total = conn.execute(_THREAD_COUNT_SQL, (thread,)).fetchone()[0]
    if total <= MAX_LINES:
        return ()
    touched = sorted({_month_of(r[2]) for r in fresh}, reverse=True)[:MAX_MONTHS]
    out = []
    for month in sorted(touched):
        start, end = _month_span(month)
        found = _rows(conn.execute(_MONTH_SQL, (thread, start, end)))
        if len(found) >= MIN_MONTH_MESSAGES:
            found.sort(key=lambda r: (r[2], r[0]))
            out.append((month, tuple(found)))
    return tuple(out)


def _month_of(at: int) -> str:
    day = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC)
    return f"{day.year:04d}-{day.month:02d}"


def _month_span(month: str) -> tuple[int, int]:
    year, number = int(month[:4]), int(month[5:])
    start = dt.datetime(year, number, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp()) * 1_000_000, int(end.timestamp()) * 1_000_000


def _month_identity(thread_key: str, month: str) -> str:
    """A month digest's identity: the thread's, then the month; hashed when
    that would be too long (cut, two months of a long thread id would meet)."""
    key = f"{thread_key}@{month}"
    if len(key) <= MAX_IDENTITY_CHARS:
        return key
    return f"month-sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def month_items(loaded: Loaded, base: Distilled) -> list[Distilled]:
    """A digest per month of a long thread (see above)."""
    out: list[Distilled] = []
    for month, rows in loaded.months:
        shown = replace(loaded, rows=rows, earlier=(), details=(), months=())
        answer = parse_result(
            OfflineDistiller().answer_now(replace(build_request(shown), person=None))
        )
        label = f"{MONTHS[int(month[5:]) - 1]} {month[:4]}"
        out.append(
            Distilled(
                kind=base.kind,
                identity_key=_month_identity(base.identity_key, month),
                title=_fit_title(f"{base.title} — {label}"),
                body=answer.summary,
                contact_id=base.contact_id,
                tags=tuple(
                    dict.fromkeys((*answer.tags, MONTHS[int(month[5:]) - 1].casefold(), month[:4]))
                )[:MAX_TAGS],
                source_ref=base.source_ref,
                about_date=max(r[2] for r in rows),
            )
        )
    return out


def series_lines(every: Sequence[Row]) -> list[Row]:
    """What a model is shown of a repeating calendar entry (every occurrence,
    earliest first): the first occurrence, and each later one whose title,
    place, people or notes differ from the one before it (a moved or retitled
    week), the newest of those if there are many."""
    if not every:
        return []
    shown = [every[0]]
    last = _without_when(every[0][5])
    for row in every[1:]:
        text = _without_when(row[5])
        if text != last:
            shown.append(row)
            last = text
    return shown[:1] + shown[1:][-(MAX_LINES - 1) :]


def _without_when(text: str) -> str:
    """A calendar entry's text less its second line, the time the importer
    writes there: what two occurrences of one entry share."""
    lines = text.split("\n")
    return "\n".join(lines[:1] + lines[2:])


def _filed(
    source: Source, rows: list[Row], mark: int | None, everything: bool
) -> tuple[list[Row], int, list[str]] | None:
    """A post's, call's, journal's or calendar entry's rows as shown (in
    order, the newest MAX_LINES), its newest row, and the other people in
    it; None if there are none, or its watermark covers them."""
    if not rows:
        return None
    top = max(r[0] for r in rows)
    if mark is not None and mark >= top and not everything:
        return None
    rows.sort(key=lambda r: (r[2], r[0]))
    if source.kind is SourceKind.POST:  # the post itself, then its newest replies
        rows = rows[:1] + rows[1:][-(MAX_LINES - 1) :]
    rows = rows[-MAX_LINES:]
    people = list(dict.fromkeys(r[3] for r in rows if r[3] is not None and not r[4]))
    return rows, top, people


def _loaded(
    source: Source,
    rows: list[Row],
    top: int,
    people: list[str],
    fresh: list[Row],
    names: dict[str, str],
    card: dict[str, str],
) -> Loaded:
    if "email" in card:  # the first few addresses, in the order the book sorts them
        # (an alias with "@" may be a handle: only addresses count; none
        # left is an empty value, which the line below leaves out)
        emails = [a for a in card["email"].split(", ") if EMAIL_ADDRESS.fullmatch(a)]
        card = {**card, "email": ", ".join(emails[:MAX_CARD_EMAILS])[:MAX_FACT_CHARS]}
    details = tuple((f, card[f]) for f in _CARD_ORDER if card.get(f)) if len(people) == 1 else ()
    people.sort(key=lambda cid: (names.get(cid, "").casefold(), cid))
    one = people[0] if source.kind is SourceKind.CONVERSATION and len(people) == 1 else None
    shown = {r[0] for r in rows}
    earlier = _stating(r for r in fresh if r[0] not in shown)
    return Loaded(source, tuple(rows), top, names, tuple(people), one, earlier, details)


def _peek_filed(
    db: Database, source: Source, new_rows: tuple[int, ...], since: int, everything: bool
) -> Loaded | _Unread | None:
    """`_load` for a post, call, journal or calendar entry whose rows are all
    among the new ones, in one statement on one snapshot (`Database.peek`,
    which needs no session): its rows, its watermark, the names of the
    people in them and the cards of the others; `_UNREAD` when it takes more
    than that statement."""
    found = db.peek(_FILED_SQL.format(",".join("?" * len(new_rows))), (*new_rows, source.mark_key))
    rows: list[Row] = []
    mark: int | None = None
    names: dict[str, str] = {}
    cards: dict[str, dict[str, str]] = {}
    for part, n, kind, at, cid, me, text in found:
        if part == 0:
            rows.append((n, kind, at, cid, bool(me), text))
        elif part == 1:
            mark = n
        elif part == 2:
            names[kind] = text
        else:
            cards.setdefault(cid, {})[kind] = text
    if mark is not None and since > 0:
        return _UNREAD  # filed under a source distilled before: read it all
    shaped = _filed(source, rows, mark, everything)
    if shaped is None:
        return None
    rows, top, people = shaped
    ids = set(people) | {r[3] for r in rows if r[3] is not None}
    names = {cid: name for cid, name in names.items() if cid in ids}
    card = cards.get(people[0], {}) if len(people) == 1 else {}
    return _loaded(source, rows, top, people, [], names, card)


class _Unread:
    """`_peek_filed`'s word for a source that one statement does not cover."""


_UNREAD = _Unread()


def _notes_for(
    session: Session, loaded: Loaded, request: DistillRequest, result: DistillResult
) -> list[Distilled]:
    """What ``result`` gives for ``loaded``'s source, merged with what is
    stored, read in ``session``'s write transaction."""
    items = digest_items(loaded, request, result)
    if loaded.months:
        items += month_items(loaded, items[0])
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    if loaded.source.kind is SourceKind.POST:
        items = [merge_post(session, items[0], loaded.rows[0][2])]
    facts = _dated(result.facts, newest)
    about = _about_you(session, facts) if facts else None
    pages: list[Distilled] = []
    # Mail no person wrote says nothing about a person, whatever a model made
    # of it: its digest, and nothing on anyone's page.
    if not (loaded.source.kind is SourceKind.MAIL and all(is_automated(r[5]) for r in loaded.rows)):
        pages = person_items(session, loaded, request, result)
        pages += _group_pages(session, loaded, request)
        pages += other_pages(session, loaded, result, pages)
    if loaded.source.kind is SourceKind.JOURNAL:
        pages.append(merge_week(session, loaded, result))
    return items + pages + ([about] if about is not None else [])


def _mark(session: Session, loaded: Loaded) -> None:
    """Move ``loaded``'s source watermark, in the caller's transaction."""
    _driver(session).execute(_MARK_SQL, (loaded.source.mark_key, loaded.newest_n))


class NotetakingService:
    """Runs distillation passes for one data dir.

    The core of a pass is synchronous and small; this driver runs its
    database steps on one worker-thread lane (SQLite calls block) and awaits
    the router, so `pixie run` keeps syncing while a pass waits on a model.
    When every backend answers at once (the built-in distiller), a source
    (or a group of them) is read, distilled and committed in one hop.
    """

    def __init__(
        self,
        db: Database,
        notebook: ClearNotebookStore,
        router: LLMRouter,
        *,
        lane: trio.CapacityLimiter | None = None,
        now: Callable[[], int] = now_us,
    ) -> None:
        self.db = db
        self.notebook = notebook
        self.router = router
        self.lane = lane or trio.CapacityLimiter(1)
        self.now = now  # for a repeating entry's next occurrence
        # Answers a group transaction had in hand for a source it left to the
        # next one (see `distill_group`), by the source's mark key.
        self._answered: _Answered = {}

    @classmethod
    def for_node(
        cls,
        node: ClearNode,
        flags: dict[str, Any] | None = None,
        *,
        offline_only: bool = False,
    ) -> NotetakingService:
        """A service with the backends the settings in force name (flags, then
        PIXIE_* variables, then the data dir's [llm] table). Refuses bad
        settings before anything runs."""
        settings = llm_settings(node.data.config_path, flags)
        return cls(node.db, node.notebook, router_for(settings, offline_only=offline_only))

    async def run_pass(
        self,
        *,
        everything: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> PassReport:
        """Distil every source with new material (``everything``: every source,
        watermarks aside; identical results still write nothing). ``progress``
        hears (done, total) after each candidate source."""
        started = time.perf_counter()
        report = PassReport()
        self.router.new_pass()
        self._answered.clear()
        try:
            view = self.notebook.clear_view()
            meaning_off = view.meaning_off()  # a bad setting stops the pass before any write
            scan = await self._db(self.scan, everything)
            total = len(scan.candidates)
            if total and not meaning_off:
                # The notes written are embedded at the end; the model loads
                # meanwhile (while a model's answers are awaited, for one).
                nearby.preload()
            done = 0
            while done < total:
                if total > GROUP_BACKLOG and self.router.answers_now:
                    group = scan.candidates[done : done + MAX_GROUP]
                    dones = await self._db(self.distill_group, group, scan.since, everything)
                    for (source, _), one in zip(group, dones, strict=False):
                        self._tally(source, one, report)
                    finished = len(dones)
                else:
                    source, new_rows = scan.candidates[done]
                    await self._one(source, new_rows, scan, everything, report)
                    finished = 1
                for n in range(done + 1, done + finished + 1):
                    if progress is not None:
                        progress(n, total)
                done += finished
            said, top = await self._db(self.read_agent_said, everything)
            if top:
                for result in await self._db(self.commit_agent_said, said, top):
                    report.notes[result.outcome] += 1
            if not report.failed and scan.top > scan.since:
                await self._db(self.advance_scan, scan.top)
            if report.written and not meaning_off and view.meaning_on():
                # The new notes' meaning vectors, in batches on the lane, so
                # the first search after a pass need not make them.
                report.embedded = await self._db(nearby.refresh, self.db)
        finally:
            report.model_calls = dict(self.router.calls)
            report.seconds = time.perf_counter() - started
            await self.router.aclose()
        return report

    async def _one(
        self,
        source: Source,
        new_rows: tuple[int, ...],
        scan: _Scan,
        everything: bool,
        report: PassReport,
    ) -> None:
        if self.router.answers_now:
            done = await self._db(self.distill_now, source, new_rows, scan.since, everything)
            self._tally(source, done, report)
            return
        loaded = await self._db(self.load, source, new_rows, scan.since, everything)
        if loaded is None:
            report.skipped += 1
            return
        request = build_request(loaded)
        try:
            routed = await self.router.distill(request)
        except NoBackendAnswered as exc:
            report.failed += 1
            log.warning("could not distil a %s (%s)", source.kind.value, exc)
            return
        try:
            results = await self._db(self.commit, loaded, request, routed.result)
        except BadInput:
            # Not the message: it may quote what was refused.
            report.failed += 1
            log.warning("the Notebook refused the notes of a %s", source.kind.value)
            return
        self._count(source, routed, results, report)

    def _tally(self, source: Source, done: _Done, report: PassReport) -> None:
        if done.loaded is None:
            report.skipped += 1
        elif done.failed is not None or done.routed is None:
            report.failed += 1
            log.warning("%s", done.failed)
        else:
            self._count(source, done.routed, done.results, report)

    @staticmethod
    def _count(
        source: Source, routed: Routed, results: Sequence[UpsertResult], report: PassReport
    ) -> None:
        report.distilled[source.kind] += 1
        report.fallbacks += bool(routed.failures)
        for result in results:
            report.notes[result.outcome] += 1

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    # -- the synchronous steps, each one transaction -----------------------------

    def scan(self, everything: bool = False) -> _Scan:
        """The sources with rows past the scan watermark, in a fixed order."""
        with self.db.reading() as session:
            since = 0
            if not everything:
                since = (
                    session.scalar(select(DistillMark.seen_n).where(DistillMark.source == SCAN_KEY))
                    or 0
                )
            conn = session.connection()
            top = conn.exec_driver_sql("SELECT max(n) FROM memory_event").scalar() or 0
            found: dict[str, tuple[Source, list[int]]] = {}
            first: dict[str, int] = {}
            for (ref,) in self._due_series(conn):
                thread = ref[len(SERIES_PREFIX) :]
                due = Source(SourceKind.CALENDAR, ref, thread=thread, again=True)
                found[due.mark_key] = (due, [])
                first[due.mark_key] = 0
            for n, event_id, kind, thread, contact_id, src in conn.exec_driver_sql(
                _SCAN_SQL, (since,)
            ):
                source = source_of(kind, event_id, thread, contact_id, src)
                if source is None:
                    continue
                entry = found.get(source.mark_key)
                if entry is None:
                    found[source.mark_key] = entry = (source, [])
                    first[source.mark_key] = n
                if source.kind is not SourceKind.CONVERSATION:
                    entry[1].append(n)
        # Kind by kind, and within a kind in the order of the log: a newer
        # source's notes are written later, and so win ties in a search.
        ordered = sorted(
            found.values(),
            key=lambda e: (_SOURCE_ORDER[e[0].kind], first[e[0].mark_key], e[0].key),
        )
        return _Scan(since, top, tuple((s, tuple(ns)) for s, ns in ordered))

    def load(
        self, source: Source, new_rows: tuple[int, ...], since: int, everything: bool = False
    ) -> Loaded | None:
        """The source's newest events, or None if its watermark covers them."""
        if source.thread is None and source.contact_id is None and 0 < len(new_rows) <= _CHUNK:
            # Most sources: one statement, and no session.
            loaded = _peek_filed(self.db, source, new_rows, since, everything)
            if not isinstance(loaded, _Unread):
                return loaded
        with self.db.reading() as session:
            return _load(_driver(session), source, new_rows, since, everything, self.now())

    def commit(
        self, loaded: Loaded, request: DistillRequest, result: DistillResult
    ) -> list[UpsertResult]:
        """Upsert what ``result`` gives and move the source's watermark, in one
        durable transaction."""
        return self.notebook.upsert_with(
            lambda session: _notes_for(session, loaded, request, result),
            lambda session, _results: _mark(session, loaded),
        )

    def distill_now(
        self,
        source: Source,
        new_rows: tuple[int, ...],
        since: int,
        everything: bool = False,
        answered: _Answered | None = None,
    ) -> _Done:
        """`load`, the router's answer and `commit`, one after the other on
        this thread, for a router whose backends all answer at once
        (`LLMRouter.answers_now`): one worker-thread hop a source instead of
        two and a trip through the event loop. The transactions are the same
        as on the way through the loop: the source's notes and its watermark
        commit together, or (the backends could not distil it, or the
        Notebook refused its notes) nothing is written."""
        done = _Done()
        done.loaded = self.load(source, new_rows, since, everything)
        if done.loaded is None:
            return done
        request = build_request(done.loaded)
        try:
            done.routed = self._answer(done.loaded, request, answered)
        except NoBackendAnswered as exc:
            done.failed = f"could not distil a {source.kind.value} ({exc})"
            return done
        try:
            done.results = self.commit(done.loaded, request, done.routed.result)
        except BadInput:
            # Not the message: it may quote what was refused.
            done.failed = f"the Notebook refused the notes of a {source.kind.value}"
        return done

    def distill_group(
        self, group: Sequence[tuple[Source, tuple[int, ...]]], since: int, everything: bool
    ) -> list[_Done]:
        """`distill_now` for the first sources of ``group`` (at least one), in
        one durable transaction: each source is read, distilled and merged
        in turn, against the notes as the sources before it in the group
        left them (`_Group`), and every watermark commits with exactly its
        source's notes. A group ends at MAX_GROUP sources, after
        MAX_GROUP_SECONDS, or before a source that reads a note an earlier
        one left in a state the group does not follow; that source starts
        the next group. If the Notebook refuses the notes of any source, the
        group is done again one source a transaction (the answers already
        given are used again, never asked for twice)."""
        taken: list[tuple[_Done, int]] = []  # each source's outcome and its number of items
        answered: _Answered = {}

        def build(session: Session) -> list[Distilled]:
            conn = _driver(session)
            written = session.info[_GROUP] = _Group()
            items: list[Distilled] = []
            started = time.perf_counter()
            for source, new_rows in group:
                if taken and time.perf_counter() - started > MAX_GROUP_SECONDS:
                    break
                done = _Done(loaded=_load(conn, source, new_rows, since, everything, self.now()))
                if done.loaded is None:
                    taken.append((done, 0))
                    continue
                request = build_request(done.loaded)
                try:
                    done.routed = self._answer(done.loaded, request, answered)
                except NoBackendAnswered as exc:
                    done.failed = f"could not distil a {source.kind.value} ({exc})"
                    taken.append((done, 0))
                    continue
                try:
                    found = _notes_for(session, done.loaded, request, done.routed.result)
                except _Conflict:
                    self._answered[source.mark_key] = (done.loaded, done.routed)
                    break
                written.wrote(found)
                items += found
                taken.append((done, len(found)))
            return items

        def then(session: Session, results: Sequence[UpsertResult]) -> None:
            at = 0
            for done, count in taken:
                done.results = list(results[at : at + count])
                at += count
                if done.loaded is not None and done.routed is not None and done.failed is None:
                    _mark(session, done.loaded)

        try:
            self.notebook.upsert_with(build, then)
        except BadInput:
            # Every source taken, or (refused while it was being merged) the
            # first: a pass always moves on.
            redone: list[_Done] = []
            for i, (source, rows) in enumerate(group[: max(len(taken), 1)]):
                if i < len(taken) and taken[i][0].failed is not None:
                    redone.append(taken[i][0])  # not distilled: nothing to do again
                else:
                    redone.append(self.distill_now(source, rows, since, everything, answered))
            return redone
        return [done for done, _ in taken]

    def _answer(
        self, loaded: Loaded, request: DistillRequest, answered: _Answered | None
    ) -> Routed:
        """The router's answer for ``loaded``: the one it gave for the very
        same source earlier in this pass, if there is one."""
        key = loaded.source.mark_key
        for cache in (answered, self._answered):
            earlier = cache.pop(key, None) if cache is not None else None
            if earlier is not None and earlier[0] == loaded:
                return earlier[1]
        routed = self.router.distill_now(request)
        if answered is not None:
            answered[key] = (loaded, routed)
        return routed

    def read_agent_said(self, everything: bool = False) -> tuple[list[AgentSaid], int]:
        """What agent answers past their watermark say about contacts (see
        `agent_statements`), and the newest row looked at (0: none)."""
        with self.db.reading() as session:
            conn = session.connection()
            since = 0
            if not everything:
                since = (
                    session.scalar(
                        select(DistillMark.seen_n).where(DistillMark.source == AGENT_SAID_KEY)
                    )
                    or 0
                )
            rows = [(n, at, text) for n, at, text in conn.exec_driver_sql(_AGENT_SQL, (since,))]
            if not rows:
                return [], 0
            names: dict[str, str] = dict(conn.exec_driver_sql("SELECT id, name FROM contact").all())
            known = {name_key(n): cid for cid, n in names.items()}
            for key, cid in conn.exec_driver_sql("SELECT alias_key, contact_id FROM contact_alias"):
                known.setdefault(key, cid)
        return agent_statements(rows, names, known), rows[-1][0]

    def commit_agent_said(self, said: Sequence[AgentSaid], top: int) -> list[UpsertResult]:
        """Merge what the agent said into each contact's page (made if need
        be) and move the watermark to ``top``, in one durable transaction."""

        def build(session: Session) -> list[Distilled]:
            items = []
            for one in said:
                stored = _stored_page(session, one.contact_id)
                if stored is not None and stored.body is None:
                    continue  # parked on the Homebase
                page = _cap_agent_facts(
                    merge_page(_page_base(session, one.contact_id, stored), one.facts)
                )
                stored_tags = tuple(json.loads(stored.tags)) if stored and stored.tags else ()
                items.append(
                    _page_item(
                        one.contact_id,
                        (stored.title if stored else None) or one.name,
                        page,
                        stored_tags,
                        stored.source_ref if stored is not None else AGENT_SAID_REF,
                        keep_tags=stored is not None,
                    )
                )
            return items

        def then(session: Session, _results: Sequence[UpsertResult]) -> None:
            session.connection().exec_driver_sql(_MARK_SQL, (AGENT_SAID_KEY, top))

        return self.notebook.upsert_with(build, then)

    def advance_scan(self, top: int) -> None:
        # Bookkeeping: losing it to a power cut costs a rescan, never a source
        # (each source's own mark is durable).
        with self.db.writing(durable=False) as session:
            session.connection().exec_driver_sql(_MARK_SQL, (SCAN_KEY, top))

    def has_new_material(self) -> bool:
        """Whether a pass would find anything to look at (cheap)."""
        with self.db.reading() as session:
            since = (
                session.scalar(select(DistillMark.seen_n).where(DistillMark.source == SCAN_KEY))
                or 0
            )
            conn = session.connection()
            found = conn.exec_driver_sql(
                f"SELECT 1 FROM memory_event WHERE n > ? AND kind IN {_DISTILLED_KINDS} LIMIT 1",
                (since,),
            )
            return found.first() is not None or self._due_series(conn).first() is not None

    def _due_series(self, conn: Any) -> Any:
        """The source references of repeating entries whose next day has
        passed (`DUE_SERIES_SQL`), as a result to iterate."""
        return conn.exec_driver_sql(DUE_SERIES_SQL, (self.now() - DAY_US,))


def _rows(result: Any) -> list[Row]:
    return [(n, kind, at, cid, bool(me), text) for n, kind, at, cid, me, text in result]


def _stating(rows: Iterable[Row]) -> tuple[Row, ...]:
    """Of rows given newest first, the newest MAX_EARLIER_LINES that state a
    fact (about their writer, or the user's about the person written to),
    oldest first."""
    kept: list[Row] = []
    for row in rows:
        text = row[5]
        if facts_in(text, None, FIRST_PERSON, loose=not row[4]) or (
            row[4] and facts_in(text, None, SECOND_PERSON)
        ):
            kept.append(row)
            if len(kept) >= MAX_EARLIER_LINES:
                break
    kept.sort(key=lambda r: (r[2], r[0]))
    return tuple(kept)


def _contact_names(conn: sqlite3.Connection, ids: set[str]) -> dict[str, str]:
    wanted = sorted(ids)
    names: dict[str, str] = {}
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        sql = f"SELECT id, name FROM contact WHERE id IN ({','.join('?' * len(chunk))})"
        names.update(conn.execute(sql, chunk).fetchall())
    return names


def _group_pages(session: Session, loaded: Loaded, request: DistillRequest) -> list[Distilled]:
    """Person pages for the people of a group conversation who have none from
    a one-to-one thread: every contact who writes gets a page. Built by the
    offline distiller from each person's own lines in the group (a model's
    summary of a group is about the group, not about one member), and marked
    with the group as its source, so that a page from a one-to-one thread,
    which carries none, always takes precedence and is never written over."""
    if loaded.source.kind is not SourceKind.CONVERSATION or loaded.one_to_one is not None:
        return []
    pages = []
    for contact_id in loaded.participants:
        stored = _stored_page(session, contact_id)
        if stored is not None and stored.source_ref is None:
            continue  # a page from a one-to-one thread
        name = loaded.names.get(contact_id)
        answer = person_in_group(request, name) if name else None
        if not name or answer is None:
            continue
        # The same validation a model's answer gets.
        fields = parse_result({"summary": "-", "facts": [], "tags": [], **answer})
        page = merge_page(
            _page_base(session, contact_id, stored),
            fields.person_facts,
            read=[fields.person] if fields.person else [],
            threads=[],
        )
        pages.append(_page_item(contact_id, name, page, (), loaded.source.key))
    return pages


def _about_you(session: Session, facts: Sequence[Fact]) -> Distilled | None:
    """The about_you note with ``facts`` merged in, read and written under the
    same write lock. None when nothing can be merged: the note is the user's
    (their edit wins), or its body is parked on the Homebase."""
    row = _stored(session, NoteKind.ABOUT_YOU, ABOUT_YOU_KEY)
    if row is not None and row.body is None and not row.user_edited:
        log.info("about_you is offloaded; facts from this source are not merged")
        return None
    # A note the user edited (or deleted) goes to the upsert all the same: it
    # reports the note kept and writes nothing.
    merged, _ = merge_facts(row.body if row is not None else None, facts)
    # Tagged with what it covers, so that "where do I work" finds the note by
    # its label and not only by a word of its body.
    tags = tuple(dict.fromkeys(_ABOUT_TAGS.get(f.kind, f.kind.value) for f in merged))
    return Distilled(
        NoteKind.ABOUT_YOU,
        ABOUT_YOU_KEY,
        ABOUT_YOU_TITLE,
        render_about_you(merged),
        tags=tags[:MAX_PAGE_TAGS],
    )


_ABOUT_TAGS = {
    FactKind.WISH: "wishes",
    FactKind.BIRTHDAY: "birthday",
    FactKind.PET: "pets",
    FactKind.ALLERGY: "allergies",
    FactKind.LIKES: "likes",
    FactKind.FAMILY: "family",
    FactKind.OTHER: "about",
}


# -- settings and routers --------------------------------------------------------------


def llm_settings(config_path: Path, flags: dict[str, Any] | None = None) -> LLMSettings:
    """The [llm] settings in force, validated; the API key from the environment."""
    return LLMSettings.from_values(config.llm(config_path, flags), config.llm_api_key())


def router_for(settings: LLMSettings, *, offline_only: bool = False) -> LLMRouter:
    """The configured endpoint (if any), then the built-in distiller."""
    backends: list[Backend] = []
    if settings.url is not None and settings.model is not None and not offline_only:
        backends.append(
            ChatCompletionsBackend(
                settings.url, settings.model, timeout=settings.timeout, api_key=settings.api_key
            )
        )
    backends.append(OfflineDistiller())
    return LLMRouter(tuple(backends))


__all__ = [
    "AgentSaid",
    "DistillMark",
    "NotetakingService",
    "PassReport",
    "Source",
    "build_request",
    "llm_settings",
    "router_for",
]
