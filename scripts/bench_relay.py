"""Relay forwarding throughput, against a bare trio frame forwarder in the same run.

Both servers run in their own process on loopback and receive the very same
bytes: the senders write ready-made ``Send`` frames. The relay proves keys,
decodes every frame, rate-limits, routes and re-frames each envelope as a
``Deliver`` through the recipient's outbox; the bare forwarder (the baseline)
only splits the stream into frames with the same `FrameDecoder` and writes them
to the paired connection. The figure is the relay's rate as a ratio to the
baseline's, for 1 KiB and 64 KiB envelopes and 1 and 50 sender/receiver pairs.
Target: ratio >= 0.5.

Every sender keeps a bounded window of envelopes in flight (smaller than the
relay's outbox, so the relay never has to drop), every run is bounded by an
envelope count and by time, and each figure is the median of a few runs. Where
/proc exists the server's CPU time per envelope is reported too, which stays
meaningful even when the client process is the bottleneck.

    .venv/bin/python scripts/bench_relay.py [--json] [--seconds S] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio
from nacl.signing import SigningKey

from pixie.protocol import relaywire as rw
from pixie.protocol.framing import FrameDecoder, encode_frame
from pixie.protocol.proof import sign_key_proof
from pixie.relay.cli import run_relay
from pixie.relay.server import RelayConfig

SIZES = (1 << 10, 64 << 10)
PAIRS = (1, 50)
# Envelopes per run, across all pairs: enough for a steady state, bounded anyway.
COUNT = {1 << 10: 60_000, 64 << 10: 4_000}
WINDOW_BYTES = 2 << 20  # per pair in flight; the relay's outbox holds 8 MiB / 256 frames
HELLO_RECEIVER, HELLO_SENDER = b"R", b"S"


# -- the servers (each runs in its own process) -------------------------------


async def bare_forwarder(port_file: Path) -> None:
    """Pair a sender with a receiver by id; copy the sender's frames to the receiver."""
    receivers: dict[bytes, trio.abc.Stream] = {}
    arrived: dict[bytes, trio.Event] = {}

    async def handler(stream: trio.SocketStream) -> None:
        # A benchmark run that ends closes its connections; that is not an error.
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await forward(stream)

    async def forward(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        frames: list[bytes] = []
        while not frames:
            data = await stream.receive_some()
            if not data:
                return
            frames = decoder.feed(data)
        role, pair = frames[0][:1], frames[0][1:]
        arrival = arrived.setdefault(pair, trio.Event())
        if role == HELLO_RECEIVER:
            receivers[pair] = stream
            arrival.set()
            await stream.send_all(encode_frame(b"ok"))
            await trio.sleep_forever()
        await arrival.wait()
        target = receivers[pair]
        await stream.send_all(encode_frame(b"ok"))
        if frames[1:]:
            await target.send_all(b"".join(encode_frame(f) for f in frames[1:]))
        while data := await stream.receive_some():
            frames = decoder.feed(data)
            if frames:
                await target.send_all(b"".join(encode_frame(f) for f in frames))

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handler, listeners)
            port_file.write_text(str(listeners[0].socket.getsockname()[1]))
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def serve(kind: str, port_file: Path) -> None:
    if kind == "bare":
        trio.run(bare_forwarder, port_file)
        return
    unlimited = 1e15  # the benchmark measures forwarding, not the rate limiter's refusals
    config = RelayConfig(
        host="127.0.0.1",
        envelopes_per_second=unlimited,
        envelope_burst=unlimited,
        bytes_per_second=unlimited,
        byte_burst=unlimited,
        stats_interval=3600,
    )
    trio.run(run_relay, config, port_file)


# -- the clients (in this process) ---------------------------------------------


@dataclass
class Pair:
    sender: trio.abc.Stream
    receiver: trio.abc.Stream
    in_frame: bytes  # what the sender writes per envelope
    out_bytes: int  # what the receiver reads per envelope
    received: int = 0
    progress: trio.Event | None = None


async def _read_frame(stream: trio.abc.Stream, decoder: FrameDecoder) -> bytes:
    while True:
        frames = decoder.feed(await stream.receive_some())
        if frames:
            return frames[0]


async def _relay_login(port: int) -> tuple[trio.abc.Stream, bytes]:
    key = SigningKey.generate()
    public = bytes(key.verify_key)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder()
    await stream.send_all(encode_frame(rw.encode(rw.Hello(rw.RELAY_VERSION, public))))
    challenge = rw.decode(await _read_frame(stream, decoder))
    assert isinstance(challenge, rw.Challenge), challenge
    proof = sign_key_proof(key, challenge.nonce)
    await stream.send_all(encode_frame(rw.encode(rw.Prove(proof))))
    welcome = rw.decode(await _read_frame(stream, decoder))
    assert isinstance(welcome, rw.Welcome), welcome
    return stream, public


async def connect_pairs(kind: str, port: int, count: int, size: int) -> list[Pair]:
    envelope = os.urandom(size)
    pairs = []
    for n in range(count):
        if kind == "relay":
            receiver, public = await _relay_login(port)
            sender, _ = await _relay_login(port)
            out_bytes = len(encode_frame(rw.encode(rw.Deliver(public, envelope))))
        else:
            pair_id = b"%d" % n
            receiver = await trio.open_tcp_stream("127.0.0.1", port)
            await receiver.send_all(encode_frame(HELLO_RECEIVER + pair_id))
            await _read_frame(receiver, FrameDecoder())
            sender = await trio.open_tcp_stream("127.0.0.1", port)
            await sender.send_all(encode_frame(HELLO_SENDER + pair_id))
            await _read_frame(sender, FrameDecoder())
            public = bytes(32)
        in_frame = encode_frame(rw.encode(rw.Send(public, envelope)))
        if kind == "bare":
            out_bytes = len(in_frame)
        pairs.append(Pair(sender, receiver, in_frame, out_bytes))
    return pairs


