"""The chat turn (the L2 loop) against a scripted OpenAI-compatible server.

The server plays the model: it answers with tool calls and text as each test
scripts, and records every request, so what the model was shown is read off
the wire, not inferred. Memory holds marker strings: some the scripted model
fetches, some it never asks for, some sealed. The checks: the prompt carries
no Notebook or log text the model did not fetch; a model that repeats a call
is refused and the turn ends; a model that rewords forever is stopped by the
budget; a person with sealed notes only looks exactly like a person with no
notes; malformed answers end the turn with an honest line, never a crash;
and the turn lands in the log as agent_chat_* events that grep never returns.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pixie.device.agent.chat import (
    MAX_STEPS,
    PERSONA,
    STOPPED_REPLY,
    ChatAgent,
    ChatTurn,
    plan_calls,
    window_in,
)
from pixie.device.agent.chatmodel import MAX_TOOL_CALLS, ToolCallingModel
from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.tools import DEFAULT_BUDGETS, CheckNotebookTool, ToolBox, ToolEvent
from pixie.device.cli.agent import NO_MODEL, memory_tools
from pixie.device.node.keyed import Node
from pixie.device.notebook.huddle import HuddleRecord, record_huddle
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import CHAT_KINDS, EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from tests.support.cli import run_cli
from tests.support.llmserver import Recorded, Reply, ScriptedLLMServer

START = 1_700_000_000_000_000
QUESTION = "How is Ada's marathon training going?"
FETCHED_NOTE = "FETCHEDNOTE Ada trains for the Lyon marathon"
FETCHED_LOG = "FETCHEDLOG Lyon in May, still on?"
# Text the scripted model never asks for: it must never reach the model.
UNFETCHED = ("UNFETCHEDNOTEPRIYA", "UNFETCHEDLOGPRIYA", "UNFETCHEDGUIDANCE")
SEALED = "SEALEDCANARYMARCO"


@dataclass
class Life:
    node: Node
    ada: str
    marco: str


@pytest.fixture
def life(node: Node) -> Life:
    ada, _ = node.contacts.add("Ada Lovelace", [], now=0)
    priya, _ = node.contacts.add("Priya Raman", [], now=0)
    marco, _ = node.contacts.add("Marco Bianchi", [], now=0)
    nb = node.notebook
    nb.upsert_clear(Distilled(NoteKind.PERSON, ada, "Ada Lovelace", FETCHED_NOTE, ada, ("sport",)))
    nb.upsert_clear(
        Distilled(
            NoteKind.PERSON, priya, "Priya Raman", f"{UNFETCHED[0]} new job", priya, ("work",)
        )
    )
    nb.add_user_note(NoteKind.GUIDANCE, "Tone", f"{UNFETCHED[2]} keep it short")
    node.log.append(
        [
            NewEvent(EventKind.MESSAGE, START, FETCHED_LOG, contact="Ada Lovelace"),
            NewEvent(EventKind.MESSAGE, START + 1, f"{UNFETCHED[1]} bakery", contact="Priya Raman"),
            NewEvent(EventKind.MESSAGE, START + 2, "ciao, dinner soon?", contact="Marco Bianchi"),
        ],
        now=START,
    )
    return Life(node, ada, marco)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default=lambda _: Reply.text("Fine, thanks.")) as s:
        yield s


@pytest.fixture
async def agent(life: Life, server: ScriptedLLMServer) -> AsyncIterator[ChatAgent]:
    model = ToolCallingModel(server.url, "test-model", timeout=10.0, api_key=None)
    chat = ChatAgent(model, memory_tools(life.node), log=life.node.log)
    yield chat
    await chat.aclose()


def outcomes(turn: ChatTurn) -> list[tuple[str, str]]:
    return [(e.tool, e.outcome) for e in turn.calls]


def tool_messages(request: Recorded) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


async def test_memory_is_fetched_by_tool_call_and_only_what_was_fetched_is_sent(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.then(
        Reply.calls(("check_notebook", {"person": "Ada"})),
        Reply.calls(("grep_memory", {"query": "lyon"})),
        Reply.text("Ada is training for Lyon."),
    )
    heard: list[ToolEvent] = []
    agent.on_call = heard.append
    turn = await agent.turn(QUESTION)

    assert turn.answer == "Ada is training for Lyon."
    assert outcomes(turn) == [("check_notebook", "ran"), ("grep_memory", "ran")]
    assert [e.pill for e in heard] == ["Checked your notebook", "Searched your memory"]
    first, second, third = server.requests
    # The first request: the persona and the question, and the tools' schemas.
    assert first.body["messages"] == [
        {"role": "system", "content": PERSONA},
        {"role": "user", "content": QUESTION},
    ]
    assert first.body["tools"] == ToolBox(memory_tools(life.node), guards=None).schemas()
    # Each tool result reaches the model exactly as the tool renders it.
    check = CheckNotebookTool(life.node.notebook.clear_view(), life.node.contacts)
    assert tool_messages(second) == [check.call({"person": "Ada"})]
    assert tool_messages(third)[1] == GrepMemoryTool(life.node.mirror).run("lyon").render()
    assert FETCHED_NOTE in tool_messages(second)[0]
    assert FETCHED_LOG in tool_messages(third)[1]
    # Nothing of the Notebook or the log rides in before it is fetched, and
    # what the model never asked for never rides in at all.
    assert "FETCHED" not in first.transcript
    assert FETCHED_LOG not in second.transcript
    for request in server.requests:
        assert not any(marker in request.transcript for marker in UNFETCHED)
        assert request.message("system") == PERSONA


async def test_the_turn_is_logged_and_grep_never_returns_it(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.then(Reply.text("QUOTEDREPLY she is fine"))
    turn = await agent.turn("QUOTEDQUESTION how is Ada?")
    records = {r.id: r for r in life.node.log.all_records()}
    logged = [records[i] for i in turn.logged]
    assert [(r.kind, r.text) for r in logged] == [
        (EventKind.AGENT_CHAT_USER, "QUOTEDQUESTION how is Ada?"),
        (EventKind.AGENT_CHAT_AGENT, "QUOTEDREPLY she is fine"),
    ]
    for query in ("QUOTEDQUESTION", "QUOTEDREPLY", "how is Ada", "."):
        result = GrepMemoryTool(life.node.mirror).run(query)
        assert not {h.kind for h in result.hits} & CHAT_KINDS
        assert not any("QUOTED" in h.snippet for h in result.hits)
    # ...and the next turn does not see the last one either.
    server.then(Reply.calls(("grep_memory", {"query": "QUOTED"})), Reply.text("ok"))
    await agent.turn("what did I ask before?")
    assert tool_messages(server.requests[-1]) == ['No memories match "QUOTED".']


async def test_a_model_that_repeats_a_call_is_refused_and_the_turn_ends(
    server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.default = lambda _: Reply.calls(("check_notebook", {"person": "Ada"}))
    turn = await agent.turn(QUESTION)

    assert outcomes(turn) == [
        ("check_notebook", "ran"),
        ("check_notebook", "refused_repeat"),
        ("check_notebook", "refused_repeat"),
    ]
    assert turn.stopped == "repeats"
    assert "already checked the Notebook" in tool_messages(server.requests[2])[-1]
    # The last request offers no tools; the model kept calling, so the turn
    # ends with the loop's own line. Within the tool's budget in all.
    assert [bool(r.tool_names) for r in server.requests] == [True, True, True, False]
    assert turn.model_requests == len(server.requests) <= DEFAULT_BUDGETS["check_notebook"]
    assert turn.answer == STOPPED_REPLY


async def test_a_model_that_rewords_forever_is_stopped_by_the_budget(
    server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    def reword(request: Recorded) -> Reply:
        n = len(server.requests)
        return Reply.calls(("grep_memory", {"query": "lyon" + " trip" * n}))

    server.default = reword
    turn = await agent.turn("when is the Lyon trip?")
    budget = DEFAULT_BUDGETS["grep_memory"]
    assert outcomes(turn) == [("grep_memory", "ran")] * budget + [("grep_memory", "budget_spent")]
    assert turn.stopped == "budget"
    assert "budget for this turn is spent" in tool_messages(server.requests[-1])[-1]
    assert [bool(r.tool_names) for r in server.requests] == [True] * (budget + 1) + [False]
    assert turn.answer == STOPPED_REPLY
    # The next turn starts with fresh guards.
    server.default = lambda _: Reply.text("done")
    server.then(Reply.calls(("grep_memory", {"query": "lyon"})))
    assert outcomes(await agent.turn("and again?")) == [("grep_memory", "ran")]


async def test_a_person_with_sealed_notes_only_looks_like_a_person_with_none(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    script = (
        Reply.calls(("check_notebook", {"person": "Marco"})),
        Reply.calls(
            ("check_notebook", {"query": "marco huddle"}), ("grep_memory", {"query": "marco"})
        ),
        Reply.calls(("check_notebook", {"topic": "secret"})),
        Reply.text("I have nothing on Marco."),
    )

    async def ask() -> list[Any]:
        start = len(server.requests)
        server.then(*script)
        turn = await agent.turn("What do you know about Marco?")
        assert turn.answer == "I have nothing on Marco."
        return [r.body["messages"] for r in server.requests[start:]]

    before = await ask()
    nb = life.node.notebook
    nb.record_sealed(
        SealedKind.HUDDLE_PREP,
        title=f"Marco huddle {SEALED}",
        body=f"{SEALED} marco secret",
        contact_id=life.marco,
        contact_name="Marco Bianchi",
        tags=["secret"],
    )
    record_huddle(nb, life.node.contacts, HuddleRecord("Marco Bianchi", (), (), (SEALED,)))
    assert any(SEALED in s.body for s in nb.sealed_notes_for_huddle_reasoning())
    after = await ask()

    assert after == before  # word for word: the model cannot tell
    assert "No notes in the Notebook about Marco" in json.dumps(after)
    assert not any(SEALED in r.transcript for r in server.requests)


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        (Reply.raw(b"<html>not json</html>"), "malformed: response is not JSON"),
        (Reply.raw(b'{"choices": []}'), "malformed: response is not a chat completion"),
        (Reply.text(""), "malformed: an empty answer"),
        (Reply.text("x" * 20_000), "oversized"),
        (Reply.error(401), "http error: HTTP 401"),
        (
            Reply.calls(*[("grep_memory", {"query": f"q{i}"}) for i in range(MAX_TOOL_CALLS + 1)]),
            "oversized",
        ),
        (Reply(content="cut", finish_reason="length"), "truncated"),
    ],
)
async def test_a_malformed_answer_ends_the_turn_honestly(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent, reply: Reply, failure: str
) -> None:
    server.then(reply)
    turn = await agent.turn(QUESTION)
    assert not turn.answered
    assert turn.failure is not None
    assert turn.failure.startswith(failure)
    assert turn.answer == f"The model gave no usable answer ({turn.failure})."
    assert turn.calls == ()
    # The question is in the log; no agent reply was made up for it.
    kinds = [life.node.log.get(i).kind for i in turn.logged]
    assert kinds == [EventKind.AGENT_CHAT_USER]


async def test_bad_tool_calls_are_answered_and_the_turn_goes_on(
    server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.then(
        Reply.calls(("check_notebook", "{not json"), ("send_email", {"to": "x"})),
        Reply.calls(("check_notebook", {"days_back": "soon"}), ("grep_memory", "[1, 2]")),
        Reply.text("Sorry, I could not look."),
    )
    turn = await agent.turn(QUESTION)
    assert turn.answer == "Sorry, I could not look."
    assert outcomes(turn) == [
        ("check_notebook", "bad_arguments"),
        ("check_notebook", "bad_arguments"),
        ("grep_memory", "bad_arguments"),
    ]
    assert tool_messages(server.requests[1]) == [
        "check_notebook: the arguments are not valid JSON",
        "There is no tool named 'send_email'.",
    ]
    assert tool_messages(server.requests[2])[2:] == [
        "check_notebook: days_back must be a whole number from 1 to 36500",
        "grep_memory: the arguments must be a JSON object",
    ]


async def test_a_model_that_never_stops_calling_is_ended_by_the_step_limit(
    server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.default = lambda _: Reply.calls(("no_such_tool", {}))
    turn = await agent.turn(QUESTION)
    assert turn.stopped == "steps"
    assert turn.model_requests == len(server.requests) == MAX_STEPS + 1
    assert not server.requests[-1].tool_names


async def test_a_late_model_meets_the_deadline(life: Life, server: ScriptedLLMServer) -> None:
    server.then(Reply.late())
    model = ToolCallingModel(server.url, "test-model", timeout=0.3, api_key=None)
    chat = ChatAgent(model, memory_tools(life.node))
    try:
        turn = await chat.turn(QUESTION)
    finally:
        await chat.aclose()
    assert turn.failure == "late: no complete answer within 0.3 s"


async def test_an_l3_tool_agent_runs_with_its_own_guards_off(
    server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    heard: list[ToolEvent] = []
    agent.on_call = heard.append
    inner = agent.tool_agent()
    assert inner.guards is None
    for _ in range(DEFAULT_BUDGETS["grep_memory"] + 2):
        assert inner.call("grep_memory", {"query": "lyon"}).text.startswith("1 memory matches")
    assert [e.outcome for e in heard] == ["ran"] * (DEFAULT_BUDGETS["grep_memory"] + 2)
    # The L2 loop's own budget is untouched by the tool-agent's calls.
    server.then(Reply.calls(("grep_memory", {"query": "lyon"})), Reply.text("ok"))
    turn = await agent.turn(QUESTION)
    assert outcomes(turn) == [("grep_memory", "ran")]


# -- the command -------------------------------------------------------------------


def test_chat_without_a_model_says_so_and_shows_what_it_would_fetch(
    life: Life, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("PIXIE_LLM_URL", "PIXIE_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    d = str(data_dir)
    before = len(life.node.log.all_records())
    result = run_cli("--data", d, "chat", "Is Ada still into sport? And Marco?")
    assert result.code == 0, result.err
    check = CheckNotebookTool(life.node.notebook.clear_view(), life.node.contacts)
    expected = [NO_MODEL]
    # The question's words go with each person it names (the names left
    # out); a person none of whose notes match is then looked up alone.
    calls: list[dict[str, Any]] = [
        {"person": "Ada", "query": "still sport"},
        {"person": "Marco", "query": "still sport"},
        {"person": "Marco"},
    ]
    assert check.lookup(calls[0]).notes and check.lookup(calls[1]).missed
    for args in calls:
        expected += ["", f"[would fetch] check_notebook {json.dumps(args)}", check.call(args)]
    assert result.out == "\n".join(expected) + "\n"
    assert FETCHED_NOTE in result.out
    as_json = run_cli("--data", d, "chat", "what about Priya?", "--json").json()
    assert as_json == {
        "model": None,
        "answer": None,
        "would_fetch": [
            {
                "tool": "check_notebook",
                "arguments": {"person": "Priya"},
                "result": check.call({"person": "Priya"}),
            }
        ],
    }
    assert len(life.node.log.all_records()) == before  # no turn happened, none is logged


def test_chat_with_a_model_shows_pills_then_the_answer(
    life: Life, data_dir: Path, server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIXIE_LLM_URL", server.url)
    monkeypatch.setenv("PIXIE_LLM_MODEL", "test-model")
    server.then(
        Reply.calls(("check_notebook", {"person": "Ada"})),
        Reply.calls(("grep_memory", {"query": "lyon"}), ("check_notebook", {"person": "ada"})),
        Reply.text("She is on track."),
    )
    result = run_cli("--data", str(data_dir), "chat", QUESTION)
    assert result.code == 0, result.err
    assert result.out == (
        "· Checked your notebook\n"
        "· Searched your memory\n"
        "· Checked your notebook (repeat refused)\n"
        "\n"
        "She is on track.\n"
    )
    server.then(Reply.text("Still on track."))
    shown = run_cli("--data", str(data_dir), "chat", QUESTION, "--json").json()
    assert isinstance(shown, dict)
    assert shown["answer"] == "Still on track."
    assert shown["model"] == "test-model"
    kinds = [r.kind for r in life.node.log.all_records() if r.kind in CHAT_KINDS]
    assert kinds == [EventKind.AGENT_CHAT_USER, EventKind.AGENT_CHAT_AGENT] * 2


def test_chat_reports_a_failed_model_in_one_line(
    life: Life, data_dir: Path, server: ScriptedLLMServer
) -> None:
    server.then(Reply.raw(b"garbage"))
    result = run_cli("--data", str(data_dir), "chat", QUESTION, "--url", server.url, "--model", "m")
    assert result.code == 1
    assert (
        result.out == "The model gave no usable answer (malformed: response is not JSON (7 B)).\n"
    )
    assert result.err == f"pixie: error: the model at {server.url} gave no usable answer\n"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["chat", "   "], "the question is empty"),
        (["chat", "x" * 2001], "the question is longer than 2000 characters"),
        (["chat", "hi", "--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
        (["chat", "hi", "--url", "ftp://x", "--model", "m"], "is not an http:// or https://"),
        (
            ["chat", "hi", "--url", "http://127.0.0.1:1/v1", "--model", "m", "--timeout", "0"],
            "the model timeout must be a number of seconds above 0",
        ),
        (["mcp", "--guards", "none"], "argument --guards: invalid choice: 'none'"),
        (["mcp", "--turn-gap", "-1"], "--turn-gap must be a number of seconds above 0"),
    ],
)
def test_bad_input_is_one_clear_line(data_dir: Path, argv: list[str], error: str) -> None:
    result = run_cli("--data", str(data_dir), *argv)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("pixie: error: ")
    assert error in result.err
    assert result.err.count("\n") == 1


# -- the offline planner ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "calls"),
    [
        # The content word stays: not just the tag "appointment".
        ("when is my dentist appointment", [{"query": "dentist appointment"}]),
        ("What's on next week?", [{"days_ahead": 14}]),
        ("anything with Ada tomorrow?", [{"person": "Ada", "days_ahead": 2}]),
        (
            "what did Priya say about the flat last month",
            [{"person": "Priya", "days_back": 62, "query": "flat"}],
        ),
        ("Ada's new job", [{"person": "Ada", "query": "new job"}]),
        ("what?", [{"query": "what"}]),
    ],
)
def test_the_offline_planner_keeps_content_words(
    life: Life, question: str, calls: list[dict[str, Any]]
) -> None:
    assert plan_calls(question, life.node.contacts) == calls


def test_window_words() -> None:
    assert window_in("what's coming up") == {"days_ahead": 31}
    assert window_in("anything this weekend?") == {"days_ahead": 7}
    assert window_in("what did I do last weekend") == {"days_back": 14}
    assert window_in("when did I last see Ada") == {}
