"""NotebookSeal: AES-GCM for the sealed zone.

A 256-bit key, minted the first time a sealed note is written and kept in the
key store (never in the database). Each write uses a fresh 96-bit nonce, and
the associated data binds the ciphertext to its note id and zone, so bytes
copied into another row, or replayed under another id, fail to open.

The database keeps a key *fingerprint* (a keyed hash, useless to an attacker)
so that a missing or substituted key is reported as such instead of being
silently replaced: minting a fresh key over existing sealed notes would make
them unreadable without anyone noticing.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pixie.device.errors import DeviceError
from pixie.device.store.keystore import KeyStore
from pixie.protocol.clock import SYSTEM_ENTROPY, Entropy, is_system

NONCE_BYTES = 12
KEY_BYTES = 32
TAG_BYTES = 16


class SealError(DeviceError):
    """A sealed note cannot be opened: wrong or missing key, or tampered bytes."""


@lru_cache(maxsize=4096)
def _aad(note_id: str, zone: str) -> bytes:
    # Cached: a note is sealed and opened under the same (id, zone) many times.
    return f"pixie-notebook-seal\x00{note_id}\x00{zone}".encode()


def key_fingerprint(key: bytes) -> str:
    return hmac.new(key, b"pixie-notebook-seal key id", hashlib.sha256).hexdigest()[:32]


class NotebookSeal:
    """AES-GCM under one key; each seal draws its nonce from ``entropy``."""

    def __init__(self, key: bytes, entropy: Entropy = SYSTEM_ENTROPY) -> None:
        if len(key) != KEY_BYTES:
            raise SealError("the sealed zone's key has the wrong length")
        self._aead = AESGCM(key)
        self._entropy = entropy
        self.fingerprint = key_fingerprint(key)

    def __repr__(self) -> str:  # never show the key
        return f"NotebookSeal(fingerprint={self.fingerprint})"

    def seal(self, note_id: str, zone: str, plaintext: bytes) -> tuple[bytes, bytes]:
        """(nonce, ciphertext): kept apart so neither side ever copies the ciphertext."""
        nonce = self._entropy.token_bytes(NONCE_BYTES)
        return nonce, self._aead.encrypt(nonce, plaintext, _aad(note_id, zone))

    def open(self, note_id: str, zone: str, nonce: bytes, ciphertext: bytes) -> bytes:
        if len(nonce) != NONCE_BYTES or len(ciphertext) < TAG_BYTES:
            raise SealError(f"sealed note {note_id} is truncated")
        try:
            return self._aead.decrypt(nonce, ciphertext, _aad(note_id, zone))
        except InvalidTag:
            raise SealError(
                f"sealed note {note_id} failed authentication (tampered, moved, or another key)"
            ) from None

    @classmethod
    def load(
        cls,
        store: KeyStore,
        key_name: str,
        expected: str | None,
        entropy: Entropy = SYSTEM_ENTROPY,
    ) -> NotebookSeal | None:
        """The existing key, checked against the recorded fingerprint, or None if never minted."""
        key = store.get(key_name)
        if key is None:
            if expected is not None:
                raise SealError(
                    "the sealed zone's key is missing from the key store; its notes can no "
                    "longer be opened"
                )
            return None
        seal = cls(key, entropy)
        if expected is not None and not hmac.compare_digest(seal.fingerprint, expected):
            raise SealError("the key store holds a different key than the one this Notebook used")
        return seal

    @classmethod
    def mint(
        cls, store: KeyStore, key_name: str, entropy: Entropy = SYSTEM_ENTROPY
    ) -> NotebookSeal:
        """A new key, kept in ``store``: the crypto library's own, or drawn from
        ``entropy`` when that is not the system's (a seeded Notebook)."""
        if is_system(entropy):
            key = AESGCM.generate_key(bit_length=256)
        else:
            key = entropy.token_bytes(KEY_BYTES)
        store.put(key_name, key)
        return cls(key, entropy)
