"""The sans-IO core: framing, relay frames, peer bodies, envelopes, replay, clocks."""

from __future__ import annotations

import contextlib
import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.protocol import envelope, peerwire, relaywire
from pixie.protocol.digest import Fingerprint, event_item, note_item
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MAX_FRAME_BYTES, FrameDecoder, encode_frame
from pixie.protocol.hlc import MAX_FORWARD_MS, ClockSkewError, HybridClock, Stamp
from pixie.protocol.identity import fingerprint, new_identity
from pixie.protocol.proof import sign_key_proof, verify_key_proof
from pixie.protocol.replay import WINDOW, ReplayWindow, Verdict

# -- framing ---------------------------------------------------------------------


@given(
    payloads=st.lists(st.binary(max_size=3000), max_size=20),
    cuts=st.lists(st.integers(0, 70_000), max_size=30),
)
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for a, b in itertools.pairwise(points):
        out += decoder.feed(stream[a:b])
    assert out == payloads
    assert decoder.at_boundary()


def test_oversize_prefix_is_refused_before_buffering() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="limit"):
        decoder.feed((MAX_FRAME_BYTES + 1).to_bytes(4, "big") + b"x")
    with pytest.raises(ProtocolError):
        encode_frame(bytes(MAX_FRAME_BYTES + 1))
    assert FrameDecoder().feed(encode_frame(bytes(MAX_FRAME_BYTES))) == [bytes(MAX_FRAME_BYTES)]


# -- relay frames and peer bodies ------------------------------------------------------

KEY = bytes(range(32))
relay_messages = st.one_of(
    st.builds(relaywire.Hello, st.integers(0, 255), st.just(KEY)),
    st.builds(relaywire.Challenge, st.binary(min_size=32, max_size=32)),
    st.builds(relaywire.Prove, st.binary(min_size=64, max_size=64)),
    st.builds(relaywire.Welcome, st.integers(0, 1000)),
    st.builds(relaywire.Send, st.just(KEY), st.binary(max_size=2000)),
    st.builds(relaywire.Deliver, st.binary(min_size=32, max_size=32), st.binary(max_size=2000)),
    st.builds(relaywire.Ping, st.integers(0, 2**62)),
    st.builds(relaywire.Pong, st.integers(0, 2**62)),
    st.builds(relaywire.Refuse, st.text(max_size=100)),
)


@given(relay_messages)
def test_relay_frames_round_trip(message: relaywire.RelayMessage) -> None:
    assert relaywire.decode(relaywire.encode(message)) == message


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_relay_decoder_only_ever_raises_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        relaywire.decode(data)


def test_a_key_proof_verifies_only_for_its_key_challenge_and_signature() -> None:
    signer, other = new_identity(), new_identity()
    key = bytes(signer.verify_key)
    challenge = bytes(range(relaywire.NONCE_BYTES))
    signature = sign_key_proof(signer, challenge)
    assert signature == signer.sign(relaywire.auth_message(challenge, key)).signature
    assert verify_key_proof(key, challenge, signature)
    assert not verify_key_proof(bytes(other.verify_key), challenge, signature)
    assert not verify_key_proof(key, bytes(relaywire.NONCE_BYTES), signature)
    assert not verify_key_proof(key, challenge, sign_key_proof(other, challenge))
    flipped = bytes([signature[0] ^ 1]) + signature[1:]
    assert not verify_key_proof(key, challenge, flipped)
    # Never an exception: wrong sizes, and 32 bytes that are no Ed25519 point.
    assert not verify_key_proof(key[:31], challenge, signature)
    assert not verify_key_proof(key, challenge, signature[:63])
    assert not verify_key_proof(b"\xff" * 32, challenge, signature)


peer_messages = st.one_of(
    st.builds(
        peerwire.PairRequest,
        st.text(max_size=50),
        st.sampled_from(["device", "homebase"]),
        st.binary(min_size=32, max_size=32),
    ),
    st.builds(
        peerwire.PairAccept,
        st.text(max_size=50),
        st.sampled_from(["device", "homebase"]),
        st.binary(min_size=32, max_size=32),
    ),
    st.builds(peerwire.PairReject, st.text(max_size=50)),
    st.builds(peerwire.Ping, st.integers(0, 2**62)),
    st.builds(peerwire.Pong, st.integers(0, 2**62)),
)


