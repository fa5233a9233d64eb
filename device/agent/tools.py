"""The model-facing tools and the guards every call passes through.

`CheckNotebookTool` (check_notebook) reads the clear zone through a
`ClearNotebook`, which holds no key; `GrepMemoryTool` (grep_memory) reads the
log's text mirror. Neither this module nor anything it imports can open a
sealed note (an import contract checks it).

Small models loop: they repeat a call word for word, or re-ask with cosmetic
changes. Prompting alone did not stop that, so `TurnGuards` does: a per-turn
duplicate-call check that refuses an identical repeat, and a per-tool call
budget that ends the turn when spent. Inside an L3 tool-agent the guards are
off (`ToolBox(..., guards=None)`), because the L2 loop above owns them. Every
call fires the UI hook, which is how the chat shows "Checked your notebook".

`CheckNotebookTool.lookup` returns the notes behind the text, so the chat loop
can tell a miss from a hit without reading the words, and `ToolReply.missed`
carries that out of the `ToolBox`. `key_words`, `fallback_pattern` and
`fallback_query` are what the loop asks grep_memory after a miss; the memory
benchmark imports them so that it measures exactly that policy.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from pixie.device.agent.grep import MAX_QUERY_CHARS, GrepMemoryTool
from pixie.device.agent.limits import MAX_DAYS_BACK
from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.clearview import ClearNotebook, ScoredNote, search_terms
from pixie.device.notebook.terms import MAX_QUERY_TERMS, STOPWORDS, fold, query_terms, stems
from pixie.device.store.contacts import (
    DETAIL_NAMES,
    ContactInfo,
    ContactReader,
    clean_name,
    name_key,
    name_tag,
)
from pixie.device.store.notes import LABELS, MAX_TAG_CHARS, NoteKind
from pixie.protocol.timestamps import format_date, now_us

BODY_CHARS_SHOWN = 600
ALIASES_SHOWN = 8
MAX_PERSON_CHARS = 200
ALIAS_POOL = 32  # notes tagged with a name that are looked at for its person page
DEFAULT_BUDGETS: Mapping[str, int] = {"check_notebook": 4, "grep_memory": 3}
# Where the guards live when the tools are served to another agent's loop (MCP):
# "session", ours, per connection, a turn ending after a quiet gap; or "client",
# off here, because the client's own loop owns them.
GuardMode = Literal["session", "client"]
GUARD_MODES: tuple[GuardMode, ...] = ("session", "client")
DEFAULT_TURN_GAP = 60.0  # seconds without a call after which a session's turn is over
MAX_TURN_GAP = 86_400.0


class Tool(Protocol):
    """What a model-facing tool offers. Read-only members, so a tool may keep
    them as class variables (its schema is the same for every instance)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> dict[str, Any]: ...
    @property
    def pill(self) -> str: ...
    @property
    def repeat_refusal(self) -> str: ...

    def call(self, arguments: Mapping[str, Any]) -> str: ...


def _check_arguments(arguments: Mapping[str, Any], allowed: set[str]) -> None:
    if not isinstance(arguments, Mapping):
        raise BadInput("arguments must be a JSON object")
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise BadInput(f"unknown argument {unknown[0]!r:.40}")


def _optional_str(arguments: Mapping[str, Any], key: str, limit: int) -> str | None:
    value = arguments.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise BadInput(f"{key} must be a string")
    if len(value) > limit:
        raise BadInput(f"{key} is longer than {limit} characters")
    return value.strip()


@dataclass(frozen=True, slots=True)
class NotebookAnswer:
    """What check_notebook hands the model, and the notes it lists (none on a
    miss: the text then says plainly that nothing matched)."""

    text: str
    notes: tuple[ScoredNote, ...]
    query: str = ""  # the words looked for

    @property
    def missed(self) -> bool:
        """Nothing matched: no note, or none that holds a word of the query
        (only notes near it in meaning); the chat loop then searches the log
        as well."""
        if search_terms(self.query):
            return not any(s.score > 0 for s in self.notes)
        return not self.notes


