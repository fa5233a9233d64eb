"""Sealed envelopes: what one peer sends another, as the relay sees it.

    envelope = ephemeral X25519 public key (32) || Box ciphertext (24-byte nonce + data)
    plaintext = 4-byte length || msgpack [version, sender key, signature, body] || zero padding

The relay routes on the recipient key it is handed beside the envelope and
learns nothing else: not the sender (inside), not the message type or ids
(inside the body), not field sizes (the plaintext is padded to a size bucket).

Why this construction. A fresh ephemeral key per envelope means the sender's
long-term key never encrypts anything, so a later theft of it opens no past
envelope (forward secrecy on the sending side). The sender is authenticated by
an Ed25519 signature over the recipient key, the ephemeral key and the body,
so an envelope cannot be re-addressed, and a flipped bit anywhere fails either
the Box MAC or the signature. Full two-sided forward secrecy would need a
handshake round trip per session; through a store-and-forward relay that a
sibling may only reach hours later, we chose one-message envelopes instead.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import msgpack
from nacl.exceptions import BadSignatureError, CryptoError
from nacl.public import Box, PrivateKey, PublicKey
from nacl.signing import SigningKey

from .errors import ProtocolError
from .identity import PUBLIC_KEY_BYTES, verify_key
from .packing import unpack
from .peerwire import MAX_BODY_BYTES

ENVELOPE_VERSION = 1
SIGN_CONTEXT = b"pixie-envelope-v1\x00"
# The smallest padded size: a sync Hello with its marks, in an envelope under
# 512 bytes on the wire, which is what a converged pair exchanges.
MIN_BUCKET = 256
_OVERHEAD = 32 + Box.NONCE_SIZE + 16  # ephemeral key, nonce, Poly1305 tag


class EnvelopeError(ProtocolError):
    """An envelope that fails to open: tampered, misaddressed or forged."""


@dataclass(frozen=True, slots=True)
class Opened:
    sender: bytes  # the sender's public identity key
    body: bytes


def _signed(recipient: bytes, eph_pub: bytes, body: bytes) -> bytes:
    """What the sender signs: the addressing and a digest of the body (signing
    the digest keeps the cost of Ed25519 flat however large the body is)."""
    digest = hashlib.blake2b(body, digest_size=32, person=b"pixie-env-body").digest()
    return SIGN_CONTEXT + recipient + eph_pub + digest


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


def seal(sender: SigningKey, recipient: bytes, body: bytes) -> bytes:
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"body of {len(body)} bytes is over {MAX_BODY_BYTES}")
    recipient_x = _curve_public(recipient)
    ephemeral = PrivateKey.generate()
    eph_pub = bytes(ephemeral.public_key)
    signature = sender.sign(_signed(recipient, eph_pub, body)).signature
    inner: bytes = msgpack.packb(
        [ENVELOPE_VERSION, bytes(sender.verify_key), signature, body], use_bin_type=True
    )
    framed = len(inner).to_bytes(4, "big") + inner
    padded = framed + bytes(bucket(len(framed)) - len(framed))
    return eph_pub + bytes(Box(ephemeral, recipient_x).encrypt(padded))


def open_envelope(recipient: SigningKey, envelope: bytes) -> Opened:
    """Open an envelope addressed to ``recipient``, or raise `EnvelopeError`."""
    if len(envelope) < _OVERHEAD + MIN_BUCKET:
        raise EnvelopeError("envelope too short")
    eph_pub = envelope[:32]
    try:
        box = Box(_curve_private(recipient), PublicKey(eph_pub))
        padded = box.decrypt(envelope[32:])
    except CryptoError:
        raise EnvelopeError("envelope failed authentication (tampered or not for us)") from None
    size = int.from_bytes(padded[:4], "big")
    if size > len(padded) - 4 or padded[4 + size :].strip(b"\x00"):
        raise EnvelopeError("envelope padding is malformed")
    try:
        items = unpack(
            padded[4 : 4 + size], "envelope", max_bin=MAX_BODY_BYTES, max_str=0, max_array=4
        )
    except ProtocolError:
        raise EnvelopeError("envelope contents are malformed") from None
    if not isinstance(items, list) or len(items) != 4:
        raise EnvelopeError("envelope contents are malformed")
    version, sender, signature, body = items
    if version != ENVELOPE_VERSION:
        raise EnvelopeError(f"unknown envelope version {version!r:.20}")
    if not all(isinstance(x, bytes) for x in (sender, signature, body)):
        raise EnvelopeError("envelope contents are malformed")
    if len(sender) != PUBLIC_KEY_BYTES or len(signature) != 64:
        raise EnvelopeError("envelope contents are malformed")
    own = bytes(recipient.verify_key)
    try:
        verify_key(sender).verify(_signed(own, eph_pub, body), signature)
    except (BadSignatureError, ProtocolError):
        raise EnvelopeError("envelope signature does not verify") from None
    return Opened(sender, body)
