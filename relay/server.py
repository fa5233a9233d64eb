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
import secrets
import traceback
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from pixie.protocol import relaywire
from pixie.protocol.errors import ProtocolError
from pixie.protocol.proof import verify_key_proof

from .config import RelayConfig
from .connection import (
    ABUSIVE,
    BUSY,
    EOF,
    EVICTED,
    FAILED,
    LOST,
    OVERLOADED,
    REPLACED,
    SHUTDOWN,
    STALLED,
    TRUNCATED,
    Connection,
    Hangup,
    fingerprint,
    frame,
)
from .logs import Throttle, event
from .mailbox import Mailboxes, MailboxLimits
from .outbox import ByteBudget
from .router import Router

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
        self._fleet = fleet
        self._outboxes = ByteBudget(self.config.outbox_total_bytes)
        self._receiving = ByteBudget(self.config.receive_total_bytes)
        self._shapes: dict[int, relaywire.Shape] = {}  # what Sends of each frame size share
        self._clients: dict[bytes, Connection] = {}
        self._open: set[Connection] = set()
        # Connections that have carried no envelope yet, oldest first: the ones that
        # make room at the connection cap (see `_evict`). Those still in the handshake
        # are ordered by when they opened, the rest by when they proved their key.
        self._unproven: dict[Connection, None] = {}
        self._quiet: dict[Connection, None] = {}
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
        self._router = Router(
            self.config,
            clients=self._clients,
            mailboxes=self._mailboxes,
            fleet=fleet,
            counters=self.counters,
            drops=self._drops,
            carried=self._carried,
            refuse=self._refuse,
        )

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
        if self._router.faults is None:
            return {}
        # Injected faults by name, and envelopes waiting in a delay or reorder hold.
        return {"faults": self._router.faults.counts(), "fault_held": self._router.faults.held()}

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
        conn = Connection(next(self._numbers), stream, self.config, self._outboxes, self._shapes)
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
            if self._router.faults is not None:
                self._router.faults.detach(conn)  # counts what it held for conn as closed drops
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

    def _oldest_first(self) -> list[dict[Connection, None]]:
        unproven, quiet = self._unproven, self._quiet
        if unproven and quiet:
            first = next(iter(unproven)).opened_at <= next(iter(quiet)).opened_at
            return [unproven, quiet] if first else [quiet, unproven]
        return [unproven, quiet]

    def _carried(self, conn: Connection) -> None:
        """``conn`` has carried an envelope: it is no longer quiet, nor evicted."""
        conn.quiet = False
        self._quiet.pop(conn, None)

    async def _serve(self, conn: Connection) -> None:
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
            faults = self._router.faults
            if faults is not None:
                # Before the writer can make conn live: it holds conn's delayed envelopes.
                faults.attach(conn)
                nursery.start_soon(self._guarded, conn, partial(faults.hold_loop, conn))
            nursery.start_soon(self._guarded, conn, partial(self._write_loop, conn, queued))
            nursery.start_soon(self._guarded, conn, partial(self._read_loop, conn))
            if self._fleet is not None:
                nursery.start_soon(self._guarded, conn, partial(self._fleet.deliver, conn))

    async def _guarded(self, conn: Connection, job: Callable[[], Any]) -> None:
        # Each half of a connection ends it on any error, so no exception ever
        # reaches the nursery and none can mix with a cancellation on its way out.
        try:
            await job()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            conn.close(LOST)
        except Exception as exc:
            self._failed(conn, exc)

    def _failed(self, conn: Connection, exc: BaseException) -> None:
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

    async def _hang_up(self, conn: Connection, hangup: Hangup) -> None:
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.config.close_grace
            if hangup.refuse is not None and conn.clean:
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    data = frame(relaywire.Refuse(hangup.refuse))
                    await conn.stream.send_all(data)
                    conn.sent += len(data)
                    self.counters["bytes_out"] += len(data)
            await trio.aclose_forcefully(conn.stream)

    # -- the handshake --------------------------------------------------------

    async def _authenticate(self, conn: Connection) -> bytes | Hangup:
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
        await self._write(conn, [frame(relaywire.Challenge(nonce))], 0)
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

    async def _next_message(self, conn: Connection) -> relaywire.RelayMessage | Hangup:
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
        self, conn: Connection, timer: trio.CancelScope | None = None
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

    def _deadline(self, conn: Connection) -> float:
        config = self.config
        if not conn.decoder.at_boundary():
            return conn.frame_started_at + config.frame_timeout
        if conn.pinged:
            return conn.last_frame_at + config.idle_timeout
        return conn.last_frame_at + config.idle_timeout / 2

    def _timed_out(self, conn: Connection) -> Hangup | None:
        """The read deadline passed: why to hang up, or None once the client is pinged."""
        config = self.config
        if not conn.decoder.at_boundary():
            return Hangup("slow_frame", f"frame not finished in {config.frame_timeout:g} s")
        if conn.pinged:
            return Hangup("idle", f"idle for {config.idle_timeout:g} s")
        conn.pinged = True
        conn.outbox.put(frame(relaywire.Ping(next(self._ping_tokens))), False)
        return None

    async def _read_loop(self, conn: Connection) -> None:
        # The relay's hot path: Sends already turned into Delivers by the decoder and
        # routed a run to one recipient at a time, one clock reading per read, and one
        # timer (a cancel scope) kept while it does not go off: moving its deadline
        # costs a fraction of entering a new scope for every read.
        # (envelope by envelope through the fault plan, when there is one)
        route, route_run = self._router.route, self._router.route_run
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

    def _on_control(self, conn: Connection, message: relaywire.RelayMessage) -> Hangup | None:
        if isinstance(message, relaywire.Ping):
            if conn.outbox.put(frame(relaywire.Pong(message.token)), False) is not None:
                self._drops["pong"] += 1
            return None
        if isinstance(message, relaywire.Pong):  # the answer to our keepalive Ping
            return None
        return self._unexpected(message, "Send or Ping")

    def _refuse(self, conn: Connection, reason: str, now: float, count: int = 1) -> None:
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

    # -- writing --------------------------------------------------------------

    async def _write_loop(self, conn: Connection, queued: int) -> None:
        await self._write(conn, [frame(relaywire.Welcome(queued))], 0)
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

    async def _write(self, conn: Connection, frames: list[bytes], envelopes: int) -> None:
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
