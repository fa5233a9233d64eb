"""GrepMemoryTool: the model's last-resort search over the raw memory log.

It really is grep: a pattern over text, no embeddings. Three limits carry the
weight here, each learned from a small model misbehaving:

* the query runs under RE2, whose matching time is linear in the text, so a
  model-written pattern such as ``(a+)+$`` cannot stall a turn; a query that is
  not a valid pattern (models love stray parentheses) is searched literally;
* at most `MAX_HITS` hits come back, newest first, each clipped to
  `SNIPPET_CHARS` characters, because a broad query over years of messages
  would otherwise flood a ~4k-token context;
* an empty memory answers with a sentence meant to stop the model from asking
  again with reworded queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pixie.device.errors import BadInput
from pixie.device.store.kinds import EventKind
from pixie.device.store.mirrorfiles import Matcher, MirrorHit
from pixie.protocol.timestamps import format_date, format_time

MAX_HITS = 12
SNIPPET_CHARS = 300
MAX_QUERY_CHARS = 512
EMPTY_MEMORY = "You have no long-term memory to search yet. Do not call grep_memory again."
ELLIPSIS = "…"


class Searchable(Protocol):
    """What grep needs of a text mirror: the store's `MemoryTextMirror`, or the
    files of one found current, as a quick command maps them (`MappedMirror`)."""

    def is_empty(self) -> bool: ...

    def search(self, matcher: Matcher, limit: int) -> list[MirrorHit]: ...


@dataclass(frozen=True, slots=True)
class GrepHit:
    event_id: str
    kind: EventKind
    at: int
    contact: str | None
    snippet: str
    from_me: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "kind": self.kind.value,
            "at": format_time(self.at),
            "contact": self.contact,
            "from_me": self.from_me,
            "snippet": self.snippet,
        }

    def who(self) -> str:
        """Whose words these are, as the model reads them."""
        if self.from_me:
            return f" · you → {self.contact}" if self.contact else " · you"
        return f" · {self.contact}" if self.contact else ""


@dataclass(frozen=True, slots=True)
class GrepResult:
    hits: tuple[GrepHit, ...]
    message: str  # the headline the model reads first
    literal: bool = False  # the query was not a valid pattern and ran as plain text

    def render(self) -> str:
        """Exactly the text the model receives."""
        lines = [self.message]
        for hit in self.hits:
            lines.append(f"- {format_date(hit.at)} · {hit.kind.value}{hit.who()}: {hit.snippet}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"hits": [h.as_json() for h in self.hits], "message": self.message}


def _options(re2: Any) -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.never_nl = True  # a match never spans two events
    options.log_errors = False  # an invalid model pattern is expected, not news
    return options


def check_query(query: object) -> str:
    if not isinstance(query, str):
        raise BadInput("the query must be a string")
    if not query.strip():
        raise BadInput("the query is empty: give a keyword, name or phrase")
    if len(query) > MAX_QUERY_CHARS:
        raise BadInput(f"the query is longer than {MAX_QUERY_CHARS} characters")
    if any(ch in query for ch in "\n\r\x00"):
        raise BadInput("the query must be one line without NUL characters")
    return query


def compile_query(query: str) -> tuple[Any, bool]:
    """Compile as an RE2 pattern, or as a literal if it is not a valid one.

    Returns the matcher and whether it fell back to literal text. ``(?m)``
    makes ``^`` and ``$`` mean the start and end of one event's line.
    """
    query = check_query(query)
    # Here, not at the top: the agent's tools import this module, and
    # check_notebook (the quick `pixie notebook search`) never compiles one.
    import re2

    try:
        return re2.compile("(?m)" + query, _options(re2)), False
    except re2.error:
        return re2.compile(re2.escape(query), _options(re2)), True


def clip(body: str, start: int, end: int, limit: int = SNIPPET_CHARS) -> str:
    """At most ``limit`` characters of ``body`` around the match [start, end)."""
    if len(body) <= limit:
        return body
    room = limit - (end - start)
    lo = start if room <= 2 else max(0, start - room // 2)
    hi = min(len(body), lo + limit)
    lo = max(0, hi - limit)
    text = body[lo:hi]
    if lo > 0:
        text = ELLIPSIS + text[1:]
    if hi < len(body):
        text = text[:-1] + ELLIPSIS
    return text


def snippet_of(hit: MirrorHit) -> str:
    return clip(hit.body, hit.match_start, hit.match_end)


class GrepMemoryTool:
    """``grep_memory``: search the memory log with a keyword, name, phrase or pattern."""

    name = "grep_memory"
    description = (
        "Search the raw memory log (messages, calls, voicemails, posts, journal, calendar, "
        "pins) for a keyword, name or phrase; regular expressions allowed, case-insensitive. "
        f"Returns the {MAX_HITS} most recent matches. Use it as a last resort, after "
        "check_notebook."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "keyword, name, phrase or RE2 regular expression",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
            }
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, mirror: Searchable) -> None:
        self.mirror = mirror

    def run(self, query: str) -> GrepResult:
        matcher, literal = compile_query(query)
        if self.mirror.is_empty():
            return GrepResult((), EMPTY_MEMORY)
        found = self.mirror.search(matcher, MAX_HITS)
        hits = tuple(
            GrepHit(h.event_id, h.kind, h.at, h.contact, snippet_of(h), h.from_me) for h in found
        )
        shown = query if len(query) <= 80 else query[:79] + ELLIPSIS
        how = " (not a valid pattern, so searched as plain text)" if literal else ""
        if not hits:
            return GrepResult((), f'No memories match "{shown}"{how}.', literal)
        more = " (older matches may exist)" if len(hits) == MAX_HITS else ""
        if len(hits) == 1:
            message = f'1 memory matches "{shown}"{how}:'
        else:
            message = (
                f'{len(hits)} most recent memories matching "{shown}"{how}, newest first{more}:'
            )
        return GrepResult(hits, message, literal)