@given(peer_messages, st.integers(1, 2**62))
def test_peer_bodies_round_trip(message: peerwire.PeerMessage, counter: int) -> None:
    body = peerwire.decode_body(peerwire.encode_body(message, counter))
    assert (body.message, body.counter) == (message, counter)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_peer_decoder_only_ever_raises_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        peerwire.decode_body(data)


def test_unknown_version_and_type_are_named() -> None:
    import msgpack

    with pytest.raises(peerwire.UnknownMessage, match="version"):
        peerwire.decode_body(msgpack.packb([99, 4, bytes(16), 1, 5]))
    with pytest.raises(peerwire.UnknownMessage, match="type"):
        peerwire.decode_body(msgpack.packb([1, 99, bytes(16), 1, 5]))
    with pytest.raises(ProtocolError, match="fields"):
        peerwire.decode_body(msgpack.packb([1, 4, bytes(16), 1]))


# -- envelopes -------------------------------------------------------------------------

ALICE, BOB, MALLORY = new_identity(), new_identity(), new_identity()


def test_envelope_round_trip_and_padding() -> None:
    body = peerwire.encode_body(peerwire.Ping(7), 1)
    sealed = envelope.seal(ALICE, bytes(BOB.verify_key), body, now=time.monotonic())
    opened = envelope.open_envelope(BOB, sealed)
    assert opened.sender == bytes(ALICE.verify_key) and opened.body == body
    # sizes leak only a bucket
    small = envelope.seal(ALICE, bytes(BOB.verify_key), b"x", now=time.monotonic())
    assert len(small) == len(
        envelope.seal(ALICE, bytes(BOB.verify_key), b"x" * 100, now=time.monotonic())
    )


