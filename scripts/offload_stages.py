"""Where an offload and a fetch spend their time, stage by stage, across the
device, the relay and the Homebase.

Runs our side of `bench_offload.py` (relay, Homebase and device, three
processes on loopback) with named functions of each process wrapped to note
when they start and end on the clock all processes share (CLOCK_MONOTONIC).
Prints, for offloads and for fetches, the median time per stage within one
call (the rest is the wire, the scheduler and glue), the mean per stage over
the slowest 5% of calls (where the tail's time goes), then the commonest
sequence of events with the median time of each since the call began.

    python scripts/offload_stages.py [--rounds 300] [--timeline]

The wrappers cost a few microseconds each: compare stages with each other and
with the floor's parts (an envelope sealed and opened each way, one durable
commit), not the totals with `bench_offload.py`'s figures.
"""

from __future__ import annotations

import argparse
import atexit
import bisect
import collections
import contextlib
import functools
import importlib
import inspect
import json
import os
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from pixie.entry.allocator import keep_freed_memory

EVENTS: list[tuple[str, int, int]] = []
DIR_ENV = "PIXIE_STAGES_DIR"
# (module, class or None, function, stage it counts to or None: shown in the
# timeline only). A module-level function is patched where it is looked up.
WRAPPED: list[tuple[str, str | None, str, str | None]] = [
    ("trio._highlevel_socket", "SocketStream", "send_all", None),
    ("trio._highlevel_socket", "SocketStream", "receive_some", None),
    (
        "pixie.device.store.siblings",
        "SiblingBook",
        "next_send_counter",
        "envelope counter reserved",
    ),
    ("pixie.device.store.siblings", "SiblingBook", "accept_counter", "replay window checked+saved"),
    ("pixie.device.sync.peers", None, "seal", "envelope sealed (floor)"),
    ("pixie.device.sync.admission", None, "open_envelope", "envelope opened (floor)"),
    ("pixie.device.sync.peers", None, "encode_body", "message encoded"),
    ("pixie.device.sync.admission", None, "decode_body", "message decoded"),
    ("pixie.device.sync.peers", "PeerLink", "send", None),
    ("pixie.device.sync.peers", "PeerLink", "receive", None),
    ("pixie.device.sync.offload", "OffloadLedger", "candidate", "device: candidate read"),
    (
        "pixie.device.sync.offload",
        "OffloadLedger",
        "compare_and_clear",
        "device: compare-and-clear",
    ),
    ("pixie.device.sync.offload", "OffloadLedger", "pointer", "device: pointer read"),
    ("pixie.device.sync.offload", "NoteOffloadService", "offload", None),
    ("pixie.device.sync.offload", "NoteOffloadService", "fetch", None),
    ("pixie.homebase.holding", "HolderCore", "hold", "holder: durable commit (floor)"),
    ("pixie.homebase.holding", "HolderCore", "serve", "holder: body read+re-hashed"),
    ("pixie.homebase.holder", "Holder", "handle", None),
    ("pixie.relay.server", "Relay", "_receive", None),
]
RELAY_STAGE = "relay: frame in to frame out"


def _wrap(owner: Any, attr: str, name: str) -> None:
    fn = inspect.getattr_static(owner, attr)
    if isinstance(fn, staticmethod):
        fn = fn.__func__
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            t = time.monotonic_ns()
            try:
                return await fn(*args, **kwargs)
            finally:
                EVENTS.append((name, t, time.monotonic_ns()))

        setattr(owner, attr, timed_async)
        return

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.monotonic_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            EVENTS.append((name, t, time.monotonic_ns()))

    setattr(owner, attr, timed)


def install(who: str, *, dump_at_exit: bool = True) -> None:
    for module, cls, attr, _stage in WRAPPED:
        try:
            owner = importlib.import_module(module)
            if cls is not None:
                owner = getattr(owner, cls)
            _wrap(owner, attr, f"{who}:{attr}")
        except (ImportError, AttributeError) as exc:
            print(f"offload_stages: not timed: {module}.{cls}.{attr} ({exc})", file=sys.stderr)

    def dump() -> None:
        where = os.environ.get(DIR_ENV)
        if where:
            (Path(where) / f"{who}.json").write_text(json.dumps(EVENTS))

    if dump_at_exit:
        atexit.register(dump)


def serve(args: list[str]) -> None:
    """Run ``pixie ARGS`` (the relay or the Homebase) with the wrappers in."""
    install("relay" if "relay" in args[:2] else "homebase")
    sys.argv = ["pixie", *args]
    with contextlib.suppress(SystemExit):
        runpy.run_module("pixie.entry.main", run_name="__main__")


