"""Key fingerprints: what people compare and what logs show instead of keys."""

from __future__ import annotations

import hashlib


def fingerprint(public_key: bytes) -> str:
    """A short, readable digest of a public key: 4 groups of 4 hex digits."""
    digest = hashlib.blake2b(public_key, digest_size=8, person=b"pixie-fpr").hexdigest()
    return "-".join(digest[i : i + 4] for i in range(0, 16, 4))
