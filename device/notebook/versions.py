"""Stamps and the state digest for note writes, shared by both zones.

Every note version, clear or sealed, takes a stamp from one hybrid clock that
has witnessed the newest stamp in the database, and moves the state digest
from the note's old version key to its new one in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from pixie.device.store import statedigest
from pixie.device.store.notetable import Note, record_marks
from pixie.protocol.clock import SYSTEM_CLOCK, Clock
from pixie.protocol.hlc import HybridClock, Stamp

# The newest stamp stored, read on the updated_at index (one row).
_LATEST_SQL = f"SELECT max({Note.updated_at.key}) FROM {Note.__tablename__}"


class NoteStamper:
    """Hands out note stamps later than every stamp already stored.

    The stamps' wall time is ``clock``'s, or ``wall``'s (milliseconds) if given.
    """

    def __init__(
        self,
        origin: str,
        wall: Callable[[], int] | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = HybridClock(origin, wall=wall, clock=clock)

    def stamp(self, session: Session) -> Stamp:
        """A fresh stamp, later than every stamp in the database (whoever wrote it).

        The database is consulted once per transaction: inside it we hold the
        write lock, so nobody else can add a newer stamp meanwhile.
        """
        if not session.info.get("pixie_stamp_witnessed"):
            latest = session.connection().exec_driver_sql(_LATEST_SQL).scalar()
            if latest is not None:
                self._clock.witness(Stamp.decode(latest))
            session.info["pixie_stamp_witnessed"] = True
        return self._clock.now()


def versioned(session: Session, old: bytes | None, row: Note) -> None:
    """Move the state digest from a note's old version key to its new one."""
    statedigest.update(
        session, add=[statedigest.note_version(row)], remove=[old] if old is not None else []
    )
    record_marks(session, [row.updated_at])


__all__ = ["NoteStamper", "versioned"]
