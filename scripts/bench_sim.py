"""Simulator throughput: seeds per minute, against the old one-job run measured in the same run.

Runs the same seeds three ways, one after another, each a fresh
``python -m pixie.sim --json`` process:

- ``baseline``: one job, ``--baseline`` (as before the speed-ups: each database
  compiles its own statements, every check at every chance);
- ``one job``: one job, as `scripts/simulate` now runs;
- ``jobs``: ``--jobs N`` worker processes.

It prints each one's wall-clock rate (seeds per minute) and CPU time per seed
(what the processes used, less sensitive to whatever else the machine runs),
their ratios to the baseline, and whether the three gave the same per-seed
results (every seed's digests, stats and relay hash, byte for byte: the
speed-ups change how fast a seed runs, never what it does). ``--rounds R``
repeats the three and keeps each one's best.

    .venv/bin/python scripts/bench_sim.py [--seeds 200] [--jobs 2] [--rounds 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Run:
    name: str
    wall_s: float
    cpu_s: float
    lines: list[str]
    violations: int

    def rate(self, seeds: int) -> float:
        return seeds / self.wall_s * 60

    def cpu_per_seed_ms(self, seeds: int) -> float:
        return self.cpu_s / seeds * 1000


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name: str, flags: list[str], seeds: int, first: int, steps: int) -> Run:
    argv = [sys.executable, "-m", "pixie.sim", "--json", "--keep-going"]
    argv += ["--seeds", str(seeds), "--first", str(first), "--steps", str(steps), *flags]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode not in (0, 1):
        sys.exit(f"bench_sim: {name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    lines = done.stdout.splitlines()
    summary = json.loads(lines[-1])["summary"]
    return Run(name, wall, cpu, lines[:-1], int(summary["violations"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = {
        "baseline": ["--baseline"],
        "one job": [],
        f"{args.jobs} jobs": ["--jobs", str(args.jobs)],
    }
    best: dict[str, Run] = {}
    for _ in range(max(1, args.rounds)):
        for name, flags in configs.items():
            got = run(name, flags, args.seeds, args.first, args.steps)
            if name not in best or got.wall_s < best[name].wall_s:
                best[name] = got
    base = best["baseline"]
    same = all(r.lines == base.lines for r in best.values())
    n = args.seeds
    rows = [
        {
            "config": r.name,
            "seeds_per_minute": round(r.rate(n), 1),
            "cpu_ms_per_seed": round(r.cpu_per_seed_ms(n), 1),
            "rate_vs_baseline": round(r.rate(n) / base.rate(n), 2),
            "cpu_vs_baseline": round(base.cpu_s / r.cpu_s, 2),
            "violations": r.violations,
        }
        for r in best.values()
    ]
    if args.json:
        print(json.dumps({"seeds": n, "steps": args.steps, "same_results": same, "runs": rows}))
    else:
        print(f"{n} seeds x {args.steps} steps, best of {max(1, args.rounds)}:")
        print(f"{'':10} {'seeds/min':>10} {'x base':>7} {'CPU ms/seed':>12} {'x base':>7}")
        for row in rows:
            print(
                f"{row['config']:10} {row['seeds_per_minute']:10.0f} "
                f"{row['rate_vs_baseline']:7.2f} {row['cpu_ms_per_seed']:12.0f} "
                f"{row['cpu_vs_baseline']:7.2f}"
            )
        print(f"same per-seed results in all three: {'yes' if same else 'NO'}")
        print(f"violations: {', '.join(str(r['violations']) for r in rows)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
