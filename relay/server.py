"""The relay server: prove keys, route sealed envelopes, hold mailboxes, outlast anyone.

A client proves it holds the private key of the identity it claims (it signs the
relay's fresh random challenge); only then may it send, and it only ever
receives envelopes addressed to that key. The relay never holds a key and never
looks inside an envelope: it sees a recipient key, a size and a time.

Everything a client can make the relay hold is bounded, and every bound drops
rather than blocks or grows: outboxes (per connection and all together),
half-received frames (all together; before the handshake, 1 KiB each),
mailboxes (per recipient and all together), a token bucket per client, the
number of connections, and deadlines on the handshake, on idleness and on any
frame once begun (slow-loris). With the defaults the relay holds at most about
256 MiB of mail, 512 MiB of outboxes and 256 MiB of partial frames, plus 24 MiB
of whom each key writes to (see `pixie.relay.mailbox`), one write batch and a
fixed few kilobytes per connection, however keys are minted.
Whatever goes wrong on one connection ends that connection, is counted, and is
logged by key fingerprint and size, never by content.

`Relay.handle` serves one `trio.abc.Stream`, so tests drive it over memory
streams with a mock clock; `Relay.serve` (and `serve_relay`) runs the TCP accept
loop, optionally behind TLS, in one nursery for the relay's lifetime.

With a fault plan (``RelayConfig.faults``, see `pixie.relay.faults`) envelopes to
connected recipients are routed one by one through it instead of the fast path,
and may be dropped, delayed, duplicated or reordered on purpose.

In a fleet (``Relay(fleet=...)``, see `pixie.relay.fleet` and `pixie.relay.member`)
an envelope whose recipient is connected to another relay is handed to that
relay over core NATS (`pixie.relay.hotpath`); one whose recipient is connected
nowhere goes to NATS JetStream instead of this relay's mailboxes, and each
connected peer's mail waiting there is pulled into its outbox. Without a fleet
nothing here changes.
"""

from __future__ import annotations

import itertools
import logging
import math
import secrets
import ssl
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from pixie.protocol import relaywire
from pixie.protocol.errors import ProtocolError
from pixie.protocol.faults import RELAY_FAULTS, FaultSpecError, parse_faults
from pixie.protocol.framing import MAX_FRAME_BYTES, MIN_ENVELOPE_BYTES, encode_frame
from pixie.protocol.keyprint import fingerprint as key_fingerprint
from pixie.protocol.proof import verify_key_proof

from .errors import RelayError
from .faults import REORDER_HOLD_SECONDS, EnvelopeFaults
from .logs import Throttle, event
from .mailbox import Mailboxes, MailboxLimits
from .ratelimit import SendLimit

if TYPE_CHECKING:
    from .member import FleetMember

INFO, ERROR = logging.INFO, logging.ERROR

RECEIVE_CHUNK = 1 << 16
# A writer hands the kernel up to this much at once: small envelopes are batched
# into few system calls, and a burst cannot build one huge joined buffer.
WRITE_BATCH_BYTES = 1 << 18
# Hello and Prove are under 120 bytes. Before a client has proved its key the
# relay buffers no more than this for it, not a whole 1 MiB frame.
HANDSHAKE_BUFFER_BYTES = 1024
# What queueing one frame in an outbox costs beyond its bytes (the bytes object's
# header and its place in the list: measured at about 42 bytes; rounded up). It is
# charged against the outbox bounds, so tiny frames cannot hold more than they say.
FRAME_OVERHEAD = 64
# The senders an outbox files a fleet's deliveries under, which no key can be
# (a key is 32 bytes and these are not): FLEET_SENDER for mail from JetStream,
# and HOT_SENDER and a sender's key for mail from that sender that another
# relay handed over directly (`pixie.relay.hotpath`), so each such sender keeps
# its own share of the outbox. Their frames are counted as they are taken
# (`Outbox.taken`), for the fleet to report them once written.
FLEET_SENDER = b"\x00"
HOT_SENDER = b"\x01"
# Told apart from keys by length alone (a key may begin with any byte).
_TRACKED = frozenset((len(FLEET_SENDER), len(HOT_SENDER) + relaywire.KEY_BYTES))


def fingerprint(key: bytes) -> str:
    """The same fingerprint peers show in `pixie status`; never the key itself."""
    return key_fingerprint(key)


