"""Where parked bodies are recorded, on both sides of an offload.

On a device: a clear note whose body is parked has ``Note.holder`` set and its
body NULL (see `notes.py`); `PendingRelease` lists holdings no note of this
device points at any more (a newer version arrived, the note was deleted or
recalled), which the holder may drop once this device says so.

On a holder (the Homebase): `Holding` keeps each parked body with the note id
and content hash it was acknowledged under, and the key of the device that
parked it. A holding is independent of the Homebase's own replica of the note:
it stays until its owner releases it.

All of this is per-replica state: never synced, never part of the state digest.
"""

from __future__ import annotations

import enum

from sqlalchemy import LargeBinary, String, bindparam, delete, insert, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from pixie.device.store.db import Base, Database, driver_sql, peek
from pixie.device.store.notes import Zone
from pixie.device.store.notetable import Note
from pixie.protocol.clock import SYSTEM_CLOCK, Clock


class PendingRelease(Base):
    """A holding this device no longer points at, waiting to be released."""

    __tablename__ = "pending_release"

    note_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64), primary_key=True)
    since: Mapped[int]


class Holding(Base):
    """A body parked here by a sibling (holder side). Every device that parked
    this very body (note id and content hash) is one of its `HoldingOwner`s;
    ``owner`` and ``offload_counter`` are those of the first, kept as they
    were before holdings had several owners."""

    __tablename__ = "holding"

    note_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))  # the parking device's key, hex
    body: Mapped[bytes] = mapped_column(LargeBinary)
    held_at: Mapped[int]  # microseconds UTC
    # The envelope counter of the latest offload request that stored or
    # re-acked this holding: a release the device sent before it (a lower
    # counter) must not drop a copy the device has parked again since.
    offload_counter: Mapped[int] = mapped_column(default=0, server_default="0")


class HoldingOwner(Base):
    """One device that parked a holding, and the envelope counter of its
    latest offload request that stored or re-acked it: a release it sent
    before that (a lower counter) must not drop a copy it has parked again
    since. The holding stays while any owner does."""

    __tablename__ = "holding_owner"

    note_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64), primary_key=True)  # the device's key, hex
    offload_counter: Mapped[int] = mapped_column(default=0, server_default="0")


# `release_later` on the driver, for the bulk paths (the batched upsert, the
# replica's merge): a release already queued stays as it was.
RELEASE_LATER_SQL = driver_sql(
    insert(PendingRelease)
    .prefix_with("OR IGNORE")
    .values(
        note_id=bindparam("note_id"),
        content_hash=bindparam("content_hash"),
        holder=bindparam("holder"),
        since=bindparam("since"),
    )
)


