"""`pixie grep` as a person waits for it: whole processes, side by side with ripgrep.

A data dir of ``--events`` events (default 1,000,000) is made from the sample
life through the real import path. The first ``pixie grep`` after the import
builds the text mirror on disk (timed once). The mirror's lines are then
written to a plain file, and each command below runs as a whole process,
``--runs`` times after one warm-up, the pairs in turn (A B A B ...), so the
figures share the machine's moods:

* ``python -c pass``: the interpreter's own start, the floor of any command;
* ``pixie --version``;
* ``pixie grep`` with a word no event holds, against ``rg -c -i`` of it over
  the file (ripgrep reads the whole file either way);
* ``pixie grep`` with a common name (the newest 12 of thousands), against
  ``rg -c -i`` of it;
* in process: the mirror's no-hit scan alone (the mirror already open),
  against ripgrep's whole process.

Each figure is the median wall time and the largest peak resident memory
(the kernel's own accounting of the finished child). Ratios are pixie's
median over ripgrep's. ripgrep comes from the ``ripgrep`` wheel (installed
into the venv by ``./scripts/bench grep`` when missing).

    python scripts/bench_grep.py [--events N] [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import repo_root  # noqa: F401 (tests.testkit is not installed)

from pixie.device.agent.grep import GrepMemoryTool, compile_query
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.keystore import KEYS_ENV, KEYSTORE_ENV
from pixie.device.store.provision import create_data_dir
from pixie.protocol.timestamps import now_us
from tests.testkit.samplelife import generate

NOHIT = "zebra crossing"
COMMON = "Ada"


# Each command is started by this small launcher, a bare interpreter that
# reads one command per line and answers with its wall time, peak memory and
# exit status: a child forked from the benchmark itself would count the
# benchmark's own memory (a fork's peak includes the parent's pages it started
# with). The launcher's own size (about 10 MiB) is the floor of the figure.
LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    argv, env = json.loads(line)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    said = err.decode(errors="replace")[-500:]
    print(json.dumps([wall, usage.ru_maxrss, code, said]), flush=True)
"""


class Launcher:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
        """Wall seconds, peak resident KiB and exit status of one whole process."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([argv, env]) + "\n")
        self.proc.stdin.flush()
        wall, rss, code, err = json.loads(self.proc.stdout.readline())
        if code not in (0, 1) or err.strip():
            raise SystemExit(f"{' '.join(argv)} failed ({code}): {err}")
        return float(wall), int(rss), int(code)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def measure(
    launcher: Launcher, commands: dict[str, list[str]], runs: int, env: dict[str, str]
) -> dict[str, Any]:
    """Each command ``runs`` times after a warm-up, the commands in turn."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, int] = dict.fromkeys(commands, 0)
    for argv in commands.values():
        launcher.run(argv, env)  # warm-up: page cache, pyc files
    for _ in range(runs):
        for name, argv in commands.items():
            wall, rss, _ = launcher.run(argv, env)
            walls[name].append(wall)
            peaks[name] = max(peaks[name], rss)
    return {
        name: {
            "wall_s": statistics.median(walls[name]),
            "wall_min_s": min(walls[name]),
            "wall_max_s": max(walls[name]),
            "peak_mib": peaks[name] / 1024,
        }
        for name in commands
    }