@dataclass(frozen=True, slots=True)
class RelayConfig:
    host: str | None = "127.0.0.1"  # None or "" listens on every interface
    port: int = 0  # 0 picks a free port; `serve` reports the one it got
    ssl_context: ssl.SSLContext | None = None
    max_connections: int = 10_000
    handshake_timeout: float = 5.0  # Hello to Prove, in all
    idle_timeout: float = 120.0  # no frame from the client for this long closes it
    frame_timeout: float = 30.0  # a frame once begun must be complete within this
    close_grace: float = 1.0  # time to say Refuse to a client before hanging up
    outbox_frames: int = 256  # per connection, waiting to be written
    outbox_bytes: int = 8 << 20  # per connection, FRAME_OVERHEAD per frame included
    # A write the client does not take within this long closes its connection: a
    # reader that stops reading loses its own connection, its mail goes to its mailbox.
    write_timeout: float = 30.0
    # Relay-wide bounds, so that many connections cannot add up to unbounded memory:
    outbox_total_bytes: int = 512 << 20  # queued in all outboxes together
    # Sends whose envelope is shorter than the smallest sealed envelope are dropped.
    min_envelope_bytes: int = MIN_ENVELOPE_BYTES
    receive_total_bytes: int = 256 << 20  # frames half-received on all connections
    envelopes_per_second: float = 500.0  # per client
    envelope_burst: float = 2_000.0
    bytes_per_second: float = 16 << 20
    byte_burst: float = 64 << 20
    # A client whose Sends are dropped for rate or size more than `abuse_factor`
    # times its allowance (its envelope burst, or its rate over the window if more)
    # within `abuse_window` seconds is disconnected ("abusive"): flooding costs it a
    # fresh handshake, not the relay the parsing of everything it cares to send.
    abuse_window: float = 1.0
    abuse_factor: float = 4.0
    mailbox: MailboxLimits = field(default_factory=MailboxLimits)
    stats_interval: float = 60.0  # seconds between stats log lines
    sweep_interval: float = 10.0  # seconds between sweeps for expired mail
    # Faults to inject into forwarding (a `pixie.protocol.faults` SPEC; "" for none),
    # the seed of their dice (None: a random one, logged), and how long a reordered
    # envelope waits to be overtaken. Each `Relay` starts its own plan afresh.
    faults: str = ""
    fault_seed: int | None = None
    reorder_hold: float = REORDER_HOLD_SECONDS

    def __post_init__(self) -> None:
        for name in (
            "max_connections",
            "handshake_timeout",
            "idle_timeout",
            "frame_timeout",
            "close_grace",
            "outbox_frames",
            "outbox_bytes",
            "write_timeout",
            "outbox_total_bytes",
            "receive_total_bytes",
            "envelopes_per_second",
            "envelope_burst",
            "bytes_per_second",
            "byte_burst",
            "abuse_window",
            "abuse_factor",
            "stats_interval",
            "sweep_interval",
            "reorder_hold",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
                raise RelayError(f"{name} must be a positive number, not {value!r}")
        if isinstance(self.min_envelope_bytes, bool) or not (
            0 <= self.min_envelope_bytes <= relaywire.MAX_ENVELOPE_BYTES
        ):
            raise RelayError(
                f"min_envelope_bytes must be from 0 to {relaywire.MAX_ENVELOPE_BYTES}, "
                f"not {self.min_envelope_bytes!r}"
            )
        if not 0 <= self.port <= 65535:
            raise RelayError(f"port must be from 0 to 65535, not {self.port}")
        if self.envelope_burst < 1 or self.byte_burst < relaywire.MAX_ENVELOPE_BYTES:
            raise RelayError("bursts must admit at least one envelope of the largest size")
        for name in ("outbox_bytes", "outbox_total_bytes", "receive_total_bytes"):
            if getattr(self, name) < MAX_FRAME_BYTES:
                raise RelayError(f"{name} must hold at least one frame ({MAX_FRAME_BYTES})")
        try:
            parse_faults(self.faults, RELAY_FAULTS)
        except FaultSpecError as exc:
            raise RelayError(f"bad --faults: {exc}") from None


@dataclass(frozen=True, slots=True)
class Hangup:
    """Why a connection ends: a short reason (counted and logged) and what the
    client is told in a `Refuse` before the close, if anything."""

    reason: str
    refuse: str | None = None


EOF = Hangup("eof")
LOST = Hangup("lost")
BUSY = Hangup("busy", "busy")
REPLACED = Hangup("replaced", "replaced by a newer connection for this key")
SHUTDOWN = Hangup("shutdown", "relay shutting down")
FAILED = Hangup("error", "internal error")
TRUNCATED = Hangup("truncated", "connection ended inside a frame")
# Every connection's half-received frames together are over the relay's budget.
OVERLOADED = Hangup("overloaded", "relay overloaded; try again later")
# The relay was at its connection cap and this connection had never carried an envelope.
EVICTED = Hangup("evicted", "relay full: an idle connection made room for a newer one")
# The client took none of a write for `write_timeout`: it is not reading.
STALLED = Hangup("stalled")
# The client's Sends were dropped for rate or size far beyond its allowance.
ABUSIVE = Hangup("abusive", "too many envelopes over the rate limit or too short")


def _frame(message: relaywire.RelayMessage) -> bytes:
    return encode_frame(relaywire.encode(message))


class ByteBudget:
    """Bytes held for one purpose across every connection, against one limit, and
    how many connections hold any (for `Outbox`'s fair share)."""

    __slots__ = ("holders", "limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.holders = 0


class Outbox:
    """Frames waiting for one connection's writer, bounded in count and bytes for
    the connection and in bytes for all outboxes together (a shared budget).

    A full outbox refuses the frame and says which bound refused it (the caller
    counts the drop): slow readers must never make the relay hold more, nor
    stall a sender. Frames a writer has taken are in flight, outside both
    bounds, but a writer takes at most one batch at a time. Each frame is
    charged its bytes plus `FRAME_OVERHEAD`.

    The shared budget is first come, first served up to half its limit; past
    that, an outbox may grow only while it holds less than an equal share of
    the other half among the outboxes holding anything ("outbox_share"), so a
    few slow readers cannot take the whole budget from everyone else. Within
    one outbox the senders share alike: with k senders queued, none may hold
    more than 1/(k+1) of its frames or bytes ("outbox_sender"), so room always
    remains for one more, and junk for a busy recipient cannot crowd out an
    honest sender's envelopes (a sender holding nothing may always add one
    frame; the relay's own frames are not counted).

    Each sender has its own queue, and a writer takes them in turn, one frame
    of each sender in each round (the relay's own frames, which carry no
    envelope, go first): an honest sender's envelope waits behind at most one
    frame of each other sender, never behind hundreds of one flooder's. Within
    a sender the order is kept. When one sender alone has frames queued, as
    usual, its whole queue is taken at once."""

    __slots__ = (
        "_controls",
        "_count",
        "_queues",
        "_ready",
        "_shares",
        "budget",
        "bytes",
        "max_bytes",
        "max_frames",
        "taken",
    )

    def __init__(self, max_frames: int, max_bytes: int, budget: ByteBudget) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self.budget = budget
        self._controls: list[bytes] = []  # the relay's own frames (Welcome, Ping, Pong)
        # Each sender's frames in order (the relay's own envelopes: b""), in the
        # order the senders are served, and [frames, bytes charged] per sender.
        self._queues: dict[bytes, list[bytes]] = {}
        self._shares: dict[bytes, list[int]] = {}
        self._count = 0
        self._ready = trio.Event()
        self.bytes = 0
        # Fleet deliveries (`FLEET_SENDER`, `HOT_SENDER` + key) taken for writing
        # and not yet reported written, by sender: the fleet settles them only
        # once written.
        self.taken: dict[bytes, int] = {}

    def __len__(self) -> int:
        return self._count

    def _refusal(self, count: int, charge: int, sender: bytes) -> str | None:
        """Why ``count`` more frames charging ``charge`` bytes cannot be queued, if so."""
        if self._count + count > self.max_frames or self.bytes + charge > self.max_bytes:
            return "outbox_full"
        if sender:
            share = self._shares.get(sender)
            held, size = share if share is not None else (0, 0)
            # One more than the senders queued (this one included) share the outbox, so
            # room always remains for a newcomer; a sender holding nothing may add one.
            room = len(self._shares) + (share is None) + 1 - (b"" in self._shares)
            if (held or count > 1) and (
                room * (held + count) > self.max_frames or room * (size + charge) > self.max_bytes
            ):
                return "outbox_sender"
        budget = self.budget
        used = budget.used + charge
        if used > budget.limit:
            return "outboxes_full"
        if 2 * used > budget.limit:
            holders = budget.holders + (not self.bytes)
            if 2 * holders * (self.bytes + charge) > budget.limit:
                return "outbox_share"
        return None

    def _add(self, count: int, charge: int) -> None:
        if not self.bytes:
            self.budget.holders += 1
        self._count += count
        self.bytes += charge
        self.budget.used += charge
        self._ready.set()

    def _queue(self, sender: bytes, count: int, charge: int) -> list[bytes]:
        share = self._shares.get(sender)
        if share is None:
            self._shares[sender] = [count, charge]
            queue: list[bytes] = []
            self._queues[sender] = queue
            return queue
        share[0] += count
        share[1] += charge
        return self._queues[sender]

    def _sub(self, charge: int) -> None:
        self.bytes -= charge
        self.budget.used -= charge
        if not self.bytes:
            self.budget.holders -= 1

    def put(self, frame: bytes, envelope: bool, sender: bytes = b"") -> str | None:
        """Queue ``frame`` from ``sender`` (a key; b"" for the relay's own frames);
        None if queued, else the drop reason."""
        charge = len(frame) + FRAME_OVERHEAD
        refused = self._refusal(1, charge, sender)
        if refused is not None:
            return refused
        if envelope:
            self._queue(sender, 1, charge).append(frame)
        else:
            self._controls.append(frame)
        self._add(1, charge)
        return None

    def put_all(self, frames: list[bytes], size: int, sender: bytes) -> bool:
        """Queue every one of ``frames`` (envelopes from ``sender``, ``size`` bytes in
        all) if all fit; if not, queue none and return False (the caller then puts
        them one by one)."""
        charge = size + len(frames) * FRAME_OVERHEAD
        if self._refusal(len(frames), charge, sender) is not None:
            return False
        self._queue(sender, len(frames), charge).extend(frames)
        self._add(len(frames), charge)
        return True

    async def take(self, max_bytes: int) -> tuple[list[bytes], int]:
        """Wait for frames; return some (at least one, and no more than ``max_bytes``
        charged unless that one is bigger) and how many carry envelopes."""
        while not self._count:
            self._ready = trio.Event()
            await self._ready.wait()
        out = self._controls
        self._controls = []
        total = sum(len(frame) for frame in out) + len(out) * FRAME_OVERHEAD
        controls = len(out)
        queues = self._queues
        if len(queues) == 1 and self.bytes <= max_bytes:  # one sender, all of it: as it is
            ((sender, queue),) = queues.items()
            out += queue
            if len(sender) in _TRACKED:
                self.taken[sender] = self.taken.get(sender, 0) + len(queue)
            queues.clear()
            del self._shares[sender]
            total = self.bytes
        elif queues:
            total = self._take_in_turn(out, total, max_bytes)
        self._count -= len(out)
        self._sub(total)
        return out, len(out) - controls

    def _take_in_turn(self, out: list[bytes], total: int, max_bytes: int) -> int:
        """Move frames into ``out`` one of each sender a round, while they fit in
        ``max_bytes`` (with ``total`` charged already); return the total charged."""
        queues, shares = self._queues, self._shares
        senders = list(queues)
        taken = dict.fromkeys(senders, 0)
        charged = dict.fromkeys(senders, 0)
        served: list[bytes] = []  # in the last, unfinished round
        full = False
        while senders and not full:
            served = []
            still = []
            for sender in senders:
                queue = queues[sender]
                at = taken[sender]
                charge = len(queue[at]) + FRAME_OVERHEAD
                if out and total + charge > max_bytes:
                    full = True
                    break
                out.append(queue[at])
                total += charge
                taken[sender] = at + 1
                charged[sender] += charge
                served.append(sender)
                if at + 1 < len(queue):
                    still.append(sender)
            senders = still
        for sender, count in taken.items():
            if not count:
                continue
            if len(sender) in _TRACKED:
                self.taken[sender] = self.taken.get(sender, 0) + count
            share = shares[sender]
            if count == share[0]:
                del queues[sender], shares[sender]
                continue
            del queues[sender][:count]
            share[0] -= count
            share[1] -= charged[sender]
        if full:  # who was served in the unfinished round waits for the others next time
            for sender in served:
                if sender in queues:
                    queues[sender] = queues.pop(sender)
                    shares[sender] = shares.pop(sender)
        return total

    def clear(self) -> int:
        """Discard everything; return how many envelopes were lost with it (the
        fleet's own are not: it hands those back for delivery elsewhere)."""
        envelopes = sum(len(q) for s, q in self._queues.items() if len(s) not in _TRACKED)
        self._controls = []
        self._queues.clear()
        self._shares.clear()
        self._count = 0
        if self.bytes:
            self._sub(self.bytes)
        return envelopes


class _Connection:
    __slots__ = (
        "abuse_since",
        "abused",
        "clean",
        "decoder",
        "fp",
        "frame_started_at",
        "hangup",
        "held",
        "key",
        "last_frame_at",
        "limit",
        "live",
        "number",
        "opened_at",
        "outbox",
        "pending",
        "pinged",
        "quiet",
        "received",
        "scope",
        "sent",
        "stream",
        "unsent",
    )

    def __init__(
        self,
        number: int,
        stream: trio.abc.Stream,
        config: RelayConfig,
        outboxes: ByteBudget,
        shapes: dict[int, relaywire.Shape],
    ) -> None:
        now = trio.current_time()
        self.number = number
        self.stream = stream
        self.decoder = relaywire.ForwardDecoder(MAX_FRAME_BYTES, shapes, config.min_envelope_bytes)
        self.pending: list[relaywire.Item] = []  # frames that arrived with the Prove
        self.key = b""
        self.fp = "-"
        self.outbox = Outbox(config.outbox_frames, config.outbox_bytes, outboxes)
        self.held = 0  # bytes of a half-received frame, counted in the relay's budget
        self.received = self.sent = 0  # bytes, for the log
        # False while the mailbox drains: envelopes for this key queue behind it.
        self.live = False
        self.scope = trio.CancelScope()
        self.hangup: Hangup | None = None
        self.clean = True  # no frame half-written: a Refuse can still follow
        self.unsent = 0  # envelopes handed to a write that has not finished
        self.opened_at = self.last_frame_at = self.frame_started_at = now
        self.pinged = False
        # Sends dropped for rate or size since ``abuse_since`` (see `Relay._refuse`).
        self.abuse_since = now
        self.abused = 0
        # True until an envelope goes either way: only such connections are evicted.
        self.quiet = True
        self.limit = SendLimit(
            config.envelopes_per_second,
            config.envelope_burst,
            config.bytes_per_second,
            config.byte_burst,
            now,
        )

    def close(self, hangup: Hangup) -> None:
        """End this connection from any task; the first reason given wins."""
        if self.hangup is None:
            self.hangup = hangup
        self.scope.cancel()


class Relay:
    """One relay's state: who is connected, what waits for whom, and the counters."""

    def __init__(
        self,
        config: RelayConfig | None = None,
        *,
        mailboxes: Mailboxes | None = None,
        fleet: FleetMember | None = None,
    ) -> None:
        """``mailboxes`` replaces the store of waiting envelopes (by default one
        built from ``config.mailbox``); a test may hand in its own. With ``fleet``
        this relay is one of many sharing NATS (see `pixie.relay.fleet`)."""
        self.config = config or RelayConfig()
        self._mailboxes = mailboxes if mailboxes is not None else Mailboxes(self.config.mailbox)
        # Where an envelope goes whose recipient cannot take it now: this relay's
        # mailboxes, or in a fleet NATS unless the recipient is connected here.
        self._park: Callable[[bytes, bytes, float, bytes], None] = self._mailboxes.put
        self._fleet = fleet
        if fleet is not None:
            self._park = self._park_in_fleet
            fleet.bind(self._keep_here, self._hand_to_fleet, self._hand_over)
        # Whom each key writes to: a recipient's correspondents keep their place in
        # its mailbox (see `pixie.relay.mailbox`). Noted for every Send routed.
        self._wrote = self._mailboxes.correspondents.note
        self._outboxes = ByteBudget(self.config.outbox_total_bytes)
        self._receiving = ByteBudget(self.config.receive_total_bytes)
        self._shapes: dict[int, relaywire.Shape] = {}  # what Sends of each frame size share
        self._clients: dict[bytes, _Connection] = {}
        self._open: set[_Connection] = set()
        # Connections that have carried no envelope yet, oldest first: the ones that
        # make room at the connection cap (see `_evict`). Those still in the handshake
        # are ordered by when they opened, the rest by when they proved their key.
        self._unproven: dict[_Connection, None] = {}
        self._quiet: dict[_Connection, None] = {}
        # Per-connection events (rejections above all) are summarised past a few a
        # minute of each kind, so a flood grows the log by a bounded amount.
        self._log = Throttle(trio.current_time)
        self._numbers = itertools.count(1)
        self._ping_tokens = itertools.count(1)
        self._scope: trio.CancelScope | None = None
        self._closing = False
        self.counters: dict[str, int] = dict.fromkeys(
            (
                "connections_total",
                "refused_busy",
                "evicted",
                "auth_ok",
                "auth_failures",
                "envelopes_in",
                "envelopes_delivered",
                "bytes_in",
                "bytes_out",
                "malformed_frames",
                "abusive",
                "errors",
            ),
            0,
        )
        config = self.config
        self._abuse_limit = config.abuse_factor * max(
            config.envelope_burst, config.envelopes_per_second * config.abuse_window
        )
        self._drops = dict.fromkeys(
            (
                "rate_limited",
                "too_short",
                "outbox_full",
                "outbox_share",
                "outbox_sender",
                "outboxes_full",
                "closed",
                "pong",
            ),
            0,
        )
        self._closes: dict[str, int] = {}
        # With a fault plan in force, envelopes go one by one through `_faults`
        # instead of the fast path; without one, nothing on the hot path changes.
        self._faults: EnvelopeFaults[_Connection] | None = None
        if self.config.faults:
            seed = self.config.fault_seed
            if seed is None:
                seed = secrets.randbits(32)
            plan = parse_faults(self.config.faults, RELAY_FAULTS, seed=seed)
            if plan:
                self._faults = EnvelopeFaults(
                    plan, self._put, self._lost, reorder_hold=self.config.reorder_hold
                )
                event(INFO, "faults", plan=plan.describe(), seed=seed)

    # -- what tests and the stats log see -------------------------------------

    def stats(self) -> dict[str, Any]:
        mail = self._mailboxes
        fleet = {} if self._fleet is None else {"fleet": self._fleet.stats()}
        return {
            **fleet,
            **self.counters,
            "connections_open": len(self._open),
            "connections_authenticated": len(self._clients),
            "envelopes_mailboxed": mail.accepted,
            "mailbox_envelopes": mail.envelopes,
            "mailbox_bytes": mail.bytes,
            "mailbox_recipients": mail.recipients,
            "outbox_frames": sum(len(c.outbox) for c in self._open),
            "outbox_bytes": self._outboxes.used,
            "receive_buffer_bytes": self._receiving.used,
            "drops": {**self._drops, **mail.drops},
            "closes": dict(sorted(self._closes.items())),
            **self._fault_stats(),
        }

    def _fault_stats(self) -> dict[str, Any]:
        if self._faults is None:
            return {}
        # Injected faults by name, and envelopes waiting in a delay or reorder hold.
        return {"faults": self._faults.counts(), "fault_held": self._faults.held()}

    def log_stats(self, *, final: bool = False) -> None:
        self._log.flush()
        event(INFO, "stats", final=final, **self.stats())

    # -- the accept loop ------------------------------------------------------

    async def serve(
        self,
        *,
        listeners: list[trio.SocketListener] | None = None,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept and serve clients until `shutdown` (or cancellation); report the port.

        Listener errors (address in use, permission) raise `OSError` before
        anything starts."""
        if listeners is None:
            listeners = await trio.open_tcp_listeners(
                self.config.port, host=self.config.host or None
            )
        address = listeners[0].socket.getsockname()
        port: int = address[1]
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                if self._closing:
                    nursery.cancel_scope.cancel()
                # Handlers run in this same nursery: one nursery for the relay's lifetime.
                # serve_listeners closes the listeners and rides out EMFILE on accept.
                await nursery.start(
                    partial(
                        trio.serve_listeners, self._accepted, listeners, handler_nursery=nursery
                    )
                )
                nursery.start_soon(self._every, self.config.stats_interval, self.log_stats)
                nursery.start_soon(self._every, self.config.sweep_interval, self._sweep)
                if self._fleet is not None:
                    nursery.start_soon(self._fleet.run)
                event(
                    INFO,
                    "listening",
                    host=address[0],
                    port=port,
                    tls=self.config.ssl_context is not None,
                    max_connections=self.config.max_connections,
                )
                task_status.started(port)
        finally:
            self.log_stats(final=True)

    def shutdown(self) -> None:
        """Stop accepting, tell every client the relay is going, and let `serve` return."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()

    async def _every(self, interval: float, job: Callable[[], object]) -> None:
        while True:
            await trio.sleep(interval)
            job()

    def _sweep(self) -> None:
        self._mailboxes.expire(trio.current_time())

    async def _accepted(self, stream: trio.SocketStream) -> None:
        if self.config.ssl_context is None:
            await self.handle(stream)
        else:
            # The TLS handshake runs inside the first read, under the relay handshake deadline.
            await self.handle(trio.SSLStream(stream, self.config.ssl_context, server_side=True))

    # -- one connection -------------------------------------------------------

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one client to the end. Nothing it does escapes this call: every
        failure is a counted, logged hangup of this connection alone."""
        try:
            await self._handle(stream)
        except Exception as exc:  # a failure while setting up or tearing down
            self.counters["errors"] += 1
            self._log.event(ERROR, "connection_error", type(exc).__name__, error=type(exc).__name__)
            with suppress(Exception):
                await trio.aclose_forcefully(stream)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        self.counters["connections_total"] += 1
        conn = _Connection(next(self._numbers), stream, self.config, self._outboxes, self._shapes)
        if len(self._open) >= self.config.max_connections and not self._evict():
            self.counters["refused_busy"] += 1
            self._closes["busy"] = self._closes.get("busy", 0) + 1
            await self._hang_up(conn, BUSY)
            return
        self._open.add(conn)
        self._unproven[conn] = None
        try:
            with conn.scope:
                await self._serve(conn)
        except Exception as exc:
            self._failed(conn, exc)
        finally:
            self._open.discard(conn)
            self._unproven.pop(conn, None)
            self._quiet.pop(conn, None)
            if self._clients.get(conn.key) is conn:
                del self._clients[conn.key]
            if self._faults is not None:
                self._faults.detach(conn)  # counts what it held for conn as closed drops
            self._drops["closed"] += conn.outbox.clear() + conn.unsent
            self._receiving.used -= conn.held
            hangup = conn.hangup or (SHUTDOWN if self._closing else LOST)
            self._closes[hangup.reason] = self._closes.get(hangup.reason, 0) + 1
            await self._hang_up(conn, hangup)
            self._log.event(
                INFO,
                "closed",
                hangup.reason,
                conn=conn.number,
                key=conn.fp,
                reason=hangup.reason,
                seconds=round(trio.current_time() - conn.opened_at, 3),
                received=conn.received,
                sent=conn.sent,
            )

    def _evict(self) -> bool:
        """At the connection cap, close the longest-open connection that has carried no
        envelope either way (still in the handshake, or proven but quiet) to make room
        for a newcomer; False if every connection has carried one (the newcomer is
        then refused busy). Minted keys cost nothing, so connections that have done
        nothing give way first; a peer evicted before its first envelope reconnects."""
        for candidates in self._oldest_first():
            while candidates:
                conn = next(iter(candidates))
                del candidates[conn]
                if conn.hangup is None:
                    self.counters["evicted"] += 1
                    conn.close(EVICTED)
                    return True
        return False

    def _oldest_first(self) -> list[dict[_Connection, None]]:
        unproven, quiet = self._unproven, self._quiet
        if unproven and quiet:
            first = next(iter(unproven)).opened_at <= next(iter(quiet)).opened_at
            return [unproven, quiet] if first else [quiet, unproven]
        return [unproven, quiet]

    def _carried(self, conn: _Connection) -> None:
        """``conn`` has carried an envelope: it is no longer quiet, nor evicted."""
        conn.quiet = False
        self._quiet.pop(conn, None)

    async def _serve(self, conn: _Connection) -> None:
        with trio.move_on_after(self.config.handshake_timeout) as deadline:
            try:
                proven = await self._authenticate(conn)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                proven = LOST  # includes a TLS handshake that failed
        if deadline.cancelled_caught:
            proven = Hangup("handshake_timeout", "handshake not finished in time")
        if isinstance(proven, Hangup):
            self.counters["auth_failures"] += 1
            conn.hangup = proven
            # The key here is only claimed (or "-" if no Hello came): it was never proven.
            self._log.event(
                INFO,
                "auth_failed",
                proven.reason,
                conn=conn.number,
                key=conn.fp,
                reason=proven.reason,
            )
            return
        self.counters["auth_ok"] += 1
        conn.key, conn.fp = proven, fingerprint(proven)
        self._unproven.pop(conn, None)
        if conn.hangup is None:  # not already evicted
            self._quiet[conn] = None
        queued = self._mailboxes.count(proven, trio.current_time())
        replaced = self._clients.get(proven)
        self._clients[proven] = conn
        if replaced is not None:
            replaced.close(REPLACED)
        self._log.event(INFO, "authenticated", "ok", conn=conn.number, key=conn.fp, queued=queued)
        async with trio.open_nursery() as nursery:
            if self._faults is not None:
                # Before the writer can make conn live: it holds conn's delayed envelopes.
                self._faults.attach(conn)
                nursery.start_soon(self._guarded, conn, partial(self._faults.hold_loop, conn))
            nursery.start_soon(self._guarded, conn, partial(self._write_loop, conn, queued))
            nursery.start_soon(self._guarded, conn, partial(self._read_loop, conn))
            if self._fleet is not None:
                nursery.start_soon(self._guarded, conn, partial(self._fleet.deliver, conn))

    async def _guarded(self, conn: _Connection, job: Callable[[], Any]) -> None:
        # Each half of a connection ends it on any error, so no exception ever
        # reaches the nursery and none can mix with a cancellation on its way out.
        try:
            await job()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            conn.close(LOST)
        except Exception as exc:
            self._failed(conn, exc)

    def _failed(self, conn: _Connection, exc: BaseException) -> None:
        self.counters["errors"] += 1
        # Type and place only: an exception's text could quote what a client sent.
        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        self._log.event(
            ERROR,
            "connection_error",
            type(exc).__name__,
            conn=conn.number,
            key=conn.fp,
            error=type(exc).__name__,
            at=f"{Path(where[0].filename).name}:{where[0].lineno}" if where else "-",
        )
        # A Refuse still follows unless the failure left a frame half-written.
        conn.close(FAILED)

    async def _hang_up(self, conn: _Connection, hangup: Hangup) -> None:
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.config.close_grace
            if hangup.refuse is not None and conn.clean:
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    data = _frame(relaywire.Refuse(hangup.refuse))
                    await conn.stream.send_all(data)
                    conn.sent += len(data)
                    self.counters["bytes_out"] += len(data)
            await trio.aclose_forcefully(conn.stream)

    # -- the handshake --------------------------------------------------------

    async def _authenticate(self, conn: _Connection) -> bytes | Hangup:
        hello = await self._next_message(conn)
        if isinstance(hello, Hangup):
            return hello
        if not isinstance(hello, relaywire.Hello):
            return self._unexpected(hello, "Hello")
        conn.fp = fingerprint(hello.key)
        if hello.version != relaywire.RELAY_VERSION:
            return Hangup(
                "version",
                f"relay version {hello.version} is not spoken here; "
                f"this relay speaks {relaywire.RELAY_VERSION}",
            )
        if conn.pending:
            self.counters["malformed_frames"] += 1
            return Hangup("unexpected", "frames sent before the challenge")
        nonce = secrets.token_bytes(relaywire.NONCE_BYTES)
        await self._write(conn, [_frame(relaywire.Challenge(nonce))], 0)
        proof = await self._next_message(conn)
        if isinstance(proof, Hangup):
            return proof
        if not isinstance(proof, relaywire.Prove):
            return self._unexpected(proof, "Prove")
        if not verify_key_proof(hello.key, nonce, proof.signature):
            return Hangup("bad_signature", "signature does not prove the key")
        return hello.key

    def _unexpected(self, message: relaywire.RelayMessage, wanted: str) -> Hangup:
        self.counters["malformed_frames"] += 1
        return Hangup("unexpected", f"expected {wanted}, got {type(message).__name__}")

    async def _next_message(self, conn: _Connection) -> relaywire.RelayMessage | Hangup:
        """One handshake message; anything after it waits in ``conn.pending``."""
        if not conn.pending:
            got = await self._receive(conn)
            if isinstance(got, Hangup):
                return got
            conn.pending = got
        frame = conn.pending.pop(0)
        assert isinstance(frame, bytes)  # Sends are only parsed as they arrive after the handshake
        return self._decode(frame)

    def _decode(self, frame: bytes) -> relaywire.RelayMessage | Hangup:
        try:
            return relaywire.decode(frame)
        except ProtocolError as exc:
            return self._malformed(exc)

    def _malformed(self, exc: ProtocolError) -> Hangup:
        self.counters["malformed_frames"] += 1
        return Hangup("malformed", f"malformed frame: {exc}")

    # -- reading --------------------------------------------------------------

    async def _receive(
        self, conn: _Connection, timer: trio.CancelScope | None = None
    ) -> list[relaywire.Item] | Hangup:
        """The next complete frames from the client, or why there will be none.

        After the handshake three clocks run, on ``timer`` (the caller handles it
        going off, see `_timed_out`): a frame once begun must finish within
        ``frame_timeout``; a silent client is pinged at half the idle timeout and
        closed at the whole of it. During the handshake (no ``timer``) its own
        overall deadline, set by the caller, is the only clock."""
        decoder = conn.decoder
        while True:
            if timer is not None:
                deadline = self._deadline(conn)
                if deadline != timer.deadline:
                    timer.deadline = deadline
            data = await conn.stream.receive_some(RECEIVE_CHUNK)
            if not data:
                if decoder.at_boundary():
                    return EOF
                self.counters["malformed_frames"] += 1
                return TRUNCATED
            if type(data) is not bytes:  # memory streams give bytearrays
                data = bytes(data)
            self.counters["bytes_in"] += len(data)
            conn.received += len(data)
            was_at_boundary = decoder.at_boundary()
            try:
                frames = decoder.items(data)
            except ProtocolError as exc:  # an oversize length prefix: refused unread
                return self._malformed(exc)
            held = decoder.buffered
            self._receiving.used += held - conn.held
            conn.held = held
            now = trio.current_time()
            if (frames or was_at_boundary) and not decoder.at_boundary():
                conn.frame_started_at = now
            if frames:
                conn.last_frame_at = now
                conn.pinged = False
                return frames
            # A read that completed nothing grew a partial frame: check what that holds.
            if timer is None and held > HANDSHAKE_BUFFER_BYTES:
                self.counters["malformed_frames"] += 1
                return Hangup("malformed", "handshake frame too large")
            if self._receiving.used > self._receiving.limit:
                return OVERLOADED

    def _deadline(self, conn: _Connection) -> float:
        config = self.config
        if not conn.decoder.at_boundary():
            return conn.frame_started_at + config.frame_timeout
        if conn.pinged:
            return conn.last_frame_at + config.idle_timeout
        return conn.last_frame_at + config.idle_timeout / 2

    def _timed_out(self, conn: _Connection) -> Hangup | None:
        """The read deadline passed: why to hang up, or None once the client is pinged."""
        config = self.config
        if not conn.decoder.at_boundary():
            return Hangup("slow_frame", f"frame not finished in {config.frame_timeout:g} s")
        if conn.pinged:
            return Hangup("idle", f"idle for {config.idle_timeout:g} s")
        conn.pinged = True
        conn.outbox.put(_frame(relaywire.Ping(next(self._ping_tokens))), False)
        return None

    async def _read_loop(self, conn: _Connection) -> None:
        # The relay's hot path: Sends already turned into Delivers by the decoder and
        # routed a run to one recipient at a time, one clock reading per read, and one
        # timer (a cancel scope) kept while it does not go off: moving its deadline
        # costs a fraction of entering a new scope for every read.
        route, route_run = self._route, self._route_run
        if self._faults is not None:  # envelope by envelope, through the fault plan
            route, route_run = self._faulty_route, self._faulty_route_run
        items, conn.pending = conn.pending, []
        conn.decoder.sender = conn.key
        conn.decoder.fast = True
        while True:
            with trio.CancelScope() as timer:
                while True:
                    now = trio.current_time()
                    for item in items:
                        if not isinstance(item, bytes):
                            route_run(conn, item, now)
                            continue
                        send = relaywire.parse_send(item)
                        if send is not None:
                            route(conn, send[0], send[1], now)
                            continue
                        try:
                            message = relaywire.decode(item)
                        except ProtocolError as exc:
                            conn.close(self._malformed(exc))
                            return
                        if isinstance(message, relaywire.Send):
                            route(conn, message.recipient, message.envelope, now)
                            continue
                        hangup = self._on_control(conn, message)
                        if hangup is not None:
                            conn.close(hangup)
                            return
                    # One chunk's frames at a time, then the other connections' turn:
                    # a burst of tiny frames cannot hold the event loop. (In a fleet,
                    # what the chunk handed to other relays goes out first.)
                    if self._fleet is None:
                        await trio.lowlevel.checkpoint()
                    else:
                        await self._fleet.hot.flush()
                        await trio.lowlevel.checkpoint()
                    got = await self._receive(conn, timer)
                    if isinstance(got, Hangup):
                        conn.close(got)
                        return
                    items = got
            hangup = self._timed_out(conn)
            if hangup is not None:
                conn.close(hangup)
                return
            items = []

    def _on_control(self, conn: _Connection, message: relaywire.RelayMessage) -> Hangup | None:
        if isinstance(message, relaywire.Ping):
            if conn.outbox.put(_frame(relaywire.Pong(message.token)), False) is not None:
                self._drops["pong"] += 1
            return None
        if isinstance(message, relaywire.Pong):  # the answer to our keepalive Ping
            return None
        return self._unexpected(message, "Send or Ping")

    def _refuse(self, conn: _Connection, reason: str, now: float, count: int = 1) -> None:
        """Count ``count`` of ``conn``'s Sends dropped for ``reason`` (rate or size),
        and disconnect it once such drops in one `abuse_window` pass its allowance
        many times over."""
        self._drops[reason] += count
        if now - conn.abuse_since >= self.config.abuse_window:
            conn.abuse_since = now
            conn.abused = 0
        conn.abused += count
        if conn.abused > self._abuse_limit and conn.hangup is None:
            self.counters["abusive"] += 1
            conn.close(ABUSIVE)

    def _route(self, conn: _Connection, recipient: bytes, envelope: bytes, now: float) -> None:
        self.counters["envelopes_in"] += 1
        # Every Send is charged to the rate limit, short ones too (they cost parsing).
        allowed = conn.limit.allow(len(envelope), now)
        if len(envelope) < self.config.min_envelope_bytes:
            self._refuse(conn, "too_short", now)  # no sealed envelope is this short
            return
        if conn.quiet:
            self._carried(conn)
        if not allowed:
            self._refuse(conn, "rate_limited", now)
            return
        self._wrote(conn.key, recipient, now)
        target = self._clients.get(recipient)
        if target is not None and target.live:
            refused = target.outbox.put(relaywire.deliver_frame(conn.key, envelope), True, conn.key)
            if refused is not None:
                self._drops[refused] += 1
        else:
            # Offline, or still draining its mailbox: queue behind what waits there.
            self._park(recipient, envelope, now, conn.key)

    def _route_run(self, conn: _Connection, run: relaywire.Run, now: float) -> None:
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
        self, conn: _Connection, recipient: bytes, envelope: bytes, now: float
    ) -> None:
        frame = relaywire.deliver_frame(conn.key, envelope)
        self._route_faulted(conn, recipient, frame, len(envelope), now)

    def _faulty_route_run(self, conn: _Connection, run: relaywire.Run, now: float) -> None:
        recipient, frames, _ = run
        for frame in frames:
            size = relaywire.deliver_envelope_size(frame)
            self._route_faulted(conn, recipient, frame, size, now)

    def _route_faulted(
        self, conn: _Connection, recipient: bytes, frame: bytes, size: int, now: float
    ) -> None:
        """`_route` for one Deliver ``frame`` (``size`` envelope bytes), with the fault
        plan deciding what becomes of it if its recipient is connected."""
        faults = self._faults
        assert faults is not None
        self.counters["envelopes_in"] += 1
        allowed = conn.limit.allow(size, now)
        if size < self.config.min_envelope_bytes:
            self._refuse(conn, "too_short", now)
            return
        if conn.quiet:
            self._carried(conn)
        if not allowed:
            self._refuse(conn, "rate_limited", now)
            return
        self._wrote(conn.key, recipient, now)
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

    def _put(self, target: _Connection, frame: bytes) -> None:
        refused = target.outbox.put(frame, True)
        if refused is not None:
            self._drops[refused] += 1

    def _lost(self, envelopes: int) -> None:
        self._drops["closed"] += envelopes

    # -- writing --------------------------------------------------------------

    async def _write_loop(self, conn: _Connection, queued: int) -> None:
        await self._write(conn, [_frame(relaywire.Welcome(queued))], 0)
        while True:
            mail = self._mailboxes.take(
                conn.key, trio.current_time(), max_count=256, max_bytes=WRITE_BATCH_BYTES
            )
            if not mail:
                break
            frames = [relaywire.deliver_frame(sender, e) for sender, e in mail]
            await self._write(conn, frames, len(mail))
        conn.live = True
        outbox, fleet = conn.outbox, self._fleet
        while True:
            frames, envelopes = await outbox.take(WRITE_BATCH_BYTES)
            await self._write(conn, frames, envelopes)
            if outbox.taken:
                assert fleet is not None
                taken, outbox.taken = outbox.taken, {}
                fleet.written(conn, taken)

    async def _write(self, conn: _Connection, frames: list[bytes], envelopes: int) -> None:
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        conn.unsent = envelopes
        conn.clean = False
        if envelopes and conn.quiet:
            self._carried(conn)
        with trio.move_on_after(self.config.write_timeout) as stall:
            await conn.stream.send_all(data)
        if stall.cancelled_caught:
            # The client reads nothing: it loses its connection (and what it was
            # sent, counted as closed); later mail for it waits in its mailbox.
            conn.close(STALLED)
            await trio.lowlevel.checkpoint()  # raises Cancelled: conn.scope is cancelled
        conn.clean = True
        conn.unsent = 0
        conn.sent += len(data)
        self.counters["bytes_out"] += len(data)
        self.counters["envelopes_delivered"] += envelopes


async def serve_relay(
    config: RelayConfig,
    *,
    listeners: list[trio.SocketListener] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a relay with ``config`` until cancelled; ``task_status`` gets the bound port."""
    await Relay(config).serve(listeners=listeners, task_status=task_status)


__all__ = [
    "MailboxLimits",
    "Relay",
    "RelayConfig",
    "fingerprint",
    "serve_relay",
]
