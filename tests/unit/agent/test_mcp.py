"""`pixie mcp` against the `mcp` package's own client, over stdio, with a real
``pixie mcp`` process: initialize, list the tools (their schemas are the
tools' own), call both (the answers are the library's, word for word), the
per-session duplicate check and budget, errors for bad arguments and unknown
tools, the setting that hands the guards to the client, and a stdout that
carries nothing but protocol (logs go to stderr).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.mcpserver import SERVER_NAME, MemoryMCPSession, SessionGuards
from pixie.device.agent.tools import DEFAULT_BUDGETS, CheckNotebookTool, GrepMemory
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from tests.support.cli import run_cli

START = 1_700_000_000_000_000
CALL_TIMEOUT = 30.0  # seconds; a hung server fails the test instead of hanging it


@pytest.fixture
def memory(node: Node) -> Iterator[Node]:
    ada, _ = node.contacts.add("Ada Lovelace", [], now=0)
    node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, ada, "Ada Lovelace", "Training for Lyon.", ada, ("sport",))
    )
    node.log.append(
        [NewEvent(EventKind.MESSAGE, START, "Lyon in May?", contact="Ada Lovelace")], now=START
    )
    yield node


@asynccontextmanager
async def connect(
    data: Path, errlog: Path, *flags: str
) -> AsyncIterator[tuple[ClientSession, list[Exception]]]:
    """A client session with a fresh ``pixie mcp`` process; the second item
    collects anything on the server's stdout that was not protocol."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pixie.entry.main", "--data", str(data), "mcp", *flags],
        env={k: os.environ[k] for k in ("PIXIE_KEYSTORE", "PIXIE_KEYS")},
    )
    stray: list[Exception] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    with errlog.open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, CALL_TIMEOUT, message_handler=on_message) as session,
        ):
            yield session, stray


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    item = result.content[0]
    assert isinstance(item, types.TextContent)
    return item.text


async def test_pixie_mcp_serves_both_tools_with_session_guards(
    memory: Node, data_dir: Path, tmp_path: Path
) -> None:
    check = CheckNotebookTool(memory.notebook.clear_view(), memory.contacts)
    grep = GrepMemory(GrepMemoryTool(memory.mirror))
    errlog = tmp_path / "mcp.err"
    async with connect(data_dir, errlog, "--verbose") as (session, stray):
        init = await session.initialize()
        assert init.server_info.name == SERVER_NAME
        assert init.capabilities.tools is not None

        listed = await session.list_tools()
        assert {t.name: (t.description, t.input_schema) for t in listed.tools} == {
            "check_notebook": (check.description, check.parameters),
            "grep_memory": (GrepMemoryTool.description, GrepMemoryTool.parameters),
        }

        # Both tools answer exactly as the library does.
        got = await session.call_tool("check_notebook", {"person": "Ada"})
        assert not got.is_error
        assert text_of(got) == check.call({"person": "Ada"})
        assert "Training for Lyon." in text_of(got)
        got = await session.call_tool("grep_memory", {"query": "lyon"})
        assert not got.is_error
        assert text_of(got) == GrepMemoryTool(memory.mirror).run("lyon").render()

        # The same call again (case and spacing aside) is refused, not run.
        again = await session.call_tool("check_notebook", {"person": "  ADA "})
        assert not again.is_error
        assert text_of(again) == check.repeat_refusal
        assert text_of(await session.call_tool("grep_memory", {"query": "Lyon"})) == (
            grep.repeat_refusal
        )

        # Arguments a tool refuses are tool errors the model can read and fix.
        bad = {
            "check_notebook": [
                ({"days_back": "soon"}, "days_back must be a whole number from 1 to 36500"),
                ({"who": "Ada"}, "unknown argument 'who'"),
            ],
            "grep_memory": [({}, "query is required"), ({"query": 7}, "must be a string")],
        }
        for name, cases in bad.items():
            for arguments, message in cases:
                result = await session.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                assert text_of(result).startswith(f"{name}: ")
                assert message in text_of(result)
        # Rewording does not get past the budget: it is spent within
        # DEFAULT_BUDGETS calls in all, and stays spent.
        budget = DEFAULT_BUDGETS["grep_memory"]
        spent = "The grep_memory budget for this turn is spent. Answer with what you have."
        answers = [
            text_of(await session.call_tool("grep_memory", {"query": "lyon" + " may" * i}))
            for i in range(1, budget + 2)
        ]
        first_spent = answers.index(spent)
        assert first_spent < budget
        assert answers[first_spent:] == [spent] * (len(answers) - first_spent)
        # A tool that does not exist is a protocol error.
        with pytest.raises(MCPError) as caught:
            await session.call_tool("send_email", {"to": "x"})
        assert caught.value.code == types.INVALID_PARAMS
        assert "unknown tool 'send_email'" in caught.value.message
    # Nothing but protocol reached stdout; the log went to stderr, without
    # the arguments' text.
    assert stray == []
    log = errlog.read_text()
    assert "pixie.mcp: check_notebook: ran (1 argument)" in log
    assert "grep_memory: refused_repeat" in log
    assert "Ada" not in log
    assert "lyon" not in log


async def test_client_guards_leave_repeats_to_the_client(
    memory: Node, data_dir: Path, tmp_path: Path
) -> None:
    check = CheckNotebookTool(memory.notebook.clear_view(), memory.contacts)
    expected = check.call({"person": "Ada"})
    async with connect(data_dir, tmp_path / "mcp.err", "--guards", "client") as (session, stray):
        await session.initialize()
        for _ in range(DEFAULT_BUDGETS["check_notebook"] + 2):
            result = await session.call_tool("check_notebook", {"person": "Ada"})
            assert not result.is_error
            assert text_of(result) == expected
    assert stray == []


def test_a_session_turn_ends_after_a_quiet_gap(memory: Node) -> None:
    now = [0.0]
    check = CheckNotebookTool(memory.notebook.clear_view(), memory.contacts)
    session = MemoryMCPSession([check], turn_gap=60.0, clock=lambda: now[0])  # type: ignore[list-item]
    assert isinstance(session.session_guards, SessionGuards)
    first = session.call("check_notebook", {"person": "Ada"})
    now[0] = 59.0
    assert text_of(session.call("check_notebook", {"person": "Ada"})) == check.repeat_refusal
    now[0] = 59.0 + 60.0  # sixty quiet seconds: a new turn
    assert text_of(session.call("check_notebook", {"person": "Ada"})) == text_of(first)


def test_pixie_mcp_refuses_a_missing_data_dir_in_one_line(tmp_path: Path) -> None:
    result = run_cli("--data", str(tmp_path / "nowhere"), "mcp")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("pixie: error: ")
    assert result.err.count("\n") == 1
