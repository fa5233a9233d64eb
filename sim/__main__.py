"""`scripts/simulate`: run the deterministic simulator for one seed or many.

    python -m pixie.sim --seed 42 [--steps 60] [--trace] [--json]
    python -m pixie.sim --seeds 10000 [--first 0] [--steps 60] [--json]

Exit status 0 when every seed held every invariant, 1 when one did not (its
seed, step, invariant and the trace that led there are printed, and
``--seed S`` replays it), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pixie.sim.world import RunResult, run_seed

DEFAULT_STEPS = 60


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
    p.add_argument("--dir", type=Path, help="where the data dirs go (default: the temp dir)")
    return p


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
    if args.steps < 1 or (args.seeds is not None and args.seeds < 1) or args.first < 0:
        print(
            "simulate: error: --steps and --seeds must be at least 1, --first at least 0",
            file=sys.stderr,
        )
        return 2
    if args.dir is not None and not args.dir.is_dir():
        print(f"simulate: error: --dir {args.dir} is not a directory", file=sys.stderr)
        return 2
    seeds = (
        [args.seed]
        if args.seed is not None
        else range(args.first, args.first + (args.seeds or 100))
    )
    sink = (lambda line: print(line, flush=True)) if args.trace else None
    started = time.perf_counter()
    failures: list[RunResult] = []
    ran = 0
    for seed in seeds:
        result = run_seed(seed, args.steps, base=args.dir, lies=args.lying_holder, trace=sink)
        ran += 1
        if args.json:
            print(json.dumps(result.as_json(), sort_keys=True), flush=True)
        if not result.ok:
            failures.append(result)
            if not args.json:
                print(_report(result).replace("{steps}", str(args.steps)), flush=True)
            if not args.keep_going:
                break
    seconds = time.perf_counter() - started
    rate = ran / seconds * 60 if seconds > 0 else 0.0
    summary = {
        "seeds": ran,
        "steps": args.steps,
        "violations": len(failures),
        "failed_seeds": [f.seed for f in failures],
        "seconds": round(seconds, 1),
        "seeds_per_minute": round(rate, 1),
    }
    if args.json:
        print(json.dumps({"summary": summary}, sort_keys=True))
    else:
        verdict = "all invariants held" if not failures else f"{len(failures)} violated"
        print(
            f"{ran} seeds x {args.steps} steps: {verdict} ({seconds:.1f} s, {rate:.0f} seeds/min)"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
