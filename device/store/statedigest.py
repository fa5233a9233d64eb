"""Keeping the state digest current, inside the transaction of every write.

The fingerprint (see `pixie.protocol.digest`) lives in one meta row. Each write
that adds an event or changes a note version updates it in the same
transaction, so it is never out of step with the rows; `Node.recompute_digest`
rebuilds it from scratch, which is what tests (and a suspicious sync) compare
it with.

Both the read and the update run on the driver connection (the update on the
session's own, inside its transaction): they run on every write and every
sync, and the ORM's per-statement cost was several times the statement's.
The SQL is made from the `Meta` model, which stays the schema's one
definition.

The same update moves the item index repair reads (see `itemindex`): each
item is hashed once for both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import cast

from sqlalchemy import Table
from sqlalchemy.orm import Session

from pixie.device.store import itemindex
from pixie.device.store.db import Database, Meta, driver_of, peek
from pixie.device.store.notetable import Note
from pixie.device.store.version import DIGEST_KEY
from pixie.protocol.digest import MODULUS, Fingerprint, item_hashes, note_item
from pixie.protocol.reconcile import KEY_BYTES

_META = cast(Table, Meta.__table__)
_KEY, _VALUE = _META.c.key.name, _META.c.value.name
_READ_SQL = f"SELECT {_VALUE} FROM {_META.name} WHERE {_KEY} = ?"
_WRITE_SQL = (
    f"INSERT INTO {_META.name} ({_KEY}, {_VALUE}) VALUES (?, ?) "
    f"ON CONFLICT ({_KEY}) DO UPDATE SET {_VALUE} = excluded.{_VALUE}"
)


def note_version(row: Note) -> bytes:
    """A note's version key: what converges, and nothing about where its body lives."""
    return note_item(row.id, row.updated_at, row.content_hash, row.user_edited, row.deleted)


def _held_row(session: Session) -> Meta | None:
    """The digest's row if this session holds it as an object (loaded, or
    added and not yet flushed), else None."""
    held = session.identity_map.get(session.identity_key(Meta, DIGEST_KEY))
    if held is not None:
        return cast(Meta, held)
    for obj in session.new:
        if isinstance(obj, Meta) and obj.key == DIGEST_KEY:
            return obj
    return None


def _hashed(items: Iterable[bytes]) -> list[tuple[bytes, int]]:
    listed = list(items)
    return list(zip([item[:KEY_BYTES] for item in listed], item_hashes(listed), strict=True))


def _moved(
    current: Fingerprint, plus: list[tuple[bytes, int]], minus: list[tuple[bytes, int]]
) -> Fingerprint:
    total = current.total + sum(h for _, h in plus) - sum(h for _, h in minus)
    return Fingerprint(total % MODULUS, current.count + len(plus) - len(minus))


def update(session: Session, *, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()) -> None:
    """Add and remove items, inside ``session``'s transaction: the digest and
    the item index.

    Through the session's driver connection, unless the session holds the
    digest's row as an object (then the digest through that object, so the
    two never disagree)."""
    conn = driver_of(session, flush=False)
    row = _held_row(session)
    if row is not None:
        plus, minus = _hashed(add), _hashed(remove)
        itemindex.write(conn, plus, minus)
        current = Fingerprint.decode(row.value)
        changed = _moved(current, plus, minus)
        if changed != current:
            row.value = changed.encode()
        return
    update_on(conn, add=add, remove=remove)


def update_on(
    conn: sqlite3.Connection, *, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()
) -> None:
    """`update` on a driver connection inside its write transaction, for a
    writer that holds no ORM object of the digest's row."""
    plus, minus = _hashed(add), _hashed(remove)
    if not plus and not minus:
        return
    itemindex.write(conn, plus, minus)
    found = conn.execute(_READ_SQL, (DIGEST_KEY,)).fetchone()
    current = Fingerprint.decode(found[0]) if found is not None else Fingerprint()
    changed = _moved(current, plus, minus)
    if changed != current:
        conn.execute(_WRITE_SQL, (DIGEST_KEY, changed.encode()))


def current(db: Database) -> Fingerprint:
    """The digest as committed: one read on a plain driver connection, in a
    read transaction of its own (`peek`)."""
    rows = peek(db, _READ_SQL, (DIGEST_KEY,))
    value = rows[0][0] if rows else None
    return Fingerprint.decode(value) if value else Fingerprint()


__all__ = ["DIGEST_KEY", "current", "note_version", "update", "update_on"]
