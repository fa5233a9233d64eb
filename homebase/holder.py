"""The holder: the Homebase's side of offloading.

It answers three requests from its siblings (see `pixie.protocol.offload`);
every decision is `HolderCore`'s (`pixie.homebase.holding`, sans-IO, which the
simulator drives too), and this module moves the messages and injects faults:

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
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from pixie.device.errors import DeviceError
from pixie.device.logs import Summarised
from pixie.device.node.keyed import Node
from pixie.device.store.db import at_once
from pixie.device.sync.peers import Incoming
from pixie.homebase.holding import AckTwist, HolderCore
from pixie.protocol.clock import Clock, Entropy
from pixie.protocol.faults import HOLDER_FAULTS, FaultPlan
from pixie.protocol.identity import fingerprint
from pixie.protocol.peerwire import (
    FetchRequest,
    HolderRefusal,
    OffloadRequest,
    PeerMessage,
    Release,
)

log = logging.getLogger("pixie.holder")

CRASH_EXIT = 70  # what a crash fault exits with
_OFFLOAD_FAULTS = [name for name in HOLDER_FAULTS if name != "corrupt-serve"]
_TWISTS = {"ack-wrong-hash": AckTwist.WRONG_HASH, "ack-wrong-id": AckTwist.WRONG_ID}

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
        clock: Clock | None = None,
        entropy: Entropy | None = None,
    ) -> None:
        """``clock`` and ``entropy`` are what the core reads the time and draws
        from: the node's unless given."""
        self.node = node
        self.core = HolderCore(
            node,
            clock=node.clock if clock is None else clock,
            entropy=node.entropy if entropy is None else entropy,
        )
        self.faults = faults or FaultPlan()
        self.crash = crash
        self.dropped: Counter[str] = Counter()
        self.drops = Summarised(log, "requests dropped", level=logging.ERROR)

    @property
    def refused(self) -> dict[str, int]:
        """Requests refused, per reason."""
        return self.core.refused

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
        why = await call(self.core.hold, sender, req, counter)
        if why:
            await reply(sender, self.core.refuse(sender, req, why))
            return
        if name == "crash-after-commit":
            self._crash_now("crash after commit, before the ack")
            return
        twist = _TWISTS.get(name or "")
        if name == "ack-delay" and fault is not None:
            log.warning("fault injected: ack-delay %.3g s for %s", fault.seconds, req.note_id)
            await trio.sleep(fault.seconds)
        if twist is not None:
            log.warning("fault injected: %s for %s", name, req.note_id)
        await reply(sender, self.core.ack(req, twist, entropy=self.core.entropy))
        # Logged after the ack, which waits for nothing but the commit.
        log.info("holding %s (%d bytes) for %s", req.note_id, len(req.body), fingerprint(sender))

    # -- fetch ---------------------------------------------------------------------------

    async def _fetch(self, sender: bytes, req: FetchRequest, reply: Reply, call: Call) -> None:
        body, why = await at_once(self.core.serve, req, otherwise=call)
        if body is None:
            await reply(sender, self.core.refuse(sender, req, why))
            return
        corrupt = bool(self.faults) and self.faults.strikes("corrupt-serve") is not None
        if corrupt:
            log.warning("fault injected: corrupt-serve for %s", req.note_id)
        for part in self.core.parts(req, body, corrupt=corrupt):
            await reply(sender, part)
        log.info("served %s (%d bytes) to %s", req.note_id, len(body), fingerprint(sender))

    # -- release -------------------------------------------------------------------------

    async def _release(
        self, sender: bytes, req: Release, counter: int, reply: Reply, call: Call
    ) -> None:
        why = await call(self.core.let_go, sender, req, counter)
        if why:
            await reply(sender, self.core.refuse(sender, req, why))
            return
        await reply(sender, self.core.released(req))


__all__ = ["CRASH_EXIT", "Holder"]
