"""check_notebook and grep_memory over the Model Context Protocol, on stdio.

Any MCP client (a desktop assistant, an agent framework) can start
``pixie mcp`` and call the same two tools the chat loop offers, with the same
JSON-schema definitions and the same answers. It is built on the `mcp`
package's low-level `Server`, driven under trio (anyio's trio backend), since
the package's one-line ``run()`` would start asyncio.

Guards. The server cannot see a client's turns, so by default it keeps the
guards per MCP session (one stdio connection is one session): the duplicate
check and the budgets of `TurnGuards`, where a "turn" ends after
``turn_gap`` seconds without a call, so a long-lived session with a person
asking question after question is not starved. With ``guards="client"`` the
server runs the tools as an L3 tool-agent does, guards off: the client's own
loop owns them.

Answers: a refused repeat and a spent budget are ordinary results (the model
reads the words meant to stop it); arguments a tool refuses come back as a
tool error (``isError``) the model can correct; an unknown tool is a protocol
error. Nothing but protocol goes to stdout: while serving, the transport
points the process's stdout at stderr, and logs go to stderr.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import trio
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from pixie.device.agent.tools import (
    DEFAULT_BUDGETS,
    DEFAULT_TURN_GAP,
    GUARD_MODES,
    MAX_TURN_GAP,
    GuardMode,
    Tool,
    ToolBox,
    ToolEvent,
    ToolReply,
    TurnGuards,
)

log = logging.getLogger("pixie.mcp")

SERVER_NAME = "pixie-memory"

INSTRUCTIONS = (
    "The user's personal memory. Call check_notebook first (distilled notes about people, "
    "the user and their standing instructions; filter by person, topic or days_back); call "
    "grep_memory only for what the Notebook lacks. Use only what the tools return."
)


@dataclass
class SessionGuards:
    """`TurnGuards` for one MCP session, whose turns end after a quiet gap."""

    turn_gap: float
    budgets: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_BUDGETS))
    clock: Callable[[], float] = time.monotonic
    guards: TurnGuards = field(init=False)
    _last: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.guards = TurnGuards(self.budgets)

    def before_call(self) -> None:
        now = self.clock()
        if self._last is not None and now - self._last >= self.turn_gap:
            self.guards.new_turn()
        self._last = now


class MemoryMCPSession:
    """The tools as one MCP session sees them: its own guards and hook."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        guards: GuardMode = "session",
        turn_gap: float = DEFAULT_TURN_GAP,
        budgets: Mapping[str, int] = DEFAULT_BUDGETS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if guards not in GUARD_MODES:
            raise ValueError(f"guards must be one of {GUARD_MODES}")
        self.session_guards = (
            SessionGuards(turn_gap, dict(budgets), clock) if guards == "session" else None
        )
        self._events: list[ToolEvent] = []  # of the call running now
        self.box = ToolBox(
            list(tools),
            guards=self.session_guards.guards if self.session_guards else None,
            on_call=self._heard,
        )

    def _heard(self, event: ToolEvent) -> None:
        self._events.append(event)
        # Which tool and what happened, never the arguments' text.
        log.info(
            "%s: %s (%d argument%s)",
            event.tool,
            event.outcome,
            len(event.arguments),
            "" if len(event.arguments) == 1 else "s",
        )

    def list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
            for t in self.box.tools.values()
        ]

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """One tools/call, synchronously (it reads SQLite)."""
        if name not in self.box.tools:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r:.80}")
        if self.session_guards is not None:
            self.session_guards.before_call()
        self._events.clear()
        reply: ToolReply = self.box.call(name, {} if arguments is None else arguments)
        failed = any(e.outcome == "bad_arguments" for e in self._events)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=reply.text)], is_error=failed
        )


def build_server(session: MemoryMCPSession, version: str = "") -> Server[Any]:
    """A low-level MCP server whose tools are ``session``'s."""
    # SQLite blocks: calls run in one worker thread at a time, never on the
    # event loop's thread.
    lane = trio.CapacityLimiter(1)

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=session.list_tools())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await trio.to_thread.run_sync(
            session.call, params.name, params.arguments, limiter=lane
        )

    server: Server[Any] = Server(
        SERVER_NAME,
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    # The package traces every message by default (a no-op until an exporter
    # is installed, but not free); a local stdio server has nobody to trace for.
    server.middleware = []
    return server


async def serve_stdio(session: MemoryMCPSession, version: str = "") -> None:
    """Serve one MCP session on stdin/stdout until the client closes it."""
    server = build_server(session, version)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


__all__ = [
    "DEFAULT_TURN_GAP",
    "GUARD_MODES",
    "MAX_TURN_GAP",
    "MemoryMCPSession",
    "SessionGuards",
    "build_server",
    "serve_stdio",
]
