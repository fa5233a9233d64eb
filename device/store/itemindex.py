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
- ``digest_cell``: the cell of each node at depth `CELL_BITS` (the sum of its
  tags, kept as the sums of their high and low 32-bit halves so that SQLite's
  64-bit integers never overflow, and the count), moved by the same write
  that moves ``digest_item`` (`write`: the rows sorted, their cells summed in
  Python, one upsert per cell touched), and checked against the items by
  `cells_agree`. An item added twice is refused (its row exists), never
  counted twice.

A node above that depth is answered from at most 2^16 cells, one below it
from its own few items (a millionth of a million-item set per node at depth
20): a round costs what the differences cost. Both 64-bit halves are stored
as SQLite's signed integers: ``top`` shifted by 2^63, so that its order is
the hash's; ``tag`` in two's complement.

A data dir made before the index existed gets the tables empty (schema 7)
and the meta row `BUILT_KEY` missing: the first repair fills them from the
rows, in one write transaction (`rebuild`), and sets it. New data dirs start
with it set.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import cast

from sqlalchemy import BigInteger, Integer, LargeBinary, PrimaryKeyConstraint, Table
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.store.db import Base, Database, Meta
from pixie.protocol.digest import item_hash
from pixie.protocol.reconcile import KEY_BYTES

CELL_BITS = 12
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


_ITEM = cast(Table, DigestItem.__table__)
_CELL = cast(Table, DigestCell.__table__)
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
)

_INSERT_SQL = f"INSERT INTO {_ITEM.name} (top, tag, key) VALUES (?, ?, ?)"
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
    f"SELECT tag, key FROM {_ITEM.name} WHERE top BETWEEN ? AND ? ORDER BY top, tag LIMIT ?"
)
_FIND_SQL = f"SELECT key FROM {_ITEM.name} WHERE top BETWEEN ? AND ? AND tag = ? LIMIT 1"
_ALL_SQL = f"SELECT top, tag, key FROM {_ITEM.name}"


def _signed(value: int) -> int:
    """A 64-bit tag as SQLite stores it (two's complement)."""
    return value - (1 << 64) if value >= _SIGN else value


def row_of(key: bytes, h: int) -> tuple[int, int, bytes]:
    """The ``digest_item`` row of an item with this key and hash."""
    return (h >> 192) - _SIGN, _signed(h & _TAG_MASK), key


def hash_part(top: int, tag: int) -> tuple[int, int]:
    """A stored row's (top 64 bits, tag) as unsigned integers."""
    return top + _SIGN, tag & _TAG_MASK


def write(
    conn: sqlite3.Connection,
    added: Iterable[tuple[bytes, int]],
    removed: Iterable[tuple[bytes, int]] = (),
) -> None:
    """Move the index by (key, item hash) pairs, inside ``conn``'s transaction:
    the items' rows in hash order (neighbours share pages), then one upsert
    per cell they fall in."""
    cells: dict[int, list[int]] = {}
    gone = _rows(removed, cells, -1)
    if gone:
        conn.executemany(_DELETE_SQL, [row[:2] for row in gone])
    rows = _rows(added, cells, 1)
    if rows:
        conn.executemany(_INSERT_SQL, rows)
    if cells:
        conn.executemany(
            _MOVE_CELL_SQL, [(cell, high, low, n) for cell, (high, low, n) in cells.items()]
        )


def _rows(
    pairs: Iterable[tuple[bytes, int]], cells: dict[int, list[int]], sign: int
) -> list[tuple[int, int, bytes]]:
    """The sorted rows of these items, their tags summed into ``cells`` (one
    pass: this runs for every item every write adds)."""
    rows = []
    cell_shift = 256 - CELL_BITS
    for key, h in pairs:
        tag = h & _TAG_MASK
        rows.append(((h >> 192) - _SIGN, tag - (1 << 64) if tag >= _SIGN else tag, key))
        moved = cells.get(h >> cell_shift)
        if moved is None:
            cells[h >> cell_shift] = [sign * (tag >> 32), sign * (tag & _HALF), sign]
        else:
            moved[0] += sign * (tag >> 32)
            moved[1] += sign * (tag & _HALF)
            moved[2] += sign
    rows.sort()
    return rows


def is_built(db: Database) -> bool:
    rows = db.peek(_BUILT_SQL)
    return bool(rows) and rows[0][0] == "built"


def is_built_on(conn: sqlite3.Connection) -> bool:
    """`is_built`, read inside ``conn``'s transaction."""
    row = conn.execute(_BUILT_SQL).fetchone()
    return row is not None and row[0] == "built"


