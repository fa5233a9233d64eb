"""Keeping the state digest current, inside the transaction of every write.

The fingerprint (see `pixie.protocol.digest`) lives in one meta row. Each write
that adds an event or changes a note version updates it in the same
transaction, so it is never out of step with the rows; `Node.recompute_digest`
rebuilds it from scratch, which is what tests (and a suspicious sync) compare
it with.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from pixie.device.store.db import Database, Meta
from pixie.device.store.notes import Note
from pixie.protocol.digest import Fingerprint, note_item

DIGEST_KEY = "state_fingerprint"


def note_version(row: Note) -> bytes:
    """A note's version key: what converges, and nothing about where its body lives."""
    return note_item(row.id, row.updated_at, row.content_hash, row.user_edited, row.deleted)


def update(session: Session, *, add: Iterable[bytes] = (), remove: Iterable[bytes] = ()) -> None:
    row = session.get(Meta, DIGEST_KEY)
    current = Fingerprint.decode(row.value) if row is not None else Fingerprint()
    changed = current.update(add, remove)
    if changed == current:
        return
    if row is None:
        session.add(Meta(key=DIGEST_KEY, value=changed.encode()))
    else:
        row.value = changed.encode()


def current(db: Database) -> Fingerprint:
    with db.reading() as session:
        value = session.scalar(select(Meta.value).where(Meta.key == DIGEST_KEY))
    return Fingerprint.decode(value) if value else Fingerprint()
