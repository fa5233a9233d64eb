"""Every wire decoder against hostile bytes: framing, peer bodies, sync messages
and sealed envelopes.

The contract is the one `tests/fuzzing.py` states: a decoder fed anything
either returns a value or raises its own error type (`ProtocolError` or a
subclass); a RecursionError, a KeyError or any other exception fails the test.
Inputs are random bytes, and valid messages of every type decoded to their
msgpack tree, mutated at random places (a random value, a value of another
type, an item dropped or repeated, or nesting up to past msgpack's own stack)
and packed again; envelopes are also sealed properly to the right key around
mutated bodies and mutated envelope fields, so the fuzzing reaches past the
authentication.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

import msgpack
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from nacl.public import Box, PrivateKey

from pixie.protocol import envelope, peerwire, syncwire
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import HEADER_BYTES, FrameDecoder, encode_frame
from pixie.protocol.identity import new_identity
from tests.support.fuzzing import fuzz_settings
from tests.support.fuzzseeds import (
    PEER_SEEDS,
    SYNC_SEEDS,
    mutated,
)

SENDER, RECIPIENT = new_identity(), new_identity()
# Python's default, which `pixie run` keeps. Hypothesis raises the limit while
# a test runs, and with it a repr of nesting msgpack still decodes (to about
# 1024 levels) would not raise the RecursionError it raises in production.
RECURSION_LIMIT = 1000
MAX_ERROR_CHARS = 200


@contextlib.contextmanager
def refused_or_taken() -> Iterator[None]:
    """Run a decoder as production would: only `ProtocolError` may escape, with
    a message of a line (one that formats a hostile value would be longer)."""
    raised = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    except ProtocolError as exc:
        assert len(str(exc)) <= MAX_ERROR_CHARS, str(exc)[:MAX_ERROR_CHARS]
    finally:
        sys.setrecursionlimit(raised)


SENDER_KEY, RECIPIENT_KEY = bytes(SENDER.verify_key), bytes(RECIPIENT.verify_key)

# -- values and mutations -----------------------------------------------------------------


# -- valid messages to start from ---------------------------------------------------------


def test_the_seeds_are_valid_and_reach_the_deepest_nesting_we_send() -> None:
    """The mutations start from real messages (a fuzzer starting from junk
    would test little more than the first check), and the deepest of them
    fits the decoders' depth bound."""
    for body in PEER_SEEDS:
        peerwire.decode_body(body)
    for message in SYNC_SEEDS:
        syncwire.decode(message)
    batch = msgpack.unpackb(SYNC_SEEDS[2])
    assert batch[4][2][0][6][5] == ["friend", "cello"]  # six arrays deep: the tags


def _peer_decode(body: bytes) -> None:
    """A body all the way down: a sync payload is decoded too."""
    with refused_or_taken():
        message = peerwire.decode_body(body).message
        if isinstance(message, peerwire.SyncData):
            syncwire.decode(message.payload)


# -- framing ------------------------------------------------------------------------------


@pytest.mark.fuzz
@fuzz_settings()
@given(
    st.lists(
        st.binary(max_size=300)
        | st.builds(encode_frame, st.binary(max_size=300))
        | st.integers(0, (1 << 32) - 1).map(lambda n: n.to_bytes(HEADER_BYTES, "big")),
        max_size=12,
    ),
    st.integers(0, 600),
)
def test_frame_decoder_takes_any_chunks(chunks: list[bytes], limit: int) -> None:
    decoder = FrameDecoder(limit)
    try:
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                assert len(frame) <= limit
            assert decoder.buffered <= limit + HEADER_BYTES
    except ProtocolError as exc:
        assert len(str(exc)) <= MAX_ERROR_CHARS


# -- peer bodies and sync messages --------------------------------------------------------


@pytest.mark.fuzz
@fuzz_settings()
@given(st.binary(max_size=600))
def test_peer_and_sync_decoders_take_random_bytes(data: bytes) -> None:
    _peer_decode(data)
    with refused_or_taken():
        syncwire.decode(data)


