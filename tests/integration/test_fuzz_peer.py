"""A live Homebase against hostile peers.

A real `pixie run` Homebase process, behind a relay on loopback, is sent junk
and hostile envelopes: random bytes, envelopes from an unpaired key (among
them a version nested a thousand deep, which once crashed it), and well-formed
envelopes from a paired key carrying mutated bodies and sync messages. Then an
honest `pixie sync` from the device must still succeed, and the Homebase
process must still be alive, its log a bounded number of rejection lines.

The Homebase and the relay stay up for the whole Hypothesis run (starting
them is the cost); each example sends a few envelopes. The honest sync comes
after the last.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from nacl.public import Box, PrivateKey
from nacl.signing import SigningKey

from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol.envelope import open_envelope, seal
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MIN_ENVELOPE_BYTES
from pixie.protocol.identity import new_identity
from pixie.protocol.peerwire import MAX_BODY_BYTES, Ping, Pong, SyncData, decode_body, encode_body
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.fuzzing import fuzz_settings
from tests.support.fuzzseeds import PEER_SEEDS, SYNC_SEEDS, mutated
from tests.support.wire import make_node, pair_up

PIXIE = [sys.executable, "-m", "pixie.entry.main"]
LAST_PING = (1 << 63) - 1  # above any counter the flood may have used
STRANGER, ROGUE = new_identity(), new_identity()
# The attack as it was reported: an envelope whose version is a thousand arrays
# deep (then a sender key, a signature and a body, none of which it reached).
DEEP_VERSION = b"".join(
    [b"\x94", b"\x91" * 1000, b"\x01", b"\xc4\x20", bytes(32), b"\xc4\x40", bytes(64), b"\xc4\x01x"]
)


def hand_sealed(recipient: bytes, plaintext: bytes) -> bytes:
    """Any plaintext in a good Box to ``recipient``, as anyone can make one."""
    from pixie.protocol.identity import verify_key

    key = PrivateKey.generate()
    box = Box(key, verify_key(recipient).to_curve25519_public_key())
    return bytes(key.public_key) + bytes(box.encrypt(plaintext))


def framed(inner: bytes) -> bytes:
    """An envelope plaintext: length, contents, zero padding."""
    size = len(inner).to_bytes(4, "big") + inner
    return size + bytes(max(0, 256 - len(size)))


def with_counter(body: bytes, counter: int) -> bytes:
    """``body`` with its envelope counter set, if it still has one where a body
    does (else as it is): mutated counters are mostly replays, which the link
    drops before any message reaches the Homebase's dispatch."""
    try:
        tree = msgpack.unpackb(body, raw=False, strict_map_key=False)
        if isinstance(tree, list) and len(tree) >= 4:
            tree[3] = counter
            repacked: bytes = msgpack.packb(tree, use_bin_type=True)
            return repacked
    except (ValueError, TypeError, msgpack.UnpackException):
        pass
    return body


def hostile(data: st.DataObject, mac: bytes, counters: Iterator[int]) -> tuple[str, bytes]:
    """One envelope for the Homebase, and which client sends it."""
    draw = data.draw
    kind = draw(st.sampled_from(["junk", "stranger", "stranger-raw", "rogue", "rogue-sync"]))
    if kind == "junk":
        return "stranger", draw(st.binary(min_size=MIN_ENVELOPE_BYTES, max_size=1500))
    if kind == "stranger-raw":  # the envelope's own fields: the deep version, or any
        inner = draw(st.just(DEEP_VERSION) | st.binary(max_size=200).map(b"\x94".__add__))
        return "stranger", hand_sealed(mac, framed(inner))
    if kind == "rogue-sync":
        payload = mutated(data, draw(st.sampled_from(SYNC_SEEDS)))[: MAX_BODY_BYTES - 64]
        body = encode_body(SyncData(payload), next(counters))
    else:
        body = mutated(data, draw(st.sampled_from(PEER_SEEDS)))[:MAX_BODY_BYTES]
        if kind == "rogue" and draw(st.booleans()):
            body = with_counter(body, next(counters))
    return kind.split("-")[0], seal(
        STRANGER if kind == "stranger" else ROGUE, mac, body, now=time.monotonic()
    )


async def _read_lines(stream: trio.abc.ReceiveStream, lines: list[str], up: trio.Event) -> None:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        for line in done:
            text = line.decode(errors="replace")
            lines.append(text)
            if "connected to relay" in text:
                up.set()


