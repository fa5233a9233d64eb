"""The contract every distillation backend works to.

A request is one source of the memory log (a conversation, a mail thread, a
post, a call, a journal entry, or a calendar entry or series), its lines
already cut to a small model's budget by `make_request`; a result is a
validated answer, within the bounds below; a `Backend` turns the one into
the decoded, not yet validated, other, or raises `BackendFailure` saying why
it could not. Nothing here reads anything: what a request carries is decided
by the caller, from one source alone.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pixie.device.errors import DeviceError

# What one source may put in front of a model. A small on-device model has a
# window of about 4k tokens: the instructions take ~450, the answer up to
# MAX_ANSWER_TOKENS, and the transcript gets what is left (about four
# characters a token). Lines are cut one by one, then the oldest are dropped.
# The answer has room for a person page (a dozen dated facts, open threads)
# besides the summary, hence 1000 rather than the 800 a summary alone needs.
MAX_LINES = 40
MAX_LINE_CHARS = 600
MAX_TRANSCRIPT_CHARS = 8_000
MAX_ANSWER_TOKENS = 1_000

# Bounds on an answer. A result that breaks one is refused whole.
MAX_SUMMARY_CHARS = 1_500
MAX_PERSON_CHARS = 1_500
MAX_FACTS = 10
MAX_FACT_CHARS = 200
MAX_RESULT_TAGS = 8
# A person page is a handful of dated facts and open threads, not a transcript:
# a dozen facts cover work, home, family, birthday, pets and a plan or two.
MAX_PERSON_FACTS = 12
# Facts a source states about other people it names (not the user, not the
# person of the request): "She kept talking about that teapot" after "Saw
# Maria at the market" goes to Maria's page, at most this many a source.
MAX_OTHERS = 6
MAX_NAME_CHARS = 80
MAX_OPEN_THREADS = 5
MAX_APPOINTMENTS = 4
MAX_WITH = 8  # people named on one appointment

# Older lines of a source, outside its newest MAX_LINES, that state a durable
# fact ("I work at ...", "my son Leo"): a fact said once, months ago, is still
# true, and the newest forty messages may not repeat it. They share the
# transcript budget (at most a quarter of it).
MAX_EARLIER_LINES = 12
MAX_DETAILS = 7  # the person's contact card: org, title, birthday, phone, email, address, note
# A repeating calendar entry is one request: its lines are the first
# occurrence and the ones that differ from it, and ``occurrences`` holds when
# every occurrence starts (at most this many, the newest kept), so the answer
# can say how often, since when, until when, what is next and which were
# skipped.
MAX_OCCURRENCES = 1_000


class SourceKind(enum.StrEnum):
    """What a request distils: a conversation thread, a mail thread, a post, a
    call (a call transcript or a voicemail), a journal entry, or a calendar
    entry (one event, or every occurrence of a repeating one)."""

    CONVERSATION = "conversation"
    POST = "post"
    CALL = "call"
    JOURNAL = "journal"
    CALENDAR = "calendar"
    MAIL = "mail"


class FactKind(enum.StrEnum):
    """What a durable fact is about. The first four hold one value at a time:
    a newer fact of the kind supersedes the older ("works at Helix Bio" after
    "looking for a new job"); the others accumulate."""

    WORK = "work"
    ROLE = "role"
    HOME = "home"
    BIRTHDAY = "birthday"
    FAMILY = "family"
    PET = "pet"
    PLAN = "plan"
    ALLERGY = "allergy"
    DIET = "diet"
    LIKES = "likes"
    DISLIKES = "dislikes"
    HOBBY = "hobby"
    HEALTH = "health"
    PHONE = "phone"
    EMAIL = "email"
    NOTE = "note"
    # Something they said they would love, or keep hinting at: a gift idea
    # ("keeps sending me links to that Stagg kettle", "I'd love to learn the
    # wheel one day").
    WISH = "wish"
    OTHER = "other"


SINGLE_VALUED = frozenset(
    {
        FactKind.WORK,
        FactKind.ROLE,
        FactKind.HOME,
        FactKind.BIRTHDAY,
        FactKind.PHONE,
        FactKind.EMAIL,
    }
)


@dataclass(frozen=True, slots=True)
class Fact:
    """A durable fact: its kind, a short phrase ("works at Helix Bio"), and
    when the source said it (microseconds UTC; None when it carries no date,
    as a contact card's details)."""

    kind: FactKind
    text: str
    at: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "text": self.text, "date": _iso_day(self.at)}


