"""`pixie run` at rest: the daemon's resident memory with a large log.

A device data dir of ``--events`` events (default 1,000,000, the sample life
through the real import path, then distilled by the built-in distiller, as a
daemon that has been running would have it) runs ``pixie run`` against a relay on loopback,
its Homebase registered but not running, so the daemon's first sync ends
without an answer and it then has nothing to do. Once that first sync is
recorded, its memory is read from ``/proc`` (resident now, and the peak) a
few times a second until it has stayed put for ``--settle`` seconds. The
baseline is the same daemon over an empty log, measured in the same run; the
ratio says what the log itself costs a daemon at rest.

    python scripts/bench_daemon.py [--events N] [--settle S] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.keystore import KEYS_ENV, KEYSTORE_ENV
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.lastsync import LAST_SYNC_KEY
from pixie.protocol.timestamps import now_us

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import write_life  # sibling scripts
from bench_fleet import stop

PIXIE = [sys.executable, "-m", "pixie.entry.main"]
FIRST_SYNC_SECONDS = 120.0


def memory_kib(pid: int) -> tuple[int, int]:
    """(resident, peak resident) KiB of a process, from /proc."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found["VmRSS"], found["VmHWM"]


def first_sync_recorded(db: Path) -> bool:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT count(*) FROM meta WHERE key LIKE ?", (LAST_SYNC_KEY + ":%",)
        ).fetchone()
        return bool(row[0])
    except sqlite3.Error:
        return False
    finally:
        con.close()


def at_rest(tmp: Path, name: str, events: int, relay: str, settle: float) -> dict[str, Any]:
    device, homebase = tmp / f"{name}-device", tmp / f"{name}-homebase"
    create_data_dir(device, name="phone", role="device")
    create_data_dir(homebase, name="mac", role="homebase")
    with Node.open(device) as phone, Node.open(homebase) as mac:
        if events:
            life = tmp / f"{name}.jsonl"
            write_life(life, events, seed=5)
            with life.open("rb") as stream:
                phone.log.append(read_events(stream), now=now_us())
            life.unlink()
            # Distilled beforehand, as a daemon that has been running finds it:
            # at rest means nothing left to distil either.
            service = NotetakingService(phone.db, phone.notebook, LLMRouter((OfflineDistiller(),)))
            trio.run(service.run_pass)
        phone.siblings.add(SiblingInfo(mac.public_key(), "mac", "homebase", relay, 0))
    daemon = subprocess.Popen(
        [*PIXIE, "--data", str(device), "run", "--interval", "3600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = time.monotonic()
        while not first_sync_recorded(device / "pixie.db"):
            if daemon.poll() is not None:
                raise SystemExit(f"pixie run exited with status {daemon.returncode}")
            if time.monotonic() - started > FIRST_SYNC_SECONDS:
                raise SystemExit("the daemon's first sync was never recorded")
            time.sleep(0.2)
        first_sync = time.monotonic() - started
        samples: list[tuple[float, int, int]] = []
        stable_since = time.monotonic()
        while time.monotonic() - stable_since < settle:
            rss, peak = memory_kib(daemon.pid)
            if samples and abs(rss - samples[-1][1]) > 1024:
                stable_since = time.monotonic()  # still moving by more than 1 MiB
            samples.append((time.monotonic(), rss, peak))
            time.sleep(0.25)
        _, rss, peak = samples[-1]
    finally:
        stop(daemon)
    return {
        "events": events,
        "first_sync_s": first_sync,
        "rss_mib": rss / 1024,
        "peak_mib": peak / 1024,
    }


def bench(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    env = {KEYSTORE_ENV: "file", KEYS_ENV: str(tmp / "keys")}
    os.environ.update(env)
    port_file = tmp / "relay.port"
    relay = subprocess.Popen(
        [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = time.monotonic()
        while not port_file.exists():
            if time.monotonic() - started > 30:
                raise SystemExit("the relay did not start")
            time.sleep(0.05)
        address = f"127.0.0.1:{int(port_file.read_text())}"
        empty = at_rest(tmp, "empty", 0, address, args.settle)
        full = at_rest(tmp, "full", args.events, address, args.settle)
    finally:
        stop(relay)
    return {"empty": empty, "full": full, "rss_ratio": full["rss_mib"] / empty["rss_mib"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds the memory must hold")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 1 or args.settle <= 0:
        parser.error("--events must be at least 1 and --settle above 0")
    with tempfile.TemporaryDirectory(prefix="pixie-bench-daemon-", dir=args.dir) as tmp:
        r = bench(args, Path(tmp))
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    e, f = r["empty"], r["full"]
    print(f"pixie run at rest (first sync without an answer, then {args.settle:g} s steady):")
    print(f"  empty log:        {e['rss_mib']:.0f} MiB resident (peak {e['peak_mib']:.0f} MiB)")
    print(
        f"  {f['events']:,} events: {f['rss_mib']:.0f} MiB resident (peak {f['peak_mib']:.0f} MiB)"
        f" = {r['rss_ratio']:.2f}x the empty log's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