class CheckNotebookTool:
    """``check_notebook``: the distilled notes, filtered by person, topic and date."""

    name = "check_notebook"
    pill = "Checked your notebook"
    repeat_refusal = (
        "You already checked the Notebook for that in this turn. Use what it returned, "
        "or answer without it."
    )
    description = (
        "Look up the user's Notebook: distilled notes about people, the user, their standing "
        "instructions, conversation/post/call digests and moments they pinned. Filter by person, "
        "topic and how many days back; an empty query lists everything that passes the filters. "
        "Check here before grep_memory."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "words to look for (title counts most, then tags, then body)",
                "maxLength": MAX_QUERY_CHARS,
            },
            "person": {
                "type": "string",
                "description": "a contact's name or alias",
                "maxLength": MAX_PERSON_CHARS,
            },
            "topic": {
                "type": "string",
                "description": "a topic tag such as travel or health",
                "maxLength": MAX_TAG_CHARS,
            },
            "days_back": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_DAYS_BACK,
                "description": "only notes about the last N days",
            },
            "days_ahead": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_DAYS_BACK,
                "description": "only notes about the next N days (appointments, plans)",
            },
        },
        "additionalProperties": False,
    }

    def __init__(
        self,
        notebook: ClearNotebook,
        contacts: ContactReader,
        now: Callable[[], int] = now_us,
    ) -> None:
        self._notebook = notebook
        self._contacts = contacts
        self._now = now

    def call(self, arguments: Mapping[str, Any]) -> str:
        return self.lookup(arguments).text

    def lookup(self, arguments: Mapping[str, Any]) -> NotebookAnswer:
        """What `call` returns, with the notes behind it."""
        _check_arguments(arguments, {"query", "person", "topic", "days_back", "days_ahead"})
        query = _optional_str(arguments, "query", MAX_QUERY_CHARS) or ""
        person = _optional_str(arguments, "person", MAX_PERSON_CHARS)
        topic = _optional_str(arguments, "topic", MAX_TAG_CHARS)
        days = _optional_days(arguments, "days_back")
        ahead = _optional_days(arguments, "days_ahead")
        return self.answer(query, person, topic, days, ahead)

    def search(
        self, query: str, person: str | None, topic: str | None, days_back: int | None
    ) -> str:
        return self.answer(query, person, topic, days_back).text

    def answer(
        self,
        query: str,
        person: str | None,
        topic: str | None,
        days_back: int | None,
        days_ahead: int | None = None,
    ) -> NotebookAnswer:
        contact_id = None
        if person is not None:
            contact_id = self._resolve(person)
            if contact_id is None:
                return NotebookAnswer(f'No notes are filed under that person ("{person}").', ())
        now = self._now()
        since = now - days_back * DAY_US if days_back else None
        until = None
        if days_ahead:
            # An appointment's date is its day and time on the calendar's
            # wall clock; the days ahead start at the start of today on this
            # machine's (so later today is ahead), unless the days back
            # start earlier.
            today = _local_day_start(now)
            since = since if since is not None else today
            until = today + (days_ahead + 1) * DAY_US
        results = self._notebook.search_clear(query, contact_id, topic, since, until)
        answer = render_results(results, query, person, topic, days_back, days_ahead)
        if contact_id is None:
            return NotebookAnswer(answer, tuple(results), query)
        # What the address book says about the person follows the notes:
        # the first line stays the count of what matched (or says that
        # nothing did).
        card = render_contact_card(self._contacts.info(contact_id))
        text = "\n".join([answer, *card]) if card else answer
        return NotebookAnswer(text, tuple(results), query)

    def _resolve(self, person: str) -> str | None:
        """The contact a person argument names: by the contact book (names,
        aliases, a unique first name or a unique name without its title), or
        else by the one person page tagged with that name (a name the log
        itself gives them, see `distill.agentsaid.alias_tags`)."""
        try:
            return self._contacts.resolve(clean_name(person, "person"))
        except NotFound:  # an unknown name is an answer, not an error
            pass
        tag = name_tag(person)[:MAX_TAG_CHARS]
        if not tag:
            return None
        pages = {
            s.note.contact_id
            for s in self._notebook.search_clear("", None, tag, None, limit=ALIAS_POOL)
            if s.note.kind is NoteKind.PERSON and s.note.contact_id is not None
        }
        return pages.pop() if len(pages) == 1 else None


def _optional_days(arguments: Mapping[str, Any], key: str) -> int | None:
    days = arguments.get(key)
    if days is not None and (
        isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS_BACK
    ):
        raise BadInput(f"{key} must be a whole number from 1 to {MAX_DAYS_BACK}")
    return days


DAY_US = 86_400_000_000


def _local_day_start(now: int) -> int:
    """The start of ``now``'s day on this machine's wall clock, as the wall
    clock written in UTC (the way appointment dates are kept)."""
    offset = dt.datetime.fromtimestamp(now / 1_000_000).astimezone().utcoffset()
    wall = now + int(offset.total_seconds() * 1_000_000 if offset else 0)
    return wall - wall % DAY_US


