"""`scripts/simulate`: run the deterministic simulator for one seed or many.

    python -m pixie.sim --seed 42 [--steps 60] [--trace] [--json]
    python -m pixie.sim --seeds 10000 [--first 0] [--steps 60] [--jobs N] [--json]

Exit status 0 when every seed held every invariant, 1 when one did not (its
seed, step, invariant and the trace that led there are printed, and
``--seed S`` replays it), 2 for bad flags.

``--jobs N`` runs the seeds in N worker processes (forked once, each running
one seed after another); by default a sweep takes one per CPU this process
may use (one with ``--trace``, which prints as it runs). A seed's run depends
on its seed alone, so what is printed is what one job prints, in seed order:
the same JSON lines, the same first violation, and the seeds after it are
not reported. Only the timing differs. ``--baseline`` runs as before the
simulator's own speed-ups (each database compiles its own statements, every
check at every chance, each check its own read, the digest rebuilt by
`Node.recompute_digest`), for
`scripts/bench_sim.py` to measure against in the same run; the product's code
is today's either way (``bench_sim.py --before REV`` runs an older tree).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import NoReturn

from pixie.device.store.db import reuse_across_databases
from pixie.sim import invariants
from pixie.sim.results import RunResult, run_seed

DEFAULT_STEPS = 60
# Seeds a worker takes at a time: few enough that the workers finish together
# and a violation stops the sweep soon, enough to keep the handing-out cheap.
CHUNK = 4
# What of a trace a worker sends back: more than a report or a JSON line shows.
TRACE_BACK = 30


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"simulate: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="simulate",
        description="Device, Homebase and relay in one process, driven by a seed.",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seed", type=int, help="run (or replay) this one seed")
    which.add_argument("--seeds", type=int, help="run this many seeds (default 100)")
    p.add_argument("--first", type=int, default=0, help="the first seed of --seeds (default 0)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="steps per seed")
    p.add_argument("--trace", action="store_true", help="print every event as it happens")
    p.add_argument("--json", action="store_true", help="one JSON object per seed, then a summary")
    p.add_argument("--lying-holder", action="store_true", help="let the holder ack unstored bodies")
    p.add_argument("--keep-going", action="store_true", help="do not stop at the first violation")
    p.add_argument(
        "--peers",
        type=int,
        choices=range(2, 6),
        default=2,
        metavar="N",
        help="peers in the account, 2 to 5: the device, the Homebase, then more devices",
    )
    p.add_argument("--dir", type=Path, help="where the data dirs go (default: the temp dir)")
    p.add_argument(
        "--jobs",
        type=int,
        help="worker processes for --seeds (default: one per CPU this process may use; "
        "one with --trace)",
    )
    p.add_argument(
        "--baseline",
        action="store_true",
        help="run as before the speed-ups (for benchmarks; checks the same invariants)",
    )
    return p


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS says)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def configure(*, baseline: bool) -> None:
    """This process's speed-ups: each off with ``baseline``. None of them changes
    a seed's run (its trace, digests and stats are the same either way)."""
    reuse_across_databases(not baseline)
    invariants.SKIP_FOREGONE = not baseline
    invariants.ONE_READ = not baseline


def _run_one(seed: int, steps: int, base: Path | None, lies: bool, peers: int) -> RunResult:
    """One seed in a worker, its trace cut to what the parent may print."""
    result = run_seed(seed, steps, base=base, lies=lies, peers=peers)
    return dataclasses.replace(result, trace=result.trace[-TRACE_BACK:])


