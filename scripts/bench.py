"""Benchmarks for the memory log and grep_memory.

Every figure is paired with a baseline measured in the same run on the same
machine, and reported as a ratio, so the numbers mean something on any box:

* import: 100k events through the real import path (parse, validate, append
  with contacts, ids and sequences, one durable transaction) against raw
  sqlite3 ``executemany`` of the same rows into an equal table (same DDL,
  indexes and pragmas). Target: rate >= 0.7x the raw rate.
* grep at 100k and 1M events: p50 for a common name (the newest 12); a pattern
  with no hit against GNU ``grep -ci`` over the same lines in a file (target
  <= 1.5x); ``(a+)+$`` against the no-hit case (target: no slower).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pixie.device.agent.grep import MAX_HITS, GrepMemoryTool
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import as_row
from pixie.device.store.provision import create_data_dir
from pixie.protocol.timestamps import now_us
from pixie.sim.samplelife import generate


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def p50(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm
    return statistics.median(timed(fn) for _ in range(runs))


def write_life(path: Path, events: int, seed: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for obj in generate(seed=seed, events=events):
            out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")


def bench_import(tmp: Path, events: int) -> dict[str, float]:
    """Two figures, each against raw sqlite3 on the same rows in the same run.

    ``store``: the log's append of already-parsed events (ids, sequences,
    contact resolution, one durable transaction) against raw ``executemany``
    of the finished rows. ``file``: the whole ``pixie log import`` path (read,
    parse, validate, append) against ``json.loads`` of every line plus the raw
    ``executemany``.
    """
    life = tmp / "import.jsonl"
    write_life(life, events, seed=11)
    with life.open("rb") as stream:
        parsed = read_events(stream)

    def fresh(name: str) -> Node:
        create_data_dir(tmp / name, name="bench", role="device")
        return Node.open(tmp / name)

    with fresh("import-store") as node:
        t_store = timed(lambda: node.log.append(parsed, now=now_us()))
        rows = [as_row(n, r) for n, r in enumerate(node.log.all_records(), start=1)]
        con = sqlite3.connect(node.db.path)
        ddl = [
            sql
            for (sql,) in con.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = 'memory_event' "
                "AND type IN ('table', 'index') AND sql IS NOT NULL"
            )
        ]
        con.close()

    with fresh("import-file") as node:

        def whole_file() -> None:
            with life.open("rb") as stream:
                node.log.append(read_events(stream), now=now_us())

        t_file = timed(whole_file)

    def raw_insert(name: str, prepare: Callable[[], object] | None = None) -> float:
        con = sqlite3.connect(tmp / name, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        for sql in ddl:
            con.execute(sql)
        placeholders = ",".join("?" * 11)

        def run() -> None:
            if prepare is not None:
                prepare()
            con.execute("BEGIN IMMEDIATE")
            con.executemany(f"INSERT INTO memory_event VALUES ({placeholders})", rows)
            con.execute("COMMIT")

        elapsed = timed(run)
        con.close()
        return elapsed

    t_raw = raw_insert("raw-store.db")

    def decode_lines() -> None:
        with life.open("rb") as stream:
            for line in stream:
                json.loads(line)

    t_raw_file = raw_insert("raw-file.db", decode_lines)
    return {
        "events": events,
        "store_events_per_s": events / t_store,
        "raw_events_per_s": events / t_raw,
        "store_rate_ratio": t_raw / t_store,
        "file_events_per_s": events / t_file,
        "raw_file_events_per_s": events / t_raw_file,
        "file_rate_ratio": t_raw_file / t_file,
    }


def bench_grep(tmp: Path, events: int, runs: int) -> dict[str, float]:
    data = tmp / f"grep-{events}"
    create_data_dir(data, name="bench", role="device")
    life = tmp / f"grep-{events}.jsonl"
    write_life(life, events, seed=5)
    with Node.open(data) as node:
        with life.open("rb") as stream:
            node.log.append(read_events(stream), now=now_us())
        life.unlink()
        t_build = timed(node.mirror.ensure_current)
        text_file = tmp / f"mirror-{events}.txt"
        with text_file.open("w", encoding="utf-8") as out:
            for _, line in node.mirror.lines():
                out.write(line + "\n")

        common = GrepMemoryTool(node.mirror).run("Ada")
        assert len(common.hits) == MAX_HITS, common.message
        nohit = "zebra crossing"
        assert not GrepMemoryTool(node.mirror).run(nohit).hits
        # The pattern that backtracking engines blow up on, in its worst form:
        # forced to fail on every line, so the whole text is scanned.
        patho = "(a+)+$"
        worst = "(a+)+QQQ$"
        assert not GrepMemoryTool(node.mirror).run(worst).hits
        t_common = p50(lambda: GrepMemoryTool(node.mirror).run("Ada"), runs)
        t_nohit = p50(lambda: GrepMemoryTool(node.mirror).run(nohit), max(5, runs // 5))
        t_patho = p50(lambda: GrepMemoryTool(node.mirror).run(patho), max(5, runs // 5))
        t_worst = p50(lambda: GrepMemoryTool(node.mirror).run(worst), max(5, runs // 5))
    grep = shutil.which("grep")
    assert grep is not None
    t_gnu = p50(
        lambda: subprocess.run(
            [grep, "-ci", nohit, str(text_file)], stdout=subprocess.DEVNULL, check=False
        ),
        max(5, runs // 5),
    )
    t_gnu_worst = p50(
        lambda: subprocess.run(
            [grep, "-ciE", worst, str(text_file)], stdout=subprocess.DEVNULL, check=False
        ),
        max(5, runs // 5),
    )
    size_mb = text_file.stat().st_size / 1e6
    text_file.unlink()
    shutil.rmtree(data)
    return {
        "events": events,
        "mirror_mb": size_mb,
        "mirror_build_s": t_build,
        "common_name_p50_ms": t_common * 1000,
        "no_hit_p50_ms": t_nohit * 1000,
        "gnu_grep_ci_p50_ms": t_gnu * 1000,
        "no_hit_vs_gnu_grep": t_nohit / t_gnu,
        "pathological_p50_ms": t_patho * 1000,
        "pathological_vs_no_hit": t_patho / t_nohit,
        "pathological_no_hit_p50_ms": t_worst * 1000,
        "pathological_no_hit_vs_no_hit": t_worst / t_nohit,
        "gnu_grep_ciE_worst_p50_ms": t_gnu_worst * 1000,
        "pathological_no_hit_vs_gnu_grep": t_worst / t_gnu_worst,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--import-events", type=int, default=100_000)
    parser.add_argument("--grep-events", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=50, help="repetitions per p50")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="pixie-bench-") as tmpname:
        tmp = Path(tmpname)
        imp = bench_import(tmp, args.import_events)
        results["import"] = imp
        if not args.json:
            print(
                f"import {imp['events']:,} events (target >= 0.7x the raw rate):\n"
                f"  store append {imp['store_events_per_s']:,.0f}/s vs raw executemany "
                f"{imp['raw_events_per_s']:,.0f}/s -> {imp['store_rate_ratio']:.2f}x\n"
                f"  whole file {imp['file_events_per_s']:,.0f}/s vs json.loads + raw "
                f"executemany {imp['raw_file_events_per_s']:,.0f}/s -> "
                f"{imp['file_rate_ratio']:.2f}x"
            )
        for n in args.grep_events:
            g = bench_grep(tmp, n, args.runs)
            results[f"grep_{n}"] = g
            if not args.json:
                print(
                    f"grep at {n:,} events ({g['mirror_mb']:.0f} MB of text, mirror built in "
                    f"{g['mirror_build_s']:.2f} s):\n"
                    f"  common name p50 {g['common_name_p50_ms']:.2f} ms (target <= 10 ms at 1M)\n"
                    f"  no hit p50 {g['no_hit_p50_ms']:.1f} ms vs grep -ci "
                    f"{g['gnu_grep_ci_p50_ms']:.1f} ms -> {g['no_hit_vs_gnu_grep']:.2f}x "
                    "(target <= 1.5x)\n"
                    f"  (a+)+$ p50 {g['pathological_p50_ms']:.1f} ms -> "
                    f"{g['pathological_vs_no_hit']:.2f}x the no-hit case (target <= 1x)\n"
                    f"  (a+)+QQQ$ (fails on every line) p50 "
                    f"{g['pathological_no_hit_p50_ms']:.1f} ms -> "
                    f"{g['pathological_no_hit_vs_no_hit']:.2f}x the no-hit case; "
                    f"grep -ciE on it {g['gnu_grep_ciE_worst_p50_ms']:.1f} ms -> "
                    f"{g['pathological_no_hit_vs_gnu_grep']:.2f}x"
                )
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
