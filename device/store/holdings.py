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

from sqlalchemy import LargeBinary, String, bindparam, delete, insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from pixie.device.store.db import Base, driver_sql
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
    """A body parked here by a sibling (holder side)."""

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


__all__ = [
    "RELEASE_LATER_SQL",
    "Holding",
    "PendingRelease",
    "forget_release",
    "make_resident",
    "release_later",
]
