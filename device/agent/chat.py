"""The chat turn: the L2 agent loop over check_notebook and grep_memory.

Memory is fetched, never injected. The system prompt is the persona and the
standing instructions and nothing else: not a note, not a line of the log. The
model is offered the two tools with their JSON-schema definitions and calls
them when it needs background; only what those calls return enters the
conversation, and only for this turn. That keeps a ~4k-token window for the
question and the reply, and it makes every look at memory an event the user
sees (a pill) and the loop can limit.

This loop owns the guards (`TurnGuards`): a per-turn duplicate check and a
per-tool budget. A spent budget ends the turn: the model is asked once more,
with no tools on offer, to answer from what it has. Being refused a repeat
twice ends it the same way, because a model that ignores the first refusal is
looping, and so does reaching `MAX_STEPS`. Tools that an L3 tool-agent calls
inside the turn go through `tool_agent_box`, with their own guards off: the
budget that matters is this loop's.

When check_notebook finds no note, the loop does not leave the model with a
bare "nothing": it runs grep_memory itself on the key words of that query (or
of the question, when the query had none), OR-ed into one escaped pattern, and
the log's hits follow the Notebook's miss in the same tool message (or come
first, when the Notebook listed notes only near the query in meaning:
evidence in the query's own words before guesses). It is a
real grep_memory call: it shows its pill, spends the grep budget and counts
for the duplicate check, and it is skipped when the guards would refuse it.

The turn is written to the memory log as agent_chat_user / agent_chat_agent
events, which grep_memory never returns (see `memlog.SEARCHABLE_KINDS`).

This module reaches the Notebook only through the tools; an import contract
checks that nothing here can open a sealed note.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from pixie.device.agent.chatmodel import ChatModel, ModelAnswer, ToolCall
from pixie.device.agent.tools import (
    DEFAULT_BUDGETS,
    CheckNotebookTool,
    GrepMemory,
    Tool,
    ToolBox,
    ToolEvent,
    TurnGuards,
    fallback_query,
    key_words,
)
from pixie.device.distill.contract import BackendFailure
from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.terms import STOPWORDS, fold
from pixie.device.store.contacts import ContactReader, clean_name
from pixie.device.store.memlog import EventKind, MemoryLog, NewEvent
from pixie.protocol.timestamps import now_us

log = logging.getLogger("pixie.chat")

MAX_QUESTION_CHARS = 2_000
MAX_STEPS = 8  # model requests with tools on offer, in one turn
MAX_REFUSALS = 2  # refused repeats in one turn before the loop ends it
MAX_PREVIEW_PEOPLE = 4

PERSONA = """\
You are Pixie, a warm and discreet personal assistant who helps the user look \
after the people in their life. Answer briefly and plainly.
You have no memory in this conversation until you fetch it. To learn about a \
person, the user, their standing instructions or recent conversations, call \
check_notebook first (filter by person, topic, days_back or days_ahead). Call grep_memory \
only when the Notebook does not have it, to search raw messages, calls and \
posts. Use only what these tools return; if they return nothing, say you do \
not know. Never make up details about people. Do not repeat a call you have \
already made in this turn."""

STOPPED_REPLY = "I could not finish looking that up."
# Between the Notebook's miss and what grep_memory found instead, in one tool
# message.
FALLBACK_NOTE = "\nNothing in the Notebook, so the raw memory log was searched instead:\n"


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """What one turn did: the answer, each tool call, and why it ended."""

    question: str
    answer: str
    calls: tuple[ToolEvent, ...]
    model_requests: int
    stopped: str | None = None  # "budget", "repeats" or "steps" when the loop ended it
    failure: str | None = None  # why the model gave no usable answer, if it did not
    logged: tuple[str, ...] = ()  # ids of the agent_chat_* events written

    @property
    def answered(self) -> bool:
        return self.failure is None

    def as_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "tools": [
                {"tool": e.tool, "pill": e.pill, "outcome": e.outcome, "arguments": e.arguments}
                for e in self.calls
            ],
            "model_requests": self.model_requests,
            "stopped": self.stopped,
            "failure": self.failure,
            "logged": list(self.logged),
        }


def check_question(question: object) -> str:
    if not isinstance(question, str) or not question.strip():
        raise BadInput("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise BadInput(f"the question is longer than {MAX_QUESTION_CHARS} characters")
    if "\x00" in question:
        raise BadInput("the question contains a NUL character")
    return question.strip()


def tool_agent_box(
    tools: Sequence[Tool], on_call: Callable[[ToolEvent], None] | None = None
) -> ToolBox:
    """Tools for an L3 tool-agent running inside a turn: the UI hook still
    fires, the guards are off (the L2 loop above owns them)."""
    return ToolBox(list(tools), guards=None, on_call=on_call)


@dataclass
class _Turn:
    question: str = ""
    events: list[ToolEvent] = field(default_factory=list)
    refusals: int = 0
    stopped: str | None = None


class ChatAgent:
    """The L2 loop: one `turn` per question, the guards reset at each."""

    def __init__(
        self,
        model: ChatModel,
        tools: Sequence[Tool],
        *,
        log: MemoryLog | None = None,
        budgets: Mapping[str, int] = DEFAULT_BUDGETS,
        on_call: Callable[[ToolEvent], None] | None = None,
        persona: str = PERSONA,
        max_steps: int = MAX_STEPS,
        now: Callable[[], int] = now_us,
    ) -> None:
        self.model = model
        self.tools = list(tools)
        self.box = ToolBox(self.tools, guards=TurnGuards(budgets), on_call=self._heard)
        self.on_call = on_call
        self.persona = persona
        self.max_steps = max_steps
        self._log = log
        self._now = now
        self._turn = _Turn()
        # SQLite blocks: tool calls and log writes go through one worker
        # thread at a time, never on the event loop's thread.
        self._lane = trio.CapacityLimiter(1)

    def _heard(self, event: ToolEvent) -> None:
        self._turn.events.append(event)
        if self.on_call is not None:
            self.on_call(event)

    def tool_agent(self) -> ToolBox:
        """The same tools for an L3 tool-agent inside this loop's turn."""
        return tool_agent_box(self.tools, self._heard)

    def messages_for(self, question: str) -> list[dict[str, Any]]:
        """The conversation a turn starts from: the persona and the question."""
        return [
            {"role": "system", "content": self.persona},
            {"role": "user", "content": question},
        ]

    async def turn(self, question: str) -> ChatTurn:
        question = check_question(question)
        asked_at = self._now()
        self.box.new_turn()
        self._turn = state = _Turn(question)
        messages = self.messages_for(question)
        schemas = self.box.schemas()
        requests = 0
        answer: str | None = None
        failure: str | None = None
        try:
            while answer is None:
                offer = schemas if state.stopped is None else []
                requests += 1
                reply = await self.model.complete(messages, offer)
                if not reply.calls or state.stopped is not None:
                    answer = reply.text or STOPPED_REPLY
                    break
                messages.append(_assistant(reply))
                for call in reply.calls:
                    messages.append(await self._run(call, state))
                if state.stopped is None and requests >= self.max_steps:
                    state.stopped = "steps"
        except BackendFailure as exc:
            failure = str(exc)
            log.warning("the chat model gave no usable answer (%s)", exc)
        if failure is not None:
            answer = f"The model gave no usable answer ({failure})."
        assert answer is not None
        logged = await self._record(question, asked_at, None if failure else answer)
        return ChatTurn(
            question,
            answer,
            tuple(state.events),
            requests,
            state.stopped,
            failure,
            logged,
        )

    async def _run(self, call: ToolCall, state: _Turn) -> dict[str, Any]:
        """Run one call through the guards; the tool message that answers it."""
        if state.stopped is not None:
            # Every call in an answer needs its reply, even after a stop.
            text = "Not run: this turn's tool calls are over. Answer with what you have."
        elif call.arguments is None:
            # The hook still fires (as bad arguments); the model is told what was wrong.
            self.box.call(call.name, None)
            text = f"{call.name}: {call.problem}"
        else:
            seen = len(state.events)
            reply = await trio.to_thread.run_sync(
                self.box.call, call.name, call.arguments, limiter=self._lane
            )
            text = reply.text
            outcome = state.events[-1].outcome if len(state.events) > seen else None
            if reply.missed:
                found = await self._fall_back(call, state)
                # What the log says in the query's own words comes before
                # notes that are only near it in meaning.
                text = found.lstrip("\n") + "\n" + text if found and reply.nearby else text + found
            if reply.stop_turn:
                state.stopped = "budget"
            elif outcome == "refused_repeat":
                state.refusals += 1
                if state.refusals >= MAX_REFUSALS:
                    state.stopped = "repeats"
                    text += " No more tool calls in this turn: answer with what you have."
        return {"role": "tool", "tool_call_id": call.id, "content": text}

    async def _fall_back(self, call: ToolCall, state: _Turn) -> str:
        """When check_notebook found no note, grep_memory for the key words,
        as its own call (pill, budget and duplicate check included); what it
        returns follows the Notebook's miss in the same tool message. Nothing
        is added when there is no grep_memory tool, no word to look for, or
        the guards would refuse the call."""
        grep = self.box.tools.get(GrepMemory.name)
        arguments = call.arguments or {}
        query = arguments.get("query")
        pattern = fallback_query(query if isinstance(query, str) else "", state.question)
        if grep is None or pattern is None:
            return ""
        wanted = {"query": pattern}
        guards = self.box.guards
        if guards is not None and not guards.would_admit(grep.name, wanted):
            return ""
        reply = await trio.to_thread.run_sync(self.box.call, grep.name, wanted, limiter=self._lane)
        return FALLBACK_NOTE + reply.text

    async def _record(self, question: str, asked_at: int, answer: str | None) -> tuple[str, ...]:
        if self._log is None:
            return ()
        events = [NewEvent(EventKind.AGENT_CHAT_USER, asked_at, question)]
        if answer is not None:
            events.append(NewEvent(EventKind.AGENT_CHAT_AGENT, max(self._now(), asked_at), answer))
        memlog = self._log
        result = await trio.to_thread.run_sync(
            lambda: memlog.append(events, now=self._now()), limiter=self._lane
        )
        return result.ids

    async def aclose(self) -> None:
        await self.model.aclose()


