"""Siblings: the other peers of this account, and per-peer envelope counters.

Pairing adds a sibling (its public identity key, name, role and relay). From
then on every envelope to it carries the next value of a persisted send
counter, and every envelope from it passes a persisted replay window.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, mapped_column

from pixie.protocol.identity import fingerprint
from pixie.protocol.replay import ReplayWindow

from .db import Base, Database


class Sibling(Base):
    __tablename__ = "sibling"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)  # hex public key
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    relay: Mapped[str] = mapped_column(String(300))
    paired_at: Mapped[int]


class PeerCounter(Base):
    __tablename__ = "peer_counter"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    sent: Mapped[int] = mapped_column(default=0)
    recv_high: Mapped[int] = mapped_column(default=0)
    recv_bitmap: Mapped[str] = mapped_column(String(40), default="0")  # hex: 128 bits


@dataclass(frozen=True, slots=True)
class SiblingInfo:
    key: bytes
    name: str
    role: str
    relay: str
    paired_at: int

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)

    def as_json(self) -> dict[str, object]:
        return {
            "fingerprint": self.fingerprint,
            "key": self.key.hex(),
            "name": self.name,
            "role": self.role,
            "relay": self.relay,
            "paired_at": self.paired_at,
        }


class SiblingBook:
    def __init__(self, db: Database) -> None:
        self.db = db

    def all(self) -> list[SiblingInfo]:
        with self.db.reading() as session:
            rows = session.scalars(select(Sibling).order_by(Sibling.paired_at))
            return [
                SiblingInfo(bytes.fromhex(r.key), r.name, r.role, r.relay, r.paired_at)
                for r in rows
            ]

    def get(self, key: bytes) -> SiblingInfo | None:
        with self.db.reading() as session:
            r = session.get(Sibling, key.hex())
            return None if r is None else SiblingInfo(key, r.name, r.role, r.relay, r.paired_at)

    def add(self, info: SiblingInfo) -> None:
        """Store (or refresh) a sibling; a re-pairing keeps its counters."""
        with self.db.writing() as session:
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

    def next_send_counter(self, key: bytes) -> int:
        """Reserve the next counter for an envelope to ``key`` (durable before sending)."""
        with self.db.writing() as session:
            row = session.get(PeerCounter, key.hex())
            if row is None:
                row = PeerCounter(key=key.hex(), sent=0, recv_high=0, recv_bitmap="0")
                session.add(row)
            row.sent += 1
            return row.sent

    def replay_window(self, key: bytes) -> ReplayWindow:
        with self.db.reading() as session:
            row = session.get(PeerCounter, key.hex())
            if row is None:
                return ReplayWindow()
            return ReplayWindow(row.recv_high, int(row.recv_bitmap, 16))

    def save_replay_window(self, key: bytes, window: ReplayWindow) -> None:
        with self.db.writing() as session:
            row = session.get(PeerCounter, key.hex())
            if row is None:
                row = PeerCounter(key=key.hex(), sent=0)
                session.add(row)
            row.recv_high, row.recv_bitmap = window.high, format(window.bitmap, "x")
