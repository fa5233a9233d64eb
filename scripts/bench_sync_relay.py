"""Initial sync of a large log, device to Homebase, through a real relay.

Three OS processes on loopback, as in real use: the relay (``pixie relay``),
the Homebase (``pixie run``) and this process, which plays the device and runs
one ``sync_once`` session. The figure is events per second from the first
Hello to the last Check, against a raw ``sqlite3`` ``executemany`` of the same
rows into the same schema (WAL, synchronous=FULL), measured in the same run
(the best of three).
The Homebase is up and has answered one sync (of two empty replicas) before
the device writes its log and the clock starts. Target: >= 0.3x.

    python scripts/bench_sync_relay.py [--events 100000] [--dir /dev/shm] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from pixie.device.app.daemon import sync_once
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import as_row
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.relayclient import RelayAddress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import write_life  # a sibling script

TARGET = 0.3
RAW_RUNS = 3
PIXIE = [sys.executable, "-m", "pixie.entry.main"]


def raw_rate(tmp: Path, node: Node) -> float:
    """Events/s of a raw executemany of the device's rows into a fresh file: the
    best of `RAW_RUNS` (each into a file of its own), so a stall of the machine
    during one of them does not flatter the ratio."""
    rows = [as_row(n, r) for n, r in enumerate(node.log.all_records(), start=1)]
    src = sqlite3.connect(node.db.path)
    ddl = [
        sql
        for (sql,) in src.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'memory_event' "
            "AND type IN ('table', 'index') AND sql IS NOT NULL"
        )
    ]
    src.close()
    best = float("inf")
    for attempt in range(RAW_RUNS):
        con = sqlite3.connect(tmp / f"raw{attempt}.db", isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        for sql in ddl:
            con.execute(sql)
        t0 = time.perf_counter()
        con.execute("BEGIN IMMEDIATE")
        con.executemany(f"INSERT INTO memory_event VALUES ({','.join('?' * 11)})", rows)
        con.execute("COMMIT")
        best = min(best, time.perf_counter() - t0)
        con.close()
    return len(rows) / best


async def run(tmp: Path, events: int) -> dict[str, float | str | None]:
    env = {**os.environ, "PIXIE_KEYSTORE": "file", "PIXIE_KEYS": str(tmp / "keys")}
    os.environ.update(env)
    life = tmp / "life.jsonl"
    write_life(life, events, seed=5)
    create_data_dir(tmp / "device", name="phone", role="device")
    create_data_dir(tmp / "homebase", name="mac", role="homebase")
    with Node.open(tmp / "device") as device, Node.open(tmp / "homebase") as mac:
        port_file = tmp / "relay.port"
        relay = await trio.lowlevel.open_process(
            [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        homebase: trio.Process | None = None
        try:
            with trio.fail_after(30):
                while not port_file.exists():
                    await trio.sleep(0.02)
            address = RelayAddress("127.0.0.1", int(port_file.read_text()))
            device.siblings.add(SiblingInfo(mac.public_key(), "mac", "homebase", str(address), 0))
            mac.siblings.add(SiblingInfo(device.public_key(), "phone", "device", str(address), 0))
            homebase = await trio.lowlevel.open_process(
                [*PIXIE, "--data", str(tmp / "homebase"), "run", "--interval", "3600"],
                env=env,
                stderr=subprocess.DEVNULL,
            )
            # A sync of the two empty replicas first: it ends once the Homebase
            # is up and answering, so the figure below is the sync alone, not
            # the start of a Python process and its connection to the relay.
            (ready,) = await sync_once(device, address, device.siblings.all(), idle_timeout=60)
            if ready.outcome != "in_sync":
                raise RuntimeError(f"the Homebase did not answer: {ready.error}")
            with life.open("rb") as stream:
                device.log.append(read_events(stream), now=0)
            t0 = time.perf_counter()
            (report,) = await sync_once(device, address, device.siblings.all(), idle_timeout=60)
            elapsed = time.perf_counter() - t0
        finally:
            for process in (homebase, relay):
                if process is not None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(20):
                        await process.wait()
        same = device.digest() == mac.digest()
        raw = raw_rate(tmp, device)
    rate = events / elapsed
    return {
        "events": events,
        "outcome": report.outcome,
        "error": report.error,
        "digests_equal": str(same),
        "seconds": elapsed,
        "events_per_s": rate,
        "raw_events_per_s": raw,
        "ratio": rate / raw,
        "bytes_sent": report.bytes_sent,
        "round_trips": report.round_trips,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pixie-bench-sync-", dir=args.dir) as name:
        result = trio.run(run, Path(name), args.events)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        verdict = "ok" if float(result["ratio"] or 0) >= TARGET else "MISSED"
        ratio = float(result["ratio"] or 0)
        print(
            f"initial sync of {result['events']:,} events through the relay: "
            f"{result['outcome']} in {float(result['seconds'] or 0):.1f} s, "
            f"{float(result['events_per_s'] or 0):,.0f} events/s vs raw executemany "
            f"{float(result['raw_events_per_s'] or 0):,.0f}/s -> {ratio:.2f}x "
            f"(target >= {TARGET}x: {verdict}); digests equal: {result['digests_equal']}; "
            f"{int(result['bytes_sent'] or 0):,} B sent"
        )
    return 0 if result["outcome"] == "synced" else 1


if __name__ == "__main__":
    sys.exit(main())