@settings(max_examples=60)
@given(position=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused(position: int, bit: int) -> None:
    sealed = bytearray(envelope.seal(ALICE, bytes(BOB.verify_key), b"hello", now=time.monotonic()))
    sealed[position % len(sealed)] ^= 1 << bit
    with pytest.raises(envelope.EnvelopeError):
        envelope.open_envelope(BOB, bytes(sealed))


def test_envelope_for_someone_else_does_not_open() -> None:
    sealed = envelope.seal(ALICE, bytes(BOB.verify_key), b"hello", now=time.monotonic())
    with pytest.raises(envelope.EnvelopeError):
        envelope.open_envelope(MALLORY, sealed)


def hand_sealed(
    version: int, sender: bytes, signature: bytes, body: bytes, eph: object = None
) -> bytes:
    """An envelope made by hand, as an attacker would. ``eph`` is an X25519
    private key, a (`Box`, ephemeral public key) pair for an existing one, or
    None for a fresh key."""
    import msgpack
    from nacl.public import Box, PrivateKey

    inner = msgpack.packb([version, sender, signature, body], use_bin_type=True)
    framed = len(inner).to_bytes(4, "big") + inner
    padded = framed + bytes(512 - len(framed))
    if isinstance(eph, tuple):
        box, eph_pub = eph
    else:
        key = eph if isinstance(eph, PrivateKey) else PrivateKey.generate()
        box, eph_pub = Box(key, BOB.verify_key.to_curve25519_public_key()), bytes(key.public_key)
    return eph_pub + bytes(box.encrypt(padded))


def test_sender_is_authenticated_not_just_encrypted() -> None:
    """Mallory knows Bob's public key; she can encrypt to him, but not as Alice."""
    forged_sig = MALLORY.sign(b"anything").signature
    forged = hand_sealed(1, bytes(ALICE.verify_key), forged_sig, b"hi")
    with pytest.raises(envelope.EnvelopeError, match="signature"):
        envelope.open_envelope(BOB, forged)


def test_mallory_cannot_bind_her_ephemeral_key_to_alice() -> None:
    """The version-2 signature binds sender, recipient and ephemeral key: one
    made by anyone but the claimed sender is refused."""
    from nacl.public import PrivateKey

    eph = PrivateKey.generate()
    alice, bob, eph_pub = bytes(ALICE.verify_key), bytes(BOB.verify_key), bytes(eph.public_key)
    signed = envelope._signed(alice, bob, eph_pub, b"hi")
    forged = hand_sealed(2, alice, MALLORY.sign(signed).signature, b"hi", eph)
    with pytest.raises(envelope.EnvelopeError, match="signature"):
        envelope.open_envelope(BOB, forged)


def test_ephemeral_keys_are_kept_for_a_while_then_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(envelope, "EPHEMERAL_ENVELOPES", 3)
    mine = envelope.EnvelopeKeys()
    sealed = [
        envelope.seal(ALICE, bytes(BOB.verify_key), bytes([i]), now=0.0, keys=mine)
        for i in range(7)
    ]
    keys = [s[:32] for s in sealed]
    assert keys[0] == keys[1] == keys[2] != keys[3]
    assert keys[3] == keys[4] == keys[5] != keys[6]
    # Each recipient has a key of its own.
    assert (
        envelope.seal(ALICE, bytes(MALLORY.verify_key), b"x", now=0.0, keys=mine)[:32] not in keys
    )
    # Opened in any order, each once or many times.
    for i in (6, 0, 3, 0, 5):
        assert envelope.open_envelope(BOB, sealed[i]) == envelope.Opened(
            bytes(ALICE.verify_key), bytes([i])
        )
    mine.forget()
    assert envelope.seal(ALICE, bytes(BOB.verify_key), b"x", now=0.0, keys=mine)[:32] not in keys


def test_ephemeral_keys_expire_with_the_time_passed_in() -> None:
    """The caller's time ages the keys (nothing in protocol reads a clock), and
    keys of one `EnvelopeKeys` are not another's."""
    keys, other = envelope.EnvelopeKeys(), envelope.EnvelopeKeys()
    to_bob = bytes(BOB.verify_key)
    first = envelope.seal(ALICE, to_bob, b"a", now=1000.0, keys=keys)[:32]
    later = 1000.0 + envelope.EPHEMERAL_SECONDS - 1
    assert envelope.seal(ALICE, to_bob, b"b", now=later, keys=keys)[:32] == first
    assert envelope.seal(ALICE, to_bob, b"b", now=later, keys=other)[:32] != first
    past = 1000.0 + envelope.EPHEMERAL_SECONDS + 1
    assert envelope.seal(ALICE, to_bob, b"c", now=past, keys=keys)[:32] != first


def test_the_recipient_cannot_write_itself_messages_in_the_senders_name() -> None:
    """Bob (or whoever stole his key) can compute the Box key of Alice's
    envelopes; re-using her ephemeral key and signature with another body, or
    naming another sender, is refused: each body is signed."""
    import msgpack
    from nacl.public import Box, PublicKey

    sealed = envelope.seal(ALICE, bytes(BOB.verify_key), b"hello", now=time.monotonic())
    assert envelope.open_envelope(BOB, sealed).sender == bytes(ALICE.verify_key)
    # The Box key Alice's side computed, from Bob's side (now cached by him too).
    box = Box(BOB.to_curve25519_private_key(), PublicKey(sealed[:32]))
    padded = box.decrypt(sealed[32:])
    items = msgpack.unpackb(padded[4 : 4 + int.from_bytes(padded[:4], "big")])
    for sender, body in ((ALICE, b"erase it"), (MALLORY, b"hello")):
        forged = hand_sealed(2, bytes(sender.verify_key), items[2], body, (box, sealed[:32]))
        with pytest.raises(envelope.EnvelopeError, match="signature"):
            envelope.open_envelope(BOB, forged)


def test_expired_ephemeral_keys_leave_memory() -> None:
    """A key past its time is dropped at the next seal to anyone, not only when
    its own recipient is written to again."""
    keys = envelope.EnvelopeKeys()
    envelope.seal(ALICE, bytes(BOB.verify_key), b"a", now=1000.0, keys=keys)
    past = 1000.0 + envelope.EPHEMERAL_SECONDS + 1
    envelope.seal(ALICE, bytes(MALLORY.verify_key), b"b", now=past, keys=keys)
    assert list(keys.sending) == [(bytes(ALICE.verify_key), bytes(MALLORY.verify_key))]


def test_version_1_envelopes_still_open() -> None:
    from nacl.public import PrivateKey

    eph = PrivateKey.generate()
    eph_pub = bytes(eph.public_key)
    signature = ALICE.sign(envelope._signed_v1(bytes(BOB.verify_key), eph_pub, b"old")).signature
    old = hand_sealed(1, bytes(ALICE.verify_key), signature, b"old", eph)
    assert envelope.open_envelope(BOB, old) == envelope.Opened(bytes(ALICE.verify_key), b"old")
    # A version-1 signature does not pass for another body.
    swapped = hand_sealed(1, bytes(ALICE.verify_key), signature, b"new", eph)
    with pytest.raises(envelope.EnvelopeError, match="signature"):
        envelope.open_envelope(BOB, swapped)


def test_fingerprints_are_stable_and_short() -> None:
    fp = fingerprint(bytes(ALICE.verify_key))
    assert fp == fingerprint(bytes(ALICE.verify_key)) and len(fp) == 19


# -- replay window -----------------------------------------------------------------------


@given(st.lists(st.integers(1, 400), max_size=200))
def test_replay_window_matches_a_set_reference(counters: list[int]) -> None:
    window = ReplayWindow()
    seen: set[int] = set()
    for c in counters:
        verdict = window.check(c)
        if c in seen:
            expected = Verdict.REPLAY if window.high - c < WINDOW else Verdict.TOO_OLD
        elif c + WINDOW <= window.high:
            expected = Verdict.TOO_OLD
        else:
            expected = Verdict.NEW
        assert verdict is expected, (c, window)
        if verdict is Verdict.NEW:
            window = window.accept(c)
            seen.add(c)


# -- the hybrid logical clock ----------------------------------------------------------------


def test_clock_is_monotonic_when_the_wall_goes_back() -> None:
    wall = iter([1000, 1000, 900, 1200, 1200])
    clock = HybridClock("a", wall=lambda: next(wall))
    stamps = [clock.now() for _ in range(5)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5


def test_clock_refuses_a_stamp_too_far_ahead() -> None:
    clock = HybridClock("a", wall=lambda: 1_000_000)
    clock.observe(Stamp(1_000_000 + MAX_FORWARD_MS, 3, "b"))
    assert clock.now() > Stamp(1_000_000 + MAX_FORWARD_MS, 3, "b")
    with pytest.raises(ClockSkewError):
        clock.observe(Stamp(4_070_908_800_000, 0, "b"))  # a phone set to 2099


@given(
    st.tuples(st.integers(0, 10**15 - 1), st.integers(0, 10**6 - 1), st.text("abc", min_size=1)),
    st.tuples(st.integers(0, 10**15 - 1), st.integers(0, 10**6 - 1), st.text("abc", min_size=1)),
)
def test_stamp_text_sorts_like_stamps(a: tuple[int, int, str], b: tuple[int, int, str]) -> None:
    sa, sb = Stamp(*a), Stamp(*b)
    assert Stamp.decode(sa.encode()) == sa
    assert (sa < sb) == (sa.encode() < sb.encode())


# -- the state digest ------------------------------------------------------------------


items = st.lists(st.uuids().map(lambda u: event_item(str(u))), unique=True, max_size=40)


@given(items, st.randoms())
def test_digest_is_order_free_and_incremental(xs: list[bytes], rnd) -> None:  # type: ignore[no-untyped-def]
    full = Fingerprint.of(xs)
    shuffled = xs[:]
    rnd.shuffle(shuffled)
    running = Fingerprint()
    for x in shuffled:
        running = running.add(x)
    assert running == full and running.digest() == full.digest()
    for x in xs[: len(xs) // 2]:
        running = running.remove(x)
    assert running == Fingerprint.of(xs[len(xs) // 2 :])
    assert Fingerprint.decode(running.encode()) == running


def test_note_versions_change_the_digest_and_no_ops_do_not() -> None:
    nid = "01900000-0000-7000-8000-000000000001"
    v1 = note_item(nid, "000000000000001.000000.a", "h1", False, False)
    v2 = note_item(nid, "000000000000002.000000.a", "h1", False, False)
    base = Fingerprint().add(v1)
    assert base.replace(v1, v1) == base
    moved = base.replace(v1, v2)
    assert moved.count == 1 and moved.digest() != base.digest()
    assert moved == Fingerprint.of([v2])
    edited = note_item(nid, "000000000000002.000000.a", "h1", True, False)
    assert Fingerprint.of([edited]).digest() != moved.digest()


# -- hostile nesting and values of the wrong type ------------------------------------------

# A thousand one-item arrays around a 1: msgpack decodes it (its own stack goes to
# about 1024 levels), but a repr or a comparison of it in Python recurses past
# the interpreter's limit.
DEEP = b"\x91" * 1000 + b"\x01"


def _packed(*items: bytes) -> bytes:
    """A msgpack array of already-packed items (the deep ones cannot be packed
    from Python values: the packer's own recursion limit refuses them)."""
    assert len(items) < 16
    return bytes([0x90 + len(items)]) + b"".join(items)


def test_unpack_bounds_nesting_depth() -> None:
    import msgpack

    from pixie.protocol.packing import MAX_DEPTH, unpack

    def nested(depth: int) -> bytes:
        return b"\x91" * depth + b"\x01"

    bounds = {"max_bin": 10, "max_str": 10, "max_array": 10, "max_map": 10}
    assert unpack(nested(MAX_DEPTH), "x", **bounds) is not None
    for deep in (nested(MAX_DEPTH + 1), DEEP, msgpack.packb({"a": [[[[[[[[1]]]]]]]]})):
        with pytest.raises(ProtocolError, match="nested over"):
            unpack(deep, "x", **bounds)
    assert unpack(b"\x92\x91\x01\x91\x01", "x", max_depth=2, **bounds) == [[1], [1]]
    with pytest.raises(ProtocolError, match="nested over 1 levels"):
        unpack(b"\x92\x01\x91\x01", "x", max_depth=1, **bounds)


def test_deep_nesting_in_any_envelope_field_is_refused_not_a_crash() -> None:
    import msgpack

    sender, signature = bytes(ALICE.verify_key), bytes(64)
    fields = [msgpack.packb(2), msgpack.packb(sender), msgpack.packb(signature), b"\xc4\x01x"]
    for position in range(4):
        hostile = list(fields)
        hostile[position] = DEEP
        with pytest.raises(envelope.EnvelopeError):
            envelope.open_envelope(BOB, raw_sealed(_packed(*hostile)))


def test_deep_nesting_in_any_peer_or_sync_field_is_refused_not_a_crash() -> None:
    import msgpack

    from pixie.protocol import syncwire

    peer = [msgpack.packb(x) for x in (1, 4, bytes(16), 1, 5)]
    for position in range(len(peer)):
        hostile = list(peer)
        hostile[position] = DEEP
        with pytest.raises(ProtocolError):
            peerwire.decode_body(_packed(*hostile))
    sync = [msgpack.packb(x) for x in (6, bytes(8), 3)]  # an Ack
    for position in range(len(sync)):
        hostile = list(sync)
        hostile[position] = DEEP
        with pytest.raises(ProtocolError):
            syncwire.decode(_packed(*hostile))


def test_errors_show_only_the_type_of_a_value_of_unchecked_type() -> None:
    import msgpack

    from pixie.protocol import syncwire

    bulky = [["secret " * 40] * 8] * 8
    cases = [
        (peerwire.decode_body, msgpack.packb([bulky, 4, bytes(16), 1, 5])),
        (peerwire.decode_body, msgpack.packb([1, bulky, bytes(16), 1, 5])),
        (peerwire.decode_body, msgpack.packb([1.0, 4, bytes(16), 1, 5])),
        (syncwire.decode, msgpack.packb([bulky, bytes(8), 3])),
        (syncwire.decode, msgpack.packb([6.0, bytes(8), 3])),
        (peerwire.decode_body, msgpack.packb([1, {"secret": "secret " * 40}, bytes(16), 1, 5])),
    ]
    for decode, data in cases:
        with pytest.raises(ProtocolError) as caught:
            decode(data)
        text = str(caught.value)
        assert "secret" not in text and len(text) < 80, text
        assert "type list" in text or "type dict" in text or "type float" in text, text
    # An integer or a string is shown, clipped.
    with pytest.raises(ProtocolError, match=r"type 'xxxxxxxxxxxxxxxxxxxx'\.\.\.$"):
        peerwire.decode_body(msgpack.packb([1, "x" * 5000, bytes(16), 1, 5]))
    with pytest.raises(ProtocolError, match=r"version 99$"):
        peerwire.decode_body(msgpack.packb([99, 4, bytes(16), 1, 5]))


def test_an_envelope_version_must_be_an_integer() -> None:
    import msgpack

    sender = msgpack.packb(bytes(ALICE.verify_key))
    rest = (sender, msgpack.packb(bytes(64)), b"\xc4\x01x")
    for version in (True, 1.0, "2", [2]):
        with pytest.raises(envelope.EnvelopeError, match=r"version|malformed") as caught:
            envelope.open_envelope(BOB, raw_sealed(_packed(msgpack.packb(version), *rest)))
        assert len(str(caught.value)) < 80


def raw_sealed(inner: bytes) -> bytes:
    """An envelope around any plaintext array, sealed to BOB (its signature need
    not verify: the decoder must refuse it before or at that check)."""
    from nacl.public import Box, PrivateKey

    key = PrivateKey.generate()
    box = Box(key, BOB.verify_key.to_curve25519_public_key())
    framed = len(inner).to_bytes(4, "big") + inner
    padded = framed + bytes(envelope.bucket(len(framed)) - len(framed))
    return bytes(key.public_key) + bytes(box.encrypt(padded))
