"""The agent-facing commands of ``pixie``: ``chat`` and ``mcp``.

``pixie chat "QUESTION"`` runs one turn of the chat loop against the model
the [llm] settings name, showing a pill for each look at memory. With no
model configured it says so in one line and shows what check_notebook would
fetch for the question, labelled as exactly that.

``pixie mcp`` serves check_notebook and grep_memory to an MCP client on
stdin/stdout. Only protocol goes to stdout; everything else to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.tools import (
    DEFAULT_TURN_GAP,
    GUARD_MODES,
    MAX_TURN_GAP,
    CheckNotebookTool,
    GrepMemory,
)
from pixie.device.cli.common import data_path, emit_json
from pixie.device.cli.early import package_version
from pixie.device.distill.settings import LLMSettings
from pixie.device.errors import BadInput
from pixie.device.logs import configure_logging
from pixie.device.node.clear import ClearNode
from pixie.device.store import config

if TYPE_CHECKING:
    from pixie.device.agent.chat import ChatTurn
    from pixie.device.agent.tools import Tool, ToolEvent

# The chat loop, the model client and the MCP SDK load only when `chat` or
# `mcp` runs: the MCP SDK alone would add most of a second to every command.

NO_MODEL = (
    "No model is configured (set [llm] url and model, PIXIE_LLM_URL and PIXIE_LLM_MODEL, "
    "or --url and --model), so there is no answer; below is what check_notebook would fetch "
    "for the names and topics in your question."
)


def memory_tools(node: ClearNode) -> list[Tool]:
    """The model-facing tools over a node: the clear zone and the log's mirror."""
    return [
        CheckNotebookTool(node.notebook.clear_view(), node.contacts),
        GrepMemory(GrepMemoryTool(node.mirror)),
    ]


def _settings(args: argparse.Namespace, node: ClearNode) -> LLMSettings:
    flags = {"llm_url": args.url, "llm_model": args.model, "llm_timeout": args.timeout}
    return LLMSettings.from_values(config.llm(node.data.config_path, flags), config.llm_api_key())


def _pill(event: ToolEvent) -> str:
    notes = {
        "refused_repeat": " (repeat refused)",
        "budget_spent": " (budget spent)",
        "bad_arguments": " (bad arguments)",
    }
    return f"· {event.pill}{notes.get(event.outcome, '')}"


def cmd_chat(args: argparse.Namespace) -> int:
    from pixie.device.agent.chat import ChatAgent, check_question, would_fetch
    from pixie.device.agent.chatmodel import ToolCallingModel

    question = check_question(args.question)
    with ClearNode.open_clear(data_path(args)) as node:
        settings = _settings(args, node)
        model = ToolCallingModel.from_settings(settings)
        tools = memory_tools(node)
        if model is None:
            check = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
            fetched = would_fetch(question, check, node.contacts)
            if args.json:
                emit_json(
                    {
                        "model": None,
                        "answer": None,
                        "would_fetch": [
                            {"tool": "check_notebook", "arguments": a, "result": r}
                            for a, r in fetched
                        ],
                    }
                )
            else:
                print(NO_MODEL)
                for arguments, result in fetched:
                    print(f"\n[would fetch] check_notebook {json.dumps(arguments)}")
                    print(result)
            return 0

        def show(event: ToolEvent) -> None:
            if not args.json:
                print(_pill(event), flush=True)

        agent = ChatAgent(model, tools, log=node.log, on_call=show)

        async def run() -> ChatTurn:
            try:
                return await agent.turn(question)
            finally:
                await agent.aclose()

        turn = trio.run(run)
    if args.json:
        emit_json({"model": settings.model, **turn.as_json()})
    else:
        if turn.calls:
            print()
        print(turn.answer)
    if not turn.answered:
        print(f"pixie: error: the model at {settings.url} gave no usable answer", file=sys.stderr)
        return 1
    return 0


def _turn_gap(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_TURN_GAP):
        raise BadInput(
            f"--turn-gap must be a number of seconds above 0 and at most {MAX_TURN_GAP:g}"
        )
    return value


def cmd_mcp(args: argparse.Namespace) -> int:
    if args.print_config is not None:
        return _print_config(args)
    gap = _turn_gap(args.turn_gap)  # before the imports: the MCP SDK takes most of a second

    import anyio

    from pixie.device.agent.mcpserver import MemoryMCPSession, serve_stdio

    configure_logging(level=logging.DEBUG if args.verbose else logging.WARNING)
    with ClearNode.open_clear(data_path(args)) as node:
        session = MemoryMCPSession(memory_tools(node), guards=args.guards, turn_gap=gap)
        logging.getLogger("pixie.mcp").info(
            "serving %s on stdio (guards: %s)", node.role, args.guards
        )
        anyio.run(serve_stdio, session, package_version(), backend="trio")
    return 0


def _print_config(args: argparse.Namespace) -> int:
    """The entry an MCP host needs to start this server on this data dir."""
    data = data_path(args).absolute()
    with ClearNode.open_clear(data):  # refuse a path that holds no data dir, now
        pass
    command, lead = _own_command()
    server: dict[str, Any] = {"command": command, "args": [*lead, "--data", str(data), "mcp"]}
    if args.print_config == "vscode":
        emit_json({"servers": {"pixie-memory": {"type": "stdio", **server}}})
    else:
        emit_json({"mcpServers": {"pixie-memory": server}})
    return 0


def _own_command() -> tuple[str, list[str]]:
    """An absolute command that starts this same installation of pixie: the
    console script that is running, or this interpreter with ``-m``."""
    launched = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if launched is not None and launched.name == "pixie" and launched.is_file():
        return str(launched.absolute()), []
    return sys.executable, ["-m", "pixie.entry.main"]


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``chat`` and ``mcp`` on the top-level subparsers."""
    p = sub.add_parser(
        "chat", parents=[common], help="ask the agent one question (it fetches memory by tool)"
    )
    p.add_argument("question", metavar="QUESTION", help="what to ask")
    p.add_argument(
        "--url", metavar="URL", help="an OpenAI-compatible API base (overrides [llm] url)"
    )
    p.add_argument("--model", metavar="NAME", help="the model to ask (overrides [llm] model)")
    p.add_argument(
        "--timeout",
        type=float,  # the model client refuses a nonsense value (llm.check_timeout)
        metavar="SECONDS",
        help="deadline per model answer (default 60)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser(
        "mcp", parents=[common], help="serve check_notebook and grep_memory over MCP on stdio"
    )
    p.add_argument(
        "--guards",
        choices=GUARD_MODES,
        default="session",
        help="session: duplicate check and budgets per MCP session (default); "
        "client: off, the client's own loop owns them",
    )
    p.add_argument(
        "--turn-gap",
        type=float,
        default=DEFAULT_TURN_GAP,
        metavar="SECONDS",
        help="with session guards, a quiet gap that starts a new turn "
        f"(default {DEFAULT_TURN_GAP:g})",
    )
    p.add_argument("--verbose", action="store_true", help="log each call (tool and outcome)")
    p.add_argument(
        "--print-config",
        nargs="?",
        const="mcpServers",
        choices=("mcpServers", "vscode"),
        metavar="FORMAT",
        help="print the JSON an MCP host needs to start this server on this data dir, "
        "and exit (FORMAT: mcpServers, the default, for Claude Desktop, Claude Code's "
        ".mcp.json and Cursor; vscode for .vscode/mcp.json)",
    )
    p.set_defaults(func=cmd_mcp)
