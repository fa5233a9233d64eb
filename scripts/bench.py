"""Benchmarks for the memory log and grep_memory.

Every figure is paired with a baseline measured in the same run on the same
machine, and reported as a ratio, so the numbers mean something on any box:

* import: 100k events through the real import path (parse, validate, append
  with contacts, ids and sequences, one durable transaction) against raw
  sqlite3 ``executemany`` of the same rows into an equal table (same DDL,
  indexes and pragmas), each the best of a few rounds taken in turn. Target:
  rate >= 0.8x the raw rate; >= 0.7x from a file (with ``json.loads`` of
  every line added to the baseline).
* the text mirror's rebuild at 10k, 100k and 1M events: the cost per event
  at each size against the smallest's (target: linear, about 1x).
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

import repo_root  # noqa: F401 (tests.testkit is not installed)

from pixie.device.agent.grep import MAX_HITS, GrepMemoryTool
from pixie.device.ingest.jsonl import event_from_object, read_events
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import as_row
from pixie.device.store.provision import create_data_dir
from pixie.protocol.timestamps import now_us
from tests.testkit.samplelife import generate


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


def bench_import(tmp: Path, events: int, rounds: int) -> dict[str, float]:
    """Two figures, each against raw sqlite3 on the same rows in the same run.

    ``store``: the log's append of already-parsed events (ids, sequences,
    contact resolution, one durable transaction) against raw ``executemany``
    of the finished rows. ``file``: the whole ``pixie log import`` path (read,
    parse, validate, append) against ``json.loads`` of every line plus the raw
    ``executemany``. Each is timed ``rounds`` times, the import and its
    baseline in turn, into fresh databases; a ratio is of the best times (the
    machine's other load only ever adds), with the range of each round's own
    ratio beside it.
    """
    life = tmp / "import.jsonl"
    write_life(life, events, seed=11)
    with life.open("rb") as stream:
        parsed = read_events(stream)

    def fresh(name: str) -> Node:
        create_data_dir(tmp / name, name="bench", role="device")
        return Node.open(tmp / name)

    rows: list[tuple[object, ...]] = []
    ddl: list[str] = []

    def store(name: str) -> float:
        with fresh(name) as node:
            elapsed = timed(lambda: node.log.append(parsed, now=now_us()))
            if not rows:
                rows.extend(as_row(n, r) for n, r in enumerate(node.log.all_records(), start=1))
                con = sqlite3.connect(node.db.path)
                ddl.extend(
                    sql
                    for (sql,) in con.execute(
                        "SELECT sql FROM sqlite_master WHERE tbl_name = 'memory_event' "
                        "AND type IN ('table', 'index') AND sql IS NOT NULL"
                    )
                )
                con.close()
        shutil.rmtree(tmp / name)
        return elapsed

    def whole_file(name: str) -> float:
        with fresh(name) as node:

            def run() -> None:
                with life.open("rb") as stream:
                    node.log.append(read_events(stream), now=now_us())

            elapsed = timed(run)
        shutil.rmtree(tmp / name)
        return elapsed

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
        for suffix in ("", "-wal", "-shm"):
            (tmp / (name + suffix)).unlink(missing_ok=True)
        return elapsed

    def decode_lines() -> None:
        with life.open("rb") as stream:
            for line in stream:
                json.loads(line)

    t_store: list[float] = []
    t_raw: list[float] = []
    t_file: list[float] = []
    t_raw_file: list[float] = []
    for r in range(rounds):
        t_store.append(store(f"import-store-{r}"))
        t_raw.append(raw_insert(f"raw-store-{r}.db"))
        t_file.append(whole_file(f"import-file-{r}"))
        t_raw_file.append(raw_insert(f"raw-file-{r}.db", decode_lines))
    store_ratios = [b / a for a, b in zip(t_store, t_raw, strict=True)]
    file_ratios = [b / a for a, b in zip(t_file, t_raw_file, strict=True)]
    return {
        "events": events,
        "rounds": rounds,
        "store_events_per_s": events / min(t_store),
        "raw_events_per_s": events / min(t_raw),
        "store_rate_ratio": min(t_raw) / min(t_store),
        "store_rate_ratio_low": min(store_ratios),
        "store_rate_ratio_high": max(store_ratios),
        "file_events_per_s": events / min(t_file),
        "raw_file_events_per_s": events / min(t_raw_file),
        "file_rate_ratio": min(t_raw_file) / min(t_file),
        "file_rate_ratio_low": min(file_ratios),
        "file_rate_ratio_high": max(file_ratios),
    }


def bench_rebuild(tmp: Path, sizes: list[int], rounds: int) -> dict[str, float]:
    """The text mirror's cold build (`rebuild`) as the log grows to each size:
    the best of ``rounds`` builds, and its cost per event against the
    smallest size's (1.0 is linear)."""
    data = tmp / "rebuild"
    create_data_dir(data, name="bench", role="device")
    out: dict[str, float] = {}
    events = generate(seed=5, events=max(sizes))
    with Node.open(data) as node:
        have = 0
        for size in sorted(sizes):
            batch = [event_from_object(next(events)) for _ in range(size - have)]
            for i in range(0, len(batch), 100_000):
                node.log.append(batch[i : i + 100_000], now=now_us())
            have = size
            del batch
            best = min(timed(node.mirror.rebuild) for _ in range(rounds))
            out[f"rebuild_{size}_s"] = best
            out[f"rebuild_{size}_us_per_event"] = best / size * 1e6
    first = min(sizes)
    for size in sizes:
        out[f"rebuild_{size}_per_event_vs_{first}"] = (
            out[f"rebuild_{size}_us_per_event"] / out[f"rebuild_{first}_us_per_event"]
        )
    shutil.rmtree(data)
    return out


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
    parser.add_argument("--grep-events", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=50, help="repetitions per p50")
    parser.add_argument(
        "--import-rounds", type=int, default=3, help="timings of the import and its baselines"
    )
    parser.add_argument(
        "--rebuild-events",
        type=int,
        nargs="*",
        default=[10_000, 100_000, 1_000_000],
        help="log sizes for the text mirror's rebuild (none to skip)",
    )
    parser.add_argument("--rebuild-rounds", type=int, default=3, help="rebuilds per size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="pixie-bench-") as tmpname:
        tmp = Path(tmpname)
        imp = bench_import(tmp, args.import_events, args.import_rounds)
        results["import"] = imp
        if not args.json:
            print(
                f"import {imp['events']:,} events, best of {imp['rounds']} "
                "(target >= 0.8x the raw rate; >= 0.7x from a file):\n"
                f"  store append {imp['store_events_per_s']:,.0f}/s vs raw executemany "
                f"{imp['raw_events_per_s']:,.0f}/s -> {imp['store_rate_ratio']:.2f}x "
                f"(rounds {imp['store_rate_ratio_low']:.2f}-{imp['store_rate_ratio_high']:.2f}x)\n"
                f"  whole file {imp['file_events_per_s']:,.0f}/s vs json.loads + raw "
                f"executemany {imp['raw_file_events_per_s']:,.0f}/s -> "
                f"{imp['file_rate_ratio']:.2f}x "
                f"(rounds {imp['file_rate_ratio_low']:.2f}-{imp['file_rate_ratio_high']:.2f}x)"
            )
        if args.rebuild_events:
            reb = bench_rebuild(tmp, args.rebuild_events, args.rebuild_rounds)
            results["rebuild"] = reb
            if not args.json:
                first = min(args.rebuild_events)
                print(f"text mirror rebuild, best of {args.rebuild_rounds} (target: linear):")
                for n in sorted(args.rebuild_events):
                    print(
                        f"  {n:>9,} events {reb[f'rebuild_{n}_s']:.2f} s, "
                        f"{reb[f'rebuild_{n}_us_per_event']:.2f} us/event -> "
                        f"{reb[f'rebuild_{n}_per_event_vs_{first}']:.2f}x the cost per "
                        f"event at {first:,}"
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