async def _drain(client: RelayClient, identity: SigningKey, answered: trio.Event) -> None:
    """Take whatever the Homebase answers, so nothing backs up; set ``answered``
    at the Pong to the last ping."""
    while True:
        envelope = (await client.receive()).envelope
        with contextlib.suppress(ProtocolError):
            message = decode_body(open_envelope(identity, envelope).body).message
            if message == Pong(LAST_PING):
                answered.set()


async def _exits(daemon: trio.Process, done: trio.Event) -> None:
    await daemon.wait()
    done.set()


@pytest.mark.fuzz
async def test_a_live_homebase_survives_hostile_envelopes(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            serve_relay, RelayConfig(port=0, envelopes_per_second=1e6, envelope_burst=1e6)
        )
        await _hostile_run(tmp_path, RelayAddress("127.0.0.1", port), nursery)
        nursery.cancel_scope.cancel()


async def _hostile_run(tmp: Path, relay: RelayAddress, nursery: trio.Nursery) -> None:
    phone = make_node(tmp, "phone", "device")
    mac = make_node(tmp, "mac", "homebase")
    with trio.fail_after(30):
        await pair_up(phone, mac, relay)
    # A second paired device, whose key the hostile bodies come from (a paired
    # key the honest device does not depend on).
    mac.siblings.add(SiblingInfo(bytes(ROGUE.verify_key), "rogue", "device", str(relay), 0))
    phone.log.append([NewEvent(EventKind.MESSAGE, 1, "hello", contact="Ada")], now=1)
    mac_key = mac.public_key()
    mac.close()
    phone.close()

    lines: list[str] = []
    up = trio.Event()
    daemon = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(tmp / "mac"), "run"], stderr=subprocess.PIPE
    )
    try:
        assert daemon.stderr is not None
        nursery.start_soon(_read_lines, daemon.stderr, lines, up)
        with trio.fail_after(60):
            await up.wait()
        senders = {
            "stranger": await RelayClient.connect(relay, STRANGER),
            "rogue": await RelayClient.connect(relay, ROGUE),
        }
        answered = trio.Event()  # the Homebase answered the last ping, or exited
        nursery.start_soon(_drain, senders["stranger"], STRANGER, answered)
        nursery.start_soon(_drain, senders["rogue"], ROGUE, answered)
        nursery.start_soon(_exits, daemon, answered)

        async def send(batch: list[tuple[str, bytes]]) -> None:
            for who, envelope in batch:
                await senders[who].send(mac_key, envelope)

        counters = itertools.count(1_000)  # the rogue's, rising past any replay

        # Hypothesis runs in a worker thread and hands each example's envelopes
        # to the event loop, where the relay clients live.
        @fuzz_settings(short=40)
        @given(st.data())
        def flood(data: st.DataObject) -> None:
            n = data.draw(st.integers(1, 6))
            batch = [hostile(data, mac_key, counters) for _ in range(n)]
            trio.from_thread.run(send, batch)

        await send([("stranger", hand_sealed(mac_key, framed(DEEP_VERSION)))])
        await trio.to_thread.run_sync(flood)
        # After the flood, a ping: its Pong says the Homebase took in every
        # envelope before it and still answers.
        await send(
            [
                (
                    "rogue",
                    seal(
                        ROGUE,
                        mac_key,
                        encode_body(Ping(LAST_PING), LAST_PING),
                        now=time.monotonic(),
                    ),
                )
            ]
        )
        with trio.fail_after(60):
            await answered.wait()
        assert daemon.returncode is None, "\n".join(lines[-20:])

        synced = await trio.run_process(
            [*PIXIE, "--data", str(tmp / "phone"), "sync", "--json", "--timeout", "30"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert synced.returncode == 0, synced.stderr.decode()
        (session,) = json.loads(synced.stdout)["sessions"]
        assert session["outcome"] == "synced", session
        assert daemon.returncode is None, "\n".join(lines[-20:])
    finally:
        if daemon.returncode is None:
            daemon.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            code = await daemon.wait()
    assert code == 0, "\n".join(lines[-20:])
    rejected = [line for line in lines if "rejected envelope" in line]
    assert rejected, "the Homebase saw none of the flood"
    # Summarised: at most the first five of each reason in full (no minute has passed).
    assert len(rejected) <= 5 * 6, "\n".join(rejected)
    assert not any("Traceback" in line for line in lines), "\n".join(lines[-40:])
