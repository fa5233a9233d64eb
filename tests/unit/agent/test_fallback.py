"""When the Notebook misses, the chat loop greps the log itself.

A scripted OpenAI-compatible server plays the model; what it was handed is
read off the wire. The checks: a check_notebook call that finds no note is
followed by one grep_memory call on the key words (an escaped OR of one
word, or with two or more, of every pair of the first four, so that two of
them meet in each memory found), whose hits reach the model in the same tool
message; a hit in the Notebook brings no grep; the fallback counts against
grep_memory's budget and its duplicate check like any call; and grep_memory
itself still matches text exactly as a pattern says (no stems, no folded
accents).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from pixie.device.agent.chat import ChatAgent, ChatTurn
from pixie.device.agent.chatmodel import ToolCallingModel
from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.tools import (
    DEFAULT_BUDGETS,
    CheckNotebookTool,
    fallback_pattern,
    fallback_query,
    key_words,
    together_pattern,
)
from pixie.device.cli.agent import memory_tools
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from tests.support.llmserver import Recorded, Reply, ScriptedLLMServer

START = 1_700_000_000_000_000
BRIDGE = "\nNothing in the Notebook, so the raw memory log was searched instead:\n"


@dataclass
class Life:
    node: Node
    priya: str


@pytest.fixture
def life(node: Node) -> Life:
    priya, _ = node.contacts.add("Priya Raman", [], now=0)
    node.notebook.upsert_clear(
        Distilled(
            NoteKind.PERSON,
            priya,
            "Priya Raman",
            "Work: lead data engineer at Helix Bio.",
            priya,
            ("work",),
        )
    )
    node.log.append(
        [
            NewEvent(EventKind.MESSAGE, START, "the salary talk went well!", contact="Priya Raman"),
            NewEvent(EventKind.MESSAGE, START + 1, "Salaries are public here", contact="Ada"),
            NewEvent(EventKind.MESSAGE, START + 2, "see you at the climbing wall", contact="Ada"),
            NewEvent(EventKind.MESSAGE, START + 3, "my café order: flat white", contact="Zoë"),
        ],
        now=START,
    )
    return Life(node, priya)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default=lambda _: Reply.text("Fine.")) as s:
        yield s


def _agent(life: Life, server: ScriptedLLMServer, **kwargs: object) -> ChatAgent:
    model = ToolCallingModel(server.url, "test-model", timeout=10.0, api_key=None)
    return ChatAgent(model, memory_tools(life.node), log=life.node.log, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def agent(life: Life, server: ScriptedLLMServer) -> AsyncIterator[ChatAgent]:
    chat = _agent(life, server)
    yield chat
    await chat.aclose()


def outcomes(turn: ChatTurn) -> list[tuple[str, str]]:
    return [(e.tool, e.outcome) for e in turn.calls]


def tool_messages(request: Recorded) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def check(life: Life) -> CheckNotebookTool:
    return CheckNotebookTool(life.node.notebook.clear_view(), life.node.contacts)


def grep(life: Life, pattern: str) -> str:
    return GrepMemoryTool(life.node.mirror).run(pattern).render()


# -- the key words and the pattern ---------------------------------------------------------


def test_key_words_drop_stopwords_and_keep_accents() -> None:
    assert key_words("What did Priya say about her salary?") == ["priya", "salary"]
    assert key_words("Zoë's café") == ["zoë", "café"]
    assert key_words("the and of") == ["the", "and", "of"]  # nothing else: kept whole
    assert key_words("?!") == []


def test_the_pattern_is_an_escaped_or_of_the_words() -> None:
    assert fallback_pattern(["salary", "priya"]) == r"(?:\bsalary|\bpriya)"
    # RE2's \b is ASCII-only: a word starting with another letter goes without
    assert fallback_pattern(["élan"]) == "(?:élan)"
    # a word is matched as itself, never as a pattern
    assert fallback_pattern(["c.t"]) == r"(?:\bc\.t)"
    assert fallback_query("salary", "anything") == r"(?:\bsalary)"
    assert fallback_query("", "?") is None


def test_two_key_words_or_more_must_meet_in_one_memory() -> None:
    assert together_pattern(["priya", "salary"]) == r"(?:\bpriya.*\bsalary|\bsalary.*\bpriya)"
    # a query with no word falls back to the question's words
    assert fallback_query("", "Where does Priya climb?") == together_pattern(["priya", "climb"])
    # pairs of the first four key words only
    pattern = fallback_query("one two three four five", "")
    assert pattern == together_pattern(["one", "two", "three", "four"])
    assert pattern.count("|") == 4 * 3 - 1 and "five" not in pattern


def test_pairs_of_words_match_only_where_both_are(life: Life) -> None:
    tool = GrepMemoryTool(life.node.mirror)
    # the contact's name leads each memory's line, so it counts as a word of it
    hits = tool.run(together_pattern(["climbing", "ada"])).hits
    assert [h.snippet for h in hits] == ["see you at the climbing wall"]
    assert tool.run(together_pattern(["climbing", "salary"])).hits == ()


def test_a_long_query_gives_way_to_grep_memorys_limit() -> None:
    words = " ".join("w" * 60 + str(i) for i in range(16))
    pattern = fallback_query(words, "")
    assert pattern is not None and len(pattern) <= 512
    assert pattern == together_pattern(["w" * 60 + "0", "w" * 60 + "1"])
    # not even one pair fits: any one of the words that fit
    assert fallback_query(" ".join("w" * 200 + str(i) for i in range(4)), "") == (
        fallback_pattern(["w" * 200 + "0", "w" * 200 + "1"])
    )


def test_an_escaped_word_matches_only_itself(life: Life) -> None:
    tool = GrepMemoryTool(life.node.mirror)
    assert tool.run(fallback_pattern(["fl.t"])).hits == ()  # not "flat"
    assert [h.snippet for h in tool.run(fallback_pattern(["flat"])).hits] == [
        "my café order: flat white"
    ]


# -- the loop ----------------------------------------------------------------------------------


async def test_a_notebook_miss_is_followed_by_grep_on_its_key_words(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    args = {"person": "Priya", "query": "salary"}
    server.then(Reply.calls(("check_notebook", args)), Reply.text("It went well."))
    turn = await agent.turn("How did Priya's salary talk go?")
    assert turn.answer == "It went well."
    assert outcomes(turn) == [("check_notebook", "ran"), ("grep_memory", "ran")]
    assert [e.pill for e in turn.calls] == ["Checked your notebook", "Searched your memory"]
    assert turn.calls[1].arguments == {"query": r"(?:\bsalary)"}
    (message,) = tool_messages(server.requests[1])
    assert message == check(life).call(args) + BRIDGE + grep(life, r"(?:\bsalary)")
    assert message.startswith('No notes in the Notebook match "salary" about Priya.')
    assert "the salary talk went well!" in message
    assert "Salaries" not in message  # grep matches the word as written, no stems


async def test_a_notebook_hit_brings_no_grep(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    args = {"person": "Priya", "query": "working"}
    server.then(Reply.calls(("check_notebook", args)), Reply.text("At Helix Bio."))
    turn = await agent.turn("Where is Priya working?")
    assert outcomes(turn) == [("check_notebook", "ran")]
    (message,) = tool_messages(server.requests[1])
    assert message == check(life).call(args)
    assert message.startswith('1 note matching "working" about Priya:')
    assert "Helix Bio" in message


async def test_a_person_alone_falls_back_to_the_questions_words(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    life.node.contacts.add("Ada", [], now=0)  # a contact with no notes
    server.then(Reply.calls(("check_notebook", {"person": "Ada"})), Reply.text("Climbing."))
    turn = await agent.turn("Where does Ada go climbing?")
    assert outcomes(turn) == [("check_notebook", "ran"), ("grep_memory", "ran")]
    assert turn.calls[1].arguments == {"query": together_pattern(["ada", "go", "climbing"])}
    (message,) = tool_messages(server.requests[1])
    assert "see you at the climbing wall" in message


async def test_the_fallback_spends_the_grep_budget_and_is_skipped_once_it_is_gone(
    life: Life, server: ScriptedLLMServer
) -> None:
    agent = _agent(life, server, budgets={**DEFAULT_BUDGETS, "grep_memory": 1})
    try:
        server.then(
            Reply.calls(("grep_memory", {"query": "wall"})),
            Reply.calls(("check_notebook", {"query": "xylophone"})),
            Reply.text("Nothing."),
        )
        turn = await agent.turn("Any xylophone?")
        # the model's own grep spent the budget: the miss stands alone
        assert outcomes(turn) == [("grep_memory", "ran"), ("check_notebook", "ran")]
        assert tool_messages(server.requests[2])[-1] == check(life).call({"query": "xylophone"})
        assert turn.stopped is None
    finally:
        await agent.aclose()


async def test_the_fallback_is_not_repeated_and_a_model_repeat_is_refused(
    life: Life, server: ScriptedLLMServer, agent: ChatAgent
) -> None:
    server.then(
        Reply.calls(("check_notebook", {"query": "salary"})),
        Reply.calls(("check_notebook", {"query": "salary", "days_back": 30})),
        Reply.calls(("grep_memory", {"query": r"(?:\bsalary)"})),
        Reply.text("It went well."),
    )
    turn = await agent.turn("How did the salary talk go?")
    # the second miss would grep the same words again: the loop does not, and
    # the model's own repeat of that grep is refused like any repeat
    assert outcomes(turn) == [
        ("check_notebook", "ran"),
        ("grep_memory", "ran"),
        ("check_notebook", "ran"),
        ("grep_memory", "refused_repeat"),
    ]
    first = tool_messages(server.requests[1])[-1]
    second = tool_messages(server.requests[2])[-1]
    assert BRIDGE in first
    assert second == check(life).call({"query": "salary", "days_back": 30})


# -- grep_memory itself ----------------------------------------------------------------------


def test_grep_memory_stays_regex_exact(life: Life) -> None:
    tool = GrepMemoryTool(life.node.mirror)

    def texts(query: str) -> list[str]:
        return [h.snippet for h in tool.run(query).hits]

    # no stems: "salaries" is not "salary"
    assert texts("salary") == ["the salary talk went well!"]
    assert texts("salaries") == ["Salaries are public here"]
    # a real pattern, case-insensitive
    assert texts(r"sal(ary|aries)\b") == ["Salaries are public here", "the salary talk went well!"]
    # no folded accents: "cafe" is not "café"
    assert texts("cafe") == []
    assert texts("café") == ["my café order: flat white"]
