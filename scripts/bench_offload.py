"""Offload and fetch round trips through a real relay, against a bare baseline.

Ours: three OS processes on loopback, as in real use: the relay (``pixie
relay``), the Homebase (``pixie run``, the holder) and this process, which
plays the device with one relay connection and `NoteOffloadService`. Each round
offloads a fresh 4 KB note (request, durable commit on the holder, ack, then
the device's compare-and-clear) and fetches it back (request, parts, re-hash).

Baseline, measured in the same run: the same path with no Pixie in it: a bare
trio forwarder process between this process and a sink process; an offload is
4 KB sent, written and fsynced once by the sink, and a 32-byte ack back; a
fetch is a 32-byte request and the 4 KB read back from the sink's file.

Floor, measured in the same run: the bare path plus only the work the issue
itself requires of every offload and fetch, done with the same libraries: the
request and the answer each in a sealed envelope (`protocol.envelope`: seal on
one side, open on the other), and the holding committed to SQLite in WAL mode
at synchronous=FULL before the ack. Its ratio to the baseline is the least any
implementation of this protocol can reach over this forwarder. The same floor
without the envelopes (a plain body and hash each way, the durable commit
kept) shows what the sealing alone costs.

Also: fetch throughput for a 1 MB body (a holding planted on the Homebase, as
the Notebook caps a note's body far below 1 MB) against the same 1 MB through
the bare forwarder. Target: p50 and p99 within 1.5x of the baseline.

All four (bare, floor, floor without envelopes, ours) are up at once, each
runs one untimed warm-up round, and then they are measured in turns, one round
of each and then the next round, so that the ratios compare the same moments
of a shared machine and its disk (an fsync here costs anything from 0.2 to
4 ms from one second to the next). Every process of every setup keeps freed
memory for reuse as `pixie` does (`pixie.entry.allocator`): the bare and floor
processes too, so that the ratios compare the work done, not the C library's
handling of large blocks. `scripts/offload_stages.py` shows where
our side's time goes, stage by stage.

    python scripts/bench_offload.py [--rounds 200] [--dir DIR] [--json]

With PIXIE_BENCH_PROFILE=DIR, our side runs under cProfile: relay.prof,
homebase.prof and device.prof (this process, every setup's rounds) land in DIR.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio

from pixie.device.notebook.store import Distilled
from pixie.device.store.db import checkpoint_in_background
from pixie.device.store.notes import NoteKind
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.offload import NoteOffloadService
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.entry.allocator import keep_freed_memory
from pixie.protocol.peerwire import PART_BYTES

TARGET = 1.5
PIXIE = [sys.executable, "-m", "pixie.entry.main"]
# Set to a directory to profile our side (cProfile): relay.prof, homebase.prof
# and device.prof land there.
PROFILE_ENV = "PIXIE_BENCH_PROFILE"
BODY_BYTES = 4096
BIG_BYTES = 1_000_000
BIG_FETCHES = 5  # the best of these is the 1 MB figure


# -- the baseline: a bare forwarder and a sink that fsyncs -------------------------------


async def _read_exactly(stream: trio.SocketStream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = await stream.receive_some(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


async def forwarder(port_file: Path) -> None:
    """Pair the sink and the client (each says which it is in its first byte)
    and pump bytes both ways."""
    peers: dict[bytes, trio.SocketStream] = {}
    both = trio.Event()

    async def handle(stream: trio.SocketStream) -> None:
        role = await _read_exactly(stream, 1)
        peers[role] = stream
        if len(peers) == 2:
            both.set()
        await both.wait()
        other = peers[b"C" if role == b"S" else b"S"]
        while data := await stream.receive_some(1 << 16):
            await other.send_all(data)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port_file.write_text(str(listeners[0].socket.getsockname()[1]))
    await trio.serve_listeners(handle, listeners)


async def sink(port: int, path: Path) -> None:
    """Offload: 'O' + length + body, written and fsynced, answered by a 32-byte
    ack. Fetch: 'F' + length, answered by that many bytes read from the file."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"S")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        try:
            op = await _read_exactly(stream, 5)
        except EOFError:  # the client is done
            return
        size = int.from_bytes(op[1:], "big")
        if op[:1] == b"O":
            body = await _read_exactly(stream, size)
            os.pwrite(fd, body, 0)
            os.fsync(fd)
            await stream.send_all(hashlib.sha256(body).digest())
        else:
            await stream.send_all(os.pread(fd, size, 0))