def _results(
    seeds: Sequence[int],
    jobs: int,
    run: Callable[[int], RunResult],
) -> Generator[RunResult, None, None]:
    """Each seed's result, in seed order, from ``jobs`` worker processes (or
    this one). Closing the iterator early stops the workers."""
    if jobs == 1 or len(seeds) == 1:
        yield from map(run, seeds)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    pool = context.Pool(min(jobs, len(seeds)))
    try:
        ordered: Iterable[RunResult] = pool.imap(run, seeds, chunksize=CHUNK)
        yield from ordered
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _report(result: RunResult) -> str:
    lines = [
        f"VIOLATION seed={result.seed} step={result.step} "
        f"invariant={result.invariant} ({result.invariant_name})",
        f"  {result.detail}",
        "  trace (most recent last):",
    ]
    lines += [f"    {line}" for line in result.trace[-25:]]
    lines.append(f"  replay: scripts/simulate --seed {result.seed} --steps {{steps}} --trace")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # What the product's loggers say (a note version that waits for its body
    # from the holder, with three peers) is the code's own account of a run;
    # the simulator's is its trace, so theirs goes nowhere.
    logging.getLogger("pixie").addHandler(logging.NullHandler())
    if (
        args.steps < 1
        or (args.seeds is not None and args.seeds < 1)
        or args.first < 0
        or (args.jobs is not None and args.jobs < 1)
    ):
        print(
            "simulate: error: --steps, --seeds and --jobs must be at least 1, --first at least 0",
            file=sys.stderr,
        )
        return 2
    if args.trace and args.jobs is not None and args.jobs > 1:
        print("simulate: error: --trace prints as it runs: use it with one job", file=sys.stderr)
        return 2
    if args.dir is not None and not args.dir.is_dir():
        print(f"simulate: error: --dir {args.dir} is not a directory", file=sys.stderr)
        return 2
    seeds: Sequence[int] = (
        [args.seed]
        if args.seed is not None
        else range(args.first, args.first + (args.seeds or 100))
    )
    if args.jobs is None:
        args.jobs = 1 if args.trace else min(usable_cpus(), len(seeds))
    configure(baseline=args.baseline)
    try:
        return _sweep(args, seeds)
    finally:  # leave a calling process (a test) as it was
        reuse_across_databases(False)
        invariants.SKIP_FOREGONE = True
        invariants.ONE_READ = True


def _sweep(args: argparse.Namespace, seeds: Sequence[int]) -> int:
    run: Callable[[int], RunResult]
    if args.trace:
        sink = functools.partial(print, flush=True)
        run = functools.partial(
            run_seed,
            steps=args.steps,
            base=args.dir,
            lies=args.lying_holder,
            trace=sink,
            peers=args.peers,
        )
    else:
        run = functools.partial(
            _run_one, steps=args.steps, base=args.dir, lies=args.lying_holder, peers=args.peers
        )
    started = time.perf_counter()
    failures: list[RunResult] = []
    ran = 0
    results = _results(seeds, args.jobs, run)
    for result in results:
        ran += 1
        if args.json:
            print(json.dumps(result.as_json(), sort_keys=True), flush=True)
        if not result.ok:
            failures.append(result)
            if not args.json:
                print(_report(result).replace("{steps}", str(args.steps)), flush=True)
            if not args.keep_going:
                break
    results.close()
    seconds = time.perf_counter() - started
    rate = ran / seconds * 60 if seconds > 0 else 0.0
    summary = {
        "seeds": ran,
        "steps": args.steps,
        "violations": len(failures),
        "failed_seeds": [f.seed for f in failures],
        "seconds": round(seconds, 1),
        "seeds_per_minute": round(rate, 1),
        "jobs": args.jobs,
        "peers": args.peers,
    }
    if args.json:
        print(json.dumps({"summary": summary}, sort_keys=True))
    else:
        verdict = "all invariants held" if not failures else f"{len(failures)} violated"
        jobs = f", {args.jobs} jobs" if args.jobs > 1 else ""
        jobs += f", {args.peers} peers" if args.peers != 2 else ""
        print(
            f"{ran} seeds x {args.steps} steps: {verdict} "
            f"({seconds:.1f} s, {rate:.0f} seeds/min{jobs})"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
