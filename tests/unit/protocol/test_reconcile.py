"""Set reconciliation over item hashes (`pixie.protocol.reconcile`), without a session."""

from __future__ import annotations

from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.protocol.digest import item_hash
from pixie.protocol.reconcile import (
    CELL_BYTES,
    IDLIST_MAX,
    MAX_FANOUT_BITS,
    TAG_BYTES,
    Part,
    Range,
    Reconciler,
    fanout_for,
)

Items = dict[bytes, int]  # key -> item hash


def _items(rng: Random, count: int) -> Items:
    out = {}
    for _ in range(count):
        key = b"E" + rng.randbytes(16)
        out[key] = item_hash(key)
    return out


def _reconcile(a: Items, b: Items, max_turns: int = 40) -> tuple[int, int]:
    """Run turns between ``a`` (which opens) and ``b`` until neither has ranges
    left, moving every record asked for or pushed; returns (turns, bytes of ranges
    and needs). Both dicts end up as the union, as a session's merges would."""
    sides = [a, b]
    sets = [Reconciler.of(a.items()), Reconciler.of(b.items())]
    ranges: list[Range] = sets[0].initial(len(b))
    need: list[bytes] = []
    sent = sum(r.wire_size() for r in ranges)
    turn = 0
    while ranges or need:
        turn += 1
        assert turn <= max_turns, "reconciliation did not finish"
        me, peer = turn % 2, (turn + 1) % 2
        out = sets[me].process(ranges)
        for key in [*sets[me].keys_for(need), *out.send]:
            sides[peer][key] = sides[me][key]
        ranges, need = out.reply, out.need
        sent += sum(r.wire_size() for r in ranges) + TAG_BYTES * len(need)
    return turn, sent


def test_one_difference_among_many_is_pushed_by_the_first_answer() -> None:
    rng = Random(1)
    base = _items(rng, 20_000)
    extra = _items(rng, 1)
    a, b = {**base, **extra}, dict(base)
    sets = Reconciler.of(b.items()), Reconciler.of(a.items())
    first = sets[0].initial(len(a))
    assert len(first) == 1 and first[0].part is Part.SPLIT
    assert len(first[0].data) == 16 * CELL_BYTES  # 16 children: 192 bytes
    out = sets[1].process(first)
    assert out.send == list(extra) and not out.reply and not out.need


def test_one_item_the_other_side_holds_is_wanted_by_tag() -> None:
    rng = Random(2)
    base = _items(rng, 5_000)
    extra = _items(rng, 1)
    mine, theirs = Reconciler.of(base.items()), Reconciler.of({**base, **extra}.items())
    out = mine.process(theirs.initial(len(base)))
    assert not out.send and not out.need
    (want,) = out.reply
    assert want.part is Part.WANT
    assert theirs.process([want]).send == list(extra)


def test_a_wrong_want_makes_the_holder_describe_the_node() -> None:
    rng = Random(3)
    held = Reconciler.of(_items(rng, 5_000).items())
    answer = held.process([Range(Part.WANT, 2, 1, bytes(TAG_BYTES))])
    assert not answer.send
    (described,) = answer.reply
    assert (described.part, described.depth, described.prefix) == (Part.SPLIT, 2, 1)


def test_a_side_with_nothing_gets_everything_and_gives_nothing() -> None:
    rng = Random(4)
    full = _items(rng, 3_000)
    empty: Items = {}
    turns, _ = _reconcile(full, empty)
    assert empty == full and turns <= 2
    full2 = _items(rng, 3_000)
    empty2: Items = {}
    _reconcile(empty2, full2)
    assert empty2 == full2


def test_changed_versions_and_differences_on_both_sides_converge() -> None:
    rng = Random(5)
    base = _items(rng, 30_000)
    a, b = dict(base), dict(base)
    a.update(_items(rng, 60))
    b.update(_items(rng, 40))
    # A changed version: the same key with another hash on each side.
    for key in list(base)[:10]:
        b[key] = item_hash(key + b"v2")
    del_a, del_b = dict(a), dict(b)
    turns, sent = _reconcile(a, b)
    assert set(a) == set(b) == set(del_a) | set(del_b)
    assert turns <= 6
    assert sent < 40_000


def test_small_sets_list_their_tags() -> None:
    rng = Random(6)
    few = Reconciler.of(_items(rng, IDLIST_MAX).items())
    (whole,) = few.initial(0)
    assert whole.part is Part.ITEMS and len(whole.data) == IDLIST_MAX * TAG_BYTES


def test_the_fan_out_grows_with_the_differences_expected_and_is_bounded() -> None:
    assert fanout_for(1) == 2
    assert fanout_for(4) < fanout_for(8)
    assert fanout_for(10_000) == MAX_FANOUT_BITS


def test_a_flood_of_differing_cells_is_answered_with_narrow_splits() -> None:
    rng = Random(7)
    held = Reconciler.of(_items(rng, 50_000).items())
    # Every cell wrong, in 64 splits of 256 children at depth 8.
    flood = [Range(Part.SPLIT, 8, p, b"\x01" * (256 * CELL_BYTES)) for p in range(0, 256, 4)]
    out = held.process(flood)
    assert sum(r.wire_size() for r in out.reply) < 6 * 1024 * 1024
    assert all(r.check() is r for r in out.reply)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 300),
    st.integers(0, 30),
    st.integers(0, 30),
    st.integers(0, 5),
    st.integers(0, 2**32),
)
def test_any_two_sets_converge(
    shared: int, only_a: int, only_b: int, changed: int, seed: int
) -> None:
    rng = Random(seed)
    base = _items(rng, shared)
    a, b = {**base, **_items(rng, only_a)}, {**base, **_items(rng, only_b)}
    for key in list(base)[:changed]:
        a[key] = item_hash(key + b"a")
    union = set(a) | set(b)
    _reconcile(a, b)
    assert set(a) == set(b) == union
