"""The digest's items by hash and their cells (`pixie.device.store.itemindex`):
kept on every write, answering reconciliation as the same items in memory
would, and built once for a data dir made before it existed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from random import Random
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.node.keyed import Node
from pixie.device.store import itemindex
from pixie.device.store.db import peek
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.replica import NodeReplica
from pixie.device.store.version import SCHEMA_VERSION
from pixie.protocol.reconcile import SortedItems
from pixie.protocol.sync import Loopback, Phase, SyncSession
from pixie.protocol.syncmessages import Marks
from pixie.sim.invariants import index_is_maintained
from tests.support.synchelp import dump, open_pair, replica, say, sync, write_every_kind


def _wanted(node: Node) -> set[tuple[bytes, int, int]]:
    return {itemindex.parts(k, h) for k, h in replica(node).items()}


@pytest.mark.parametrize("pending_max", [3, 65_536])
def test_every_write_keeps_the_index_equal_to_the_digests_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pending_max: int
) -> None:
    """With merges every few rows or none at all, digest_item and the
    pending rows together hold the digest's items, and the cells their sums."""
    monkeypatch.setattr(itemindex, "PENDING_MAX", pending_max)
    a, _ = open_pair(tmp_path)
    assert itemindex.is_built(a.db) and itemindex.stored(a.db) == set()
    write_every_kind(a)
    assert len(_wanted(a)) > 45
    assert itemindex.stored(a.db) == _wanted(a)
    assert itemindex.cells_agree(a.db) and index_is_maintained(a)
    pending = len(peek(a.db, "SELECT * FROM digest_pending"))
    assert pending < 3 if pending_max == 3 else pending > 45


def test_a_merge_moves_what_waits_in_hash_order_and_changes_no_answer(tmp_path: Path) -> None:
    a, _ = open_pair(tmp_path)
    write_every_kind(a)
    before = itemindex.stored(a.db)
    with a.db.writing() as session:
        conn = session.connection().connection.driver_connection
        assert isinstance(conn, sqlite3.Connection)
        moved = itemindex.merge(conn)
    assert moved > 45 and not peek(a.db, "SELECT * FROM digest_pending")
    # An item replaced (the detail) and a deleted note's version left nothing behind.
    assert itemindex.stored(a.db) == before == _wanted(a)
    assert len(peek(a.db, "SELECT * FROM digest_item")) == len(before)


def test_a_merge_keeps_the_index_of_the_replica_it_lands_in(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    write_every_kind(a)
    sync(a, b)
    assert dump(a) == dump(b)
    assert itemindex.stored(b.db) == _wanted(b) == _wanted(a)
    assert itemindex.cells_agree(b.db)


@pytest.fixture(scope="module", params=["merged", "pending"])
def filled(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Node]:
    """A node of some 3,000 items: all in digest_item ("merged"), or 2,000
    there and the rest, adds and removals, still pending."""
    a, b = open_pair(tmp_path_factory.mktemp("index"))
    b.close()
    _say_many(a, 2_000)
    with a.db.writing() as session:
        conn = session.connection().connection.driver_connection
        assert isinstance(conn, sqlite3.Connection)
        itemindex.merge(conn)
    _say_many(a, 1_000)
    write_every_kind(a)
    if request.param == "merged":
        with a.db.writing() as session:
            conn = session.connection().connection.driver_connection
            assert isinstance(conn, sqlite3.Connection)
            itemindex.merge(conn)
        assert not peek(a.db, "SELECT * FROM digest_pending")
    else:
        assert len(peek(a.db, "SELECT * FROM digest_pending")) > 1_000
        assert peek(a.db, "SELECT * FROM digest_pending WHERE sign < 0")
    yield a
    a.close()


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(0, 20), bits=st.integers(1, 8), seed=st.integers(0, 2**32))
def test_the_stored_index_answers_as_the_same_items_in_memory(
    filled: Node, depth: int, bits: int, seed: int
) -> None:
    node = filled
    memory = SortedItems(replica(node).items())
    stored = itemindex.StoredItems(node.db)
    rng = Random(seed)
    # A node that holds something (the prefix of a random held item), or any.
    hashes = memory.hashes
    prefix = hashes[rng.randrange(len(hashes))] >> (256 - depth) if rng.random() < 0.8 else 0
    assert len(stored) == len(memory)
    assert stored.count(depth, prefix) == memory.count(depth, prefix)
    assert stored.cells(depth, prefix, bits) == memory.cells(depth, prefix, bits)
    listed = memory.listing(depth, prefix)
    assert sorted(stored.listing(depth, prefix)) == sorted(listed)
    for tag, key in listed[:3]:
        assert stored.find(depth, prefix, tag) == key
    assert stored.find(depth, prefix, rng.getrandbits(64)) is None


def _say_many(node: Node, count: int) -> None:
    at = 1_700_000_000_000_000
    node.log.append(
        [NewEvent(EventKind.MESSAGE, at + i, f"line {i}", thread="t1") for i in range(count)],
        now=at,
    )