def in_process_nohit(node: Node, runs: int) -> float:
    matcher, _ = compile_query(NOHIT)
    node.mirror.search(matcher, 12)  # opened and current
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        assert not node.mirror.search(matcher, 12)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(args: argparse.Namespace, tmp: Path, launcher: Launcher) -> dict[str, Any]:
    rg = shutil.which("rg", path=str(Path(sys.executable).parent)) or shutil.which("rg")
    if rg is None:
        raise SystemExit("pixie: error: ripgrep (rg) not found: pip install 'ripgrep>=14.1,<15'")
    pixie = shutil.which("pixie", path=str(Path(sys.executable).parent)) or "pixie"
    env = {**os.environ, KEYS_ENV: str(tmp / "keys"), KEYSTORE_ENV: "file"}
    os.environ.update({KEYS_ENV: env[KEYS_ENV], KEYSTORE_ENV: "file"})
    data = tmp / "data"
    create_data_dir(data, name="bench", role="device")
    life = tmp / "life.jsonl"
    with life.open("w", encoding="utf-8") as out:
        for obj in generate(seed=5, events=args.events):
            out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    with Node.open(data) as node, life.open("rb") as stream:
        t0 = time.perf_counter()
        node.log.append(read_events(stream), now=now_us())
        imported = time.perf_counter() - t0
    life.unlink()
    first = launcher.run([pixie, "--data", str(data), "grep", NOHIT], env)[0]
    text = tmp / "mirror.txt"
    with Node.open(data) as node:
        with text.open("w", encoding="utf-8") as out:
            for _, line in node.mirror.lines():
                out.write(line + "\n")
        common = GrepMemoryTool(node.mirror).run(COMMON)
        assert len(common.hits) == 12, common.message
        scan = in_process_nohit(node, max(5, args.runs))
    mirror_mb = sum(p.stat().st_size for p in (data / "mirror").iterdir()) / 1e6
    grep = [pixie, "--data", str(data), "grep"]
    whole = measure(
        launcher,
        {
            "python -c pass": [sys.executable, "-c", "pass"],
            "pixie --version": [pixie, "--version"],
            "pixie grep (no hit)": [*grep, NOHIT],
            "rg -c -i (no hit)": [rg, "-c", "-i", NOHIT, str(text)],
            f"pixie grep {COMMON}": [*grep, COMMON],
            f"rg -c -i {COMMON}": [rg, "-c", "-i", COMMON, str(text)],
        },
        args.runs,
        env,
    )
    rg_nohit = whole["rg -c -i (no hit)"]["wall_s"]
    return {
        "events": args.events,
        "import_s": imported,
        "first_grep_s": first,
        "text_mb": text.stat().st_size / 1e6,
        "mirror_mb": mirror_mb,
        "whole": whole,
        "in_process_nohit_s": scan,
        "ratios": {
            "grep_nohit_vs_rg": whole["pixie grep (no hit)"]["wall_s"] / rg_nohit,
            "grep_common_vs_rg": whole[f"pixie grep {COMMON}"]["wall_s"]
            / whole[f"rg -c -i {COMMON}"]["wall_s"],
            "in_process_nohit_vs_rg_process": scan / rg_nohit,
            "grep_startup_over_python": whole["pixie grep (no hit)"]["wall_s"]
            - whole["python -c pass"]["wall_s"],
            "version_over_python": whole["pixie --version"]["wall_s"]
            - whole["python -c pass"]["wall_s"],
        },
    }


def render(r: dict[str, Any]) -> list[str]:
    out = [
        f"pixie grep as a command: {r['events']:,} events, {r['text_mb']:.0f} MB of text "
        f"({r['mirror_mb']:.0f} MB of mirror files on disk)",
        f"  import {r['import_s']:.1f} s; first grep after it (builds the mirror) "
        f"{r['first_grep_s']:.2f} s",
        "  whole process, median wall (min-max), peak memory:",
    ]
    for name, f in r["whole"].items():
        out.append(
            f"    {name:<24} {f['wall_s'] * 1000:8.1f} ms "
            f"({f['wall_min_s'] * 1000:.1f}-{f['wall_max_s'] * 1000:.1f}), {f['peak_mib']:.0f} MiB"
        )
    x = r["ratios"]
    out += [
        f"  pixie grep / rg -c -i: no hit {x['grep_nohit_vs_rg']:.2f}x, "
        f"common name {x['grep_common_vs_rg']:.2f}x",
        f"  in process, no-hit scan {r['in_process_nohit_s'] * 1000:.1f} ms = "
        f"{x['in_process_nohit_vs_rg_process']:.2f}x ripgrep's whole process",
        f"  start-up beyond python -c pass: pixie --version "
        f"{x['version_over_python'] * 1000:.0f} ms, pixie grep (no hit, whole) "
        f"{x['grep_startup_over_python'] * 1000:.0f} ms",
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 1000 or args.runs < 1:
        parser.error("--events must be at least 1000 and --runs at least 1")
    launcher = Launcher()  # first, while this process is small
    try:
        with tempfile.TemporaryDirectory(prefix="pixie-bench-grep-", dir=args.dir) as tmp:
            results = bench(args, Path(tmp), launcher)
    finally:
        launcher.close()
    print(json.dumps(results, indent=2) if args.json else "\n".join(render(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
