"""The holder: the Homebase's side of offloading.

It answers three requests from its siblings (see `pixie.protocol.offload`):

- Offload: the body must re-hash to the hash it came with and must not name a
  note this replica knows as sealed; it is committed (WAL, synchronous=FULL)
  before the ack is sent, so an ack always means "durably held".
- Fetch: served only for a request naming a clear note held here, and only if
  the resident body still re-hashes to the requested hash. Otherwise a refusal,
  and a log line saying why.
- Release: only the device that parked a holding can release it; holdings stay
  whatever happens to this replica's own copy of the note. A release sent
  before the offload that last stored or re-acked the holding (its envelope
  counter is lower: the relay may deliver them in either order, and a device
  retries releases) is answered but changes nothing: the device asked to drop
  a copy it has since parked again and points at.

`FaultPlan` (``pixie run --faults SPEC``) makes the holder misbehave on
purpose, for tests of the device's gates and of systems built on them.

A request that makes the holder raise anything but a connection or database
error (those are the driver's to report) is dropped, counted in `dropped` and
logged (in summary under a flood), and the holder goes on with the next: no
sibling's request, however odd, stops the Homebase. Refusals are logged in
summary too.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from sqlalchemy import delete

from pixie.device.errors import DeviceError
from pixie.device.logs import Summarised
from pixie.device.store.db import at_once
from pixie.device.store.holdings import Holding
from pixie.device.store.node import Node
from pixie.device.store.notes import Zone
from pixie.device.sync.peers import Incoming
from pixie.protocol.faults import HOLDER_FAULTS, FaultPlan
from pixie.protocol.identity import fingerprint
from pixie.protocol.offload import body_hash, check_offload, holder_parts, new_request_id
from pixie.protocol.peerwire import (
    FetchRequest,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    PeerMessage,
    Release,
    Released,
)

log = logging.getLogger("pixie.holder")

CRASH_EXIT = 70  # what a crash fault exits with
# The replica's zone for the note (if it has the note) and the held body (if any).
_RESIDENT_SQL = (
    "SELECT (SELECT zone FROM note WHERE id = ?), "
    "(SELECT body FROM holding WHERE note_id = ? AND content_hash = ?)"
)
_ZONE_SQL = "SELECT zone FROM note WHERE id = ?"
_OWNER_SQL = "SELECT owner FROM holding WHERE note_id = ? AND content_hash = ?"
_HOLD_SQL = (
    "INSERT INTO holding (note_id, content_hash, owner, body, held_at, offload_counter) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_RESTAMP_SQL = (
    "UPDATE holding SET offload_counter = max(offload_counter, ?) "
    "WHERE note_id = ? AND content_hash = ?"
)
_OFFLOAD_FAULTS = [name for name in HOLDER_FAULTS if name != "corrupt-serve"]

Reply = Callable[[bytes, PeerMessage], Awaitable[int]]
Call = Callable[..., Awaitable[Any]]


def _crash(why: str) -> None:
    log.error("fault injected: %s; exiting now", why)
    logging.shutdown()
    os._exit(CRASH_EXIT)


class _Injected(Exception):
    """What an injected crash raised (an in-process test's stand-in for exiting),
    carried past the guard that drops failed requests."""

    def __init__(self, raised: Exception) -> None:
        super().__init__(str(raised))
        self.raised = raised


class Holder:
    """Serves holder requests for one Homebase data dir."""

    def __init__(
        self,
        node: Node,
        faults: FaultPlan | None = None,
        *,
        crash: Callable[[str], None] = _crash,
    ) -> None:
        self.node = node
        self.faults = faults or FaultPlan()
        self.crash = crash
        self.refused: dict[str, int] = {}
        self.dropped: Counter[str] = Counter()
        self.drops = Summarised(log, "requests dropped", level=logging.ERROR)
        self.refusals = Summarised(log, "requests refused")

    def wants(self, message: PeerMessage) -> bool:
        return isinstance(message, OffloadRequest | FetchRequest | Release)

    async def handle(self, incoming: Incoming, reply: Reply, call: Call) -> None:
        sender, message, counter = incoming.sender, incoming.body.message, incoming.body.counter
        try:
            if isinstance(message, OffloadRequest):
                await self._offload(sender, message, counter, reply, call)
            elif isinstance(message, FetchRequest):
                await self._fetch(sender, message, reply, call)
            elif isinstance(message, Release):
                await self._release(sender, message, counter, reply, call)
        except _Injected as injected:
            raise injected.raised from None
        except (DeviceError, trio.TooSlowError):
            raise  # the relay or the database: the driver reports those
        except Exception as exc:  # one request must never stop the Homebase
            reason = type(exc).__name__
            self.dropped[reason] += 1
            kind = type(message).__name__
            self.drops.log(reason, "dropped a %s from %s: %s", kind, fingerprint(sender), reason)

    def _crash_now(self, why: str) -> None:
        try:
            self.crash(why)
        except Exception as exc:
            raise _Injected(exc) from exc

    def _refuse(self, sender: bytes, what: str, note_id: str, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        self.refusals.log(
            reason, "refused %s of %s from %s: %s", what, note_id, fingerprint(sender), reason
        )

    # -- offload -------------------------------------------------------------------------

    async def _offload(
        self, sender: bytes, req: OffloadRequest, counter: int, reply: Reply, call: Call
    ) -> None:
        fault = self.faults.first_strike(_OFFLOAD_FAULTS) if self.faults else None
        name = fault.name if fault else None
        if name == "crash-before-commit":
            self._crash_now("crash before commit")
            return
        if name == "ack-timeout":
            log.warning("fault injected: ack-timeout for %s (no answer)", req.note_id)
            return
        if name == "refuse":
            log.warning("fault injected: refuse %s", req.note_id)
            await reply(sender, HolderRefusal(req.request, "refused (injected fault)"))
            return
        why = check_offload(req) or await call(self._store, sender, req, counter)
        if why:
            self._refuse(sender, "offload", req.note_id, why)
            await reply(sender, HolderRefusal(req.request, why))
            return
        if name == "crash-after-commit":
            self._crash_now("crash after commit, before the ack")
            return
        note_id, content_hash = req.note_id, req.content_hash
        if name == "ack-wrong-hash":
            content_hash = body_hash(req.body + b"\x00")
        elif name == "ack-wrong-id":
            note_id = _other_id(req.note_id)
        elif name == "ack-delay" and fault is not None:
            log.warning("fault injected: ack-delay %.3g s for %s", fault.seconds, req.note_id)
            await trio.sleep(fault.seconds)
        if name in ("ack-wrong-hash", "ack-wrong-id"):
            log.warning("fault injected: %s for %s", name, req.note_id)
        await reply(sender, OffloadAck(req.request, note_id, content_hash))
        # Logged after the ack, which waits for nothing but the commit.
        log.info("holding %s (%d bytes) for %s", req.note_id, len(req.body), fingerprint(sender))

    def _store(self, sender: bytes, req: OffloadRequest, counter: int) -> str | None:
        """Commit the holding durably (synchronous=FULL), on the plain driver
        connection, stamped with the request's envelope counter (see
        `_drop`); the reason to refuse, or None."""
        owner = sender.hex()
        with self.node.db.bookkeeping(durable=True) as conn:
            zone = conn.execute(_ZONE_SQL, (req.note_id,)).fetchone()
            if zone is not None and zone[0] == Zone.SEALED.value:
                return "that id names a sealed note; sealed notes are never offloaded"
            held = conn.execute(_OWNER_SQL, (req.note_id, req.content_hash.hex())).fetchone()
            if held is not None:
                if held[0] != owner:
                    return "another device holds that note here"
                # Already held: the ack is idempotent, and this offload now
                # backs the holding too.
                conn.execute(_RESTAMP_SQL, (counter, req.note_id, req.content_hash.hex()))
                return None
            conn.execute(
                _HOLD_SQL,
                (
                    req.note_id,
                    req.content_hash.hex(),
                    owner,
                    req.body,
                    time.time_ns() // 1000,
                    counter,
                ),
            )
        return None

    # -- fetch ---------------------------------------------------------------------------

    async def _fetch(self, sender: bytes, req: FetchRequest, reply: Reply, call: Call) -> None:
        body, why = await at_once(self._resident_body, req, otherwise=call)
        if body is None:
            self._refuse(sender, "fetch", req.note_id, why)
            await reply(sender, HolderRefusal(req.request, why))
            return
        if self.faults and self.faults.strikes("corrupt-serve"):
            log.warning("fault injected: corrupt-serve for %s", req.note_id)
            body = bytes([body[0] ^ 0x01]) + body[1:] if body else b"\x00"
        for part in holder_parts(req, body):
            await reply(sender, part)
        log.info("served %s (%d bytes) to %s", req.note_id, len(body), fingerprint(sender))

    def _resident_body(self, req: FetchRequest) -> tuple[bytes | None, str]:
        rows = self.node.db.peek(_RESIDENT_SQL, (req.note_id, req.note_id, req.content_hash.hex()))
        zone, body = rows[0] if rows else (None, None)
        if zone == Zone.SEALED.value:
            return None, "that id names a sealed note"
        if body is None:
            return None, "no holding for that note and hash"
        if body_hash(body) != req.content_hash:
            log.error("holding %s no longer matches its hash: not served", req.note_id)
            return None, "the held body no longer matches its hash"
        return bytes(body), ""

    # -- release -------------------------------------------------------------------------

    async def _release(
        self, sender: bytes, req: Release, counter: int, reply: Reply, call: Call
    ) -> None:
        why = await call(self._drop, sender, req, counter)
        if why:
            self._refuse(sender, "release", req.note_id, why)
            await reply(sender, HolderRefusal(req.request, why))
            return
        await reply(sender, Released(req.request, req.note_id, req.content_hash))

    def _drop(self, sender: bytes, req: Release, counter: int) -> str | None:
        """Let go of a holding; the reason to refuse, or None (also when there
        is nothing to drop, or when the release predates the holding's latest
        offload, whose copy the device may point at: both are answered as
        done, since the copy the release spoke of is no longer the device's
        concern)."""
        with self.node.db.writing() as session:
            held = session.get(Holding, (req.note_id, req.content_hash.hex()))
            if held is None:
                return None  # nothing to drop: releasing twice is fine
            if held.owner != sender.hex():
                return "only the device that parked a holding can release it"
            if held.offload_counter > counter:
                log.info(
                    "kept %s: %s parked it again after asking to release it",
                    req.note_id,
                    fingerprint(sender),
                )
                return None
            session.execute(
                delete(Holding).where(
                    Holding.note_id == req.note_id, Holding.content_hash == req.content_hash.hex()
                )
            )
        log.info("released %s for %s", req.note_id, fingerprint(sender))
        return None


def _other_id(note_id: str) -> str:
    """A well-formed note id that is not ``note_id`` (for the wrong-id fault)."""
    raw = new_request_id().hex()
    other = f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:32]}"
    return other if other != note_id else _other_id(note_id)


__all__ = ["CRASH_EXIT", "Holder"]
