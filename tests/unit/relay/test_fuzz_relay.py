"""Fuzzing the relay: its frame decoders, and a live relay fed hostile frames.

The contract (see tests/fuzzing.py): `relaywire.decode` and the relay's frame
splitter accept bytes or raise `ProtocolError`, nothing else; a live relay fed
random and mutated frames from many connections ends those connections (or
ignores what they send), never fails itself, and still carries an honest
pair's envelope afterwards.
"""

from __future__ import annotations

from contextlib import suppress

import msgpack
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from nacl.signing import SigningKey

from pixie.protocol import relaywire as rw
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MAX_FRAME_BYTES, MIN_ENVELOPE_BYTES, encode_frame
from pixie.relay.server import Relay, RelayConfig
from tests.support.fuzzing import fuzz_settings
from tests.support.relayclient import memory_client

pytestmark = pytest.mark.fuzz

_KEYS = [SigningKey.generate() for _ in range(4)]
_PUBLIC = [bytes(k.verify_key) for k in _KEYS]

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True)
    | st.binary(max_size=48)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=10,
)

# Frames as the relay's peers write them, for mutation.
_valid = st.sampled_from(
    [
        rw.encode(rw.Hello(rw.RELAY_VERSION, _PUBLIC[0])),
        rw.encode(rw.Prove(bytes(64))),
        rw.encode(rw.Send(_PUBLIC[1], bytes(MIN_ENVELOPE_BYTES))),
        rw.encode(rw.Send(_PUBLIC[2], bytes(300))),
        rw.encode(rw.Ping(7)),
        rw.encode(rw.Pong(2**63 - 1)),
        rw.encode(rw.Refuse("go away")),
        rw.encode(rw.Deliver(bytes(32), bytes(40))),
    ]
)


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(_valid))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(0, len(frame) - 1)))
        how = draw(st.sampled_from(["flip", "cut", "insert", "nest"]))
        if how == "flip" and frame:
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "cut":
            del frame[at:]
        elif how == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:  # a deep array where a field was
            depth = draw(st.integers(1, 1200))
            frame[at:at] = b"\x91" * depth + b"\x01"
    return bytes(frame)


_bodies = st.one_of(
    st.binary(max_size=200),
    _mutated(),
    st.lists(_values, min_size=1, max_size=4).map(lambda v: msgpack.packb(v, use_bin_type=True)),
    st.tuples(st.integers(-2, 12), st.lists(_values, max_size=3)).map(
        lambda t: msgpack.packb([t[0], *t[1]], use_bin_type=True)
    ),
)


@fuzz_settings()
@given(body=_bodies)
def test_relaywire_decode_accepts_or_raises_protocol_error(body: bytes) -> None:
    with suppress(ProtocolError):
        message = rw.decode(body)
        assert rw.decode(rw.encode(message)) == message


@fuzz_settings()
@given(
    stream=st.lists(
        st.one_of(
            _bodies.map(encode_frame),
            st.binary(max_size=64),
            st.integers(MAX_FRAME_BYTES - 2, 2**32 - 1).map(lambda n: n.to_bytes(4, "big")),
        ),
        max_size=8,
    ),
    cuts=st.lists(st.integers(1, 64), max_size=8),
    fast=st.booleans(),
)
def test_the_relays_frame_splitter_accepts_or_raises_protocol_error(
    stream: list[bytes], cuts: list[int], fast: bool
) -> None:
    data = b"".join(stream)
    decoder = rw.ForwardDecoder(MAX_FRAME_BYTES, {}, MIN_ENVELOPE_BYTES)
    decoder.fast = fast
    pos = 0
    with suppress(ProtocolError):
        for cut in [*cuts, len(data)]:
            decoder.items(data[pos : pos + cut])
            pos += cut


@fuzz_settings(short=40)
@given(
    attacks=st.lists(
        st.tuples(
            st.booleans(),  # log in first
            st.lists(_bodies, min_size=1, max_size=6),
            st.binary(max_size=12),  # raw trailing bytes
        ),
        min_size=1,
        max_size=5,
    )
)
def test_a_live_relay_fed_hostile_frames_still_serves_an_honest_pair(
    attacks: list[tuple[bool, list[bytes], bytes]],
) -> None:
    async def scenario() -> None:
        relay = Relay(RelayConfig(idle_timeout=30))
        async with trio.open_nursery() as nursery:
            for n, (login, bodies, tail) in enumerate(attacks):
                mallory = memory_client(relay, nursery)
                if login:
                    await mallory.login()
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await mallory.send_raw(b"".join(map(encode_frame, bodies)) + tail)
                if n % 2:
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await mallory.stream.send_eof()
            a = memory_client(relay, nursery, _KEYS[1])
            b = memory_client(relay, nursery, _KEYS[2])
            await a.login()
            await b.login()
            envelope = bytes(range(256)) * 2
            await a.send(rw.Send(b.public, envelope))
            assert await b.envelope() == envelope
            await a.close()
            await b.close()
        stats = relay.stats()
        assert stats["errors"] == 0
        assert stats["connections_open"] == 0

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
