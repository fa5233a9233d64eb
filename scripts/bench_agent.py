"""Benchmarks for the agent surface: tools through MCP, and a whole chat turn.

Every figure comes with a baseline measured in the same run on the same data,
so the numbers mean something on any machine.

* Per-call cost of check_notebook and grep_memory through ``pixie mcp`` (a
  real process, the `mcp` package's client over stdio) against the same calls
  made directly through the library (`CheckNotebookTool.call`,
  `GrepMemory.call`) in this process. Reported: p50 of each, the overhead (MCP
  minus direct) and the ratio. The server runs with ``--guards client`` so
  that repeated calls are answered, not refused. A second baseline is an MCP
  ping on the same session: the protocol's own round trip, no tool; the call
  is also reported against (ping + direct call), which shows what the server
  adds beyond the round trip it cannot avoid and the tool's own work.
* A full chat turn against the scripted OpenAI-compatible server: the model
  calls check_notebook, grep_memory and check_notebook again (three tool
  calls over three answers), then replies; every scripted answer waits
  ``--delay`` seconds, and the time per turn is reported minus those waits.
  The scripted server runs in a process of its own. Baseline: the same three
  tool calls made directly, plus the turn's own four request bodies posted
  again to the same server, which answers them after the same waits (also
  taken off): the HTTP, JSON and waking-up-after-a-wait the turn cannot avoid.

Data: a sample life (``--events`` events from `samplelife.generate`) and one
Person note per sample contact plus ``--notes`` conversation digests, written
through the real write paths.

    python scripts/bench_agent.py [--events 20000] [--notes 2000] [--calls 200] [--turns 20]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from random import Random
from typing import Any

import anyio
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.llmserver, the scripted model

from multiprocessing.connection import Connection  # noqa: E402

import repo_root  # noqa: E402, F401 (tests.testkit is not installed)
from mcp.client import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from pixie.device.agent.chat import ChatAgent  # noqa: E402
from pixie.device.agent.chatmodel import ModelAnswer, ToolCallingModel  # noqa: E402
from pixie.device.agent.tools import Tool  # noqa: E402
from pixie.device.cli.agent import memory_tools  # noqa: E402
from pixie.device.ingest.jsonl import read_events  # noqa: E402
from pixie.device.node.keyed import Node  # noqa: E402
from pixie.device.notebook.store import Distilled  # noqa: E402
from pixie.device.store.notes import NoteKind  # noqa: E402
from pixie.device.store.provision import create_data_dir  # noqa: E402
from pixie.protocol.timestamps import now_us  # noqa: E402
from tests.support.llmserver import Recorded, Reply, ScriptedLLMServer  # noqa: E402
from tests.testkit import samplelife  # noqa: E402

DAY_US = 86_400_000_000


def build(path: Path, events: int, notes: int) -> None:
    create_data_dir(path, name="bench", role="device")
    buffer = io.StringIO()
    samplelife.write_jsonl(buffer, events=events)
    with Node.open(path) as node:
        node.log.append(read_events(io.BytesIO(buffer.getvalue().encode())), now=now_us())
        rng = Random(7)
        items = []
        for contact in samplelife.CONTACTS:
            cid = node.contacts.resolve(contact.name)
            body = f"{contact.name}, {contact.relationship}, lives in {contact.city}."
            items.append(
                Distilled(NoteKind.PERSON, cid, contact.name, body, cid, contact.topics[:3])
            )
        for i in range(notes):
            contact = rng.choice(samplelife.CONTACTS)
            cid = node.contacts.resolve(contact.name)
            topic = rng.choice(contact.topics)
            items.append(
                Distilled(
                    NoteKind.CONVERSATION_DIGEST,
                    f"bench:{i}",
                    f"{contact.short} on {topic}",
                    f"Talked with {contact.short} about {topic} and {rng.choice(contact.topics)}.",
                    cid,
                    (topic,),
                    about_date=now_us() - rng.randrange(400) * DAY_US,
                )
            )
        node.notebook.upsert_many(items)


def workload(count: int) -> list[tuple[str, dict[str, Any]]]:
    """A realistic mix of calls, the same for both paths."""
    rng = Random(11)
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(count):
        contact = rng.choice(samplelife.CONTACTS)
        topic = rng.choice(contact.topics)
        if i % 2 == 0:
            args: dict[str, Any] = rng.choice(
                [
                    {"person": contact.short},
                    {"query": topic},
                    {"person": contact.short, "topic": topic},
                ]
            )
            out.append(("check_notebook", args))
        else:
            out.append(("grep_memory", {"query": rng.choice([contact.short, topic, contact.city])}))
    return out


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def timed_direct(
    tools: Mapping[str, Tool], calls: list[tuple[str, dict[str, Any]]]
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"check_notebook": [], "grep_memory": []}
    for name, args in calls:
        t0 = time.perf_counter()
        tools[name].call(args)
        out[name].append(time.perf_counter() - t0)
    return out


async def timed_mcp(data: Path, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pixie.entry.main", "--data", str(data), "mcp", "--guards", "client"],
        env={k: os.environ[k] for k in ("PIXIE_KEYSTORE", "PIXIE_KEYS")},
    )
    out: dict[str, list[float]] = {"check_notebook": [], "grep_memory": [], "ping": []}
    async with stdio_client(params) as (read, write), ClientSession(read, write, 60.0) as session:
        await session.initialize()
        await session.list_tools()
        for name, args in calls[:20]:  # warm up: imports, caches, the mirror
            await session.call_tool(name, args)
        for name, args in calls:
            t0 = time.perf_counter()
            result = await session.call_tool(name, args)
            out[name].append(time.perf_counter() - t0)
            assert not result.is_error, (name, args)
            t0 = time.perf_counter()
            await session.send_ping()
            out["ping"].append(time.perf_counter() - t0)
    return out


SCRIPT = (
    Reply.calls(("check_notebook", {"person": "Ada"})),
    Reply.calls(("grep_memory", {"query": "marathon"})),
    Reply.calls(("check_notebook", {"topic": "travel"})),
    Reply.text("Ada is training for the Lyon marathon."),
)


def _serve_model(delay: float, conn: Connection) -> None:
    """The scripted model, in a process of its own: an in-process server would
    share the interpreter lock with the loop it is timing. Each answer follows
    from the request alone (how many tool results it carries), so a replayed
    request gets the same answer after the same wait."""

    def answer(request: Recorded) -> Reply:
        messages = request.body["messages"]
        step = min(sum(m["role"] == "tool" for m in messages), len(SCRIPT) - 1)
        return SCRIPT[step].after(delay)

    with ScriptedLLMServer(default=answer) as server:
        conn.send(server.url)
        conn.recv()  # until told to stop


class Recording:
    """A `ChatModel` that keeps each request it sends, for the replay."""

    def __init__(self, model: ToolCallingModel) -> None:
        self.model = model
        self.sent: list[tuple[list[Any], list[Any]]] = []

    async def complete(self, messages: Any, tools: Any) -> ModelAnswer:
        self.sent.append((list(messages), list(tools)))
        return await self.model.complete(messages, tools)

    async def aclose(self) -> None:
        await self.model.aclose()


async def timed_turns(
    url: str, node: Node, turns: int, delay: float
) -> tuple[list[float], list[float]]:
    """Seconds per turn and per replay of its requests, both minus the scripted waits."""
    per_turn: list[float] = []
    replayed: list[float] = []
    model = ToolCallingModel(url, "bench", timeout=30.0, api_key=None)
    recording = Recording(model)
    agent = ChatAgent(recording, memory_tools(node), log=None)
    try:
        for i in range(turns + 2):
            recording.sent.clear()
            t0 = time.perf_counter()
            turn = await agent.turn("How is Ada's training going?")
            took = time.perf_counter() - t0 - len(SCRIPT) * delay
            assert len(turn.calls) == 3 and turn.answered, turn
            payloads = []
            for messages, tools in recording.sent:
                body = model.body(messages, tools)
                payloads.append(json.dumps(body, ensure_ascii=False).encode())
            t0 = time.perf_counter()
            for payload in payloads:
                await model.http.post(payload)
            round_trips = time.perf_counter() - t0 - len(payloads) * delay
            if i >= 2:  # the first turns pay for imports and connections
                per_turn.append(took)
                replayed.append(round_trips)
    finally:
        await agent.aclose()
    return per_turn, replayed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--notes", type=int, default=2_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.02, help="scripted model wait, seconds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PIXIE_KEYSTORE"] = "file"
        os.environ["PIXIE_KEYS"] = str(Path(tmp) / "keys")
        data = Path(tmp) / "data"
        t0 = time.perf_counter()
        build(data, args.events, args.notes)
        print(
            f"data: {args.events} events, {args.notes + len(samplelife.CONTACTS)} clear notes "
            f"(built in {time.perf_counter() - t0:.1f} s)"
        )
        calls = workload(args.calls)
        with Node.open(data) as node:
            tools = {t.name: t for t in memory_tools(node)}
            timed_direct(tools, calls[:20])  # warm up the same way
            direct = timed_direct(tools, calls)
            via_mcp = anyio.run(timed_mcp, data, calls, backend="trio")
            ping = p50(via_mcp["ping"])
            print(
                f"\nper tool call, p50 over {args.calls} calls (MCP over stdio vs the library "
                f"in-process; an MCP ping takes {ping * 1e3:.3f} ms):"
            )
            for name in ("check_notebook", "grep_memory"):
                d, m = p50(direct[name]), p50(via_mcp[name])
                print(
                    f"  {name:15} direct {d * 1e3:7.3f} ms   mcp {m * 1e3:7.3f} ms   "
                    f"overhead {(m - d) * 1e3:6.3f} ms   ratio {m / d:4.1f}x   "
                    f"mcp/(ping+direct) {m / (ping + d):4.2f}x"
                )
            direct_turn_tools = _direct_turn_tools(tools)
            spawn = multiprocessing.get_context("spawn")
            here, there = spawn.Pipe()
            server = spawn.Process(target=_serve_model, args=(args.delay, there), daemon=True)
            server.start()
            try:
                if not here.poll(60):
                    raise SystemExit("the scripted model server did not start within 60 s")
                url = here.recv()
                per_turn, bare = trio.run(timed_turns, url, node, args.turns, args.delay)
            finally:
                here.send("stop")
                server.join(10)
        turn, http = p50(per_turn), p50(bare)
        baseline = direct_turn_tools + http
        ratio = turn / baseline
        print(
            f"\nchat turn with 3 tool calls ({args.turns} turns, scripted waits of "
            f"{args.delay * 1e3:g} ms x 4 taken off):"
        )
        print(
            f"  turn {turn * 1e3:7.3f} ms   baseline {baseline * 1e3:7.3f} ms "
            f"(tools direct {direct_turn_tools * 1e3:.3f} "
            f"+ its 4 requests replayed {http * 1e3:.3f})   "
            f"ratio {ratio:4.2f}x"
        )
    return 0


def _direct_turn_tools(tools: Mapping[str, Tool]) -> float:
    """p50 of the turn's three tool calls made directly, one after another."""
    samples = []
    for _ in range(21):
        t0 = time.perf_counter()
        tools["check_notebook"].call({"person": "Ada"})
        tools["grep_memory"].call({"query": "marathon"})
        tools["check_notebook"].call({"topic": "travel"})
        samples.append(time.perf_counter() - t0)
    return p50(samples)


if __name__ == "__main__":
    sys.exit(main())