def describe_filters(
    query: str, person: str | None, topic: str | None, days: int | None, ahead: int | None = None
) -> str:
    """The filters of a search in words: 'about Priya tagged work from the last 3 days'."""
    parts = []
    if person:
        parts.append(f"about {person}")
    if topic:
        parts.append(f"tagged {topic}")
    if days:
        parts.append("from the last day" if days == 1 else f"from the last {days} days")
    if ahead:
        parts.append("in the next day" if ahead == 1 else f"in the next {ahead} days")
    return " ".join(parts)


def label(kind: NoteKind, title: str) -> str:
    if kind is NoteKind.ABOUT_YOU:
        return LABELS[kind]
    return f"{LABELS[kind]} · {title}"


def render_contact_card(info: ContactInfo) -> list[str]:
    """A contact's details and the other names and addresses they go by, as
    lines that follow a person's notes; none if the book knows nothing more
    than the name."""
    own = name_key(info.name)
    others = [a for a in info.aliases if name_key(a) != own]
    facts = [
        f"{DETAIL_NAMES[field]}: {value}"
        for field, value in info.details.as_dict().items()
        if value is not None and field != "note"
    ]
    if others:
        shown = ", ".join(others[:ALIASES_SHOWN])
        more = len(others) - ALIASES_SHOWN
        facts.append(f"also: {shown}" + (f" and {more} more" if more > 0 else ""))
    note = info.details.note
    if not facts and note is None:
        return []
    lines = [f"Contact card · {info.name}" + (f" ({'; '.join(facts)})" if facts else "")]
    if note is not None:
        text = " ".join(note.split())
        if len(text) > BODY_CHARS_SHOWN:
            text = text[: BODY_CHARS_SHOWN - 1] + "…"
        lines.append(f"   Note: {text}")
    return lines


def render_results(
    results: list[ScoredNote],
    query: str,
    person: str | None,
    topic: str | None,
    days: int | None,
    ahead: int | None = None,
) -> str:
    filters = describe_filters(query, person, topic, days, ahead)
    words = f'"{query.strip()}"' if query.strip() else ""
    if not results:
        if words:
            return " ".join(["No notes in the Notebook match", words, filters]).rstrip() + "."
        if filters:
            return f"No notes in the Notebook {filters}."
        return "The Notebook has no notes yet."
    near = sum(1 for s in results if s.by_meaning)
    matched = len(results) - near
    if words and not near and not any(s.score for s in results):
        words = ""  # a query with no terms: the filters alone answered
    head = f"{matched} note{'s' if matched != 1 else ''}"
    if words:
        head += f" matching {words}"
    if near:
        # Places no term match took, filled by notes near the query's meaning.
        nearby = f"{near} note{'s' if near != 1 else ''} near it in meaning"
        head = f"{head} and {nearby}" if matched else f"No notes match {words}; {nearby}"
    lines = [" ".join([head, filters]).rstrip() + ":"]
    for i, item in enumerate(results, start=1):
        note = item.note
        meta = [format_date(note.effective_date)]
        if note.tags:
            meta.append("tags: " + ", ".join(note.tags))
        if item.by_meaning:
            meta.append("by meaning")
        lines.append(f"{i}. {label(note.kind, note.title)} ({'; '.join(meta)})")
        if note.body is None:
            lines.append("   Offloaded — opens from your Homebase.")
        else:
            lines.append(f"   {shown_body(note.body, query)}")
    return "\n".join(lines)


_SEGMENT = re.compile(r"\n+|(?<=[.!?…”])\s+(?=[-–•“\"A-Z0-9])")


def shown_body(body: str, query: str = "") -> str:
    """A note's body as the model is shown it, within BODY_CHARS_SHOWN: whole
    when it fits; else its lines (or sentences) past the first that hold the
    query's words, most words first, within half the room, and as much of
    its opening as the rest of the room holds, all in the order written,
    "…" where text was left out. A long digest's answer can sit far from its
    start, and the model sees nothing past the limit; a line the opening
    shows anyway takes none of the half (see `_chosen`)."""
    flat = " ".join(body.split())
    if len(flat) <= BODY_CHARS_SHOWN:
        return flat
    cut = flat[: BODY_CHARS_SHOWN - 1] + "…"
    terms = set(query_terms(query)) if query.strip() else set()
    if not terms:
        return cut
    parts = [p for p in (" ".join(x.split()) for x in _SEGMENT.split(body)) if p]
    holding = [(len(terms & stems(parts[i])), i) for i in range(1, len(parts))]
    wanted = [i for _, i in sorted((t for t in holding if t[0]), key=lambda t: (-t[0], t[1]))]
    shown = _chosen(parts, wanted)
    if shown is None:
        return cut
    pieces: list[str] = []
    last = -1
    for i in sorted(shown):
        if i != last + 1:
            pieces.append("…")  # text left out
        pieces.append(parts[i])
        last = i
    if last != len(parts) - 1:
        pieces.append("…")
    out = " ".join(pieces)
    return out[: BODY_CHARS_SHOWN - 1] + "…" if len(out) > BODY_CHARS_SHOWN else out