def _envelopes(sealed: bool) -> tuple[Callable[..., bytes], Callable[..., Any]]:
    """``seal(own, to, body, now=...)`` and ``open_envelope(own, envelope).body``:
    the real ones, or (not ``sealed``) ones that pass the body through."""
    from pixie.protocol import envelope

    if sealed:
        return envelope.seal, envelope.open_envelope
    return (lambda _own, _to, body, now: body), (lambda _own, sent: SimpleNamespace(body=sent))


async def floor_sink(port: int, path: Path, keys: Path | None) -> None:
    """The sink, doing the required work: envelopes opened and sealed (unless
    ``keys`` is None), the body committed durably before the ack, the served
    body read from the database."""
    from nacl.signing import SigningKey

    seal, open_envelope = _envelopes(keys is not None)
    own = SigningKey(keys.read_bytes()[:32]) if keys else SigningKey.generate()
    client = keys.read_bytes()[32:] if keys else b""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS held (hash BLOB PRIMARY KEY, body BLOB)")
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(b"S")
    while True:
        try:
            op = await _read_exactly(stream, 5)
        except EOFError:
            return
        payload = await _read_exactly(stream, int.from_bytes(op[1:], "big"))
        if op[:1] == b"P":  # a holding planted for the 1 MB fetch, not timed
            db.execute(
                "INSERT INTO held VALUES (?, ?)", (hashlib.sha256(payload).digest(), payload)
            )
            await stream.send_all(b"\x00")
            continue
        opened = open_envelope(own, payload)
        if op[:1] == b"O":
            digest = hashlib.sha256(opened.body).digest()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT OR IGNORE INTO held VALUES (?, ?)", (digest, opened.body))
            db.execute("COMMIT")
            answer = seal(own, client, digest, now=time.monotonic())
        else:
            (body,) = db.execute("SELECT body FROM held WHERE hash = ?", (opened.body,)).fetchone()
            # Served in parts of the size the holder uses, one envelope each.
            parts = [
                seal(own, client, body[i : i + PART_BYTES], now=time.monotonic())
                for i in range(0, len(body), PART_BYTES)
            ]
            answer = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
            await stream.send_all(len(parts).to_bytes(4, "big") + answer)
            continue
        await stream.send_all(len(answer).to_bytes(4, "big") + answer)


async def _floor_exchange(client: trio.SocketStream, op: bytes, envelope: bytes) -> bytes:
    await client.send_all(op + len(envelope).to_bytes(4, "big") + envelope)
    return await _floor_envelope(client)


async def _floor_envelope(client: trio.SocketStream) -> bytes:
    size = int.from_bytes(await _read_exactly(client, 4), "big")
    return await _read_exactly(client, size)


@dataclass
class Setup:
    """One way of offloading and fetching, ready to be timed: ``round(i)``
    offloads and fetches the i-th 4 KB body, returning the two times in
    seconds; ``big()`` fetches the 1 MB body once, returning its time."""

    round: Callable[[int], Awaitable[tuple[float, float]]]
    big: Callable[[], Awaitable[float]]


