"""The contract every distillation backend works to.

A request is one source of the memory log (a conversation, a post or a call),
its lines already cut to a small model's budget by `make_request`; a result is
a validated answer, within the bounds below; a `Backend` turns the one into
the decoded, not yet validated, other, or raises `BackendFailure` saying why
it could not. Nothing here reads anything: what a request carries is decided
by the caller, from one source alone.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pixie.device.errors import DeviceError

# What one source may put in front of a model. A small on-device model has a
# window of about 4k tokens: the instructions take ~350, the answer up to
# MAX_ANSWER_TOKENS, and the transcript gets what is left (about four
# characters a token). Lines are cut one by one, then the oldest are dropped.
MAX_LINES = 40
MAX_LINE_CHARS = 600
MAX_TRANSCRIPT_CHARS = 8_000
MAX_ANSWER_TOKENS = 800

# Bounds on an answer. A result that breaks one is refused whole.
MAX_SUMMARY_CHARS = 1_500
MAX_PERSON_CHARS = 1_500
MAX_FACTS = 10
MAX_FACT_CHARS = 200
MAX_RESULT_TAGS = 8


class SourceKind(enum.StrEnum):
    """What a request distils: a conversation thread, a post, or a call
    (a call transcript or a voicemail)."""

    CONVERSATION = "conversation"
    POST = "post"
    CALL = "call"


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


@dataclass(frozen=True, slots=True)
class DistillResult:
    """A validated answer: what may go on to the Notebook."""

    summary: str
    person: str | None
    facts: tuple[str, ...]
    tags: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "person": self.person,
            "facts": list(self.facts),
            "tags": list(self.tags),
        }


def make_request(
    kind: SourceKind,
    title: str,
    person: str | None,
    participants: Sequence[str],
    lines: Sequence[Line],
) -> DistillRequest:
    """A request holding the newest ``lines`` (given oldest first) that fit:
    at most MAX_LINES, a message at most MAX_LINE_CHARS, MAX_TRANSCRIPT_CHARS
    in all. A post keeps its own text (the first line) ahead of its replies."""
    pinned: list[Line] = []
    budget = MAX_TRANSCRIPT_CHARS
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
    return DistillRequest(kind, title, person, tuple(participants), tuple(pinned + kept))


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
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_PERSON_CHARS",
    "MAX_RESULT_TAGS",
    "MAX_SUMMARY_CHARS",
    "MAX_TRANSCRIPT_CHARS",
    "ME",
    "Backend",
    "BackendFailure",
    "DistillRequest",
    "DistillResult",
    "Failure",
    "Line",
    "NoBackendAnswered",
    "SourceKind",
    "fact_key",
    "make_request",
]
