"""Two nodes joined by an in-memory wire for offload tests, with a hook that crashes on cue."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.holdings import PendingRelease
from pixie.device.store.notes import NoteKind
from pixie.device.store.siblings import Still, Withdrawn
from pixie.device.sync.offload import NoteOffloadService
from pixie.device.sync.peers import Incoming
from pixie.homebase.holder import Holder
from pixie.protocol.faults import HOLDER_FAULTS, parse_faults
from pixie.protocol.peerwire import (
    Body,
    PeerMessage,
    decode_body,
    encode_body,
)
from tests.support.synchelp import open_pair

PHONE = b"\x01" * 32


MAC = b"\x02" * 32


ROGUE = b"\x03" * 32


BODY = ("Ada prefers mornings; she is learning the cello. " * 20).strip()


class Crashed(Exception):
    """What a crash fault does to an in-process holder: it stops mid-request."""


def crash(why: str) -> None:
    raise Crashed(why)


@dataclass
class Wire:
    """Phone -> holder requests, holder -> phone replies; ``tamper`` may rewrite
    or inject what the phone receives."""

    holder: Holder
    nursery: trio.Nursery
    inbox: trio.MemorySendChannel[Incoming]
    outbox: trio.MemoryReceiveChannel[Incoming]
    before_deliver: Callable[[PeerMessage], None] | None = None
    crashes: list[str] = field(default_factory=list)
    sent: int = 0  # the phone's envelope counter
    phone: Node | None = None
    before_seal: Callable[[], None] | None = None

    async def send(self, to: bytes, message: PeerMessage, *, still: Still | None = None) -> int:
        assert to == MAC
        if self.before_seal is not None:
            self.before_seal()
        if still is not None:  # as `SiblingBook.next_send_counter` checks it
            assert self.phone is not None
            with self.phone.db.writing(plain=True, durable=False) as conn:
                if not still(conn):
                    raise Withdrawn("withdrawn")
        # Through the real codec, as the envelope would carry it.
        self.sent += 1
        decoded = decode_body(encode_body(message, self.sent))
        if self.before_deliver is not None:
            self.before_deliver(decoded.message)
        self.nursery.start_soon(self._holder_side, decoded)
        return 0

    async def _holder_side(self, body: Body) -> None:
        try:
            await self.holder.handle(Incoming(PHONE, body), self.reply, self.call)
        except Crashed as exc:
            self.crashes.append(str(exc))

    async def reply(self, to: bytes, message: PeerMessage) -> int:
        assert to == PHONE
        await self.inject(MAC, message)
        return 0

    async def inject(self, sender: bytes, message: PeerMessage) -> None:
        decoded = decode_body(encode_body(message, 1))
        await self.inbox.send(Incoming(sender, decoded))

    async def receive(self) -> Incoming:
        return await self.outbox.receive()

    @staticmethod
    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await trio.to_thread.run_sync(fn, *args)


@dataclass
class Pair:
    phone: Node
    mac: Node
    wire: Wire
    service: NoteOffloadService

    def note(self, body: str = BODY, identity: str = "ada") -> str:
        return self.phone.notebook.upsert_clear(
            Distilled(NoteKind.PERSON, identity, f"{identity} page", body, tags=("music",))
        ).note_id

    def row(self, note_id: str) -> tuple[Any, ...]:
        con = sqlite3.connect(self.phone.db.path)
        try:
            found = con.execute(
                "SELECT body, holder, content_hash, updated_at FROM note WHERE id = ?", (note_id,)
            ).fetchone()
        finally:
            con.close()
        assert found is not None
        return tuple(found)

    def held(self) -> list[tuple[str, bytes]]:
        con = sqlite3.connect(self.mac.db.path)
        try:
            return con.execute("SELECT note_id, body FROM holding ORDER BY note_id").fetchall()
        finally:
            con.close()

    def pending(self) -> list[str]:
        with self.phone.db.reading() as session:
            return [p.note_id for p in session.query(PendingRelease).all()]


def make_pair(tmp: Path, nursery: trio.Nursery, spec: str = "", timeout: float = 5.0) -> Pair:
    phone, mac = open_pair(tmp)
    plan = parse_faults(spec, HOLDER_FAULTS, seed=1)
    inbox, outbox = trio.open_memory_channel[Incoming](100)
    wire = Wire(Holder(mac, plan, crash=crash), nursery, inbox, outbox, phone=phone)
    service = NoteOffloadService(phone, MAC, wire.send, wire.receive, timeout=timeout)
    return Pair(phone, mac, wire, service)
