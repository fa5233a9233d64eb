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
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import cast

from sqlalchemy import Table
from sqlalchemy.orm import Session

from pixie.device.store.db import Database, Meta
from pixie.device.store.notes import Note
from pixie.protocol.digest import Fingerprint, note_item

DIGEST_KEY = "state_fingerprint"

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


def update(session: Session, *, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()) -> None:
    """Add and remove items, inside ``session``'s transaction.

    Through the session's driver connection, unless the session holds the
    row as an object (then through that object, so the two never disagree)."""
    row = _held_row(session)
    if row is not None:
        current = Fingerprint.decode(row.value)
        changed = current.update(add, remove)
        if changed != current:
            row.value = changed.encode()
        return
    conn = cast(sqlite3.Connection, session.connection().connection.driver_connection)
    found = conn.execute(_READ_SQL, (DIGEST_KEY,)).fetchone()
    current = Fingerprint.decode(found[0]) if found is not None else Fingerprint()
    changed = current.update(add, remove)
    if changed != current:
        conn.execute(_WRITE_SQL, (DIGEST_KEY, changed.encode()))


def current(db: Database) -> Fingerprint:
    """The digest as committed: one read on a plain driver connection, in a
    read transaction of its own (`Database.peek`)."""
    rows = db.peek(_READ_SQL, (DIGEST_KEY,))
    value = rows[0][0] if rows else None
    return Fingerprint.decode(value) if value else Fingerprint()