def release_later(
    session: Session,
    note_id: str,
    content_hash: str,
    holder: str,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Queue the release of a holding (inside the caller's transaction), dated
    by ``clock``."""
    if session.get(PendingRelease, (note_id, content_hash, holder)) is None:
        session.add(
            PendingRelease(
                note_id=note_id, content_hash=content_hash, holder=holder, since=clock.now_us()
            )
        )


def make_resident(
    session: Session, row: Note, body: str, content_hash: str, *, clock: Clock = SYSTEM_CLOCK
) -> None:
    """Give an offloaded row a resident body again (a new version, a deletion or
    a recall), queueing the release of the holding it pointed at."""
    if row.holder is not None:
        release_later(session, row.id, row.content_hash, row.holder, clock=clock)
        row.holder = None
    row.body = body
    row.content_hash = content_hash


def forget_release(session: Session, note_id: str, content_hash: str, holder: str) -> None:
    session.execute(
        delete(PendingRelease).where(
            PendingRelease.note_id == note_id,
            PendingRelease.content_hash == content_hash,
            PendingRelease.holder == holder,
        )
    )


# -- the holder's side: the statements of `pixie.homebase.holding.HolderCore` --------

# The replica's zone for the note (if it has the note) and the held body (if any).
# The body is a column of the outer query, not a scalar subquery's value, which
# SQLite copies once more (a megabyte a fetch, for a large body).
_RESIDENT_SQL = (
    "SELECT (SELECT zone FROM note WHERE id = ?1), body FROM holding "
    "WHERE note_id = ?1 AND content_hash = ?2"
)
_ZONE_SQL = "SELECT zone FROM note WHERE id = ?"
_HELD_SQL = "SELECT 1 FROM holding WHERE note_id = ? AND content_hash = ?"
_OWNER_SQL = (
    "SELECT offload_counter FROM holding_owner WHERE note_id = ? AND content_hash = ? AND owner = ?"
)
_HOLD_SQL = (
    "INSERT INTO holding (note_id, content_hash, owner, body, held_at, offload_counter) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_OWN_SQL = (
    "INSERT INTO holding_owner (note_id, content_hash, owner, offload_counter) VALUES (?, ?, ?, ?)"
)
_RESTAMP_SQL = (
    "UPDATE holding_owner SET offload_counter = max(offload_counter, ?) "
    "WHERE note_id = ? AND content_hash = ? AND owner = ?"
)


class Held(enum.Enum):
    """What `hold` did."""

    NEW = "new"  # committed: the body, or this device as one more owner of it
    AGAIN = "again"  # held already for this device: re-stamped with the counter
    SEALED = "sealed"  # the id names a sealed note of this replica: nothing written


class LetGo(enum.Enum):
    """What `let_go` did."""

    DROPPED = "dropped"  # this device's share, and the body with the last one
    ABSENT = "absent"  # nothing held under that id and hash
    NOT_OWNER = "not_owner"  # held, but this device never parked it: kept
    PARKED_AGAIN = "parked_again"  # an offload newer than the release backs it: kept


def hold(
    db: Database,
    note_id: str,
    content_hash: str,
    owner: str,
    body: bytes,
    *,
    held_at: int,
    counter: int,
) -> Held:
    """Commit a holding durably (synchronous=FULL) on the plain driver
    connection, ``owner`` among its owners, stamped with the offload
    request's envelope ``counter``. Another device's copy of the very same
    body (its hash checked before) is shared, not refused."""
    with db.writing(plain=True) as conn:
        zone = conn.execute(_ZONE_SQL, (note_id,)).fetchone()
        if zone is not None and zone[0] == Zone.SEALED.value:
            return Held.SEALED
        key = (note_id, content_hash)
        if conn.execute(_OWNER_SQL, (*key, owner)).fetchone() is not None:
            conn.execute(_RESTAMP_SQL, (counter, *key, owner))
            return Held.AGAIN
        if conn.execute(_HELD_SQL, key).fetchone() is None:
            conn.execute(_HOLD_SQL, (*key, owner, body, held_at, counter))
        conn.execute(_OWN_SQL, (*key, owner, counter))
    return Held.NEW


def held_body(db: Database, note_id: str, content_hash: str) -> tuple[str | None, bytes | None]:
    """(this replica's zone for ``note_id`` or None, the body held under that
    id and hash or None), on one snapshot each."""
    rows = peek(db, _RESIDENT_SQL, (note_id, content_hash))
    if rows:
        zone, body = rows[0]
        return zone, None if body is None else bytes(body)
    zones = peek(db, _ZONE_SQL, (note_id,))
    return (zones[0][0] if zones else None), None


def let_go(db: Database, note_id: str, content_hash: str, owner: str, counter: int) -> LetGo:
    """Drop ``owner``'s share of a holding, unless an offload of its whose
    envelope counter is above ``counter`` backs it; the body goes with the
    last owner."""
    key = (note_id, content_hash)
    with db.writing() as session:
        mine = session.get(HoldingOwner, (*key, owner))
        if mine is None:
            held = session.get(Holding, key) is not None
            return LetGo.NOT_OWNER if held else LetGo.ABSENT
        if mine.offload_counter > counter:
            return LetGo.PARKED_AGAIN
        session.delete(mine)
        session.flush()
        others = session.execute(
            select(HoldingOwner.owner).where(
                HoldingOwner.note_id == note_id, HoldingOwner.content_hash == content_hash
            )
        ).first()
        if others is None:
            session.execute(
                delete(Holding).where(
                    Holding.note_id == note_id, Holding.content_hash == content_hash
                )
            )
    return LetGo.DROPPED


__all__ = [
    "RELEASE_LATER_SQL",
    "Held",
    "Holding",
    "HoldingOwner",
    "LetGo",
    "PendingRelease",
    "forget_release",
    "held_body",
    "hold",
    "let_go",
    "make_resident",
    "release_later",
]
