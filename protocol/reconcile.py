"""Range-based set reconciliation, in the style of Negentropy.

Both sides hold a set of items, each a fixed-width key and the 256-bit hash the
state digest sums (see `digest.py`). Sorted by key, any half-open key range
[lower, upper) has a fingerprint: the sum of its items' hashes modulo 2^256 and
their count, hashed to 16 bytes. Equal fingerprints mean (with overwhelming
probability) equal items, so a range that matches is done. A range that does
not is split into ``SPLITS`` parts by the sender's own keys, or, once it holds
at most ``IDLIST_MAX`` items, listed outright as (key, short hash) pairs, from
which the other side computes exactly what each of them lacks.

Nothing here trusts a summary or a high-water mark: it compares the sets
themselves, which is why sync falls back to it when digests still differ after
the ordinary exchange.

`ItemSet` keeps prefix sums, so the fingerprint of any range costs two binary
searches, and splitting a range costs a few more.
"""

from __future__ import annotations

import hashlib
import itertools
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .digest import MODULUS

KEY_BYTES = 17  # a kind byte, then a 128-bit id
SHORT_HASH_BYTES = 16
FINGERPRINT_BYTES = 16
SPLITS = 16
IDLIST_MAX = 16
LOWEST = bytes(KEY_BYTES)
HIGHEST = b"\xff" * (KEY_BYTES + 1)  # above every key


def short_hash(value: int) -> bytes:
    return value.to_bytes(32, "big")[:SHORT_HASH_BYTES]


def range_fingerprint(total: int, count: int) -> bytes:
    data = b"pixie-range\x00" + (total % MODULUS).to_bytes(32, "big") + count.to_bytes(8, "big")
    return hashlib.sha256(data).digest()[:FINGERPRINT_BYTES]


@dataclass(frozen=True, slots=True)
class Range:
    """A key range [lower, upper) and what one side says about it: a
    fingerprint (``items`` is None), or its items outright."""

    lower: bytes
    upper: bytes
    fingerprint: bytes = b""
    items: tuple[tuple[bytes, bytes], ...] | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What processing the peer's ranges produced."""

    reply: list[Range]  # ranges to send back
    send: list[bytes]  # keys whose records the peer lacks (or holds another version of)
    need: list[bytes]  # keys whose records we lack (or hold another version of)


class ItemSet:
    def __init__(self, items: Iterable[tuple[bytes, int]]) -> None:
        pairs = sorted(items)
        self.keys = [k for k, _ in pairs]
        self.hashes = [h for _, h in pairs]
        self._prefix = [0]
        total = 0
        for h in self.hashes:
            total += h
            self._prefix.append(total)

    def __len__(self) -> int:
        return len(self.keys)

    def _bounds(self, lower: bytes, upper: bytes) -> tuple[int, int]:
        return bisect_left(self.keys, lower), bisect_left(self.keys, upper)

    def fingerprint(self, lower: bytes, upper: bytes) -> tuple[bytes, int]:
        i, j = self._bounds(lower, upper)
        j = max(i, j)
        return range_fingerprint(self._prefix[j] - self._prefix[i], j - i), j - i

    def describe(self, lower: bytes, upper: bytes) -> list[Range]:
        """Our view of [lower, upper): the items if few, else SPLITS fingerprints."""
        i, j = self._bounds(lower, upper)
        j = max(i, j)
        if j - i <= IDLIST_MAX:
            items = tuple((self.keys[k], short_hash(self.hashes[k])) for k in range(i, j))
            return [Range(lower, upper, items=items)]
        out = []
        bounds = [lower]
        for part in range(1, SPLITS):
            bounds.append(self.keys[i + (j - i) * part // SPLITS])
        bounds.append(upper)
        for lo, hi in itertools.pairwise(bounds):
            if lo < hi:
                fp, _ = self.fingerprint(lo, hi)
                out.append(Range(lo, hi, fingerprint=fp))
        return out

    def initial(self) -> list[Range]:
        return self.describe(LOWEST, HIGHEST)

    def process(self, ranges: Sequence[Range]) -> Outcome:
        reply: list[Range] = []
        send: list[bytes] = []
        need: list[bytes] = []
        for r in ranges:
            if r.items is None:
                fp, _ = self.fingerprint(r.lower, r.upper)
                if fp != r.fingerprint:
                    reply.extend(self.describe(r.lower, r.upper))
                continue
            theirs = dict(r.items)
            i, j = self._bounds(r.lower, r.upper)
            mine = {self.keys[k]: short_hash(self.hashes[k]) for k in range(i, max(i, j))}
            for key, h in mine.items():
                if theirs.get(key) != h:
                    send.append(key)
            for key, h in theirs.items():
                if mine.get(key) != h:
                    need.append(key)
        return Outcome(reply, send, need)


__all__ = [
    "FINGERPRINT_BYTES",
    "HIGHEST",
    "IDLIST_MAX",
    "KEY_BYTES",
    "LOWEST",
    "SHORT_HASH_BYTES",
    "SPLITS",
    "ItemSet",
    "Outcome",
    "Range",
    "range_fingerprint",
    "short_hash",
]
