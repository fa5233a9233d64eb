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
import copy
import sys
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nacl.public import Box, PrivateKey

from pixie.protocol import envelope, peerwire, syncwire
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import HEADER_BYTES, FrameDecoder, encode_frame
from pixie.protocol.hlc import Stamp
from pixie.protocol.identity import new_identity
from pixie.protocol.reconcile import FINGERPRINT_BYTES, KEY_BYTES, SHORT_HASH_BYTES, Range

from .fuzzing import fuzz_settings

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

# Packed as a binary string, then swapped for raw bytes of deep nesting (the
# packer itself refuses to pack nesting past a few hundred levels).
DEEP_MARK = b"\x00deep-nesting-goes-here\x00"
# Around the bound, where Python's recursion limit (1000) bites, and past
# msgpack's own stack (1024).
DEPTHS = st.sampled_from([1000, 8, 9, 998, 999, 1022, 1023, 1024, 1100])

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.text(max_size=40)
    | st.binary(max_size=40)
    | st.sampled_from(
        [0, 1, -1, (1 << 63) - 1, 1 << 62, "", b"", bytes(8), bytes(16), bytes(32), "a1b2"]
    )
    | st.sampled_from(["x" * 70_000, b"\x00" * 300_000, "0" * 64, b"\xff" * 17])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
REPLACEMENTS = (
    VALUES
    | st.just(DEEP_MARK)
    | st.builds(lambda: [DEEP_MARK])  # built afresh: a mutation may change it in place
    | st.builds(lambda: {"k": DEEP_MARK})
)


def _pack(tree: Any, depth: int) -> bytes:
    packed: bytes = msgpack.packb(tree, use_bin_type=True)
    mark = msgpack.packb(DEEP_MARK, use_bin_type=True)
    return packed.replace(mark, b"\x91" * depth + b"\x01")


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a tree (ours: a few levels deep, so recursion is fine here)."""
    found = [path]
    if isinstance(node, list):
        for i, item in enumerate(node):
            found += _paths(item, (*path, i))
    elif isinstance(node, dict):
        for key in sorted(node, key=repr):
            found += _paths(node[key], (*path, key))
    return found


def _mutate_once(data: st.DataObject, root: Any) -> Any:
    """``root`` with one node changed (chosen evenly among all of them): replaced,
    or an item dropped from it, repeated in it or added to it."""
    path = data.draw(st.sampled_from(_paths(root)))
    parent: Any = None
    node = root
    for key in path:
        parent, node = node, node[key]
    op = data.draw(st.sampled_from(["replace", "replace", "replace", "drop", "repeat", "add"]))
    if op in ("drop", "repeat") and isinstance(node, list) and node:
        at = data.draw(st.integers(0, len(node) - 1))
        if op == "drop":
            del node[at]
        else:
            node.insert(at, copy.deepcopy(node[at]))
        return root
    if op == "add" and isinstance(node, list):
        node.append(data.draw(REPLACEMENTS))
        return root
    new = data.draw(REPLACEMENTS)
    if parent is None:
        return new
    parent[path[-1]] = new
    return root


def mutated(data: st.DataObject, packed: bytes) -> bytes:
    """A valid message's bytes, mutated as a tree one to three times and packed again."""
    tree = msgpack.unpackb(packed, raw=False, strict_map_key=False)
    for _ in range(data.draw(st.integers(1, 3))):
        tree = _mutate_once(data, tree)
    return _pack(tree, data.draw(DEPTHS))


# -- valid messages to start from ---------------------------------------------------------

ID = "0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10"
HASH = bytes(range(32))


def _peer_seeds() -> list[bytes]:
    request = bytes(range(16))
    messages: list[peerwire.PeerMessage] = [
        peerwire.PairRequest("phone", "device", bytes(32)),
        peerwire.PairAccept("mac", "homebase", bytes(32)),
        peerwire.PairReject("no"),
        peerwire.Ping(7),
        peerwire.Pong(7),
        peerwire.SyncData(syncwire.encode(syncwire.Ack(bytes(8), 3))),
        peerwire.OffloadRequest(request, ID, HASH, b"a body"),
        peerwire.OffloadAck(request, ID, HASH),
        peerwire.HolderRefusal(request, "no"),
        peerwire.FetchRequest(request, ID, HASH),
        peerwire.FetchPart(request, ID, HASH, 10, 4, b"body"),
        peerwire.Release(request, ID, HASH),
        peerwire.Released(request, ID, HASH),
    ]
    return [peerwire.encode_body(m, i + 1) for i, m in enumerate(messages)]


def _sync_seeds() -> list[bytes]:
    session = bytes(range(8))
    stamp = Stamp(1_700_000_000_000, 3, "a1b2").encode()
    events = [
        syncwire.LogEvent(
            f"0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e1{i}",
            "a1b2" if i % 2 else "c3d4",
            i + 1,
            "message",
            1_700_000_000_000_000 + i,
            None if i % 2 else "ab" * 16,
            "t1",
            None,
            bool(i % 2),
            f"hello {i}",
        )
        for i in range(3)
    ]
    clear = syncwire.ClearFields(
        "person", "ada", "Ada", "Likes mornings.", "cd" * 16, ("friend", "cello"), None, None, 5
    )
    notes = (
        syncwire.NoteVersion(ID, stamp, "ab" * 32, True, False, clear=clear),
        syncwire.NoteVersion(
            "1b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10",
            stamp,
            "cd" * 32,
            False,
            True,
            nonce=bytes(12),
            ciphertext=b"sealed",
        ),
    )
    contacts = (syncwire.ContactEntry("ab" * 16, "Ada Lovelace", ("Ada", "Countess")),)
    marks = syncwire.Marks((("a1b2", 4), ("c3d4", 2)), (("a1b2", stamp),), bytes(16))
    key = b"\x01" + bytes(16)
    ranges = (
        Range(bytes(KEY_BYTES), key, fingerprint=bytes(FINGERPRINT_BYTES)),
        Range(key, b"\xff" * (KEY_BYTES + 1), items=((key, bytes(SHORT_HASH_BYTES)),)),
    )
    messages: list[syncwire.SyncMessage] = [
        syncwire.Hello(session, False, bytes(32), 12, marks),
        syncwire.Hello(session, True, bytes(32), 12, marks, streaming=False),
        syncwire.Batch(session, 0, True, syncwire.Records(contacts, events, notes)),
        syncwire.Check(session, bytes(32), 12),
        syncwire.Repair(session, ranges, (key,)),
        syncwire.Abort(session, "no"),
        syncwire.Ack(session, 3),
    ]
    return [syncwire.encode(m) for m in messages]


PEER_SEEDS = _peer_seeds()
SYNC_SEEDS = _sync_seeds()


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
    _peer_decode(peerwire.encode_body(peerwire.SyncData(mutated(data, seed)), 1))


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
    opened = envelope.open_envelope(RECIPIENT, envelope.seal(SENDER, RECIPIENT_KEY, body))
    assert opened.body == body
    _peer_decode(opened.body)