async def pump(pair: Pair, count: int, window: int) -> None:
    async def send() -> None:
        sent = 0
        batches: dict[int, bytes] = {}
        while sent < count:
            while sent - pair.received >= window:
                pair.progress = trio.Event()
                await pair.progress.wait()
            n = min(window - (sent - pair.received), count - sent, 16)
            batch = batches.get(n) or batches.setdefault(n, pair.in_frame * n)
            await pair.sender.send_all(batch)
            sent += n

    async def receive() -> None:
        total = 0
        goal = count * pair.out_bytes
        while total < goal:
            data = await pair.receiver.receive_some(1 << 20)
            if not data:
                raise RuntimeError("server closed the connection")
            total += len(data)
            pair.received = total // pair.out_bytes
            if pair.progress is not None:
                pair.progress.set()

    pair.received = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        nursery.start_soon(receive)


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    kind: str
    process: subprocess.Popen[bytes]
    port: int
    pairs: list[Pair]
    rates: list[float]
    cpu_us: list[float]


async def one_run(server: Server, per_pair: int, window: int, seconds: float) -> int:
    """Pump ``per_pair`` envelopes through every pair at once; return how many arrived."""
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            for pair in server.pairs:
                nursery.start_soon(pump, pair, per_pair, window)
    return sum(p.received for p in server.pairs)


async def measure(
    servers: list[Server], size: int, pair_count: int, seconds: float, repeat: int
) -> None:
    per_pair = max(1, COUNT[size] // pair_count)
    window = max(4, min(128, WINDOW_BYTES // size))
    for server in servers:
        server.pairs = await connect_pairs(server.kind, server.port, pair_count, size)
        server.rates, server.cpu_us = [], []
        await one_run(server, max(1, per_pair // 10), window, seconds)  # warm-up
    # Relay and baseline take turns (in alternating order), so a noisy neighbour
    # on the machine slows both alike instead of skewing the ratio.
    for attempt in range(repeat):
        for server in servers if attempt % 2 else servers[::-1]:
            cpu0, t0 = cpu_seconds(server.process.pid), time.perf_counter()
            done = await one_run(server, per_pair, window, seconds)
            elapsed = time.perf_counter() - t0
            cpu1 = cpu_seconds(server.process.pid)
            if done:
                server.rates.append(done / elapsed)
                if cpu0 is not None and cpu1 is not None:
                    server.cpu_us.append((cpu1 - cpu0) / done * 1e6)
            if done < per_pair * pair_count:  # a run cut by time leaves frames in flight
                await close_pairs(server)
                server.pairs = await connect_pairs(server.kind, server.port, pair_count, size)
    for server in servers:
        await close_pairs(server)


async def close_pairs(server: Server) -> None:
    for pair in server.pairs:
        await pair.sender.aclose()
        await pair.receiver.aclose()
    server.pairs = []


def start_server(kind: str, tmp: Path) -> Server:
    port_file = tmp / f"{kind}.port"
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port-file", str(port_file)],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench_relay: the {kind} server did not start")
        time.sleep(0.02)
    return Server(kind, process, int(port_file.read_text()), [], [], [])


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run(seconds: float, repeat: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        servers = [start_server("bare", Path(tmp)), start_server("relay", Path(tmp))]
        try:
            for size in SIZES:
                for pairs in PAIRS:
                    trio.run(partial(measure, servers, size, pairs, seconds, repeat))
                    bare, relay = (_median(s.rates) for s in servers)
                    ratio = relay / bare
                    rows.append(
                        {
                            "envelope_bytes": size,
                            "pairs": pairs,
                            "relay_envelopes_per_s": round(relay),
                            "relay_mb_per_s": round(relay * size / 1e6, 1),
                            "bare_envelopes_per_s": round(bare),
                            "bare_mb_per_s": round(bare * size / 1e6, 1),
                            "ratio": round(ratio, 2),
                            "relay_cpu_us_per_envelope": round(_median(servers[1].cpu_us), 1),
                            "bare_cpu_us_per_envelope": round(_median(servers[0].cpu_us), 1),
                            "meets_target": ratio >= 0.5,
                        }
                    )
        finally:
            for server in servers:
                server.process.send_signal(signal.SIGTERM)
                server.process.wait(10)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--seconds", type=float, default=10.0, help="time bound per run")
    parser.add_argument("--repeat", type=int, default=5, help="measured runs per figure")
    parser.add_argument("--serve", choices=("bare", "relay"), help=argparse.SUPPRESS)
    parser.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port_file)
        return 0
    rows = run(args.seconds, max(1, args.repeat))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{'envelope':>9} {'pairs':>5} {'relay env/s':>12} {'relay MB/s':>10} "
            f"{'bare env/s':>11} {'bare MB/s':>9} {'ratio':>6} {'cpu us/env relay/bare':>22}"
        )
        for r in rows:
            cpu = f"{r['relay_cpu_us_per_envelope']}/{r['bare_cpu_us_per_envelope']}"
            print(
                f"{r['envelope_bytes']:>9} {r['pairs']:>5} {r['relay_envelopes_per_s']:>12} "
                f"{r['relay_mb_per_s']:>10} {r['bare_envelopes_per_s']:>11} "
                f"{r['bare_mb_per_s']:>9} {r['ratio']:>6} {cpu:>22}"
                f"{'' if r['meets_target'] else '  (below the 0.5 target)'}"
            )
    return 0 if all(r["meets_target"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
