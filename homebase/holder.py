"""The holder: the Homebase's side of offloading.

It answers three requests from its siblings (see `pixie.protocol.offload`);
what a request takes is `pixie.homebase.holdsteps`' to say and every decision
is `HolderCore`'s (`pixie.homebase.holding`), both sans-IO and shared with the
simulator; this module only does what the steps name (commits in a worker
thread, replies through the relay) and picks the faults struck into them:

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
from pixie.homebase import holdsteps
from pixie.homebase.holding import HolderCore
from pixie.protocol.clock import Clock, Entropy
from pixie.protocol.faults import HOLDER_FAULTS, FaultPlan
from pixie.protocol.identity import fingerprint
from pixie.protocol.offload import holder_parts
from pixie.protocol.peerwire import (
    FetchRequest,
    OffloadAck,
    OffloadRequest,
    PeerMessage,
    Release,
)

log = logging.getLogger("pixie.holder")

CRASH_EXIT = 70  # what a crash fault exits with
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
        sender, message = incoming.sender, incoming.body.message
        assert isinstance(message, OffloadRequest | FetchRequest | Release)
        steps = holdsteps.answer(sender, message, incoming.body.counter)
        if self.faults:
            steps = holdsteps.faulted(steps, self._pick, self.core.entropy)
        try:
            await self._run(sender, steps, reply, call)
        except _Injected as injected:
            raise injected.raised from None
        except (DeviceError, trio.TooSlowError):
            raise  # the relay or the database: the driver reports those
        except Exception as exc:  # one request must never stop the Homebase
            reason = type(exc).__name__
            self.dropped[reason] += 1
            kind = type(message).__name__
            self.drops.log(reason, "dropped a %s from %s: %s", kind, fingerprint(sender), reason)

    async def _run(self, sender: bytes, steps: holdsteps.Steps, reply: Reply, call: Call) -> None:
        """Do what each step names: commits in a worker thread (``call``),
        replies through the relay (``reply``), each within its deadline."""
        core, result = self.core, None
        body_size = 0  # of the body an offload holds
        while True:
            try:
                step = steps.send(result)
            except StopIteration:
                return
            result = None
            if isinstance(step, holdsteps.Hold):
                result = await call(core.hold, step.sender, step.request, step.counter)
                body_size = len(step.request.body)
            elif isinstance(step, holdsteps.Read):
                result = await at_once(core.serve, step.request, otherwise=call)
            elif isinstance(step, holdsteps.LetGo):
                result = await call(core.let_go, step.sender, step.request, step.counter)
            elif isinstance(step, holdsteps.Reply):
                await reply(sender, step.message)
                if isinstance(step.message, OffloadAck):
                    # Logged after the ack, which waits for nothing but the commit.
                    what = step.message.note_id
                    log.info("holding %s (%d bytes) for %s", what, body_size, fingerprint(sender))
            elif isinstance(step, holdsteps.Refuse):
                await reply(sender, core.refuse(step.sender, step.request, step.reason))
            elif isinstance(step, holdsteps.Serve):
                for part in holder_parts(step.request, step.body):
                    await reply(sender, part)
                log.info(
                    "served %s (%d bytes) to %s",
                    step.request.note_id,
                    len(step.body),
                    fingerprint(sender),
                )
            elif isinstance(step, holdsteps.Crash):
                self._crash_now(step.why)
                return
            elif isinstance(step, holdsteps.Delay):
                await trio.sleep(step.seconds)
            else:
                log.warning("fault injected: %s for %s", step.name, step.note_id)

    def _pick(self, stage: str) -> tuple[str, float] | None:
        """The fault of the plan that strikes at ``stage``, if any."""
        if stage == holdsteps.OFFLOAD:
            fault = self.faults.first_strike(_OFFLOAD_FAULTS)
        else:
            fault = self.faults.strikes("corrupt-serve")
        return None if fault is None else (fault.name, fault.seconds)

    def _crash_now(self, why: str) -> None:
        try:
            self.crash(why)
        except Exception as exc:
            raise _Injected(exc) from exc


__all__ = ["CRASH_EXIT", "Holder"]