@pytest.mark.fuzz
@fuzz_settings()
@given(st.sampled_from(PEER_SEEDS), st.data())
def test_peer_decoder_takes_mutated_bodies(seed: bytes, data: st.DataObject) -> None:
    _peer_decode(mutated(data, seed))


@pytest.mark.fuzz
@fuzz_settings()
@given(st.sampled_from(SYNC_SEEDS), st.data())
def test_sync_decoder_takes_mutated_messages(seed: bytes, data: st.DataObject) -> None:
    with refused_or_taken():
        syncwire.decode(mutated(data, seed))


@pytest.mark.fuzz
@fuzz_settings()
@given(st.sampled_from(SYNC_SEEDS), st.data())
def test_sync_payloads_in_peer_bodies_take_mutation(seed: bytes, data: st.DataObject) -> None:
    payload = mutated(data, seed)
    # A mutation may grow a payload past what a body carries, which the encoder
    # refuses before anything is sent: only what fits can reach a decoder.
    assume(len(payload) < peerwire.MAX_BODY_BYTES - 1024)
    _peer_decode(peerwire.encode_body(peerwire.SyncData(payload), 1))


# -- envelopes ----------------------------------------------------------------------------


def _hand_sealed(plaintext: bytes) -> bytes:
    """Any plaintext, in a Box to the right key (as an attacker can make one)."""
    key = PrivateKey.generate()
    box = Box(key, RECIPIENT.verify_key.to_curve25519_public_key())
    return bytes(key.public_key) + bytes(box.encrypt(plaintext))


def _open(sealed: bytes) -> None:
    with refused_or_taken():
        _peer_decode(envelope.open_envelope(RECIPIENT, sealed).body)


@pytest.mark.fuzz
@fuzz_settings()
@given(st.binary(max_size=700) | st.binary(min_size=328, max_size=700))
def test_envelopes_of_random_bytes_are_refused(data: bytes) -> None:
    _open(data)


@pytest.mark.fuzz
@fuzz_settings()
@given(st.binary(max_size=600), st.integers(0, (1 << 32) - 1), st.binary(max_size=40))
def test_random_plaintext_in_a_good_box_is_refused(inner: bytes, size: int, padding: bytes) -> None:
    _open(_hand_sealed(size.to_bytes(4, "big") + inner + padding))
    framed = len(inner).to_bytes(4, "big") + inner
    _open(_hand_sealed(framed + bytes(envelope.bucket(len(framed)) - len(framed)) + padding))


@pytest.mark.fuzz
@fuzz_settings()
@given(st.sampled_from(PEER_SEEDS + SYNC_SEEDS), st.data())
def test_mutated_envelope_fields_are_refused(body: bytes, data: st.DataObject) -> None:
    """The plaintext array itself mutated (version, sender, signature, body), in a good box."""
    signature = bytes(64)
    inner = mutated(data, msgpack.packb([2, SENDER_KEY, signature, body], use_bin_type=True))
    framed = len(inner).to_bytes(4, "big") + inner
    _open(_hand_sealed(framed + bytes(envelope.bucket(len(framed)) - len(framed))))


@pytest.mark.fuzz
@fuzz_settings()
@given(st.sampled_from(PEER_SEEDS), st.data())
def test_sealed_mutated_bodies_open_and_are_refused_by_the_body_decoder(
    seed: bytes, data: st.DataObject
) -> None:
    """Properly sealed and signed by a real sender: past every check of the
    envelope, into the body and sync decoders."""
    body = mutated(data, seed)
    if len(body) > peerwire.MAX_BODY_BYTES:
        return
    opened = envelope.open_envelope(
        RECIPIENT, envelope.seal(SENDER, RECIPIENT_KEY, body, now=time.monotonic())
    )
    assert opened.body == body
    _peer_decode(opened.body)