@dataclass(frozen=True, slots=True)
class Appointment:
    """One calendar entry as understood: what, which day (YYYY-MM-DD), the
    start time (HH:MM) if it has one, where, and with whom."""

    what: str
    day: str
    time: str | None = None
    place: str | None = None
    with_: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "date": self.day,
            "time": self.time,
            "place": self.place,
            "with": list(self.with_),
        }


def _iso_day(at: int | None) -> str | None:
    if at is None:
        return None
    return dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).date().isoformat()


@dataclass(frozen=True, slots=True)
class Line:
    """One event of the source, as a model is shown it."""

    at: int  # microseconds UTC
    speaker: str  # a display name, or ME for the user
    from_me: bool
    text: str
    kind: str = "message"  # the event kind: message, post, call or voicemail


ME = "Me"


@dataclass(frozen=True, slots=True)
class DistillRequest:
    """One source, cut to a model's budget. Build it with `make_request`."""

    kind: SourceKind
    title: str  # what the source is: "Conversation with Ada Lovelace"
    person: str | None  # whose person summary is wanted, if anyone's
    participants: tuple[str, ...]  # everyone in it but the user, by display name
    lines: tuple[Line, ...]  # oldest first
    # Older lines of the same source that state a fact, oldest first (see
    # MAX_EARLIER_LINES), and what the person's contact card says, as
    # (field, value) pairs: org, title, birthday, note.
    earlier: tuple[Line, ...] = ()
    details: tuple[tuple[str, str], ...] = ()
    # For a repeating calendar entry: every occurrence's start (microseconds
    # UTC, ascending, the newest MAX_OCCURRENCES); empty for anything else.
    occurrences: tuple[int, ...] = ()
    # For a repeating calendar entry: when the pass runs (microseconds UTC),
    # so the answer can say which occurrence is next; 0 for anything else.
    now: int = 0


@dataclass(frozen=True, slots=True)
class DistillResult:
    """A validated answer: what may go on to the Notebook."""

    summary: str
    person: str | None  # the read on the relationship, for the person page
    facts: tuple[Fact, ...]  # about the user
    tags: tuple[str, ...]
    person_facts: tuple[Fact, ...] = ()  # about the person of the request
    open_threads: tuple[str, ...] = ()  # with that person: questions, promises
    appointments: tuple[Appointment, ...] = ()
    others: tuple[tuple[str, Fact], ...] = ()  # (whom it is about, as named; the fact)

    def as_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "person": self.person,
            "facts": [f.as_json() for f in self.facts],
            "tags": list(self.tags),
            "person_facts": [f.as_json() for f in self.person_facts],
            "open_threads": list(self.open_threads),
            "appointments": [a.as_json() for a in self.appointments],
            "others": [{"name": name, **fact.as_json()} for name, fact in self.others],
        }