def _assistant(reply: ModelAnswer) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [call.wire() for call in reply.calls],
    }


# -- without a model ---------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)


def _words(text: str) -> list[str]:
    """Lowercased words, a possessive's "'s" dropped ("Ada's" is Ada)."""
    return [_POSSESSIVE.sub("", w.casefold()) for w in _WORD.findall(text)]


_POSSESSIVE = re.compile(r"['’]s$")


def _mentions(question: str, name: str) -> bool:
    wanted = _words(name)
    words = _words(question)
    n = len(wanted)
    return n > 0 and any(words[i : i + n] == wanted for i in range(len(words) - n + 1))


def people_in(question: str, contacts: ContactReader) -> list[str]:
    """The contacts a question names (full name, alias or first name), as
    check_notebook's person argument would be given them."""
    found: list[str] = []
    seen: set[str] = set()
    for contact in contacts.all():
        if contact.id in seen:
            continue
        first = contact.name.split()[0] if contact.name.split() else ""
        # A first name only if it could be one ("The Depot" is no "The").
        firsts = [first] if len(first) > 1 and fold(first) not in STOPWORDS else []
        for name in (contact.name, *contact.aliases, *firsts):
            if _mentions(question, name):
                if name not in found:
                    found.append(name)
                seen.add(contact.id)
                break
    return found[:MAX_PREVIEW_PEOPLE]


