"""Simulator throughput: seeds per minute, against the old one-job run measured in the same run.

Runs the same seeds three ways, one after another, each a fresh
``python -m pixie.sim --json`` process:

- ``baseline``: one job, ``--baseline`` (as before the simulator's speed-ups:
  each database compiles its own statements, every check at every chance and
  with a read of its own, the digest rebuilt through ORM objects; the
  product's code is today's, see ``--before``);
- ``one job``: one job, as `scripts/simulate` now runs;
- ``jobs``: ``--jobs N`` worker processes.

It prints each one's wall-clock rate (seeds per minute) and CPU time per seed
(what the processes used, less sensitive to whatever else the machine runs),
their ratios to the baseline, and whether the three gave the same per-seed
results (every seed's digests, stats and relay hash, byte for byte: the
speed-ups change how fast a seed runs, never what it does). ``--rounds R``
repeats the three and keeps each one's best.

``--before REV`` also runs one job and ``--jobs N`` on the code of git
revision ``REV`` (a commit before a change: the product's code as well as the
simulator's, which ``--baseline`` cannot undo), from a copy of that tree put
first on the import path, and prints the ratios of now to then; its per-seed
results must be the same too.

    .venv/bin/python scripts/bench_sim.py [--seeds 200] [--jobs 2] [--rounds 1] [--json]
                                          [--before REV]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def tree_at(rev: str, into: Path) -> dict[str, str]:
    """The code of git revision ``rev`` laid out under ``into`` as the
    ``pixie`` packages (each folder where pyproject.toml maps it); returns
    the environment that imports it before the installed tree."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        capture_output=True,
        check=True,
    ).stdout
    tree = into / "tree"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
    pixie = into / "path" / "pixie"
    pixie.mkdir(parents=True)
    for package, folder in mapping["package-dir"].items():
        parts = package.split(".")
        if len(parts) == 2 and parts[0] == "pixie":
            (pixie / parts[1]).symlink_to(tree / folder, target_is_directory=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(into / "path"), env.get("PYTHONPATH", "")) if p
    )
    where = subprocess.run(
        [sys.executable, "-c", "import pixie.sim; print(pixie.sim.__path__[0])"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(into.resolve()):
        sys.exit(f"bench_sim: --before {rev}: pixie.sim still imports from {where}")
    return env


def run(
    name: str,
    flags: list[str],
    seeds: int,
    first: int,
    steps: int,
    env: dict[str, str] | None = None,
) -> Run:
    argv = [sys.executable, "-m", "pixie.sim", "--json", "--keep-going"]
    argv += ["--seeds", str(seeds), "--first", str(first), "--steps", str(steps), *flags]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
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
    parser.add_argument("--before", metavar="REV", help="also run the code of this git revision")
    args = parser.parse_args()
    jobs = f"{args.jobs} jobs"
    configs: dict[str, tuple[list[str], bool]] = {
        "baseline": (["--baseline", "--jobs", "1"], False),
        "one job": (["--jobs", "1"], False),
        jobs: (["--jobs", str(args.jobs)], False),
    }
    scratch = Path(tempfile.mkdtemp(prefix="bench-sim-"))
    try:
        before_env = None
        if args.before:
            before_env = tree_at(args.before, scratch)
            configs["before 1"] = (["--jobs", "1"], True)
            configs[f"before {args.jobs}"] = (["--jobs", str(args.jobs)], True)
        best: dict[str, Run] = {}
        for _ in range(max(1, args.rounds)):
            for name, (flags, then) in configs.items():
                env = before_env if then else None
                got = run(name, flags, args.seeds, args.first, args.steps, env)
                if name not in best or got.wall_s < best[name].wall_s:
                    best[name] = got
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = best["baseline"]
    same = all(r.lines == base.lines for r in best.values())
    n = args.seeds
    versus: dict[str, float] = {}
    if args.before:
        versus = {
            "one job": round(best["before 1"].wall_s / best["one job"].wall_s, 2),
            jobs: round(best[f"before {args.jobs}"].wall_s / best[jobs].wall_s, 2),
            "one job cpu": round(best["before 1"].cpu_s / best["one job"].cpu_s, 2),
            f"{jobs} cpu": round(best[f"before {args.jobs}"].cpu_s / best[jobs].cpu_s, 2),
        }
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
        out = {"seeds": n, "steps": args.steps, "same_results": same, "runs": rows}
        if args.before:
            out.update(before=args.before, now_vs_before=versus)
        print(json.dumps(out))
    else:
        print(f"{n} seeds x {args.steps} steps, best of {max(1, args.rounds)}:")
        print(f"{'':10} {'seeds/min':>10} {'x base':>7} {'CPU ms/seed':>12} {'x base':>7}")
        for row in rows:
            print(
                f"{row['config']:10} {row['seeds_per_minute']:10.0f} "
                f"{row['rate_vs_baseline']:7.2f} {row['cpu_ms_per_seed']:12.0f} "
                f"{row['cpu_vs_baseline']:7.2f}"
            )
        if args.before:
            print(
                f"now vs {args.before}: one job {versus['one job']:.2f}x "
                f"(CPU {versus['one job cpu']:.2f}x), {jobs} {versus[jobs]:.2f}x "
                f"(CPU {versus[jobs + ' cpu']:.2f}x)"
            )
        print(f"same per-seed results in all {len(best)}: {'yes' if same else 'NO'}")
        print(f"violations: {', '.join(str(r['violations']) for r in rows)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
