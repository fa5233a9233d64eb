"""The device's statements for offloading: a clear note's body and pointer,
and the releases it owes its holder (`pending_release`).

`pixie.device.sync.offload.OffloadLedger` decides; these run its reads and
writes. The per-request ones (the candidate, the compare-and-clear, the
pointer) use `peek` and ``Database.writing(plain=True)``, a plain driver
connection, where a SQLAlchemy session costs twenty times the statements;
the rest go through sessions. Every query selects from the clear zone first:
a sealed row never reaches the code past it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, func, select

from pixie.device.store.db import Database, driver_sql, peek
from pixie.device.store.holdings import PendingRelease, forget_release, release_later
from pixie.device.store.notes import NoteKind, Zone
from pixie.device.store.notetable import Note
from pixie.device.store.siblings import Still
from pixie.protocol.clock import Clock
from pixie.protocol.offload import body_hash

# The candidate and, in the same snapshot, whether a release of that very
# body to this holder is still due (see `candidate`).
_CANDIDATE_SQL = (
    "SELECT body, content_hash, holder, deleted, kind, EXISTS (SELECT 1 FROM pending_release "
    "WHERE note_id = note.id AND content_hash = note.content_hash AND holder = ?) "
    "FROM note WHERE zone = 'clear' AND id = ?"
)
# Each holding no note here points at, oldest first (`releases_due`).
_RELEASES_DUE_SQL = driver_sql(
    select(PendingRelease.note_id, PendingRelease.content_hash)
    .where(PendingRelease.holder == bindparam("holder"))
    .order_by(PendingRelease.since, PendingRelease.note_id)
)
_RELEASING_SQL = (
    "SELECT 1 FROM pending_release WHERE note_id = ? AND content_hash = ? AND holder = ?"
)
# The compare-and-clear: the body still here, unchanged (and no release of it
# to this holder due), then the clear itself.
_RESIDENT_SQL = (
    "SELECT body, content_hash, EXISTS (SELECT 1 FROM pending_release "
    "WHERE note_id = note.id AND content_hash = note.content_hash AND holder = ?) FROM note "
    "WHERE zone = 'clear' AND id = ? AND deleted = 0 AND holder IS NULL"
)
_CLEAR_SQL = "UPDATE note SET body = NULL, holder = ? WHERE zone = 'clear' AND id = ?"
_POINTER_SQL = (
    "SELECT content_hash, holder FROM note WHERE zone = 'clear' AND id = ? AND deleted = 0"
)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A clear note as offloading first sees it."""

    body: str | None
    content_hash: str
    holder: str | None
    deleted: bool
    kind: str
    releasing: bool  # a release of this very body to this holder is still due


def candidate(db: Database, holder: str, note_id: str) -> CandidateRow | None:
    """``note_id`` if it is a clear note (deleted or not), else None."""
    rows = peek(db, _CANDIDATE_SQL, (holder, note_id))
    if not rows:
        return None
    body, chash, held_by, deleted, kind, releasing = rows[0]
    return CandidateRow(body, chash, held_by, bool(deleted), kind, bool(releasing))


def clear_if_unchanged(db: Database, holder: str, note_id: str, content_hash: str) -> bool:
    """Erase ``note_id``'s body and point it at ``holder``, only if the body
    still here hashes to ``content_hash`` and no release of that very body to
    ``holder`` is due. True if it was cleared. Not fsynced (a power cut that
    undoes a clear leaves the body here as well as with the holder)."""
    with db.writing(plain=True, durable=False) as conn:
        row = conn.execute(_RESIDENT_SQL, (holder, note_id)).fetchone()
        if row is None or row[0] is None or row[1] != content_hash:
            return False
        if body_hash(str(row[0]).encode("utf-8")).hex() != content_hash:
            return False
        if row[2]:
            return False
        conn.execute(_CLEAR_SQL, (holder, note_id))
        return True


def release_unless_pointed_at(
    db: Database, note_id: str, content_hash: str, holder: str, *, clock: Clock
) -> bool:
    """Queue the release of a holding unless a note here points at that very
    holding; True if queued."""
    with db.writing() as session:
        pointer = session.execute(
            select(Note.id).where(
                Note.id == note_id,
                Note.holder == holder,
                Note.content_hash == content_hash,
            )
        ).first()
        if pointer is not None:
            return False
        release_later(session, note_id, content_hash, holder, clock=clock)
        return True


def pointer(db: Database, note_id: str) -> tuple[str, str | None] | None:
    """(content hash, holder or None) of a live clear note, else None."""
    rows = peek(db, _POINTER_SQL, (note_id,))
    if not rows:
        return None
    chash, holder = rows[0]
    return str(chash), holder


def restore(
    db: Database, note_id: str, content_hash: str, holder: str, body: bytes, *, clock: Clock
) -> bool:
    """Body back and pointer gone in one transaction, the holding queued for
    release in the same one; False if the row no longer points there."""
    with db.writing() as session:
        row = session.scalar(
            select(Note).where(
                Note.zone == Zone.CLEAR.value,
                Note.id == note_id,
                Note.holder == holder,
                Note.content_hash == content_hash,
            )
        )
        if row is None:
            return False
        row.body = body.decode("utf-8")
        row.holder = None
        release_later(session, note_id, content_hash, holder, clock=clock)
        return True


def releases_due(db: Database, holder: str) -> list[tuple[str, str]]:
    """(note id, content hash) of each holding no note here points at, oldest first."""
    with db.reading(plain=True) as conn:
        return [(str(n), str(h)) for n, h in conn.execute(_RELEASES_DUE_SQL, (holder,))]


def released(db: Database, note_id: str, content_hash: str, holder: str) -> None:
    """The holder let go: the release is no longer due."""
    with db.writing() as session:
        forget_release(session, note_id, content_hash, holder)


def still_releasing(note_id: str, content_hash: str, holder: str) -> Still:
    """A check run where a release's counter is reserved: is it still due?"""
    key = (note_id, content_hash, holder)
    return lambda conn: conn.execute(_RELEASING_SQL, key).fetchone() is not None


def offload_candidates(db: Database, cutoff_us: int) -> list[str]:
    """Live, resident clear notes (not About you) about a date, or last
    changed, before ``cutoff_us``, oldest first."""
    when = func.coalesce(Note.about_date, Note.updated_wall)
    with db.reading() as session:
        return list(
            session.scalars(
                select(Note.id)
                .where(
                    Note.zone == Zone.CLEAR.value,
                    Note.deleted.is_(False),
                    Note.holder.is_(None),
                    Note.kind != NoteKind.ABOUT_YOU.value,
                    when < cutoff_us,
                )
                .order_by(when, Note.id)
            )
        )


__all__ = [
    "CandidateRow",
    "candidate",
    "clear_if_unchanged",
    "offload_candidates",
    "pointer",
    "release_unless_pointed_at",
    "released",
    "releases_due",
    "restore",
    "still_releasing",
]