def _chosen(parts: list[str], wanted: list[int]) -> set[int] | None:
    """Which parts `shown_body` shows: the ``wanted`` ones (best first) that
    fit in half the room, and the opening around them; None when no wanted
    part fits. A wanted part that the opening reaches anyway is shown as part
    of it and gives its room back to the next wanted part, so a line inside
    the opening never pushes a later one out; repeated until nothing moves."""
    free: set[int] = set()  # wanted parts the opening shows anyway
    while True:
        extra: set[int] = set()
        room = BODY_CHARS_SHOWN // 2
        for i in wanted:
            if i not in free and len(parts[i]) + 3 <= room:
                extra.add(i)
                room -= len(parts[i]) + 3
        if not extra and not free:
            return None
        budget = BODY_CHARS_SHOWN - 2 - sum(len(parts[i]) + 3 for i in extra)
        budget -= sum(len(parts[i]) + 1 for i in free)
        shown = extra | free
        used = 0
        for i, part in enumerate(parts):
            if i in shown:
                continue
            if used + len(part) + 1 > budget:
                break
            shown.add(i)
            used += len(part) + 1
        reach = 0  # the opening: every part up to here is shown
        while reach in shown:
            reach += 1
        inside = {i for i in extra if i < reach}
        if not inside:
            return shown
        free |= inside


# -- when the Notebook misses ---------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def key_words(text: str) -> list[str]:
    """The words of a question that carry its subject: lowercased, each once,
    the Notebook's stopwords dropped (unless nothing else is left), at most
    `MAX_QUERY_TERMS`. Accents are kept, because grep matches text as written."""
    found = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in found if fold(w) not in STOPWORDS]
    return (kept or found)[:MAX_QUERY_TERMS]


def fallback_pattern(words: list[str]) -> str:
    """One grep_memory pattern that matches any of ``words`` at the start of a
    word. Each word is escaped, so it matches only itself. RE2's ``\\b`` knows
    only ASCII word characters, so a word that starts with any other letter
    goes without it (it would never match there)."""
    alternatives = [(r"\b" if w[0].isascii() else "") + re.escape(w) for w in words if w]
    return "(?:" + "|".join(alternatives) + ")"


def together_pattern(words: list[str]) -> str:
    """One grep_memory pattern that matches a memory holding at least two of
    ``words`` (each at the start of a word, in either order): the first
    `TOGETHER_WORDS` of them, as pairs. RE2 never lets a match span two
    memories, so both words are in the same one."""
    alternatives = [
        f"{_start(a)}.*{_start(b)}"
        for i, a in enumerate(words[:TOGETHER_WORDS])
        for j, b in enumerate(words[:TOGETHER_WORDS])
        if i != j and a and b
    ]
    return "(?:" + "|".join(alternatives) + ")"


TOGETHER_WORDS = 4  # pairs of at most this many key words: 12 alternatives


def _start(word: str) -> str:
    return (r"\b" if word[0].isascii() else "") + re.escape(word)


def fallback_query(notebook_query: str, question: str) -> str | None:
    """What grep_memory is asked when check_notebook found no note: the key
    words of the Notebook query, or when it had none (a person or topic
    alone), those of the user's question; None if neither has a word. With
    two key words or more, only memories where at least two of them meet
    (grep lists the newest matches, and a single common word such as "call"
    or "lunch" would fill the list with the last few days); with one, that
    word."""
    words = key_words(notebook_query) or key_words(question)
    together = words[:TOGETHER_WORDS]
    while len(together) > 2 and len(together_pattern(together)) > MAX_QUERY_CHARS:
        together = together[:-1]
    if len(together) >= 2 and len(together_pattern(together)) <= MAX_QUERY_CHARS:
        return together_pattern(together)
    # grep_memory refuses a longer query: the last words give way.
    while words and len(fallback_pattern(words)) > MAX_QUERY_CHARS:
        words = words[:-1]
    return fallback_pattern(words) if words else None


