"""Sealed envelopes: what one peer sends another, as the relay sees it.

    envelope = ephemeral X25519 public key (32) || Box ciphertext (24-byte nonce + data)
    plaintext = 4-byte length || msgpack [version, sender key, signature, body] || zero padding

The relay routes on the recipient key it is handed beside the envelope and
learns nothing else: not the message type or ids (inside the body), not field
sizes (the plaintext is padded to a size bucket).

Why this construction. The sender's long-term key never encrypts anything: each
envelope is a Box between an ephemeral X25519 key and the recipient's key, so a
later theft of the sender's long-term key opens no past envelope (forward
secrecy on the sending side). Every envelope carries an Ed25519 signature by
the sender over its identity, the recipient, the ephemeral key and a digest of
the body: a flipped bit anywhere fails the Box MAC or the signature, an
envelope cannot be re-addressed, and even a thief of the recipient's key, who
can compute the Box key, cannot write the recipient messages in the sender's
name.

Version 2 keeps one ephemeral key per sender and recipient, in memory only,
for at most `EPHEMERAL_SECONDS` or `EPHEMERAL_ENVELOPES` envelopes (expired
keys are dropped at the next seal to anyone), and the recipient caches the
Box key of each ephemeral key it has verified, so an envelope costs no X25519
operation, only the signature, its check and a symmetric encryption (sealing
and opening a 4 KB body: about 160 microseconds with a key per envelope, about
85 now). The price is a window: someone who
reads a running sender's memory can open what it sent to that recipient in the
last minutes, not only the envelope it was sealing. Envelopes sharing an
ephemeral key are linkable, which tells the relay nothing new (it already knows
which connection each envelope came in on). Version 1 (a fresh key per
envelope) still opens. Full two-sided forward secrecy would need a handshake
round trip per session; through a store-and-forward relay that a sibling may
only reach hours later, we chose one-message envelopes instead.

The keys live in an `EnvelopeKeys`, and the time that ages them is the
caller's, passed to `seal` as ``now`` (seconds on any clock that does not go
back, the same one for every seal into one `EnvelopeKeys`): nothing here reads
a clock. A process's drivers share `PROCESS_KEYS` and pass monotonic time; the
simulator gives each world keys of its own and its own clock, so a seed seals
the same envelopes whatever ran before it in the process.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import msgpack
from nacl.exceptions import BadSignatureError, CryptoError
from nacl.public import Box, PrivateKey, PublicKey
from nacl.signing import SigningKey

from .clock import SYSTEM_ENTROPY, Entropy, is_system
from .errors import ProtocolError, shown
from .framing import MIN_ENVELOPE_BYTES, MIN_PADDED_BYTES
from .identity import PUBLIC_KEY_BYTES, verify_key
from .packing import unpack
from .peerwire import MAX_BODY_BYTES

ENVELOPE_VERSION = 2
SIGN_CONTEXT = b"pixie-envelope-v2\x00"
SIGN_CONTEXT_V1 = b"pixie-envelope-v1\x00"
# How long a sender keeps one ephemeral key for one recipient.
EPHEMERAL_SECONDS = 600.0
EPHEMERAL_ENVELOPES = 10_000
# Ephemeral keys a recipient remembers as verified (most recently used kept).
VERIFIED_KEYS = 1024
# The smallest padded size: a sync Hello with its marks, in an envelope under
# 512 bytes on the wire, which is what a converged pair exchanges.
MIN_BUCKET = MIN_PADDED_BYTES
_OVERHEAD = 32 + Box.NONCE_SIZE + 16  # ephemeral key, nonce, Poly1305 tag
assert _OVERHEAD + MIN_BUCKET == MIN_ENVELOPE_BYTES


class EnvelopeError(ProtocolError):
    """An envelope that fails to open: tampered, misaddressed or forged."""


@dataclass(frozen=True, slots=True)
class Opened:
    sender: bytes  # the sender's public identity key
    body: bytes


def _digest(body: bytes) -> bytes:
    """What a signature covers of the body (signing a digest keeps the cost of
    Ed25519 flat however large the body is)."""
    return hashlib.blake2b(body, digest_size=32, person=b"pixie-env-body").digest()


def _signed_v1(recipient: bytes, eph_pub: bytes, body: bytes) -> bytes:
    """What a version-1 sender signed: the addressing and a digest of the body."""
    return SIGN_CONTEXT_V1 + recipient + eph_pub + _digest(body)


def _signed(sender: bytes, recipient: bytes, eph_pub: bytes, body: bytes) -> bytes:
    """What a sender signs for each envelope: who it is, whom it writes to, with
    which ephemeral key, and a digest of the body. The body is signed, not only
    covered by the Box MAC, because the recipient can compute the Box key too:
    whoever stole the recipient's key could otherwise write it messages in the
    sender's name."""
    return SIGN_CONTEXT + sender + recipient + eph_pub + _digest(body)