# Words that ask for a time window rather than a subject: "what's on next
# week" is the days ahead, not a search for "week". Each window, the days it
# spans (generously: "next week" seen from a Saturday runs eight days on).
_AHEAD = (
    (re.compile(r"\b(?:tomorrow|amanh[ãa])\b"), 2),
    (re.compile(r"\bthis (?:week|weekend)\b"), 7),
    (re.compile(r"\b(?:next|coming|upcoming) (?:week|weekend|few days)\b"), 14),
    (re.compile(r"\b(?:this|next|coming) month\b"), 62),
    (re.compile(r"\b(?:coming up|upcoming|what'?s on|what'?s next|pr[óo]xim[ao]s?)\b"), 31),
)
_BACK = (
    (re.compile(r"\b(?:yesterday|ontem)\b"), 2),
    (re.compile(r"\b(?:last|past|previous) (?:week|weekend|few days)\b"), 14),
    (re.compile(r"\b(?:last|past|previous) month\b"), 62),
    (re.compile(r"\b(?:last|past|previous) year\b"), 400),
)
_WINDOW_WORDS = frozenset(
    "tomorrow yesterday week weekend month year next coming upcoming last past previous few "
    "days this up on what's whats amanhã amanha ontem próximo próxima próximos próximas".split()
)


