"""The state digest's items by hash, with the cells reconciliation compares.

Repair (see `pixie.protocol.reconcile`) compares the two sides' sets of
digest items node by node in the space of their hashes. Read from the rows
themselves, every round would hash and sort every event, note version and
contact item first: seconds at a million events, whatever the differences.
So each data dir keeps, beside the digest and in the same transaction as
every write that moves it (`statedigest.update`):

- ``digest_item``: one row per item, keyed by its hash's top 64 bits and its
  tag (the low 64 bits), with the item's 17-byte key. A node of any depth up
  to 64 is a range of ``top``; an item is found by its tag within a node.
- ``digest_pending``: the items added and taken away since ``digest_item``
  was last brought up to date, appended in the order written. An item's row
  in ``digest_item`` lands on a page chosen by its hash, so a write of
  thousands of items (an import, a first sync) would dirty a page for
  nearly each of them; appended here they fill a few pages, and once
  `PENDING_MAX` of them wait, the write that adds the last one moves them
  all into ``digest_item`` in hash order, each page written once for many.
  Reads see ``digest_item`` and the pending rows together.
- ``digest_cell``: the cell of each node at depth `CELL_BITS` (the sum of its
  tags, kept as the sums of their high and low 32-bit halves so that SQLite's
  64-bit integers never overflow, and the count), exact at every commit:
  moved by the same write (`write`: the cells summed in Python, one upsert
  per cell touched) and checked against the items by `cells_agree`.

A node above that depth is answered from at most 2^12 cells, one below it
from its own few items (a few hundred of a million-item set per node at
depth 12, with the pending rows, held in memory while they last): a round
costs what the differences cost. Both 64-bit halves are stored
as SQLite's signed integers: ``top`` shifted by 2^63, so that its order is
the hash's; ``tag`` in two's complement.

A data dir made before the index existed gets the tables empty (schema 7)
and the meta row `BUILT_KEY` missing: the first repair fills them from the
rows, in one write transaction (`rebuild`), and sets it. New data dirs start
with it set.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import cast

from sqlalchemy import BigInteger, Integer, LargeBinary, PrimaryKeyConstraint, Table
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.store.db import Base, Database, Meta, peek
from pixie.protocol.digest import item_hash
from pixie.protocol.reconcile import KEY_BYTES

CELL_BITS = 12
# How many pending rows wait before a write moves them into digest_item.
PENDING_MAX = 65_536
BUILT_KEY = "item_index"
_HALF = 0xFFFFFFFF
_TAG_MASK = (1 << 64) - 1
_SIGN = 1 << 63


class DigestItem(Base):
    """One digest item, by hash (see the module docstring)."""

    __tablename__ = "digest_item"
    __table_args__ = (
        PrimaryKeyConstraint("top", "tag"),
        {"sqlite_with_rowid": False},
    )

    top: Mapped[int] = mapped_column(BigInteger)  # the hash's top 64 bits, minus 2^63
    tag: Mapped[int] = mapped_column(BigInteger)  # its low 64 bits, two's complement
    key: Mapped[bytes] = mapped_column(LargeBinary(KEY_BYTES))


class DigestCell(Base):
    """The cell of one node at depth `CELL_BITS`, kept by `write`."""

    __tablename__ = "digest_cell"

    cell: Mapped[int] = mapped_column(Integer, primary_key=True)  # the top 16 bits
    high: Mapped[int] = mapped_column(BigInteger)  # sum of the tags' high halves
    low: Mapped[int] = mapped_column(BigInteger)  # sum of their low halves
    n: Mapped[int] = mapped_column(Integer)


class DigestPending(Base):
    """An item added (``sign`` 1) or taken away (-1) since ``digest_item``
    was last brought up to date, in the order written. Row numbers are
    never reused (AUTOINCREMENT), so a reader that has seen rows up to some
    number reads only those after it, and a merge shows as a new lowest
    number."""

    __tablename__ = "digest_pending"
    __table_args__ = ({"sqlite_autoincrement": True},)

    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    top: Mapped[int] = mapped_column(BigInteger)
    tag: Mapped[int] = mapped_column(BigInteger)
    key: Mapped[bytes] = mapped_column(LargeBinary(KEY_BYTES))
    sign: Mapped[int] = mapped_column(Integer)


_ITEM = cast(Table, DigestItem.__table__)
_CELL = cast(Table, DigestCell.__table__)
_PENDING = cast(Table, DigestPending.__table__)
_META = cast(Table, Meta.__table__)

# What a new data dir runs after creating the tables: the mark that its
# (empty) index covers its (empty) set.
ITEM_INDEX_DDL: tuple[str, ...] = (
    f"INSERT OR IGNORE INTO {_META.name} (key, value) VALUES ('{BUILT_KEY}', 'built')",
)
# What takes a data dir of schema 6 to 7 (see `db.MIGRATIONS`, which spells
# these out because it cannot import this module): the tables, empty; the
# index is built by the first repair.
TABLES_DDL: tuple[str, ...] = (
    f"CREATE TABLE IF NOT EXISTS {_ITEM.name} ("
    " top BIGINT NOT NULL, tag BIGINT NOT NULL, key BLOB NOT NULL,"
    " PRIMARY KEY (top, tag)) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {_CELL.name} ("
    " cell INTEGER NOT NULL PRIMARY KEY, high BIGINT NOT NULL, low BIGINT NOT NULL,"
    " n INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_PENDING.name} ("
    " n INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, top BIGINT NOT NULL, tag BIGINT NOT NULL,"
    " key BLOB NOT NULL, sign INTEGER NOT NULL)",
)

# A row already there is replaced, not refused: one item added twice (a bug
# elsewhere) must not stop every later merge.
_INSERT_SQL = f"INSERT OR REPLACE INTO {_ITEM.name} (top, tag, key) VALUES (?, ?, ?)"
_PEND_SQL = f"INSERT INTO {_PENDING.name} (top, tag, key, sign) VALUES (?, ?, ?, ?)"
# Each of max(n) and min(n) in a query of its own: SQLite answers a lone
# min() or max() from the index, but reads the whole table for the two.
_NEWEST_PENDING = f"(SELECT max(n) FROM {_PENDING.name})"
_OLDEST_PENDING = f"(SELECT min(n) FROM {_PENDING.name})"
_PENDING_SIZE_SQL = f"SELECT coalesce({_NEWEST_PENDING} - {_OLDEST_PENDING} + 1, 0)"
_PENDING_MARK_SQL = f"SELECT {_NEWEST_PENDING}, {_OLDEST_PENDING}"
_PENDING_ROWS_SQL = f"SELECT top, tag, key, sign FROM {_PENDING.name} ORDER BY n"
_PENDING_AFTER_SQL = f"SELECT top, tag, key, sign FROM {_PENDING.name} WHERE n > ? ORDER BY n"
_MOVE_CELL_SQL = (
    f"INSERT INTO {_CELL.name} (cell, high, low, n) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (cell) DO UPDATE SET high = high + excluded.high, "
    "low = low + excluded.low, n = n + excluded.n"
)
_DELETE_SQL = f"DELETE FROM {_ITEM.name} WHERE top = ? AND tag = ?"
_BUILT_SQL = f"SELECT value FROM {_META.name} WHERE key = '{BUILT_KEY}'"
_MARK_BUILT_SQL = (
    f"INSERT INTO {_META.name} (key, value) VALUES ('{BUILT_KEY}', 'built') "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_CELLS_SQL = (
    f"SELECT cell >> ?, sum(high), sum(low), sum(n) FROM {_CELL.name} "
    "WHERE cell BETWEEN ? AND ? GROUP BY 1"
)
_ITEM_CELLS_SQL = (
    f"SELECT top >> ?, sum((tag >> 32) & {_HALF}), sum(tag & {_HALF}), count(*) "
    f"FROM {_ITEM.name} WHERE top BETWEEN ? AND ? GROUP BY 1"
)
_CELL_COUNT_SQL = f"SELECT coalesce(sum(n), 0) FROM {_CELL.name} WHERE cell BETWEEN ? AND ?"
_ITEM_COUNT_SQL = f"SELECT count(*) FROM {_ITEM.name} WHERE top BETWEEN ? AND ?"
_LISTING_SQL = (
    f"SELECT top, tag, key FROM {_ITEM.name} WHERE top BETWEEN ? AND ? ORDER BY top, tag LIMIT ?"
)
_FIND_SQL = f"SELECT top, key FROM {_ITEM.name} WHERE top BETWEEN ? AND ? AND tag = ?"
_ALL_SQL = f"SELECT top, tag, key FROM {_ITEM.name}"


def _signed(value: int) -> int:
    """A 64-bit tag as SQLite stores it (two's complement)."""
    return value - (1 << 64) if value >= _SIGN else value


def hash_part(top: int, tag: int) -> tuple[int, int]:
    """A stored row's (top 64 bits, tag) as unsigned integers."""
    return top + _SIGN, tag & _TAG_MASK


def write(
    conn: sqlite3.Connection,
    added: Iterable[tuple[bytes, int]],
    removed: Iterable[tuple[bytes, int]] = (),
) -> None:
    """Move the index by (key, item hash) pairs, inside ``conn``'s transaction:
    the items appended to the pending rows, one upsert per cell they fall in,
    and, once `PENDING_MAX` rows wait, all of them moved into
    ``digest_item`` (`merge`)."""
    cells: dict[int, list[int]] = {}
    rows = _rows(removed, cells, -1) + _rows(added, cells, 1)
    if not rows:
        return
    conn.executemany(_PEND_SQL, rows)
    conn.executemany(
        _MOVE_CELL_SQL, [(cell, high, low, n) for cell, (high, low, n) in cells.items()]
    )
    if conn.execute(_PENDING_SIZE_SQL).fetchone()[0] >= PENDING_MAX:
        merge(conn)


def merge(conn: sqlite3.Connection) -> int:
    """Move the pending rows into ``digest_item``, in hash order, inside
    ``conn``'s transaction; returns how many there were."""
    net = _net(conn.execute(_PENDING_ROWS_SQL))
    gone = sorted(k for k, (_, sign) in net.items() if sign < 0)
    if gone:
        conn.executemany(_DELETE_SQL, gone)
    rows = sorted((top, tag, key) for (top, tag), (key, sign) in net.items() if sign > 0)
    if rows:
        conn.executemany(_INSERT_SQL, rows)
    return conn.execute(f"DELETE FROM {_PENDING.name}").rowcount


def _net(rows: Iterable[tuple[int, int, bytes, int]]) -> dict[tuple[int, int], tuple[bytes, int]]:
    """What pending rows add up to, per item: +1 added, -1 taken away from
    ``digest_item``; an item added and taken away again is no change."""
    net: dict[tuple[int, int], tuple[bytes, int]] = {}
    for top, tag, key, sign in rows:
        _, before = net.get((top, tag), (b"", 0))
        if before + sign:
            net[(top, tag)] = (bytes(key), before + sign)
        else:
            net.pop((top, tag), None)
    return net


def _rows(
    pairs: Iterable[tuple[bytes, int]], cells: dict[int, list[int]], sign: int
) -> list[tuple[int, int, bytes, int]]:
    """The pending rows (top, tag, key, sign) of these items, their tags
    summed into ``cells`` (one pass: this runs for every item a write adds)."""
    rows = []
    cell_shift = 256 - CELL_BITS
    for key, h in pairs:
        tag = h & _TAG_MASK
        rows.append(((h >> 192) - _SIGN, _signed(tag), key, sign))
        moved = cells.get(h >> cell_shift)
        if moved is None:
            cells[h >> cell_shift] = [sign * (tag >> 32), sign * (tag & _HALF), sign]
        else:
            moved[0] += sign * (tag >> 32)
            moved[1] += sign * (tag & _HALF)
            moved[2] += sign
    return rows


def is_built(db: Database) -> bool:
    with db.reading(plain=True) as conn:
        return is_built_on(conn)


def is_built_on(conn: sqlite3.Connection) -> bool:
    """`is_built`, read inside ``conn``'s transaction."""
    row = conn.execute(_BUILT_SQL).fetchone()
    return row is not None and row[0] == "built"


def rebuild(conn: sqlite3.Connection, items: Iterable[bytes]) -> int:
    """Fill the index from scratch with these items (every item the digest
    sums, read inside the same transaction), and mark it built. Returns how
    many rows it holds."""
    for table in (_ITEM, _CELL, _PENDING):
        conn.execute(f"DELETE FROM {table.name}")
    cells: dict[int, list[int]] = {}
    rows = _rows(((item[:KEY_BYTES], item_hash(item)) for item in items), cells, 1)
    conn.executemany(_INSERT_SQL, sorted(row[:3] for row in rows))
    conn.executemany(
        _MOVE_CELL_SQL, [(cell, high, low, n) for cell, (high, low, n) in cells.items()]
    )
    conn.execute(_MARK_BUILT_SQL)
    return len(rows)


def parts(key: bytes, h: int) -> tuple[bytes, int, int]:
    """(key, top 64 bits, tag) of an item: what `stored` lists for it."""
    return key, h >> 192, h & _TAG_MASK


def stored(db: Database) -> set[tuple[bytes, int, int]]:
    """Every item the index holds (``digest_item`` and the pending rows
    together) as (key, top 64 bits, tag), for checks against the rows
    (compare with `parts` of each item)."""
    with db.reading(plain=True) as conn:
        held = {(top, tag): bytes(key) for top, tag, key in conn.execute(_ALL_SQL)}
        for (top, tag), (key, sign) in _net(conn.execute(_PENDING_ROWS_SQL)).items():
            if sign > 0:
                held[(top, tag)] = key
            else:
                held.pop((top, tag), None)
    return {(key, *hash_part(top, tag)) for (top, tag), key in held.items()}


def cells_agree(db: Database) -> bool:
    """Whether every stored cell equals what the items (`stored`) sum to
    (`write`'s work, checked from scratch)."""
    kept = {
        cell: (high, low, n)
        for cell, high, low, n in peek(db, f"SELECT cell, high, low, n FROM {_CELL.name}")
        if n
    }
    summed: dict[int, tuple[int, int, int]] = {}
    for _, top, tag in stored(db):
        high, low, n = summed.get(top >> (64 - CELL_BITS), (0, 0, 0))
        summed[top >> (64 - CELL_BITS)] = (high + (tag >> 32), low + (tag & _HALF), n + 1)
    return kept == summed


class _Pending:
    """The pending rows as a reader sees them: what they add and take away,
    each sorted by (top, tag), brought forward row by row (`extend`)."""

    def __init__(self, rows: Iterable[tuple[int, int, bytes, int]]) -> None:
        self.net = _net(rows)
        self.added = sorted((top, tag, key) for (top, tag), (key, s) in self.net.items() if s > 0)
        self.removed = sorted(k for k, (_, s) in self.net.items() if s < 0)

    def extend(self, rows: Iterable[tuple[int, int, bytes, int]]) -> None:
        for top, tag, key, sign in rows:
            held, before = self.net.get((top, tag), (b"", 0))
            self._drop(top, tag, held, before)
            after = before + sign
            if after:
                self.net[(top, tag)] = (bytes(key), after)
                if after > 0:
                    insort(self.added, (top, tag, bytes(key)))
                else:
                    insort(self.removed, (top, tag))
            else:
                self.net.pop((top, tag), None)

    def _drop(self, top: int, tag: int, key: bytes, sign: int) -> None:
        if sign > 0:
            at = bisect_left(self.added, (top, tag, key))
            if at < len(self.added) and self.added[at] == (top, tag, key):
                del self.added[at]
        elif sign < 0:
            at = bisect_left(self.removed, (top, tag))
            if at < len(self.removed) and self.removed[at] == (top, tag):
                del self.removed[at]

    def added_in(self, lo: int, hi: int) -> list[tuple[int, int, bytes]]:
        """Added items with ``top`` in [lo, hi]."""
        return self.added[bisect_left(self.added, (lo,)) : bisect_left(self.added, (hi + 1,))]

    def removed_in(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return self.removed[bisect_left(self.removed, (lo,)) : bisect_left(self.removed, (hi + 1,))]


class StoredItems:
    """A `reconcile.ItemIndex` read from a data dir's index, as it stands at
    each call: cells from ``digest_cell`` (exact at every commit), items from
    ``digest_item`` and the pending rows, which are read again whenever they
    have changed (a repair's own merges add to them)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._len: int | None = None
        self._pending_mark: tuple[int | None, int | None] | None = None
        self._pending = _Pending(())

    def __len__(self) -> int:
        if self._len is None:
            self._len = self.count(0, 0)
        return self._len

    def _current_pending(self) -> _Pending:
        """The pending rows as they stand: only the rows written since the
        last look are read, unless a merge moved them all meanwhile."""
        with self.db.reading(plain=True) as conn:
            newest, oldest = conn.execute(_PENDING_MARK_SQL).fetchone()
            seen = self._pending_mark
            if seen is None or oldest != seen[1] or newest is None:
                self._pending = _Pending(conn.execute(_PENDING_ROWS_SQL))
            elif newest != seen[0]:
                self._pending.extend(conn.execute(_PENDING_AFTER_SQL, (seen[0],)))
            self._pending_mark = (newest, oldest)
        return self._pending

    @staticmethod
    def _tops(depth: int, prefix: int) -> tuple[int, int]:
        """The stored ``top`` range of a node (inclusive)."""
        shift = 64 - depth
        return (prefix << shift) - _SIGN, ((prefix + 1) << shift) - 1 - _SIGN

    def count(self, depth: int, prefix: int) -> int:
        if depth <= CELL_BITS:
            shift = CELL_BITS - depth
            lo, hi = prefix << shift, ((prefix + 1) << shift) - 1
            return int(peek(self.db, _CELL_COUNT_SQL, (lo, hi))[0][0])
        lo, hi = self._tops(depth, prefix)
        pending = self._current_pending()
        held = int(peek(self.db, _ITEM_COUNT_SQL, (lo, hi))[0][0])
        return held + len(pending.added_in(lo, hi)) - len(pending.removed_in(lo, hi))

    def cells(self, depth: int, prefix: int, bits: int) -> list[tuple[int, int]]:
        if depth + bits <= CELL_BITS:
            shift = CELL_BITS - depth - bits
            span = CELL_BITS - depth
            lo, hi = prefix << span, ((prefix + 1) << span) - 1
            first = prefix << bits
            out = [(0, 0)] * (1 << bits)
            for child, high, low, n in peek(self.db, _CELLS_SQL, (shift, lo, hi)):
                out[child - first] = (((high << 32) + low) & _TAG_MASK, n)
            return out
        shift = 64 - depth - bits
        lo, hi = self._tops(depth, prefix)
        first = lo >> shift
        sums = [0] * (1 << bits)
        counts = [0] * (1 << bits)
        pending = self._current_pending()
        for child, high, low, n in peek(self.db, _ITEM_CELLS_SQL, (shift, lo, hi)):
            sums[child - first] += (high << 32) + low
            counts[child - first] += n
        for top, tag, _ in pending.added_in(lo, hi):
            sums[(top >> shift) - first] += tag & _TAG_MASK
            counts[(top >> shift) - first] += 1
        for top, tag in pending.removed_in(lo, hi):
            sums[(top >> shift) - first] -= tag & _TAG_MASK
            counts[(top >> shift) - first] -= 1
        return [(s & _TAG_MASK, c) for s, c in zip(sums, counts, strict=True)]

    def listing(self, depth: int, prefix: int, limit: int | None = None) -> list[tuple[int, bytes]]:
        lo, hi = self._tops(depth, prefix)
        pending = self._current_pending()
        removed = set(pending.removed_in(lo, hi))
        wanted = -1 if limit is None else limit + len(removed)
        rows = [
            (top, tag, bytes(key))
            for top, tag, key in peek(self.db, _LISTING_SQL, (lo, hi, wanted))
            if (top, tag) not in removed
        ]
        merged = sorted(rows + pending.added_in(lo, hi))
        if limit is not None:
            merged = merged[:limit]
        return [(tag & _TAG_MASK, key) for _, tag, key in merged]

    def find(self, depth: int, prefix: int, tag: int) -> bytes | None:
        lo, hi = self._tops(depth, prefix)
        pending = self._current_pending()
        wanted = _signed(tag)
        for _, their_tag, key in pending.added_in(lo, hi):
            if their_tag == wanted:
                return key
        removed = set(pending.removed_in(lo, hi))
        for top, key in peek(self.db, _FIND_SQL, (lo, hi, wanted)):
            if (top, wanted) not in removed:
                return bytes(key)
        return None


__all__ = [
    "BUILT_KEY",
    "CELL_BITS",
    "ITEM_INDEX_DDL",
    "PENDING_MAX",
    "TABLES_DDL",
    "DigestCell",
    "DigestItem",
    "DigestPending",
    "StoredItems",
    "cells_agree",
    "is_built",
    "is_built_on",
    "merge",
    "parts",
    "rebuild",
    "stored",
    "write",
]
