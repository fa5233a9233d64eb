"""Set reconciliation over item hashes, in the style of Negentropy.

Both sides hold a set of items, each a 17-byte key and the 256-bit hash the
state digest sums (see `digest.py`). Reconciliation works in the space of
those hashes, which are uniform: a *node* is every item whose hash starts with
a given prefix of ``depth`` bits, so both sides cut the same nodes without
sending a single bound. An item's *tag* is the low 64 bits of its hash (bits
no node prefix ever uses), and a node's *cell* is the sum of its items' tags
modulo 2^64 together with their count modulo 2^32: 12 bytes.

A side describes a node that differs in one of three ways (a `Range`):

- ``SPLIT``: the cells of its 2^bits children (the fan-out adapts to how many
  differences the node seems to hold: a few children where one or two are
  expected, up to 2^MAX_FANOUT_BITS where many are);
- ``ITEMS``: its tags outright, once it holds at most ``IDLIST_MAX`` items
  there (or the node is as deep as nodes go);
- ``WANT``: "this node differs by exactly one item of yours, the one with this
  tag": what a side says when a child's count is one below the peer's.

The receiver of a split compares each child's cell with its own. Equal, the
child is done. One item more than the peer, and the difference of the sums is
the tag of an item it holds in that child: the child differs by exactly that
item, which it sends at once, without descending any further. One item fewer,
and the negated difference names the peer's extra item: a ``WANT`` asks for
it (the peer checks the guess: a tag it does not hold there makes it describe
the node instead). Anything else it describes in turn. One difference among a
million items is thus found in the first split, and each further split
separates most of the differences it holds.

Nothing here trusts a summary or a high-water mark: it compares the sets
themselves, which is why sync falls back to it when digests still differ
after the ordinary exchange. A false match (two different sets with equal
cells, about 2^-96 per comparison) only leaves the digests apart: the session
notices and runs another round.

A side reads its items through an `ItemIndex`, which answers for a node its
count, its children's cells, its tags and an item by tag. `SortedItems` does
so in memory (the hashes sorted with prefix sums of the tags, so a cell costs
two binary searches, after a pass over every item); a store keeps the cells of
a fixed depth and the items by hash on disk, current on every write as the
digest is, so a round costs what the differences cost, not what the set holds.
`Reconciler` is one side's part in a round, over either.
"""

from __future__ import annotations

import enum
import hashlib
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .digest import MODULUS
from .errors import ProtocolError

KEY_BYTES = 17  # a kind byte, then a 128-bit id
HASH_BITS = 256
TAG_BYTES = 8
TAG_BITS = 8 * TAG_BYTES
COUNT_BYTES = 4
CELL_BYTES = TAG_BYTES + COUNT_BYTES
MAX_DEPTH = 64  # node prefixes stop well above the tag's bits
MAX_FANOUT_BITS = 8
ROOT_FANOUT_BITS = 4
IDLIST_MAX = 8  # a side lists its tags in a differing node of at most this many items
MAX_IDLIST = 4_096  # tags in one ITEMS range, on the wire
FINGERPRINT_BYTES = 16  # the contacts fingerprint in a replica's marks
_TAG_MASK = (1 << TAG_BITS) - 1
_COUNT_MOD = 1 << (8 * COUNT_BYTES)
# What the ranges answering one message may take, about, before every further
# split is cut in two only: a flood of differing cells from the peer then
# costs this much memory, not 256 times what it sent.
REPLY_LIMIT = 4 * 1024 * 1024
# The fan-out of a split is chosen so that 2^bits >= SPREAD * m^2 for the m
# differences a node is expected to hold: then most of them land alone in a
# child and are settled by the next message.
SPREAD = 2.0


def range_fingerprint(total: int, count: int) -> bytes:
    """A 16-byte fingerprint of a sum of item hashes and its count."""
    data = b"pixie-range\x00" + (total % MODULUS).to_bytes(32, "big") + count.to_bytes(8, "big")
    return hashlib.sha256(data).digest()[:FINGERPRINT_BYTES]


class Part(enum.IntEnum):
    SPLIT = 0
    ITEMS = 1
    WANT = 2