def window_in(question: str) -> dict[str, int]:
    """The time window a question asks about, as check_notebook's days_ahead
    or days_back; empty when it names none."""
    text = " ".join(question.casefold().replace("’", "'").split())
    for pattern, days in _AHEAD:
        if pattern.search(text):
            return {"days_ahead": days}
    for pattern, days in _BACK:
        if pattern.search(text):
            return {"days_back": days}
    return {}


def _resolves(contacts: ContactReader, name: str) -> bool:
    """Whether check_notebook's person argument would name one contact."""
    try:
        contacts.resolve(clean_name(name, "person"))
    except (NotFound, BadInput):
        return False
    return True


def plan_calls(question: str, contacts: ContactReader) -> list[dict[str, Any]]:
    """The check_notebook calls a question makes without a model: its key
    words always (a tag counts twice a body word in the ranking, so topics
    and words are tried together), for each person it names filtered to
    them, and the time window it names. With neither words nor a filter, the
    question itself."""
    window = window_in(question)
    words = [w for w in key_words(question) if not (window and w in _WINDOW_WORDS)]
    people = [p for p in people_in(question, contacts) if _resolves(contacts, p)]
    calls: list[dict[str, Any]] = []
    named = {w for person in people for w in _words(person)}
    for person in people:
        rest = [w for w in words if w not in named and w.removesuffix("'s") not in named]
        call: dict[str, Any] = {"person": person, **window}
        if rest:
            call["query"] = " ".join(rest)
        calls.append(call)
    if not people:
        call = dict(window)
        if words:
            call["query"] = " ".join(words)
        calls.append(call or {"query": question[:200]})
    return calls


def would_fetch(
    question: str, check: CheckNotebookTool, contacts: ContactReader
) -> list[tuple[dict[str, Any], str]]:
    """What check_notebook returns for a question without a model
    (`plan_calls`): each call's arguments and its result, exactly as a model
    would read them. A call for a person that matches none of their notes is
    followed by one for the person alone (their page, their notes)."""
    question = check_question(question)
    out: list[tuple[dict[str, Any], str]] = []
    for args in plan_calls(question, contacts):
        answer = check.lookup(args)
        out.append((args, answer.text))
        if answer.missed and "person" in args and "query" in args:
            alone = {k: v for k, v in args.items() if k != "query"}
            out.append((alone, check.call(alone)))
    return out


__all__ = [
    "FALLBACK_NOTE",
    "MAX_QUESTION_CHARS",
    "MAX_STEPS",
    "PERSONA",
    "ChatAgent",
    "ChatTurn",
    "check_question",
    "plan_calls",
    "tool_agent_box",
    "window_in",
    "would_fetch",
]