class _Frozen(NodeReplica):
    """A replica whose marks stay as they were before its last writes, so the
    stream sends nothing and only reconciliation can find those writes."""

    frozen: ClassVar[dict[str, Marks]] = {}

    def marks(self) -> Marks:
        return self.frozen.get(self.origin) or super().marks()


def test_repair_through_the_stored_index_settles_differences_the_marks_hide(
    tmp_path: Path,
) -> None:
    a, b = open_pair(tmp_path)
    _say_many(a, 2_000)
    sync(a, b)
    _Frozen.frozen = {n.origin: replica(n).marks() for n in (a, b)}
    try:
        say(a, "only on a")
        say(a, "and another only on a")
        say(b, "only on b")
        assert index_is_maintained(a) and index_is_maintained(b)
        opener = SyncSession(_Frozen(a.db, a.log, a.origin), opener=True)
        responder = SyncSession(_Frozen(b.db, b.log, b.origin), opener=False)
        loop = Loopback(opener, responder)
        loop.run()
    finally:
        _Frozen.frozen = {}
    assert opener.phase is Phase.DONE, opener.error
    assert opener.stats.repair_rounds == 1
    assert a.digest() == b.digest() == a.recompute_digest()
    assert dump(a) == dump(b)
    assert index_is_maintained(a) and index_is_maintained(b)
    # Cells and a few records went across, not a listing of 2,000 items.
    assert loop.bytes_a_to_b < 3_000 and loop.bytes_b_to_a < 3_000


def _make_version_6(data_dir: Path) -> None:
    con = sqlite3.connect(data_dir / "pixie.db")
    with con:
        con.execute("DROP TABLE digest_item")
        con.execute("DROP TABLE digest_cell")
        con.execute("DROP TABLE digest_pending")
        con.execute("DELETE FROM meta WHERE key = ?", (itemindex.BUILT_KEY,))
        con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()


def _schema(path: Path) -> list[object]:
    """The index's tables as SQLite sees them (columns, keys, whether rowid)."""
    con = sqlite3.connect(path)
    try:
        shape: list[object] = []
        for table in ("digest_item", "digest_cell", "digest_pending"):
            (sql,) = con.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
            ).fetchone()
            shape.append(con.execute(f"PRAGMA table_info({table})").fetchall())
            shape.append("WITHOUT ROWID" in sql)
        return shape
    finally:
        con.close()


def test_a_version_6_data_dir_gets_its_index_built_by_the_first_repair(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    write_every_kind(a)
    sync(a, b)
    a_dir = a.data.path
    fresh = _schema(a_dir / "pixie.db")
    a.close()
    _make_version_6(a_dir)
    a = Node.open(a_dir)
    try:
        assert a.db.meta()["schema_version"] == str(SCHEMA_VERSION) == "10"
        # The migrated tables are those a new data dir creates.
        assert _schema(a_dir / "pixie.db") == fresh and fresh[1] is True
        assert not itemindex.is_built(a.db) and itemindex.stored(a.db) == set()
        _Frozen.frozen = {n.origin: replica(n).marks() for n in (a, b)}
        try:
            say(a, "written before the index is built")  # in the table already
            say(b, "one the other side lacks")
            opener = SyncSession(_Frozen(a.db, a.log, a.origin), opener=True)
            responder = SyncSession(_Frozen(b.db, b.log, b.origin), opener=False)
            Loopback(opener, responder).run()
        finally:
            _Frozen.frozen = {}
        assert opener.phase is Phase.DONE, opener.error
        assert itemindex.is_built(a.db)
        assert itemindex.stored(a.db) == _wanted(a) and itemindex.cells_agree(a.db)
        assert dump(a) == dump(b)
    finally:
        a.close()
        b.close()


def test_a_reader_follows_writes_and_merges_made_while_it_reads(tmp_path: Path) -> None:
    """A repair's reader outlives the writes it causes: it reads the pending
    rows written since its last look, or all of them again after a merge, and
    answers as the items in memory would at each moment."""
    a, _ = open_pair(tmp_path)
    _say_many(a, 800)
    stored = itemindex.StoredItems(a.db)

    def agree() -> None:
        memory = SortedItems(replica(a).items())
        for h in memory.hashes[::97]:
            for depth in (CELL_BITS_BELOW, CELL_BITS_BELOW + 3):
                prefix = h >> (256 - depth)
                assert stored.count(depth, prefix) == memory.count(depth, prefix)
                assert stored.cells(depth, prefix, 2) == memory.cells(depth, prefix, 2)
                assert sorted(stored.listing(depth, prefix)) == sorted(
                    memory.listing(depth, prefix)
                )
                tag, key = memory.listing(depth, prefix)[0]
                assert stored.find(depth, prefix, tag) == key

    agree()
    write_every_kind(a)  # adds, a replaced detail, a deleted note: read row by row
    agree()
    with a.db.writing() as session:
        conn = session.connection().connection.driver_connection
        assert isinstance(conn, sqlite3.Connection)
        itemindex.merge(conn)
    _say_many(a, 300)  # after a merge: all read again
    agree()


CELL_BITS_BELOW = itemindex.CELL_BITS + 1
