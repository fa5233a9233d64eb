"""Injected faults on the relay (`pixie relay --faults SPEC`): envelopes that vanish,
arrive late, arrive twice, or are overtaken.

A relay with a fault plan forwards each envelope to a connected recipient through
`EnvelopeFaults.forward`, one at a time, instead of its fast path. Every such
envelope is one request to the plan (so ``#N`` means the N-th envelope forwarded
live), and at most one fault strikes it, the first in `ORDER` that does:

- ``drop``: it is never delivered;
- ``delay``: it is delivered the rule's seconds later, by the recipient's own
  hold task, so the sender's read loop never waits;
- ``duplicate``: it is delivered twice, back to back;
- ``reorder``: it is held until the next envelope to the same recipient has been
  delivered, then follows it; if none comes within the hold (1 s by default) it
  is delivered anyway.

Envelopes for a recipient that is offline go to its mailbox untouched and are
not counted as requests; control frames (Welcome, Ping, Pong) never reach this
module. Held envelopes belong to the recipient's connection: if it closes first
they are discarded and counted with the relay's ``closed`` drops. Each fault is
logged with sizes and key fingerprints, never envelope bytes.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import trio

from pixie.protocol.faults import FaultPlan

from .logs import event

INFO = logging.INFO

# The order in which an envelope is offered to the faults; the first that strikes wins.
ORDER = ("drop", "delay", "duplicate", "reorder")
# How long a reordered envelope waits for one to overtake it before it goes anyway.
REORDER_HOLD_SECONDS = 1.0


class Peer(Protocol):
    """What this module needs of a connection: a name for the log."""

    @property
    def number(self) -> int: ...

    @property
    def fp(self) -> str: ...


P = TypeVar("P", bound=Peer)


class _Holds:
    """What waits for one recipient: delayed envelopes by due time, then the
    envelopes held back for reordering and when they go regardless."""

    __slots__ = ("delayed", "reorder_due", "reordered", "wake")

    def __init__(self) -> None:
        self.delayed: list[tuple[float, int, bytes]] = []  # a heap: (due, sequence, frame)
        self.reordered: list[bytes] = []
        self.reorder_due = math.inf
        self.wake = trio.Event()

    def __len__(self) -> int:
        return len(self.delayed) + len(self.reordered)

    def next_due(self) -> float:
        return min(self.delayed[0][0] if self.delayed else math.inf, self.reorder_due)


class EnvelopeFaults(Generic[P]):
    """The fault plan in force on one relay and the envelopes it is holding.

    ``put`` queues one Deliver frame for a recipient (the relay counts any drop a
    full outbox makes); ``lost`` counts envelopes discarded because their
    recipient went away. A recipient is `attach`-ed once it has proved its key,
    its `hold_loop` runs beside its reader and writer, and `detach` (after both
    have ended) discards whatever still waits for it."""

    def __init__(
        self,
        plan: FaultPlan,
        put: Callable[[P, bytes], None],
        lost: Callable[[int], None],
        *,
        reorder_hold: float = REORDER_HOLD_SECONDS,
    ) -> None:
        self.plan = plan
        self._put = put
        self._lost = lost
        self._reorder_hold = reorder_hold
        self._order = tuple(name for name in ORDER if name in plan.faults)
        # Faults injected, by name. Not the plan's own ``fired``: that counts every
        # fault that struck an envelope, though only the first of them is applied.
        self._injected = dict.fromkeys(plan.faults, 0)
        self._holds: dict[P, _Holds] = {}
        self._sequence = itertools.count()

    # -- what the stats show ----------------------------------------------------

    def counts(self) -> dict[str, int]:
        """How many times each fault in the plan has been injected."""
        return dict(self._injected)

    def held(self) -> int:
        """Envelopes waiting in a delay or a reorder hold, for every recipient."""
        return sum(map(len, self._holds.values()))

    # -- recipients ---------------------------------------------------------------

    def attach(self, peer: P) -> None:
        self._holds[peer] = _Holds()

    def detach(self, peer: P) -> int:
        """Forget ``peer``; how many envelopes held for it were discarded (and counted)."""
        holds = self._holds.pop(peer, None)
        discarded = len(holds) if holds is not None else 0
        if discarded:
            self._lost(discarded)
            event(INFO, "fault_discarded", conn=peer.number, key=peer.fp, envelopes=discarded)
        return discarded

    async def hold_loop(self, peer: P) -> None:
        """Deliver ``peer``'s delayed and reordered envelopes as they fall due."""
        holds = self._holds[peer]
        while True:
            holds.wake = trio.Event()
            now = trio.current_time()
            while holds.delayed and holds.delayed[0][0] <= now:
                frame = heapq.heappop(holds.delayed)[2]
                self._put(peer, frame)
                self._release(peer, holds)
            if holds.reordered and holds.reorder_due <= now:
                self._release(peer, holds)
            with trio.move_on_at(holds.next_due()):
                await holds.wake.wait()

    # -- one envelope -------------------------------------------------------------

    def forward(self, sender: P, peer: P, frame: bytes, size: int) -> None:
        """Deliver one Deliver ``frame`` (``size`` envelope bytes) from ``sender`` to
        the connected ``peer``, or not, as the plan decides."""
        fault = self.plan.first_strike(self._order)
        holds = self._holds.get(peer)
        if fault is None:
            self._put(peer, frame)
            if holds is not None and holds.reordered:
                self._release(peer, holds)
            return
        name = fault.name
        self._injected[name] += 1
        event(
            INFO,
            "fault",
            fault=name,
            conn=sender.number,
            key=sender.fp,
            to=peer.fp,
            size=size,
            **({"seconds": fault.seconds} if fault.seconds else {}),
        )
        if name == "drop":
            return
        if name == "duplicate":
            self._put(peer, frame)
            self._put(peer, frame)
            if holds is not None and holds.reordered:
                self._release(peer, holds)
            return
        if holds is None:  # its connection is closing: nobody is left to deliver it later
            self._lost(1)
            return
        if name == "delay":
            due = trio.current_time() + fault.seconds
            heapq.heappush(holds.delayed, (due, next(self._sequence), frame))
        else:  # reorder
            if not holds.reordered:
                holds.reorder_due = trio.current_time() + self._reorder_hold
            holds.reordered.append(frame)
        holds.wake.set()

    def _release(self, peer: P, holds: _Holds) -> None:
        """The envelopes held back for reordering, now that one has overtaken them
        (or their hold is over)."""
        frames, holds.reordered = holds.reordered, []
        holds.reorder_due = math.inf
        for frame in frames:
            self._put(peer, frame)


__all__ = ["ORDER", "REORDER_HOLD_SECONDS", "EnvelopeFaults", "Peer"]