def make_request(
    kind: SourceKind,
    title: str,
    person: str | None,
    participants: Sequence[str],
    lines: Sequence[Line],
    earlier: Sequence[Line] = (),
    details: Sequence[tuple[str, str]] = (),
    occurrences: Sequence[int] = (),
    now: int = 0,
) -> DistillRequest:
    """A request holding the newest ``lines`` (given oldest first) that fit:
    at most MAX_LINES, a message at most MAX_LINE_CHARS, MAX_TRANSCRIPT_CHARS
    in all. A post keeps its own text (the first line) ahead of its replies.
    ``earlier`` lines (older fact-stating lines) keep their newest
    MAX_EARLIER_LINES within a quarter of the budget."""
    pinned: list[Line] = []
    budget = MAX_TRANSCRIPT_CHARS
    kept_earlier: list[Line] = []
    spare = MAX_TRANSCRIPT_CHARS // 4
    for line in reversed(earlier[-MAX_EARLIER_LINES:]):
        cut = _cut(line, MAX_LINE_CHARS)
        if len(cut.text) > spare:
            break
        spare -= len(cut.text)
        budget -= len(cut.text)
        kept_earlier.append(cut)
    kept_earlier.reverse()
    card = tuple((f, _clip(" ".join(v.split()), MAX_FACT_CHARS)) for f, v in details)
    if kind is SourceKind.POST and len(lines) > 1:
        root = lines[0]
        pinned.append(_cut(root, MAX_TRANSCRIPT_CHARS // 2))
        budget -= len(pinned[0].text)
        lines = lines[1:]
    kept: list[Line] = []
    for line in reversed(lines[-(MAX_LINES - len(pinned)) :]):
        cut = _cut(line, MAX_LINE_CHARS if line.kind == "message" else budget)
        if kept and len(cut.text) > budget:
            break
        cut = _cut(cut, budget)
        budget -= len(cut.text)
        kept.append(cut)
        if budget <= 0:
            break
    kept.reverse()
    return DistillRequest(
        kind,
        title,
        person,
        tuple(participants),
        tuple(pinned + kept),
        tuple(kept_earlier),
        card[:MAX_DETAILS],
        tuple(sorted(occurrences)[-MAX_OCCURRENCES:]),
        now if occurrences else 0,
    )


def _cut(line: Line, limit: int) -> Line:
    text = line.text.strip()
    if len(text) <= limit:
        return (
            line
            if text == line.text
            else Line(line.at, line.speaker, line.from_me, text, line.kind)
        )
    return Line(line.at, line.speaker, line.from_me, _clip(text, limit), line.kind)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def fact_key(fact: str) -> str:
    """What two facts are compared by: case, spacing and end punctuation aside."""
    return " ".join(fact.casefold().split()).rstrip(".!;:, ")


class Failure(enum.StrEnum):
    """Why a backend's answer was not used."""

    UNREACHABLE = "unreachable"
    STATUS = "http error"
    LATE = "late"
    TRUNCATED = "truncated"
    OVERSIZED = "oversized"
    MALFORMED = "malformed"
    SCHEMA = "schema violation"
    BROKEN = "internal error"  # the built-in distiller failed on this source


class BackendFailure(Exception):
    """A backend gave no usable answer. ``detail`` holds no content."""

    def __init__(
        self, reason: Failure, detail: str, *, retry: bool = False, permanent: bool = False
    ) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retry = retry  # worth another attempt (a refused connection, a 503)
        self.permanent = permanent  # will not change this pass (a 401, a wrong model)


class NoBackendAnswered(DeviceError):
    """Every backend failed on one source."""


class Backend(Protocol):
    """A model: given a request, the decoded JSON answer, not yet validated."""

    @property
    def name(self) -> str: ...

    async def answer(self, request: DistillRequest) -> object: ...

    async def aclose(self) -> None: ...


__all__ = [
    "MAX_ANSWER_TOKENS",
    "MAX_APPOINTMENTS",
    "MAX_DETAILS",
    "MAX_EARLIER_LINES",
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_NAME_CHARS",
    "MAX_OCCURRENCES",
    "MAX_OPEN_THREADS",
    "MAX_OTHERS",
    "MAX_PERSON_CHARS",
    "MAX_PERSON_FACTS",
    "MAX_RESULT_TAGS",
    "MAX_SUMMARY_CHARS",
    "MAX_TRANSCRIPT_CHARS",
    "MAX_WITH",
    "ME",
    "SINGLE_VALUED",
    "Appointment",
    "Backend",
    "BackendFailure",
    "DistillRequest",
    "DistillResult",
    "Fact",
    "FactKind",
    "Failure",
    "Line",
    "NoBackendAnswered",
    "SourceKind",
    "fact_key",
    "make_request",
]
