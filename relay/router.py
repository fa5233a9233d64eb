"""Where each Send goes: straight into its recipient's outbox when the
recipient is connected here, or else into this relay's mailboxes (in a fleet:
to the relay the recipient is on, or to JetStream), after the sender's rate
limit; or one by one through the fault plan when there is one.

`Router` holds no connection of its own: `pixie.relay.server.Relay` hands it
the connected clients, the mailboxes, the drop counters and two callbacks for
what is the connection's business (an envelope carried, a Send refused).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from pixie.protocol import relaywire
from pixie.protocol.faults import RELAY_FAULTS, parse_faults

from .config import RelayConfig
from .connection import Connection
from .faults import EnvelopeFaults
from .logs import event
from .mailbox import Mailboxes

if TYPE_CHECKING:
    from .member import FleetMember

# A Send refused for ``reason`` (rate or size), ``count`` of them, at ``now``.
Refuse = Callable[[Connection, str, float, int], None]
Route = Callable[[Connection, bytes, bytes, float], None]
RouteRun = Callable[[Connection, relaywire.Run, float], None]


class Router:
    """Routes Sends for one relay (see the module's docstring)."""

    def __init__(
        self,
        config: RelayConfig,
        *,
        clients: dict[bytes, Connection],
        mailboxes: Mailboxes,
        fleet: FleetMember | None,
        counters: dict[str, int],
        drops: dict[str, int],
        carried: Callable[[Connection], None],
        refuse: Refuse,
    ) -> None:
        self.config = config
        self.counters = counters
        self._clients = clients
        self._mailboxes = mailboxes
        self._drops = drops
        self._carried = carried
        self._refuse = refuse
        # Where an envelope goes whose recipient cannot take it now: this relay's
        # mailboxes, or in a fleet NATS unless the recipient is connected here.
        self._park: Callable[[bytes, bytes, float, bytes], None] = mailboxes.put
        self._fleet = fleet
        if fleet is not None:
            self._park = self._park_in_fleet
            fleet.bind(self._keep_here, self._hand_to_fleet, self._hand_over)
        # Whom each key writes to: a recipient's correspondents keep their place in
        # its mailbox (see `pixie.relay.mailbox`). Noted for every Send routed.
        self._wrote = mailboxes.correspondents.note
        # With a fault plan in force, envelopes go one by one through `faults`
        # instead of the fast path; without one, nothing on the hot path changes.
        self.faults: EnvelopeFaults[Connection] | None = None
        self.route: Route = self._route
        self.route_run: RouteRun = self._route_run
        if config.faults:
            seed = config.fault_seed
            if seed is None:
                seed = secrets.randbits(32)
            plan = parse_faults(config.faults, RELAY_FAULTS, seed=seed)
            if plan:
                self.faults = EnvelopeFaults(
                    plan, self._put, self._lost, reorder_hold=config.reorder_hold
                )
                self.route, self.route_run = self._faulty_route, self._faulty_route_run
                event(logging.INFO, "faults", plan=plan.describe(), seed=seed)

    def _admit(self, conn: Connection, recipient: bytes, size: int, now: float) -> bool:
        """Whether one Send of ``size`` envelope bytes goes on, counted and
        charged either way; a refusal is said to the sender."""
        self.counters["envelopes_in"] += 1
        # Every Send is charged to the rate limit, short ones too (they cost parsing).
        allowed = conn.limit.allow(size, now)
        if size < self.config.min_envelope_bytes:
            self._refuse(conn, "too_short", now, 1)  # no sealed envelope is this short
            return False
        if conn.quiet:
            self._carried(conn)
        if not allowed:
            self._refuse(conn, "rate_limited", now, 1)
            return False
        self._wrote(conn.key, recipient, now)
        return True

    def _route(self, conn: Connection, recipient: bytes, envelope: bytes, now: float) -> None:
        if not self._admit(conn, recipient, len(envelope), now):
            return
        target = self._clients.get(recipient)
        if target is not None and target.live:
            refused = target.outbox.put(relaywire.deliver_frame(conn.key, envelope), True, conn.key)
            if refused is not None:
                self._drops[refused] += 1
        else:
            # Offline, or still draining its mailbox: queue behind what waits there.
            self._park(recipient, envelope, now, conn.key)

    def _route_run(self, conn: Connection, run: relaywire.Run, now: float) -> None:
        """Route Sends to one recipient, as Delivers (``size`` envelope bytes in all),
        exactly as `_route` would one by one: when the rate limit and the outbox
        admit them all, at once."""
        recipient, frames, size = run
        self.counters["envelopes_in"] += len(frames)
        if conn.quiet:  # (runs carry only envelopes of at least the minimum size)
            self._carried(conn)
        allowed = conn.limit.allow_all(len(frames), size, now)
        if allowed:
            self._wrote(conn.key, recipient, now)
        target = self._clients.get(recipient)
        # Offline, or still draining its mailbox: queue behind what waits there.
        outbox = target.outbox if target is not None and target.live else None
        if allowed:
            if outbox is not None:
                if outbox.put_all(frames, sum(map(len, frames)), conn.key):
                    return
            elif (
                self._fleet is not None
                and target is None
                and self._fleet.forward_frames(recipient, conn.key, frames)
            ):
                return  # connected to another relay of the fleet: handed over
        drops = self._drops
        limited = 0
        for frame in frames:
            if not allowed and not conn.limit.allow(relaywire.deliver_envelope_size(frame), now):
                limited += 1
            elif outbox is not None:
                refused = outbox.put(frame, True, conn.key)
                if refused is not None:
                    drops[refused] += 1
            else:
                self._park(recipient, relaywire.deliver_envelope(frame), now, conn.key)
        if limited:
            self._refuse(conn, "rate_limited", now, limited)
        if not allowed and limited < len(frames):
            self._wrote(conn.key, recipient, now)

    # -- routing with a fault plan ----------------------------------------------

    def _faulty_route(
        self, conn: Connection, recipient: bytes, envelope: bytes, now: float
    ) -> None:
        frame = relaywire.deliver_frame(conn.key, envelope)
        self._route_faulted(conn, recipient, frame, len(envelope), now)

    def _faulty_route_run(self, conn: Connection, run: relaywire.Run, now: float) -> None:
        recipient, frames, _ = run
        for frame in frames:
            size = relaywire.deliver_envelope_size(frame)
            self._route_faulted(conn, recipient, frame, size, now)

    def _route_faulted(
        self, conn: Connection, recipient: bytes, frame: bytes, size: int, now: float
    ) -> None:
        """`_route` for one Deliver ``frame`` (``size`` envelope bytes), with the fault
        plan deciding what becomes of it if its recipient is connected."""
        faults = self.faults
        assert faults is not None
        if not self._admit(conn, recipient, size, now):
            return
        target = self._clients.get(recipient)
        if target is not None and target.live:
            faults.forward(conn, target, frame, size)
        else:
            # Offline, or still draining its mailbox: queued unfaulted behind what waits there.
            self._park(recipient, relaywire.deliver_envelope(frame), now, conn.key)

    # -- in a fleet -------------------------------------------------------------

    def _park_in_fleet(self, recipient: bytes, envelope: bytes, now: float, sender: bytes) -> None:
        """A recipient connected here but still draining its mailbox queues behind
        it; any other goes to NATS, or stays here while NATS cannot take it."""
        fleet = self._fleet
        assert fleet is not None
        if recipient in self._clients or not fleet.forward(recipient, sender, envelope):
            self._mailboxes.put(recipient, envelope, now, sender)

    def _keep_here(self, recipient: bytes, sender: bytes, envelope: bytes) -> None:
        """Mail NATS did not take waits in this relay's mailboxes."""
        self._mailboxes.put(recipient, envelope, trio.current_time(), sender)

    def _hand_to_fleet(self) -> None:
        """NATS is back: mail held here for peers not connected here goes to it, so
        they find it on whichever relay they use."""
        fleet = self._fleet
        assert fleet is not None
        now = trio.current_time()
        for recipient in self._mailboxes.holding():
            if recipient in self._clients:
                continue
            mail = self._mailboxes.take(recipient, now, max_count=1 << 30, max_bytes=1 << 62)
            for sender, envelope in mail:
                if not fleet.forward(recipient, sender, envelope):
                    self._mailboxes.put(recipient, envelope, now, sender)

    def _hand_over(self) -> None:
        """Mail held here (NATS was down, or its sender past its share of the
        stream) for a key now connected to another relay goes to that relay."""
        fleet = self._fleet
        assert fleet is not None
        now = trio.current_time()
        for recipient in self._mailboxes.holding():
            if recipient in self._clients or not fleet.hot.elsewhere(recipient):
                continue
            mail = self._mailboxes.take(recipient, now, max_count=1 << 30, max_bytes=1 << 62)
            for sender, envelope in mail:
                if not fleet.hot.send_one(recipient, sender, envelope):
                    self._mailboxes.put(recipient, envelope, now, sender)

    def _put(self, target: Connection, frame: bytes) -> None:
        refused = target.outbox.put(frame, True)
        if refused is not None:
            self._drops[refused] += 1

    def _lost(self, envelopes: int) -> None:
        self._drops["closed"] += envelopes


__all__ = ["Router"]