def bucket(size: int) -> int:
    """The padded size for ``size`` bytes: at least MIN_BUCKET, then steps of 1/8 of
    the power of two below (Padmé-like: leaks only the rough order of size)."""
    if size <= MIN_BUCKET:
        return MIN_BUCKET
    step = 1 << max(0, size.bit_length() - 4)
    return -(-size // step) * step


@functools.lru_cache(maxsize=256)
def _curve_public(recipient: bytes) -> PublicKey:
    """A sibling's X25519 key (from its Ed25519 key; the conversion costs more
    than the encryption of a small envelope, and siblings are few)."""
    return verify_key(recipient).to_curve25519_public_key()


@functools.lru_cache(maxsize=8)
def _curve_private(identity: SigningKey) -> PrivateKey:
    return identity.to_curve25519_private_key()


@dataclass(slots=True)
class _Ephemeral:
    """A sender's current ephemeral key for one recipient."""

    public: bytes
    box: Box
    until: float
    left: int


class EnvelopeKeys:
    """The sending side's ephemeral keys and the receiving side's verified
    ones, shared by the threads that seal and open with it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sending: dict[tuple[bytes, bytes], _Ephemeral] = {}
        self.verified: OrderedDict[tuple[bytes, bytes], Box] = OrderedDict()

    def ephemeral(
        self, sender: SigningKey, recipient: bytes, entropy: Entropy, now: float
    ) -> _Ephemeral:
        own = bytes(sender.verify_key)
        with self.lock:
            # Keys past their time are dropped whoever they were for, so none
            # outlives its window in memory just because its recipient went quiet.
            for pair in [p for p, e in self.sending.items() if not now < e.until]:
                del self.sending[pair]
            current = self.sending.get((own, recipient))
            if current is not None and current.left > 0:
                current.left -= 1
                return current
        # libsodium's own key for the system's randomness; a seeded source
        # gives the key's bytes (so a seeded run seals the same envelopes).
        key = (
            PrivateKey.generate()
            if is_system(entropy)
            else PrivateKey(entropy.token_bytes(PrivateKey.SIZE))
        )
        fresh = _Ephemeral(
            bytes(key.public_key),
            Box(key, _curve_public(recipient)),
            now + EPHEMERAL_SECONDS,
            EPHEMERAL_ENVELOPES - 1,
        )
        with self.lock:
            self.sending[(own, recipient)] = fresh
        return fresh

    def known(self, own: bytes, eph_pub: bytes) -> Box | None:
        with self.lock:
            entry = self.verified.get((own, eph_pub))
            if entry is not None:
                self.verified.move_to_end((own, eph_pub))
            return entry

    def remember(self, own: bytes, eph_pub: bytes, entry: Box) -> None:
        with self.lock:
            self.verified[(own, eph_pub)] = entry
            while len(self.verified) > VERIFIED_KEYS:
                self.verified.popitem(last=False)

    def forget(self) -> None:
        """Drop every ephemeral and verified key (the next envelope starts afresh)."""
        with self.lock:
            self.sending.clear()
            self.verified.clear()


PROCESS_KEYS = EnvelopeKeys()


def seal(
    sender: SigningKey,
    recipient: bytes,
    body: bytes,
    *,
    now: float,
    entropy: Entropy = SYSTEM_ENTROPY,
    keys: EnvelopeKeys = PROCESS_KEYS,
) -> bytes:
    """Seal ``body`` from ``sender`` to ``recipient`` at time ``now`` (seconds,
    on the clock every seal into ``keys`` uses: it ages the ephemeral keys).

    A new ephemeral key and every Box nonce are drawn from ``entropy``: the
    system's randomness by default; a seeded source (a simulation, a test)
    makes the same envelope from the same seed, once ``keys`` holds no
    ephemeral key for the pair (fresh keys, or `EnvelopeKeys.forget`).
    """
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"body of {len(body)} bytes is over {MAX_BODY_BYTES}")
    ephemeral = keys.ephemeral(sender, recipient, entropy, now)
    own = bytes(sender.verify_key)
    signature = sender.sign(_signed(own, recipient, ephemeral.public, body)).signature
    inner: bytes = msgpack.packb([ENVELOPE_VERSION, own, signature, body], use_bin_type=True)
    framed = len(inner).to_bytes(4, "big") + inner
    padded = framed + bytes(bucket(len(framed)) - len(framed))
    nonce = entropy.token_bytes(Box.NONCE_SIZE)
    return ephemeral.public + bytes(ephemeral.box.encrypt(padded, nonce))


def open_envelope(
    recipient: SigningKey, envelope: bytes, *, keys: EnvelopeKeys = PROCESS_KEYS
) -> Opened:
    """Open an envelope addressed to ``recipient``, or raise `EnvelopeError`
    (an ephemeral key verified before is remembered in ``keys``)."""
    if len(envelope) < _OVERHEAD + MIN_BUCKET:
        raise EnvelopeError("envelope too short")
    own = bytes(recipient.verify_key)
    eph_pub = envelope[:32]
    known = keys.known(own, eph_pub)
    try:
        box = known if known is not None else Box(_curve_private(recipient), PublicKey(eph_pub))
        padded = box.decrypt(envelope[32:])
    except CryptoError:
        raise EnvelopeError("envelope failed authentication (tampered or not for us)") from None
    size = int.from_bytes(padded[:4], "big")
    if size > len(padded) - 4 or padded[4 + size :].strip(b"\x00"):
        raise EnvelopeError("envelope padding is malformed")
    try:
        items = unpack(
            padded[4 : 4 + size],
            "envelope",
            max_bin=MAX_BODY_BYTES,
            max_str=0,
            max_array=4,
            max_depth=1,  # a flat array: nothing in it is ever a container
        )
    except ProtocolError:
        raise EnvelopeError("envelope contents are malformed") from None
    if not isinstance(items, list) or len(items) != 4:
        raise EnvelopeError("envelope contents are malformed")
    version, sender, signature, body = items
    if type(version) is not int or version not in (1, ENVELOPE_VERSION):
        raise EnvelopeError(f"unknown envelope version {shown(version)}")
    if not all(isinstance(x, bytes) for x in (sender, signature, body)):
        raise EnvelopeError("envelope contents are malformed")
    if len(sender) != PUBLIC_KEY_BYTES or len(signature) != 64:
        raise EnvelopeError("envelope contents are malformed")
    v1 = version == 1
    signed = _signed_v1(own, eph_pub, body) if v1 else _signed(sender, own, eph_pub, body)
    try:
        verify_key(sender).verify(signed, signature)
    except (BadSignatureError, ProtocolError):
        raise EnvelopeError("envelope signature does not verify") from None
    if version == ENVELOPE_VERSION and known is None:
        keys.remember(own, eph_pub, box)
    return Opened(sender, body)