@asynccontextmanager
async def forwarded(tmp: Path, *, floor: bool, sealed: bool = True) -> AsyncIterator[Setup]:
    """Rounds through a bare forwarder to the plain sink, or (``floor``) to the
    sink that does the required work (without the envelopes unless ``sealed``)."""
    from nacl.signing import SigningKey

    seal, open_envelope = _envelopes(sealed)
    name = ("floor" if sealed else "unsealed") if floor else "bare"
    port_file = tmp / f"fwd-{name}.port"
    own, holder = SigningKey.generate(), SigningKey.generate()
    keys = tmp / f"{name}.keys"
    keys.touch(0o600)
    keys.write_bytes(bytes(holder) + bytes(own.verify_key))
    holder_key = bytes(holder.verify_key)
    procs = [
        await trio.lowlevel.open_process(
            [sys.executable, __file__, "--serve-forwarder", str(port_file)]
        )
    ]
    try:
        with trio.fail_after(30):
            while not port_file.exists() or not port_file.read_text():
                await trio.sleep(0.01)
        port = int(port_file.read_text())
        serve = ["--serve-floor-sink", str(keys) if sealed else "-"] if floor else ["--serve-sink"]
        procs.append(
            await trio.lowlevel.open_process(
                [sys.executable, __file__, *serve, str(port), str(tmp / f"{name}.sink")]
            )
        )
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(b"C")

        async def offload(body: bytes) -> None:
            if not floor:
                await client.send_all(b"O" + len(body).to_bytes(4, "big") + body)
                await _read_exactly(client, 32)
                return
            ack = await _floor_exchange(
                client, b"O", seal(own, holder_key, body, now=time.monotonic())
            )
            if open_envelope(own, ack).body != hashlib.sha256(body).digest():
                raise SystemExit("floor sink acked another hash")

        async def fetch(body: bytes) -> bytes:
            if not floor:
                await client.send_all(b"F" + len(body).to_bytes(4, "big"))
                return await _read_exactly(client, len(body))
            request = seal(own, holder_key, hashlib.sha256(body).digest(), now=time.monotonic())
            await client.send_all(b"F" + len(request).to_bytes(4, "big") + request)
            count = int.from_bytes(await _read_exactly(client, 4), "big")
            parts = [open_envelope(own, await _floor_envelope(client)).body for _ in range(count)]
            got = b"".join(parts)
            if hashlib.sha256(got).digest() != hashlib.sha256(body).digest():
                raise SystemExit("floor sink served other bytes")
            return got

        async def one_round(_i: int) -> tuple[float, float]:
            body = os.urandom(BODY_BYTES)
            t0 = time.perf_counter()
            await offload(body)
            t1 = time.perf_counter()
            got = await fetch(body)
            t2 = time.perf_counter()
            assert got == body
            return t1 - t0, t2 - t1

        big = os.urandom(BIG_BYTES)
        if floor:  # planted, as on the Homebase below
            await client.send_all(b"P" + len(big).to_bytes(4, "big") + big)
            await _read_exactly(client, 1)
        else:
            await offload(big)

        async def big_fetch() -> float:
            t0 = time.perf_counter()
            await fetch(big)
            return time.perf_counter() - t0

        yield Setup(one_round, big_fetch)
        await client.aclose()
    finally:
        for p in procs:
            p.kill()
            await p.wait()


# -- ours ---------------------------------------------------------------------------------


