"""Benchmark of distillation over the generated sample life.

Every figure comes with a baseline measured in the same run on the same
machine:

* a full pass with the built-in distiller over a freshly imported sample life
  (sources a second: threads, posts and calls). Each source's notes commit
  with its watermark, durably (a backlog like this one commits in groups of
  sources, each source's watermark with exactly its notes); the baseline is
  one raw sqlite3 commit per source (WAL, synchronous=FULL) of a row as large
  as the notes written. The share of the time spent in the distiller itself
  and the number of write transactions are reported too;
* a second pass with no new material: it must make 0 model calls and write 0
  notes, leaving every note row and the state digest as they were; its time is
  reported as a ratio to the full pass;
* one new message in one thread: the pass after it (1 model call);
* the meaning vectors the pass makes at its end (how many notes), and
  whether the model was loaded in the pass (a one-off `pixie distill`) or
  before it (``--model-loaded``: as a running daemon's later passes find
  it; loading costs about 0.15 s once a process);
* with ``--http``, the full pass again through the OpenAI-compatible backend
  against an instant scripted server on loopback (the HTTP path's overhead,
  not a model's speed).

Exit status 1 if the second pass called a model or wrote anything.
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import repo_root  # noqa: F401 (tests.testkit is not installed)
import trio

from pixie.device.distill.http import ChatCompletionsBackend
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.notebook import meaning, nearby
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.provision import create_data_dir
from tests.testkit.samplelife import write_jsonl

ROOT = Path(__file__).resolve().parent.parent


def make_life(where: Path, events: int, seed: int) -> Node:
    create_data_dir(where / "device", name="bench", role="device", key_store=FileKeyStore(where))
    node = Node.open(where / "device", key_store=FileKeyStore(where))
    text = io.StringIO()
    write_jsonl(text, seed=seed, events=events)
    node.log.append(read_events(io.BytesIO(text.getvalue().encode())), now=0)
    return node


class Timed:
    """A backend wrapper that adds up the time spent waiting for answers (it
    wraps the built-in distiller, which answers at once: a pass asks it on the
    worker thread that reads and writes each source, through ``answer_now``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    async def answer(self, request: Any) -> object:
        t0 = time.perf_counter()
        try:
            return await self.inner.answer(request)
        finally:
            self.seconds += time.perf_counter() - t0

    def answer_now(self, request: Any) -> object:
        t0 = time.perf_counter()
        try:
            return self.inner.answer_now(request)
        finally:
            self.seconds += time.perf_counter() - t0

    async def aclose(self) -> None:
        await self.inner.aclose()


def snapshot(node: Node) -> tuple[object, ...]:
    con = sqlite3.connect(node.db.path)
    try:
        notes = con.execute("SELECT * FROM note ORDER BY n").fetchall()
    finally:
        con.close()
    return notes, node.digest().digest()


def commit_floor(where: Path, count: int, row_bytes: int) -> float:
    """Seconds for one durable sqlite3 commit of a ``row_bytes`` row, on average."""
    con = sqlite3.connect(where / "floor.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("DELETE FROM t")
    body = "x" * row_bytes
    t0 = time.perf_counter()
    for i in range(count):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t (id, body) VALUES (?, ?)", (i, body))
        con.execute("COMMIT")
    seconds = (time.perf_counter() - t0) / count
    con.close()
    return seconds


def count_transactions(node: Node) -> list[int]:
    """A counter of the notes' write transactions (`upsert_with` calls) from now on."""
    count = [0]
    inner = node.notebook.upsert_with

    def counted(build: Any, then: Any) -> Any:
        count[0] += 1
        return inner(build, then)

    node.notebook.upsert_with = counted  # type: ignore[method-assign]
    return count


def run(service: NotetakingService) -> tuple[PassReport, float]:
    t0 = time.perf_counter()
    report = trio.run(service.run_pass)
    return report, time.perf_counter() - t0


def bench(args: argparse.Namespace, where: Path) -> dict[str, Any]:
    node = make_life(where / "offline", args.events, args.seed)
    out: dict[str, Any] = {"events": args.events, "seed": args.seed}
    try:
        timed = Timed(OfflineDistiller())
        service = NotetakingService(node.db, node.notebook, LLMRouter((timed,)))  # type: ignore[arg-type]
        transactions = count_transactions(node)
        if args.model_loaded and nearby.enabled():
            # As a running daemon's later passes find it: loaded once a process.
            meaning.embed(["warm"])
        first, seconds = run(service)
        sources = first.sources
        with node.db.reading() as session:
            bytes_written = (
                session.connection()
                .exec_driver_sql("SELECT coalesce(sum(length(body)), 0) FROM note")
                .scalar()
            )
        row = max(int(bytes_written or 0) // max(first.written, 1), 1)
        floor = commit_floor(where, min(max(sources, 50), 500), row)
        out["full"] = {
            "sources": sources,
            "by_kind": first.as_json(),
            "seconds": seconds,
            "sources_per_s": sources / seconds,
            "ms_per_source": 1000 * seconds / sources,
            "distiller_share": timed.seconds / seconds,
            "floor_ms_per_commit": 1000 * floor,
            "x_floor": (seconds / sources) / floor,
            "write_transactions": transactions[0],
            "embedded": first.embedded,
            "model_loaded_before": bool(args.model_loaded and nearby.enabled()),
        }
        before = snapshot(node)
        second, seconds2 = run(service)
        unchanged = snapshot(node) == before
        out["second"] = {
            "seconds": seconds2,
            "ratio_to_full": seconds2 / seconds,
            "model_calls": second.calls,
            "notes_written": second.written,
            "notebook_and_digest_unchanged": unchanged,
        }
        node.log.append(
            [
                NewEvent(
                    EventKind.MESSAGE,
                    1_900_000_000_000_000,
                    "I finished the Lyon marathon in 3:58!!",
                    contact="Ada Lovelace",
                    thread="t-ada",
                )
            ],
            now=0,
        )
        third, seconds3 = run(service)
        out["one_new_message"] = {
            "seconds": seconds3,
            "model_calls": third.calls,
            "notes_written": third.written,
        }
    finally:
        node.close()
    if args.http:
        out["http"] = bench_http(args, where / "http", out["full"]["seconds"])
    return out


def bench_http(args: argparse.Namespace, where: Path, offline_seconds: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.support.llmserver import ScriptedLLMServer

    node = make_life(where, args.events, args.seed)
    try:
        with ScriptedLLMServer() as server:
            backend = ChatCompletionsBackend(server.url, "bench", timeout=30)
            router = LLMRouter((backend, OfflineDistiller()))
            report, seconds = run(NotetakingService(node.db, node.notebook, router))
            return {
                "seconds": seconds,
                "sources_per_s": report.sources / seconds,
                "requests": len(server.requests),
                "ratio_to_offline": seconds / offline_seconds,
            }
    finally:
        node.close()


def render(r: dict[str, Any]) -> list[str]:
    f, s, n = r["full"], r["second"], r["one_new_message"]
    k = f["by_kind"]
    lines = [
        f"distillation: sample life seed {r['seed']}, {r['events']:,} events, {f['sources']} "
        f"sources ({k['threads']} threads, {k['posts']} posts, {k['calls']} calls)",
        f"  full pass, built-in distiller: {f['seconds']:.2f} s = {f['sources_per_s']:.1f} "
        f"sources/s ({f['ms_per_source']:.2f} ms a source, {k['notes_written']} notes written "
        f"in {f['write_transactions']} write transactions)",
        f"    meaning vectors: {f['embedded']} notes embedded at the pass's end"
        + (
            ", the model loaded before the pass (as in a daemon's later passes)"
            if f["model_loaded_before"]
            else (", the model loaded during the pass" if f["embedded"] else " (off)")
        ),
        f"    baseline, one durable sqlite3 commit per source: {f['floor_ms_per_commit']:.2f} ms "
        f"-> {f['x_floor']:.1f}x the floor; the distiller itself: "
        f"{100 * f['distiller_share']:.0f}% of the pass",
        f"  second pass, nothing new: {s['seconds'] * 1000:.1f} ms = "
        f"{s['ratio_to_full']:.5f}x the full pass; {s['model_calls']} model calls, "
        f"{s['notes_written']} notes written, notes and digest "
        f"{'unchanged' if s['notebook_and_digest_unchanged'] else 'CHANGED'}",
        f"  one new message: {n['seconds'] * 1000:.1f} ms, {n['model_calls']} model call, "
        f"{n['notes_written']} notes written",
    ]
    if "http" in r:
        h = r["http"]
        lines.append(
            f"  full pass through the HTTP backend (instant loopback server): {h['seconds']:.2f} s"
            f" = {h['sources_per_s']:.1f} sources/s, {h['requests']} requests, "
            f"{h['ratio_to_offline']:.2f}x the built-in pass"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=5000, help="sample-life size (default 5000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--http", action="store_true", help="also time the HTTP backend")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--model-loaded",
        action="store_true",
        help="load the meaning model before the timed pass, as a daemon's later passes find it",
    )
    args = parser.parse_args(argv)
    if args.events < 300:
        parser.error("--events must be at least 300")
    with tempfile.TemporaryDirectory(prefix="pixie-bench-distill-", dir=args.dir) as tmp:
        results = bench(args, Path(tmp))
    print(json.dumps(results, indent=2) if args.json else "\n".join(render(results)))
    second = results["second"]
    ok = (
        second["model_calls"] == 0
        and second["notes_written"] == 0
        and second["notebook_and_digest_unchanged"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