def rebuild(conn: sqlite3.Connection, items: Iterable[bytes]) -> int:
    """Fill the index from scratch with these items (every item the digest
    sums, read inside the same transaction), and mark it built. Returns how
    many rows it holds."""
    conn.execute(f"DELETE FROM {_ITEM.name}")
    conn.execute(f"DELETE FROM {_CELL.name}")
    batch: list[tuple[bytes, int]] = []
    count = 0
    for item in items:
        batch.append((item[:KEY_BYTES], item_hash(item)))
        if len(batch) >= 10_000:
            write(conn, batch)
            count += len(batch)
            batch.clear()
    write(conn, batch)
    conn.execute(_MARK_BUILT_SQL)
    return count + len(batch)


def parts(key: bytes, h: int) -> tuple[bytes, int, int]:
    """(key, top 64 bits, tag) of an item: what `stored` lists for it."""
    return key, h >> 192, h & _TAG_MASK


def stored(db: Database) -> set[tuple[bytes, int, int]]:
    """Every item the index holds as (key, top 64 bits, tag), for checks
    against the rows (compare with `parts` of each item)."""
    return {(bytes(key), *hash_part(top, tag)) for top, tag, key in db.peek(_ALL_SQL)}


def cells_agree(db: Database) -> bool:
    """Whether every stored cell equals what its items sum to (`write`'s
    work, checked from scratch)."""
    kept = {
        cell: (high, low, n)
        for cell, high, low, n in db.peek(f"SELECT cell, high, low, n FROM {_CELL.name}")
        if n
    }
    summed = {
        cell: (high, low, n)
        for cell, high, low, n in db.peek(
            f"SELECT (top >> {64 - CELL_BITS}) + {1 << (CELL_BITS - 1)}, "
            f"sum((tag >> 32) & {_HALF}), sum(tag & {_HALF}), count(*) "
            f"FROM {_ITEM.name} GROUP BY 1"
        )
    }
    return kept == summed


class StoredItems:
    """A `reconcile.ItemIndex` read from a data dir's index, as it stands at
    each call (one short read transaction per question)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._len: int | None = None

    def __len__(self) -> int:
        if self._len is None:
            self._len = self.count(0, 0)
        return self._len

    @staticmethod
    def _tops(depth: int, prefix: int) -> tuple[int, int]:
        """The stored ``top`` range of a node (inclusive)."""
        shift = 64 - depth
        return (prefix << shift) - _SIGN, ((prefix + 1) << shift) - 1 - _SIGN

    def count(self, depth: int, prefix: int) -> int:
        if depth <= CELL_BITS:
            shift = CELL_BITS - depth
            lo, hi = prefix << shift, ((prefix + 1) << shift) - 1
            return int(self.db.peek(_CELL_COUNT_SQL, (lo, hi))[0][0])
        return int(self.db.peek(_ITEM_COUNT_SQL, self._tops(depth, prefix))[0][0])

    def cells(self, depth: int, prefix: int, bits: int) -> list[tuple[int, int]]:
        out = [(0, 0)] * (1 << bits)
        if depth + bits <= CELL_BITS:
            shift = CELL_BITS - depth - bits
            span = CELL_BITS - depth
            lo, hi = prefix << span, ((prefix + 1) << span) - 1
            rows = self.db.peek(_CELLS_SQL, (shift, lo, hi))
            first = prefix << bits
        else:
            shift = 64 - depth - bits
            lo, hi = self._tops(depth, prefix)
            rows = self.db.peek(_ITEM_CELLS_SQL, (shift, lo, hi))
            first = lo >> shift
        for child, high, low, n in rows:
            out[child - first] = (((high << 32) + low) & _TAG_MASK, n)
        return out

    def listing(self, depth: int, prefix: int, limit: int | None = None) -> list[tuple[int, bytes]]:
        lo, hi = self._tops(depth, prefix)
        rows = self.db.peek(_LISTING_SQL, (lo, hi, -1 if limit is None else limit))
        return [(tag & _TAG_MASK, bytes(key)) for tag, key in rows]

    def find(self, depth: int, prefix: int, tag: int) -> bytes | None:
        lo, hi = self._tops(depth, prefix)
        rows = self.db.peek(_FIND_SQL, (lo, hi, _signed(tag)))
        return bytes(rows[0][0]) if rows else None


__all__ = [
    "BUILT_KEY",
    "CELL_BITS",
    "ITEM_INDEX_DDL",
    "TABLES_DDL",
    "DigestCell",
    "DigestItem",
    "StoredItems",
    "cells_agree",
    "is_built",
    "is_built_on",
    "parts",
    "rebuild",
    "row_of",
    "stored",
    "write",
]