@dataclass(frozen=True, slots=True)
class Range:
    """What one side says about the node of hashes starting with ``prefix``
    (``depth`` bits): see the module docstring. ``data`` is the children's
    cells (SPLIT), the tags (ITEMS, 8 bytes each) or one tag (WANT)."""

    part: Part
    depth: int
    prefix: int
    data: bytes = b""

    @property
    def fanout_bits(self) -> int:
        return (len(self.data) // CELL_BYTES).bit_length() - 1

    def check(self) -> Range:
        """This range, or `ProtocolError` if any field is out of bounds."""
        if not 0 <= self.depth <= MAX_DEPTH:
            raise ProtocolError(f"a range's depth must be 0..{MAX_DEPTH}")
        if not 0 <= self.prefix < 1 << self.depth:
            raise ProtocolError("a range's prefix must fit its depth")
        size = len(self.data)
        if self.part is Part.SPLIT:
            cells, odd = divmod(size, CELL_BYTES)
            if odd or cells < 2 or cells & (cells - 1) or cells > 1 << MAX_FANOUT_BITS:
                raise ProtocolError("a split must hold 2 to 256 cells, a power of two")
            if self.depth + self.fanout_bits > MAX_DEPTH:
                raise ProtocolError(f"a split must not cut below depth {MAX_DEPTH}")
        elif self.part is Part.ITEMS:
            if size % TAG_BYTES or size > TAG_BYTES * MAX_IDLIST:
                raise ProtocolError(f"a range's items must be at most {MAX_IDLIST} tags")
        elif size != TAG_BYTES:
            raise ProtocolError(f"a wanted tag must be {TAG_BYTES} bytes")
        return self

    def wire_size(self) -> int:
        """About what this range costs encoded."""
        return 16 + len(self.data)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What processing the peer's ranges produced."""

    reply: list[Range]  # ranges to send back
    send: list[bytes]  # keys whose records the peer lacks (or holds another version of)
    need: list[bytes]  # tags of the peer's items we lack (or hold another version of)


def tags(data: bytes) -> list[int]:
    return [int.from_bytes(data[i : i + TAG_BYTES], "big") for i in range(0, len(data), TAG_BYTES)]


def _tag_bytes(values: Iterable[int]) -> bytes:
    return b"".join(v.to_bytes(TAG_BYTES, "big") for v in values)


def fanout_for(expected: float) -> int:
    """Bits of fan-out for a node expected to hold ``expected`` differences."""
    want = SPREAD * max(expected, 1.0) ** 2
    return min(MAX_FANOUT_BITS, max(2, math.ceil(math.log2(want))))


def root_fanout(count_gap: int) -> int:
    """Bits of fan-out of the first split, given how far apart the two counts are
    (a lower bound on the differences)."""
    return max(ROOT_FANOUT_BITS, fanout_for(count_gap))


def _expected(children: int, differing: int) -> float:
    """How many differences a split's children hold, judged by how many of them
    differ (balls in bins: all of them differing says at least this many)."""
    if differing >= children:
        return children * (math.log(children) + 1.0)
    return -children * math.log1p(-differing / children)


class ItemIndex(Protocol):
    """What reconciliation reads of one side's items: the nodes of the hash
    space, answered from wherever the items live (`SortedItems` in memory, or
    a store that keeps its cells current on every write). A node is named by
    ``depth`` and ``prefix`` as in the module docstring."""

    def __len__(self) -> int: ...

    def count(self, depth: int, prefix: int) -> int:
        """How many items the node holds."""
        ...

    def cells(self, depth: int, prefix: int, bits: int) -> list[tuple[int, int]]:
        """The cell (tag sum modulo 2^64, count) of each of the node's 2^bits
        children, in prefix order."""
        ...

    def listing(self, depth: int, prefix: int, limit: int | None = None) -> list[tuple[int, bytes]]:
        """(tag, key) of the node's items in hash order, the first ``limit`` of them."""
        ...

    def find(self, depth: int, prefix: int, tag: int) -> bytes | None:
        """The key of an item of the node with this tag (two sharing it: one of them)."""
        ...


class SortedItems:
    """An `ItemIndex` in memory: the hashes sorted, with prefix sums of their
    tags, so the cell of any node costs two binary searches. Building it reads
    every item; a store that keeps cells on disk needs no such pass."""

    def __init__(self, items: Iterable[tuple[bytes, int]]) -> None:
        by_hash = {h: k for k, h in items}
        self.hashes = sorted(by_hash)
        self.keys = [by_hash[h] for h in self.hashes]
        self._sums = [0]
        total = 0
        for h in self.hashes:
            total += h & _TAG_MASK
            self._sums.append(total)

    def __len__(self) -> int:
        return len(self.hashes)

    def _bounds(self, depth: int, prefix: int) -> tuple[int, int]:
        """Where the node of hashes starting with ``prefix`` lies in ours."""
        shift = HASH_BITS - depth
        i = bisect_left(self.hashes, prefix << shift)
        return i, bisect_left(self.hashes, (prefix + 1) << shift, i)

    def count(self, depth: int, prefix: int) -> int:
        i, j = self._bounds(depth, prefix)
        return j - i

    def cells(self, depth: int, prefix: int, bits: int) -> list[tuple[int, int]]:
        i, j = self._bounds(depth, prefix)
        shift = HASH_BITS - depth - bits
        base = prefix << bits
        cuts = [i]
        for c in range(1, 1 << bits):
            cuts.append(bisect_left(self.hashes, (base + c) << shift, cuts[-1], j))
        cuts.append(j)
        sums = self._sums
        return [
            ((sums[cuts[c + 1]] - sums[cuts[c]]) & _TAG_MASK, cuts[c + 1] - cuts[c])
            for c in range(1 << bits)
        ]

    def listing(self, depth: int, prefix: int, limit: int | None = None) -> list[tuple[int, bytes]]:
        i, j = self._bounds(depth, prefix)
        if limit is not None:
            j = min(j, i + limit)
        return [(self.hashes[k] & _TAG_MASK, self.keys[k]) for k in range(i, j)]

    def find(self, depth: int, prefix: int, tag: int) -> bytes | None:
        i, j = self._bounds(depth, prefix)
        hashes = self.hashes
        for k in range(i, j):
            if hashes[k] & _TAG_MASK == tag:
                return self.keys[k]
        return None


class Reconciler:
    """One side of a round of reconciliation, over its `ItemIndex`.

    It remembers the tags it listed in the round (each ``ITEMS`` range it
    sends), which is where every tag the peer then asks for comes from: a
    ``need`` is answered from that memory, not from a search of every item."""

    def __init__(self, index: ItemIndex) -> None:
        self.index = index
        self._listed: dict[int, bytes] = {}  # tag -> key, of the tags we listed
        self._spent = 0  # bytes of ranges in the reply being made

    @classmethod
    def of(cls, items: Iterable[tuple[bytes, int]]) -> Reconciler:
        """A reconciler over these (key, item hash) pairs, held in memory."""
        return cls(SortedItems(items))

    def __len__(self) -> int:
        return len(self.index)

    def describe(
        self, depth: int, prefix: int, expected: float = 1.0, count: int | None = None
    ) -> Range:
        """Our view of a node that differs: its tags if few, else a split whose
        fan-out suits ``expected`` differences. ``count``: how many items we
        hold there, if known."""
        held = self.index.count(depth, prefix) if count is None else count
        if held <= IDLIST_MAX or depth >= MAX_DEPTH:
            listed = self.index.listing(depth, prefix, MAX_IDLIST)
            self._listed.update(listed)
            described = Range(Part.ITEMS, depth, prefix, _tag_bytes(t for t, _ in listed))
        else:
            bits = min(fanout_for(expected), MAX_DEPTH - depth, max(1, held.bit_length()))
            if self._spent > REPLY_LIMIT:
                bits = 1
            described = self._split(depth, prefix, bits)
        self._spent += described.wire_size()
        return described

    def _split(self, depth: int, prefix: int, bits: int) -> Range:
        cells = b"".join(
            s.to_bytes(TAG_BYTES, "big") + (c % _COUNT_MOD).to_bytes(COUNT_BYTES, "big")
            for s, c in self.index.cells(depth, prefix, bits)
        )
        return Range(Part.SPLIT, depth, prefix, cells)

    def initial(self, peer_count: int | None = None) -> list[Range]:
        """The first ranges of a round: the whole set, split."""
        gap = 0 if peer_count is None else abs(len(self) - peer_count)
        bits = root_fanout(gap)
        if len(self) <= IDLIST_MAX:
            return [self.describe(0, 0)]
        return [self._split(0, 0, bits)]

    def keys_for(self, wanted: Iterable[bytes]) -> list[bytes]:
        """The keys of the items with these tags among those we listed this
        round (a tag we did not list is one the peer cannot have seen)."""
        found = (self._listed.get(int.from_bytes(tag, "big")) for tag in wanted)
        return [key for key in found if key is not None]

    # -- the peer's ranges ------------------------------------------------------------

    def process(self, ranges: Sequence[Range]) -> Outcome:
        out = Outcome([], [], [])
        self._spent = 0
        for r in ranges:
            if r.part is Part.SPLIT:
                self._compare_split(r, out)
            elif r.part is Part.ITEMS:
                self._compare_items(r, out)
            else:
                self._answer_want(r, out)
        return out

    def _compare_split(self, r: Range, out: Outcome) -> None:
        bits = r.fanout_bits
        depth = r.depth + bits
        theirs = r.data
        differing = []
        for c, (my_sum, my_count) in enumerate(self.index.cells(r.depth, r.prefix, bits)):
            cell = theirs[c * CELL_BYTES : (c + 1) * CELL_BYTES]
            their_sum = int.from_bytes(cell[:TAG_BYTES], "big")
            their_count = int.from_bytes(cell[TAG_BYTES:], "big")
            if (my_sum, my_count % _COUNT_MOD) != (their_sum, their_count):
                differing.append(
                    (c, my_count, my_sum - their_sum, my_count - their_count, their_count)
                )
        if not differing:
            return
        expected = _expected(1 << bits, len(differing)) / len(differing)
        for c, my_count, sum_gap, count_gap, their_count in differing:
            child = (r.prefix << bits) | c
            gap = (count_gap + _COUNT_MOD // 2) % _COUNT_MOD - _COUNT_MOD // 2  # signed
            if their_count == 0:  # the peer holds nothing here: it lacks all of ours
                out.send.extend(key for _, key in self.index.listing(depth, child))
            elif my_count == 0:  # we hold nothing here: ask for all of theirs
                out.reply.append(Range(Part.ITEMS, depth, child))
            elif (
                gap == 1
                and (found := self.index.find(depth, child, sum_gap & _TAG_MASK)) is not None
            ):
                out.send.append(found)
            elif gap == -1:
                want = (-sum_gap) & _TAG_MASK
                out.reply.append(Range(Part.WANT, depth, child, want.to_bytes(TAG_BYTES, "big")))
            else:
                # At least two differences (one more when the counts differ by an odd number).
                floor = max(2.0, abs(gap), 3.0 if gap % 2 else 2.0)
                out.reply.append(self.describe(depth, child, max(expected, floor), my_count))

    def _compare_items(self, r: Range, out: Outcome) -> None:
        theirs = set(tags(r.data))
        mine = dict(self.index.listing(r.depth, r.prefix))
        out.send.extend(key for tag, key in mine.items() if tag not in theirs)
        out.need.extend(t.to_bytes(TAG_BYTES, "big") for t in theirs if t not in mine)

    def _answer_want(self, r: Range, out: Outcome) -> None:
        found = self.index.find(r.depth, r.prefix, int.from_bytes(r.data, "big"))
        if found is not None:
            out.send.append(found)
        else:  # the peer's guess was wrong: the node holds more than that one item
            out.reply.append(self.describe(r.depth, r.prefix, 3.0))


__all__ = [
    "CELL_BYTES",
    "FINGERPRINT_BYTES",
    "IDLIST_MAX",
    "KEY_BYTES",
    "MAX_DEPTH",
    "MAX_FANOUT_BITS",
    "MAX_IDLIST",
    "TAG_BYTES",
    "ItemIndex",
    "Outcome",
    "Part",
    "Range",
    "Reconciler",
    "SortedItems",
    "range_fingerprint",
    "tags",
]
