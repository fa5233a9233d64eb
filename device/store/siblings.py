"""Siblings: the other peers of this account, and per-peer envelope counters.

Pairing adds a sibling (its public identity key, name, role and relay). From
then on every envelope to it carries the next value of a persisted send
counter, and every envelope from it passes a persisted replay window.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sqlalchemy import String, bindparam, select
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.errors import DeviceError
from pixie.device.store.db import Base, Database, driver_sql
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.protocol.replay import WINDOW, ReplayWindow, Verdict

# Checked in the transaction that reserves an envelope's counter: is the reason
# to send it still there? (See `SiblingBook.next_send_counter`.)
Still = Callable[[sqlite3.Connection], bool]


class Withdrawn(DeviceError):
    """A message not sent: what it was about was gone when its counter was due."""


class Sibling(Base):
    __tablename__ = "sibling"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)  # hex public key
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    relay: Mapped[str] = mapped_column(String(300))
    paired_at: Mapped[int]


class RemovedSibling(Base):
    """A peer removed from the account: its envelopes are answered with a
    notice of it and never taken in again (see `pixie.device.sync.membership`)."""

    __tablename__ = "removed_sibling"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)  # hex public key
    name: Mapped[str] = mapped_column(String(200))
    removed_at: Mapped[int]  # microseconds, the removing record's time
    removed_by: Mapped[str] = mapped_column(String(64))  # hex key of the record's signer


class PeerCounter(Base):
    __tablename__ = "peer_counter"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    sent: Mapped[int] = mapped_column(default=0)
    recv_high: Mapped[int] = mapped_column(default=0)
    recv_bitmap: Mapped[str] = mapped_column(String(40), default="0")  # hex: 128 bits


_NEXT_SEND_SQL = (
    "INSERT INTO peer_counter (key, sent, recv_high, recv_bitmap) VALUES (?, 1, 0, '0') "
    "ON CONFLICT (key) DO UPDATE SET sent = sent + 1 RETURNING sent"
)
_WINDOW_SQL = "SELECT recv_high, recv_bitmap FROM peer_counter WHERE key = ?"
_SAVE_WINDOW_SQL = (
    "INSERT INTO peer_counter (key, sent, recv_high, recv_bitmap) VALUES (?, 0, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET recv_high = excluded.recv_high, "
    "recv_bitmap = excluded.recv_bitmap"
)


_COLUMNS = (Sibling.name, Sibling.role, Sibling.relay, Sibling.paired_at)
_ALL_SQL = driver_sql(select(Sibling.key, *_COLUMNS).order_by(Sibling.paired_at))
_GET_SQL = driver_sql(select(*_COLUMNS).where(Sibling.key == bindparam("key")))
_REMOVED_SQL = driver_sql(
    select(
        RemovedSibling.key,
        RemovedSibling.name,
        RemovedSibling.removed_at,
        RemovedSibling.removed_by,
    )
)


class SiblingBook:
    def __init__(self, db: Database) -> None:
        self.db = db

    def all(self) -> list[SiblingInfo]:
        with self.db.reading(plain=True) as conn:
            rows = conn.execute(_ALL_SQL).fetchall()
        return [
            SiblingInfo(bytes.fromhex(key), name, role, relay, paired_at)
            for key, name, role, relay, paired_at in rows
        ]

    def get(self, key: bytes) -> SiblingInfo | None:
        with self.db.reading(plain=True) as conn:
            r = conn.execute(_GET_SQL, (key.hex(),)).fetchone()
        return None if r is None else SiblingInfo(key, *r)

    def add(self, info: SiblingInfo, seen: ReplayWindow | None = None) -> None:
        """Store (or refresh) a sibling; a re-pairing keeps its counters. ``seen``:
        the counters already accepted from it while pairing, added to its replay
        window in the same transaction, so none of those envelopes is taken twice."""
        with self.db.writing() as session:
            if seen is not None:
                counts = session.get(PeerCounter, info.key.hex())
                if counts is None:
                    counts = PeerCounter(key=info.key.hex(), sent=0, recv_high=0, recv_bitmap="0")
                    session.add(counts)
                held = ReplayWindow(counts.recv_high, int(counts.recv_bitmap, 16))
                union = _union(held, seen)
                counts.recv_high, counts.recv_bitmap = union.high, format(union.bitmap, "x")
            row = session.get(Sibling, info.key.hex())
            if row is None:
                session.add(
                    Sibling(
                        key=info.key.hex(),
                        name=info.name,
                        role=info.role,
                        relay=info.relay,
                        paired_at=info.paired_at,
                    )
                )
            else:
                row.name, row.role, row.relay = info.name, info.role, info.relay

    def remove(self, key: bytes, *, name: str, at: int, by: bytes) -> bool:
        """Take ``key`` out of the siblings for good (its counters stay, so no
        envelope of it is taken twice should it come back as a stranger);
        True if it was a sibling here."""
        with self.db.writing() as session:
            row = session.get(Sibling, key.hex())
            if row is not None:
                session.delete(row)
            if session.get(RemovedSibling, key.hex()) is None:
                session.add(
                    RemovedSibling(key=key.hex(), name=name, removed_at=at, removed_by=by.hex())
                )
            return row is not None

    def removed(self) -> dict[bytes, tuple[str, int, bytes]]:
        """Each removed peer's key: (name, when, by whom)."""
        with self.db.reading(plain=True) as conn:
            rows = conn.execute(_REMOVED_SQL).fetchall()
        return {
            bytes.fromhex(key): (name, int(at), bytes.fromhex(by)) for key, name, at, by in rows
        }

    def next_send_counter(self, key: bytes, still: Still | None = None) -> int:
        """Reserve the next counter for an envelope to ``key`` before sending it.

        ``still``, if given, runs in the same transaction first; if it answers
        False, no counter is reserved and `Withdrawn` is raised. A sibling
        orders a device's messages by their counters, so a check made here
        cannot be overtaken by a message another process sends meanwhile.

        Committed without an fsync (see `Database.writing`): a power cut can
        hand a few counters out twice, and a sibling then drops those envelopes
        as replays (messages are idempotent and retried); it can never make it
        accept one twice."""
        with self.db.writing(plain=True, durable=False) as conn:
            if still is not None and not still(conn):
                raise Withdrawn("withdrawn: what the message was about is gone")
            (sent,) = conn.execute(_NEXT_SEND_SQL, (key.hex(),)).fetchone()
            return int(sent)

    def accept_counter(self, key: bytes, counter: int) -> Verdict:
        """Check ``counter`` against the replay window of ``key`` and, if new,
        record it, in one transaction (so two processes of one peer never both
        accept an envelope). Not fsynced: the durable write that acts on the
        envelope, if any, commits after this one and so makes it durable too;
        an acceptance a power cut undoes had changed nothing durable."""
        with self.db.writing(plain=True, durable=False) as conn:
            row = conn.execute(_WINDOW_SQL, (key.hex(),)).fetchone()
            window = ReplayWindow() if row is None else ReplayWindow(row[0], int(row[1], 16))
            verdict = window.check(counter)
            if verdict is Verdict.NEW:
                new = window.accept(counter)
                conn.execute(_SAVE_WINDOW_SQL, (key.hex(), new.high, format(new.bitmap, "x")))
            return verdict

    def replay_window(self, key: bytes) -> ReplayWindow:
        with self.db.reading() as session:
            row = session.get(PeerCounter, key.hex())
            if row is None:
                return ReplayWindow()
            return ReplayWindow(row.recv_high, int(row.recv_bitmap, 16))


def _union(a: ReplayWindow, b: ReplayWindow) -> ReplayWindow:
    """A window that refuses every counter either of ``a`` and ``b`` refuses."""
    high = max(a.high, b.high)
    mask = (1 << WINDOW) - 1
    bitmap = 0
    for w in (a, b):
        shift = high - w.high
        if shift < WINDOW:
            bitmap |= (w.bitmap << shift) & mask
    return ReplayWindow(high, bitmap)
