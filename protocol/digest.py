"""The state digest: one short value that two converged peers agree on.

Everything that converges between siblings is a set of items: each log event
(by id), each note version (id, stamp, content hash, user_edited, deleted),
each contact (id, name), each alias (alias, contact) and each contact detail
(contact, field, time, value). Every item starts with
a 17-byte key (a kind letter and a 128-bit id) that names it across versions.
The fingerprint of a set is the sum of its items' hashes modulo 2^256 together
with the count, as Negentropy fingerprints ranges. Addition commutes, so the
digest does not depend on the order things arrived in; and an item can be added
or taken away in O(1), so a store can keep the digest current on every write
and check it against a full recomputation whenever it likes.

What is not in an item is not in the digest: where a note's body lives, local
row numbers, watermarks, settings and keys. A write that changes none of the
items (a no-op) leaves the digest exactly as it was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

MODULUS = 1 << 256
_PERSON = b"pixie-digest-v1\x00"


def _id_bytes(item_id: str) -> bytes:
    raw = bytes.fromhex(item_id.replace("-", ""))
    if len(raw) != 16:
        raise ValueError(f"not a 128-bit id: {item_id!r:.60}")
    return raw


def event_item(event_id: str) -> bytes:
    return b"E" + _id_bytes(event_id)


def note_item(
    note_id: str, stamp: str, content_hash: str, user_edited: bool, deleted: bool
) -> bytes:
    flags = (1 if user_edited else 0) | (2 if deleted else 0)
    return (
        b"N"
        + _id_bytes(note_id)
        + stamp.encode()
        + b"\x00"
        + content_hash.encode()
        + bytes([flags])
    )


def contact_item(contact_id: str, name: str) -> bytes:
    return b"C" + _id_bytes(contact_id) + name.encode()


def alias_item(alias_key: str, contact_id: str, alias: str) -> bytes:
    # Keyed by a hash of the alias key: every item starts with a 17-byte key.
    key = hashlib.sha256(b"pixie-alias\x00" + alias_key.encode()).digest()[:16]
    return b"A" + key + _id_bytes(contact_id) + alias.encode()


def detail_item(contact_id: str, field: str, value: str, at: int) -> bytes:
    """A contact's detail (organisation, title, birthday, note) as it stands.

    Keyed by a hash of (contact, field), so a new value for the same detail is
    the same key with other bytes: replacing it is a remove and an add. The
    time is part of the bytes because it is part of what converges: two
    replicas that hold one value stamped at different times still differ
    (last writer wins on (at, value), see the replica's merge).
    """
    key = hashlib.sha256(
        b"pixie-detail\x00" + contact_id.encode() + b"\x00" + field.encode()
    ).digest()[:16]
    return (
        b"D"
        + key
        + _id_bytes(contact_id)
        + field.encode()
        + b"\x00"
        + at.to_bytes(8, "big", signed=True)
        + value.encode()
    )


def item_key(item: bytes) -> bytes:
    """The 17 bytes (kind, id) that name an item whatever its version."""
    return item[:17]


_BASE = hashlib.sha256(_PERSON)


def item_hash(item: bytes) -> int:
    h = _BASE.copy()
    h.update(item)
    return int.from_bytes(h.digest(), "big")


def item_hashes(items: Iterable[bytes]) -> list[int]:
    """`item_hash` of each item, the loop written out (a write hashes every
    item it adds, up to a million in a first sync)."""
    copy, to_int = _BASE.copy, int.from_bytes
    out = []
    for item in items:
        h = copy()
        h.update(item)
        out.append(to_int(h.digest(), "big"))
    return out


def _sum_hashes(items: Iterable[bytes]) -> tuple[int, int]:
    """The sum of `item_hash` over ``items``, and how many there were: the
    same hash written out in the loop (a sync or an import sums a hash for
    each of up to a million items, and the call costs a third of each)."""
    copy, to_int = _BASE.copy, int.from_bytes
    total = count = 0
    for item in items:
        h = copy()
        h.update(item)
        total += to_int(h.digest(), "big")
        count += 1
    return total, count


@dataclass(frozen=True, slots=True)
class Fingerprint:
    total: int = 0
    count: int = 0

    def add(self, item: bytes) -> Fingerprint:
        return Fingerprint((self.total + item_hash(item)) % MODULUS, self.count + 1)

    def remove(self, item: bytes) -> Fingerprint:
        return Fingerprint((self.total - item_hash(item)) % MODULUS, self.count - 1)

    def update(self, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()) -> Fingerprint:
        """Add and take away many items at once (one big-integer sum each way)."""
        plus, added = _sum_hashes(add)
        minus, removed = _sum_hashes(remove)
        return Fingerprint((self.total + plus - minus) % MODULUS, self.count + added - removed)

    def replace(self, old: bytes, new: bytes) -> Fingerprint:
        if old == new:
            return self
        return Fingerprint((self.total - item_hash(old) + item_hash(new)) % MODULUS, self.count)

    def digest(self) -> bytes:
        """32 bytes that change whenever the set does."""
        return hashlib.sha256(
            _PERSON + self.total.to_bytes(32, "big") + self.count.to_bytes(8, "big")
        ).digest()

    @classmethod
    def of(cls, items: Iterable[bytes]) -> Fingerprint:
        total, count = _sum_hashes(items)
        return cls(total % MODULUS, count)

    def encode(self) -> str:
        return f"{self.total:064x}:{self.count}"

    @classmethod
    def decode(cls, text: str) -> Fingerprint:
        total, _, count = text.partition(":")
        return cls(int(total, 16), int(count))