@asynccontextmanager
async def pixie(tmp: Path, rounds: int) -> AsyncIterator[Setup]:
    env = {**os.environ, "PIXIE_KEYSTORE": "file", "PIXIE_KEYS": str(tmp / "keys")}
    os.environ.update(env)
    from pixie.device.node.keyed import Node  # after PIXIE_KEYS is set

    create_data_dir(tmp / "device", name="phone", role="device")
    create_data_dir(tmp / "homebase", name="mac", role="homebase")
    port_file = tmp / "relay.port"
    relay = await trio.lowlevel.open_process(
        [*_pixie("relay"), "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    homebase: trio.Process | None = None
    try:
        async with trio.open_nursery() as nursery:
            with Node.open(tmp / "device") as device, Node.open(tmp / "homebase") as mac:
                with trio.fail_after(30):
                    while not port_file.exists():
                        await trio.sleep(0.02)
                address = RelayAddress("127.0.0.1", int(port_file.read_text()))
                device.siblings.add(
                    SiblingInfo(mac.public_key(), "mac", "homebase", str(address), 0)
                )
                mac.siblings.add(
                    SiblingInfo(device.public_key(), "phone", "device", str(address), 0)
                )
                ids = [
                    device.notebook.upsert_clear(
                        Distilled(NoteKind.POST_DIGEST, f"post:{i}", f"Post {i}", _text(i))
                    ).note_id
                    for i in range(rounds + 1)  # one more for the warm-up round
                ]
                big_id = _plant_big(device, mac)
                homebase = await trio.lowlevel.open_process(
                    [
                        *_pixie("homebase"),
                        "--data",
                        str(tmp / "homebase"),
                        "run",
                        "--interval",
                        "3600",
                    ],
                    env=env,
                    stderr=subprocess.DEVNULL,
                )
                # The device's side checkpoints as `pixie run` does: in the background.
                await nursery.start(checkpoint_in_background, device.db)
                identity = device.identity()
                client = await RelayClient.connect(address, identity)
                try:
                    link = PeerLink(identity, device.siblings, client)
                    service = NoteOffloadService(
                        device, mac.public_key(), link.send, link.receive, timeout=30
                    )

                    async def one_round(i: int) -> tuple[float, float]:
                        t0 = time.perf_counter()
                        report = await service.offload(ids[i])
                        t1 = time.perf_counter()
                        body = await service.fetch(ids[i])
                        t2 = time.perf_counter()
                        if not report.cleared or len(body.encode()) != BODY_BYTES:
                            raise SystemExit(f"offload failed: {report}")
                        return t1 - t0, t2 - t1

                    async def big_fetch() -> float:
                        t0 = time.perf_counter()
                        body = await service.fetch(big_id)
                        took = time.perf_counter() - t0
                        assert len(body) == BIG_BYTES
                        return took

                    yield Setup(one_round, big_fetch)
                finally:
                    await client.aclose()
            nursery.cancel_scope.cancel()  # the checkpoints
    finally:
        for process in (homebase, relay):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(20):
                    await process.wait()


def _pixie(name: str) -> list[str]:
    """The command that runs ``pixie``, under cProfile if asked."""
    where = os.environ.get(PROFILE_ENV)
    if not where:
        return PIXIE
    out = str(Path(where) / f"{name}.prof")
    return [sys.executable, "-m", "cProfile", "-o", out, "-m", "pixie.entry.main"]


def _profiler() -> Any:
    if not os.environ.get(PROFILE_ENV):
        return None
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def _text(i: int) -> str:
    words = (f"note {i} " + "the quick brown fox jumps over the lazy dog ") * 200
    return words[:BODY_BYTES].strip().ljust(BODY_BYTES, "x")


def _plant_big(device: Any, mac: Any) -> str:
    """A 1 MB holding on the Homebase and a device note pointing at it."""
    big = ("0123456789abcdef" * (BIG_BYTES // 16 + 1))[:BIG_BYTES]
    digest = hashlib.sha256(big.encode()).hexdigest()
    note_id: str = device.notebook.upsert_clear(
        Distilled(NoteKind.POST_DIGEST, "post:big", "Big", "placeholder")
    ).note_id
    con = sqlite3.connect(device.db.path)
    con.execute(
        "UPDATE note SET body = NULL, holder = ?, content_hash = ? WHERE id = ?",
        (mac.public_key().hex(), digest, note_id),
    )
    con.commit()
    con.close()
    con = sqlite3.connect(mac.db.path)
    con.execute(
        "INSERT INTO holding (note_id, content_hash, owner, body, held_at) VALUES (?, ?, ?, ?, 0)",
        (note_id, digest, device.public_key().hex(), big.encode()),
    )
    con.commit()
    con.close()
    return note_id


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


NAMES = ("bare", "floor", "unsealed", "ours")


async def measure(tmp: Path, rounds: int) -> list[dict[str, Any]]:
    """Every setup up at once and measured in turns (each round of each, then
    the next round, the order rotating), so that all four see the same moments
    of a shared machine and the same state of its disk: the ratios compare
    like with like."""
    async with AsyncExitStack() as stack:
        setups = [
            await stack.enter_async_context(forwarded(tmp, floor=False)),
            await stack.enter_async_context(forwarded(tmp, floor=True)),
            await stack.enter_async_context(forwarded(tmp, floor=True, sealed=False)),
            await stack.enter_async_context(pixie(tmp, rounds)),
        ]
        times: list[dict[str, Any]] = [{"offload": [], "fetch": [], "big": []} for _ in setups]
        # One untimed round each first: connections up, caches warm (ours
        # would otherwise count the Homebase's first connection to the relay).
        for setup in setups:
            await setup.round(rounds)
        profiler = _profiler()
        for i in range(rounds):
            for k in range(len(setups)):
                j = (i + k) % len(setups)
                offload, fetch = await setups[j].round(i)
                times[j]["offload"].append(offload)
                times[j]["fetch"].append(fetch)
        for i in range(BIG_FETCHES):
            for k in range(len(setups)):
                j = (i + k) % len(setups)
                times[j]["big"].append(await setups[j].big())
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(Path(os.environ[PROFILE_ENV]) / "device.prof")
    return [{**t, "big_fetch_s": min(t["big"])} for t in times]


def main() -> int:
    keep_freed_memory()  # in every process here, as in every `pixie` process
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve-forwarder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--serve-sink", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor-sink", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_forwarder:
        trio.run(forwarder, args.serve_forwarder)
        return 0
    if args.serve_sink:
        trio.run(sink, int(args.serve_sink[0]), Path(args.serve_sink[1]))
        return 0
    if args.serve_floor_sink:
        keys, port, path = args.serve_floor_sink
        trio.run(floor_sink, int(port), Path(path), None if keys == "-" else Path(keys))
        return 0
    with tempfile.TemporaryDirectory(prefix="pixie-bench-offload-", dir=args.dir) as name:
        base, least, unsealed, ours = trio.run(measure, Path(name), args.rounds)
    result: dict[str, float] = {}
    for what in ("offload", "fetch"):
        for q in (50, 99):
            b, o = _pct(base[what], q), _pct(ours[what], q)  # type: ignore[arg-type]
            f = _pct(least[what], q)  # type: ignore[arg-type]
            result[f"{what}_p{q}_ms"] = o * 1000
            result[f"{what}_p{q}_baseline_ms"] = b * 1000
            result[f"{what}_p{q}_ratio"] = o / b
            result[f"{what}_p{q}_floor_ms"] = f * 1000
            result[f"{what}_p{q}_floor_ratio"] = f / b
            result[f"{what}_p{q}_over_floor"] = o / f
            u = _pct(unsealed[what], q)  # type: ignore[arg-type]
            result[f"{what}_p{q}_unsealed_floor_ms"] = u * 1000
            result[f"{what}_p{q}_unsealed_floor_ratio"] = u / b
    big_b, big_o = float(base["big_fetch_s"]), float(ours["big_fetch_s"])  # type: ignore[arg-type]
    result["big_fetch_mb_s"] = BIG_BYTES / big_o / 1e6
    result["big_fetch_baseline_mb_s"] = BIG_BYTES / big_b / 1e6
    result["big_fetch_ratio"] = big_o / big_b
    big_f = float(least["big_fetch_s"])  # type: ignore[arg-type]
    result["big_fetch_floor_mb_s"] = BIG_BYTES / big_f / 1e6
    result["big_fetch_floor_ratio"] = big_f / big_b
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for what in ("offload", "fetch"):
        for q in (50, 99):
            ratio = result[f"{what}_p{q}_ratio"]
            print(
                f"{what} 4 KB p{q}: {result[f'{what}_p{q}_ms']:.2f} ms vs bare forwarder + fsync "
                f"{result[f'{what}_p{q}_baseline_ms']:.2f} ms -> {ratio:.2f}x "
                f"(target <= {TARGET}x: {'ok' if ratio <= TARGET else 'MISSED'}); "
                f"floor {result[f'{what}_p{q}_floor_ms']:.2f} ms -> "
                f"{result[f'{what}_p{q}_floor_ratio']:.2f}x "
                f"(ours {result[f'{what}_p{q}_over_floor']:.2f}x the floor); "
                f"floor without envelopes {result[f'{what}_p{q}_unsealed_floor_ms']:.2f} ms -> "
                f"{result[f'{what}_p{q}_unsealed_floor_ratio']:.2f}x"
            )
    print(
        f"fetch 1 MB: {result['big_fetch_mb_s']:.1f} MB/s vs bare forwarder "
        f"{result['big_fetch_baseline_mb_s']:.1f} MB/s -> {result['big_fetch_ratio']:.2f}x time; "
        f"floor {result['big_fetch_floor_mb_s']:.1f} MB/s -> {result['big_fetch_floor_ratio']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