async def run_ours(tmp: Path, rounds: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_offload

    bench_offload.PIXIE = [sys.executable, __file__, "--serve"]
    async with bench_offload.pixie(tmp, rounds) as setup:
        for i in range(rounds):
            await setup.round(i)


def analyse(where: Path, what: str, timeline: bool) -> None:
    events: list[tuple[str, int, int]] = []
    for who in ("device", "homebase", "relay"):
        events += [(n, s, e) for n, s, e in json.loads((where / f"{who}.json").read_text())]
    events.sort(key=lambda e: e[1])
    starts = [e[1] for e in events]
    # The first call is a warm-up (a connection's first use, cold caches), as
    # in bench_offload.py: not counted.
    calls = sorted((e for e in events if e[0] == f"device:{what}"), key=lambda e: e[1])[1:]
    points = sorted([(s, f"{n} <") for n, s, _ in events] + [(e, f"{n} >") for n, _, e in events])
    at = [p[0] for p in points]
    stage_of = {attr: stage for _m, _c, attr, stage in WRAPPED if stage}
    per_stage: dict[str, list[float]] = collections.defaultdict(list)
    totals: list[float] = []
    rests: list[float] = []
    sequences: collections.Counter[tuple[str, ...]] = collections.Counter()
    offsets: dict[tuple[str, ...], list[list[int]]] = collections.defaultdict(list)
    for _, start, end in calls:
        first, last = bisect.bisect_left(starts, start), bisect.bisect_right(starts, end)
        inside = [e for e in events[first:last] if e[2] <= end]
        sums: dict[str, float] = collections.defaultdict(float)
        for name, s, e in inside:
            stage = stage_of.get(name.split(":", 1)[1])
            if stage:
                sums[stage] += (e - s) / 1000
        i, j = bisect.bisect_left(at, start), bisect.bisect_right(at, end)
        window = points[i:j]
        for k, (t, name) in enumerate(window):
            if name == "relay:receive_some >":
                nxt = next((u for u, n in window[k:] if n == "relay:send_all <"), None)
                if nxt is not None:
                    sums[RELAY_STAGE] += (nxt - t) / 1000
        for stage in {*stage_of.values(), RELAY_STAGE}:
            per_stage[stage].append(sums.get(stage, 0.0))
        totals.append((end - start) / 1000)
        rests.append(totals[-1] - sum(sums.values()))
        sequence = tuple(name for _, name in window)
        sequences[sequence] += 1
        offsets[sequence].append([t - start for t, _ in window])
    total = statistics.median(totals)
    print(f"\n{what}: {len(calls)} calls, median {total:.0f} us; median per stage (us):")
    for stage, values in sorted(per_stage.items(), key=lambda kv: -statistics.median(kv[1])):
        median = statistics.median(values)
        if median:
            print(f"  {median:7.0f}  {stage}")
    # Each call's own rest (stages such as an fsync are bimodal on a shared
    # disk: the medians of the parts need not add up to the median whole).
    rest = statistics.median(rests)
    print(f"  {rest:7.0f}  the rest: sockets, process wake-ups, scheduling, dispatch and glue")
    # The slowest calls (the p99's side of the distribution): where their
    # extra time goes, stage by stage, as the mean over the slowest 5%.
    slow = sorted(range(len(totals)), key=totals.__getitem__)[-max(len(totals) // 20, 1) :]
    print(
        f"  the slowest {len(slow)} calls: mean {statistics.mean(totals[k] for k in slow):.0f} us;"
        " mean per stage (us):"
    )
    tail = {stage: statistics.mean(values[k] for k in slow) for stage, values in per_stage.items()}
    for stage, mean in sorted(tail.items(), key=lambda kv: -kv[1]):
        if mean >= 1:
            print(f"  {mean:7.0f}  {stage}")
    print(f"  {statistics.mean(rests[k] for k in slow):7.0f}  the rest")
    if not timeline:
        return
    sequence, count = sequences.most_common(1)[0]
    print(
        f"\n{what} timeline ({count} of {len(calls)} calls had this sequence), us since the call:"
    )
    medians = [statistics.median(row[k] for row in offsets[sequence]) for k in range(len(sequence))]
    before = 0.0
    for name, t in zip(sequence, medians, strict=True):
        print(f"  {t / 1000:8.0f} (+{(t - before) / 1000:5.0f})  {name}")
        before = t


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
        return 0
    keep_freed_memory()  # the device side, as `bench_offload.py` (the others go through `pixie`)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--timeline", action="store_true", help="also print each event's time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pixie-offload-stages-") as name:
        tmp = Path(name)
        os.environ[DIR_ENV] = str(tmp)
        install("device", dump_at_exit=False)
        trio.run(run_ours, tmp, args.rounds)
        (tmp / "device.json").write_text(json.dumps(EVENTS))
        for what in ("offload", "fetch"):
            analyse(tmp, what, args.timeline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
