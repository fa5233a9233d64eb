"""Peer identities: one long-term Ed25519 key pair per peer.

The same key proves a client to the relay (it signs the relay's challenge),
signs every envelope the peer sends, and, converted to X25519, is what
envelopes to the peer are encrypted for. Only the public half ever leaves the
key store; a fingerprint of it is what people compare.
"""

from __future__ import annotations

from nacl.signing import SigningKey, VerifyKey

from .errors import ProtocolError
from .keyprint import fingerprint

__all__ = ["fingerprint", "identity_from_seed", "new_identity", "verify_key"]

PUBLIC_KEY_BYTES = 32
SEED_BYTES = 32


def new_identity() -> SigningKey:
    return SigningKey.generate()


def identity_from_seed(seed: bytes) -> SigningKey:
    if len(seed) != SEED_BYTES:
        raise ProtocolError("an identity seed is 32 bytes")
    return SigningKey(seed)


def verify_key(public_key: bytes) -> VerifyKey:
    if not isinstance(public_key, bytes) or len(public_key) != PUBLIC_KEY_BYTES:
        raise ProtocolError("a public key is 32 bytes")
    try:
        return VerifyKey(public_key)
    except Exception:  # nacl raises several types for a bad point
        raise ProtocolError("not a valid Ed25519 public key") from None