class GrepMemory:
    """``grep_memory`` in the common tool shape."""

    name = GrepMemoryTool.name
    pill = "Searched your memory"
    repeat_refusal = (
        "You already searched your memory for that in this turn. Use what it returned, "
        "or answer without it."
    )
    description = GrepMemoryTool.description
    parameters = GrepMemoryTool.parameters

    def __init__(self, grep: GrepMemoryTool) -> None:
        self._grep = grep

    def call(self, arguments: Mapping[str, Any]) -> str:
        _check_arguments(arguments, {"query"})
        if "query" not in arguments:
            raise BadInput("query is required")
        return self._grep.run(arguments["query"]).render()


# -- guards ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """What the UI hook sees for each call: which tool, its pill, what happened."""

    tool: str
    pill: str
    arguments: Mapping[str, Any]
    outcome: str  # "ran", "refused_repeat", "budget_spent", "bad_arguments"


@dataclass(frozen=True, slots=True)
class ToolReply:
    text: str  # what goes back to the model
    stop_turn: bool = False  # the budget is spent: the loop must end the turn now
    missed: bool = False  # check_notebook ran and found no note
    nearby: bool = False  # ... but listed notes near the query in meaning


def _normalise(value: Any) -> Any:
    """Arguments as the tool understands them: case and spacing folded, and
    empty values dropped (after folding, so "   " counts as empty too)."""
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    if isinstance(value, Mapping):
        folded = {k: _normalise(v) for k, v in value.items()}
        return {k: v for k, v in folded.items() if v not in (None, "")}
    return value


class TurnGuards:
    """Per-turn duplicate check and per-tool budgets, owned by the L2 loop."""

    def __init__(self, budgets: Mapping[str, int] = DEFAULT_BUDGETS) -> None:
        self.budgets = dict(budgets)
        self._seen: set[str] = set()
        self._used: dict[str, int] = {}

    def new_turn(self) -> None:
        self._seen.clear()
        self._used.clear()

    def would_admit(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether `admit` would let this call run (nothing is counted)."""
        if self._used.get(tool, 0) >= self.budgets.get(tool, 1):
            return False
        key = tool + json.dumps(_normalise(arguments), sort_keys=True, ensure_ascii=False)
        return key not in self._seen

    def admit(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """Return "ran" if the call may proceed, or why it may not."""
        used = self._used.get(tool, 0)
        if used >= self.budgets.get(tool, 1):
            return "budget_spent"
        key = tool + json.dumps(_normalise(arguments), sort_keys=True, ensure_ascii=False)
        if key in self._seen:
            return "refused_repeat"
        self._seen.add(key)
        self._used[tool] = used + 1
        return "ran"


class ToolBox:
    """Runs tool calls by name, through the guards (if on) and the UI hook."""

    def __init__(
        self,
        tools: list[Tool],
        *,
        guards: TurnGuards | None,
        on_call: Callable[[ToolEvent], None] | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.guards = guards
        self.on_call = on_call

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI-compatible function definitions."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in self.tools.values()
        ]

    def new_turn(self) -> None:
        if self.guards is not None:
            self.guards.new_turn()

    def call(self, name: str, arguments: Any) -> ToolReply:
        """Run one call; ``arguments`` is whatever the model sent (checked here)."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolReply(f"There is no tool named {name!r}.")
        if not isinstance(arguments, Mapping):
            if self.on_call is not None:
                self.on_call(ToolEvent(name, tool.pill, {}, "bad_arguments"))
            return ToolReply(f"{name}: arguments must be a JSON object")
        outcome = "ran" if self.guards is None else self.guards.admit(name, arguments)
        reply: ToolReply
        if outcome == "budget_spent":
            reply = ToolReply(
                f"The {name} budget for this turn is spent. Answer with what you have.",
                stop_turn=True,
            )
        elif outcome == "refused_repeat":
            reply = ToolReply(tool.repeat_refusal)
        else:
            try:
                if isinstance(tool, CheckNotebookTool):
                    found = tool.lookup(arguments)
                    reply = ToolReply(
                        found.text, missed=found.missed, nearby=found.missed and bool(found.notes)
                    )
                else:
                    reply = ToolReply(tool.call(arguments))
            except BadInput as exc:
                outcome = "bad_arguments"
                reply = ToolReply(f"{name}: {exc}")
        if self.on_call is not None:
            self.on_call(ToolEvent(name, tool.pill, dict(arguments), outcome))
        return reply
