"""The trio driver of sync sessions: a `SyncSession` run over a relay connection.

The session (`pixie.protocol.sync`) decides everything; this module moves its
messages. Per session two tasks share it: one sends whatever it has to say, one
feeds it what the sibling says; every call into the session (and so into the
database) goes through one lane (a `CapacityLimiter(1)`), so the session is
never entered twice at once and SQLite never blocks the event loop.

Every wait has a deadline: a sibling silent for ``idle_timeout`` ends the
session as timed out (nothing half-applied: each batch commits on its own), and
a send that cannot get its bytes to the relay within ``send_timeout`` ends it
as well.

`SyncEndpoint` owns one relay connection for a node: it reads every envelope,
routes sync messages to their session by id, and answers a sibling's Hello by
starting a responder session. `pixie sync` opens one session and stops;
`pixie run` keeps an endpoint up (see `daemon.py`).

A sibling's Hello is not always what it seems: a relay mailbox keeps the Hellos
and Aborts of sessions a sibling opened while this peer was away, long after
they timed out. A Hello carries no time, so the endpoint relies on order (the
relay delivers one sender's envelopes in the order sent) and on one rule every
peer keeps: it opens a session with a sibling only after its earlier sessions
with that sibling have ended. Hence, for a Hello of a session not open here:

- While a session of ours with that sibling is still opening (no answer to our
  Hello yet), the two collide, or the sibling's Hello is a leftover; the rule
  cannot tell which. The peer with the lower key refuses the sibling's session
  (`protocol.sync.refusal`) and keeps its own. The higher one holds the Hello
  back: if the sibling refuses our session, the sibling's goes on and the Hello
  held back (its newest) is answered; if the sibling answers ours instead, it
  had no session of its own open, and the Hello held back is a leftover,
  dropped. Neither side answers a leftover, so neither waits on a dead session.
- Either way, our own Hello may never have reached the sibling: the relay hands
  an envelope to the connection a peer has at that moment, and one that is
  closing (a `pixie sync` just done) takes it down unread. So, before refusing
  or holding back a sibling's Hello (the first time its id is seen), the peer
  sends its own Hello again, and the sibling's live connection, which that
  Hello just came over or which has replaced it, gets it: the higher peer then
  holds it back (or answers it, once refused) and the lower one refuses it, so
  the two always settle on one session. Its silence timer starts afresh, as
  the sibling has just shown it is there. A Hello is taken in once: a copy of
  the one that opened a session still running here is dropped before it
  reaches the session, and so is a Hello of a session that has ended here or
  was refused here (`SessionTable.ended`), so no session runs or applies twice.
- Otherwise, any session still running here with that sibling is one it has
  moved on from: it takes in what arrived for it, then ends as superseded
  (telling the sibling nothing), and the new Hello is answered.

A message for no open session (an answer to a leftover, an Abort of a session
long over) is dropped.

These rules are `SessionTable`'s (`pixie.device.sync.sessions`), sans-IO so
that the simulator drives them step by step too; this module moves messages.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol, TypeVar

import trio

from pixie.device.errors import BadInput, DeviceError
from pixie.device.logs import Summarised
from pixie.device.node.keyed import Node
from pixie.device.store.replica import NodeReplica
from pixie.device.sync import membership, syncsteps
from pixie.device.sync.peers import REMOVED_NOTICE, Incoming, PeerLink
from pixie.device.sync.relayclient import RelayUnavailable
from pixie.device.sync.reports import SyncOutcome, SyncReport, last_syncs, record_last_sync
from pixie.device.sync.sessions import Route, SessionTable
from pixie.protocol import syncwire
from pixie.protocol.clock import Clock, Entropy
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.peerwire import (
    PairAccept,
    PairReject,
    PairRequest,
    PeerMessage,
    Ping,
    Pong,
    SyncData,
)
from pixie.protocol.replay import ReplayWindow
from pixie.protocol.sync import Ending, SyncSession, SyncStats

log = logging.getLogger("pixie.sync")
T = TypeVar("T")

IDLE_TIMEOUT = 30.0
# An opener's Hello goes with a Ping, which a running daemon answers from its
# read loop at once: a sibling that answers neither within this long is said
# to be away (`SyncEndpoint.on_absent`), while the session waits on for the
# rest of its silence allowance (a daemon just starting may answer yet).
PRESENCE_TIMEOUT = 5.0
SEND_TIMEOUT = 30.0
INBOX_MESSAGES = 64
PAIRING_QUEUE = 64
DESK_GRACE = 5.0  # seconds an invite or pairing waits for one that is ending
MOVED_ON = "the sibling opened a newer session"


class PeerService(Protocol):
    """Something else a connected peer answers besides sync (the Homebase's
    holder, for one): it says which messages it wants, and handles each in a
    task of its own, replying through the endpoint and touching the database
    only through ``call`` (the endpoint's lane)."""

    def wants(self, message: PeerMessage) -> bool: ...

    async def handle(
        self,
        incoming: Incoming,
        reply: Callable[[bytes, PeerMessage], Awaitable[int]],
        call: Callable[..., Awaitable[Any]],
    ) -> None: ...


class PairingDesk:
    """Pairing over an endpoint's connection (a daemon's): the pairing messages
    the endpoint reads, while unpaired senders are admitted (see `pairing.py`)."""

    def __init__(self, endpoint: SyncEndpoint) -> None:
        self._endpoint = endpoint
        self._in, self._out = trio.open_memory_channel[Incoming](PAIRING_QUEUE)

    async def send(self, recipient: bytes, message: PeerMessage) -> int:
        return await self._endpoint._send_peer(recipient, message)

    async def receive(self) -> Incoming:
        try:
            return await self._out.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise RelayUnavailable("lost the relay connection while pairing") from None

    def seen_from(self, key: bytes) -> ReplayWindow | None:
        return self._endpoint.link.seen_from_stranger(key)

    def deliver(self, incoming: Incoming) -> None:
        """Queue a pairing message; when the queue is full the oldest goes, so
        a flood of wrong codes cannot keep a joiner's newest request out (the
        joiner asks again now and then)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            try:
                self._in.send_nowait(incoming)
            except trio.WouldBlock:
                with contextlib.suppress(trio.WouldBlock):
                    self._out.receive_nowait()
                with contextlib.suppress(trio.WouldBlock):
                    self._in.send_nowait(incoming)

    def close(self) -> None:
        self._in.close()


@dataclass
class _Running:
    session: SyncSession
    peer: bytes
    send: trio.MemorySendChannel[tuple[syncwire.SyncMessage, int]]
    receive: trio.MemoryReceiveChannel[tuple[syncwire.SyncMessage, int]]
    bytes_received: int = 0
    progress: trio.Event = field(default_factory=trio.Event)
    done: trio.Event = field(default_factory=trio.Event)
    report: SyncReport | None = None
    cause: SyncOutcome | None = None  # why the driver ended it, if it did
    # The silence deadline of the wait now under way, and the ids of the
    # sibling's Hellos this opener has sent its own Hello again for.
    idle: trio.CancelScope | None = None
    shown: set[bytes] = field(default_factory=set)
    opened_by: syncwire.Hello | None = None  # a responder's: the sibling's Hello
    ping: int | None = None  # an opener's presence check, until the sibling answers it
    present: bool = False  # the sibling answered the presence check

    def wake(self) -> None:
        """Tell the sending task the session may have something new to say."""
        self.progress.set()


class SyncEndpoint:
    """Sync sessions of one node over one relay connection."""

    def __init__(
        self,
        node: Node,
        link: PeerLink,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        send_timeout: float = SEND_TIMEOUT,
        presence_timeout: float = PRESENCE_TIMEOUT,
        services: Sequence[PeerService] = (),
        clock: Clock | None = None,
        entropy: Entropy | None = None,
    ) -> None:
        self.node = node
        self.link = link
        # Where the sessions' ids and the reports' times come from: the node's
        # unless given.
        self.clock = node.clock if clock is None else clock
        self.entropy = node.entropy if entropy is None else entropy
        self.services = tuple(services)
        self.idle_timeout = idle_timeout
        self.send_timeout = send_timeout
        self.presence_timeout = presence_timeout
        # Told (sibling fingerprint, stats) after each message a session takes
        # in: how `pixie sync` draws its progress line.
        self.on_progress: Callable[[str, SyncStats], None] | None = None
        # Told (sibling name, seconds) when an opener's sibling has answered
        # neither the Hello nor the Ping within the presence check.
        self.on_absent: Callable[[str, float], None] | None = None
        self._names: dict[bytes, str] = {}  # the siblings' names, as reports say them
        self.lane = trio.CapacityLimiter(1)
        link.lane = self.lane  # envelope crypto and replay state share the database lane
        # The sessions open here, the Hellos held back and the sessions over
        # (see the module's docstring).
        self.table: SessionTable[_Running] = SessionTable(bytes(link.identity.verify_key))
        self._registered = trio.Event()  # set when a sibling's session arrives
        self._desk: PairingDesk | None = None
        self._desk_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.reports: list[SyncReport] = []
        # What a sibling's bytes make us refuse or drop is logged in summary, so
        # a paired key that floods us grows the log by a bounded amount.
        self.notices = Summarised(log, "sync messages dropped")
        self.dropped: Counter[str] = Counter()

    def open_sessions(self) -> list[bytes]:
        """The ids of the sessions open here now (a snapshot: it does not change
        as sessions open and end)."""
        return list(self.table.sessions)

    async def sessions_ended(self) -> None:
        """Wait until every session open now has ended and been reported."""
        for running in list(self.table.sessions.values()):
            await running.done.wait()

    def _replica(self) -> NodeReplica:
        return NodeReplica(self.node.db, self.node.log, self.node.origin, clock=self.clock)

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn`` in the lane: the session and the database, one call at a time."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    # -- the connection -----------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read envelopes until the connection ends (raising `RelayUnavailable`),
        answering siblings' sessions meanwhile."""
        lost: list[RelayUnavailable] = []
        # Records a session took in before this process stopped short of
        # reading them (a crash, a cancel) are read now, before any envelope.
        await self._reconcile()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._read_loop, nursery, lost)
                task_status.started()
        finally:
            self._nursery = None
            if self._desk is not None:
                self._desk.close()
        if lost:
            raise lost[0]

    async def _read_loop(self, nursery: trio.Nursery, lost: list[RelayUnavailable]) -> None:
        try:
            while True:
                incoming = await self.link.receive()
                message = incoming.body.message
                if isinstance(message, PairRequest | PairAccept | PairReject):
                    if self._desk is not None:
                        self._desk.deliver(incoming)
                    elif isinstance(message, PairReject) and await self._is_sibling(
                        incoming.sender
                    ):
                        await self._refused(incoming.sender, message.reason)
                    continue
                if self._desk is not None and not await self._is_sibling(incoming.sender):
                    continue  # admitted only to pair
                if isinstance(message, Ping):
                    await self._send_peer(incoming.sender, Pong(message.token))
                elif isinstance(message, Pong):
                    self._answered(incoming.sender, message.token)
                elif isinstance(message, SyncData):
                    await self._route(incoming.sender, message.payload)
                else:
                    for service in self.services:
                        if service.wants(message):
                            nursery.start_soon(self._serve_request, service, incoming)
                            break
        except RelayUnavailable as exc:
            lost.append(exc)
        except trio.TooSlowError:
            lost.append(RelayUnavailable("the relay did not take our bytes in time"))
        nursery.cancel_scope.cancel()

    async def _refused(self, sibling: bytes, reason: str) -> None:
        """A sibling refuses this peer (it was removed from the account, say):
        every session with it ends now, with the sibling's reason."""
        who = fingerprint(sibling)
        log.warning("%s refuses this device: %s", who, reason)
        if reason == REMOVED_NOTICE:
            await self._call(membership.note_removed, self.node, sibling)
        for running in self.table.with_peer(sibling):
            await self._call(
                partial(running.session.fail, f"{who} refused: {reason}", tell_peer=False)
            )
            running.wake()

    def _answered(self, sibling: bytes, token: int) -> None:
        """A sibling answered a presence check: it is there."""
        for running in self.table.with_peer(sibling):
            if running.ping == token:
                running.present = True

    async def _reconcile(self) -> None:
        """What came in may hold membership records: a peer that joined the
        account is a sibling from now on, one removed is refused."""
        done = await self._call(membership.reconcile, self.node)
        if done.added or done.removed:
            self._names.clear()
        for info in done.added:
            self.link.admission.learn(info.key)
        for key in done.removed:
            self.link.admission.forget(key)

    async def _name_of(self, sibling: bytes) -> str:
        """``sibling``'s name in this peer's book ("" if it has none), read
        once per endpoint."""
        name = self._names.get(sibling)
        if name is None:
            known = await self._call(self.node.siblings.get, sibling)
            name = self._names[sibling] = known.name if known is not None else ""
        return name

    async def _is_sibling(self, key: bytes) -> bool:
        return await self._call(self.node.siblings.get, key) is not None

    @contextlib.asynccontextmanager
    async def pairing(self) -> AsyncIterator[PairingDesk]:
        """Admit unpaired senders' pairing messages while the block runs (one
        invite or pairing at a time)."""
        # A command just interrupted may still be closing its desk: a moment's grace.
        acquired = False
        with trio.move_on_after(DESK_GRACE):
            await self._desk_lock.acquire()
            acquired = True
        if not acquired:
            raise BadInput("an invite or a pairing is already running on this peer")
        desk = self._desk = PairingDesk(self)
        self.link.admit_strangers = True
        try:
            yield desk
        finally:
            self._desk = None
            self.link.admit_strangers = False
            desk.close()
            self._desk_lock.release()

    async def _serve_request(self, service: PeerService, incoming: Incoming) -> None:
        try:
            await service.handle(incoming, self._send_peer, self._call)
        except (RelayUnavailable, trio.TooSlowError) as exc:
            log.warning("could not answer %s: %s", fingerprint(incoming.sender), exc or "timeout")
        except DeviceError as exc:
            log.warning("could not handle a request from %s: %s", fingerprint(incoming.sender), exc)
        except Exception as exc:
            # A service that raises on one sibling's request must not take the
            # peer down: that request is dropped and counted, the rest go on.
            kind = type(exc).__name__
            self.dropped[kind] += 1
            self.notices.log(
                kind, "dropped a request from %s: %s", fingerprint(incoming.sender), kind
            )

    async def _route(self, sender: bytes, payload: bytes) -> None:
        who = fingerprint(sender)
        try:
            message = await self._call(syncwire.decode, payload)
        except ProtocolError as exc:
            self.dropped["malformed"] += 1
            self.notices.log("malformed", "malformed sync message from %s: %s", who, exc)
            return
        for step in syncsteps.receive(self.table, sender, message, len(payload)):
            if isinstance(step, syncsteps.Deliver):
                await self._deliver(step.entry, step.message, step.size)
            elif isinstance(step, syncsteps.Drop):
                if step.route is Route.MISADDRESSED:
                    self.dropped["misaddressed"] += 1
                    self.notices.log(
                        "misaddressed", "sync message from %s for another sibling's session", who
                    )
                elif step.route is Route.NO_SESSION:
                    log.info("sync message from %s for no open session (%s)", who, step.kind)
                # A repeat of the Hello a session opened with: it has it already;
                # a Hello held back or refused: the rules say so.
            elif isinstance(step, syncsteps.SayAgain):
                ours = step.entry.session.hello
                assert ours is not None
                await self._send_peer(sender, SyncData(syncwire.encode(ours)))
                if step.entry.idle is not None:
                    step.entry.idle.deadline = trio.current_time() + self.idle_timeout
            elif isinstance(step, syncsteps.Send):
                log.info("sync with %s: both sides opened a session; keeping ours", who)
                await self._send_peer(sender, SyncData(syncwire.encode(step.message)))
            elif isinstance(step, syncsteps.Supersede):
                step.entry.send.close()
            elif self._nursery is not None:  # Answer (none once the endpoint stops)
                self._answer(sender, step.hello, step.size)

    async def _deliver(self, running: _Running, message: syncwire.SyncMessage, size: int) -> None:
        try:
            running.send.send_nowait((message, size))
        except trio.ClosedResourceError:
            who = fingerprint(running.peer)
            log.info("sync message from %s for a session it has moved on from", who)
        except trio.WouldBlock:
            # The session's inbox is full: a sibling far ahead of us. Ending the
            # session is safe (everything applied so far is committed) and the
            # next one resumes from the marks.
            log.warning("sync session with %s overrun; ending it", fingerprint(running.peer))
            await self._call(running.session.fail, "the sibling sent faster than we could apply")
            running.wake()  # the sender says so and ends the session now

    def _answer(self, peer: bytes, hello: syncwire.Hello, size: int) -> None:
        """Start a responder session for ``hello``."""
        assert self._nursery is not None
        session = SyncSession(
            self._replica(), opener=False, session_id=hello.session, entropy=self.entropy
        )
        running = self._register(session, peer)
        running.opened_by = hello
        self.table.open(running)  # anything held back from the sibling is older, and goes
        running.send.send_nowait((hello, size))
        self._registered.set()
        self._nursery.start_soon(self._respond, running)

    def _register(self, session: SyncSession, peer: bytes) -> _Running:
        send, receive = trio.open_memory_channel[tuple[syncwire.SyncMessage, int]](INBOX_MESSAGES)
        running = _Running(session, peer, send, receive)
        return running

    async def _respond(self, running: _Running) -> None:
        try:
            running.report = await self._pump(running)
            self._finish(running.report)
        finally:
            running.done.set()

    async def sync_with(self, peer: bytes) -> SyncReport:
        """Open a session with ``peer`` and run it to the end (after any session
        already running with it, so that the two never overlap)."""
        while running_now := self.table.with_peer(peer):
            await running_now[0].done.wait()
        session = SyncSession(self._replica(), opener=True, entropy=self.entropy)
        running = self._register(session, peer)
        syncsteps.open_ours(self.table, running)
        report: SyncReport | None = None
        try:
            await self._call(session.start)
            report = await self._pump(running)
            self._finish(report)
        finally:
            running.done.set()
            refused = report is not None and report.outcome is SyncOutcome.SUPERSEDED
            held = syncsteps.after_ours(self.table, peer, refused=refused)
        assert report is not None  # (the session ran to its end)
        if report.outcome is not SyncOutcome.SUPERSEDED:
            return report
        # The sibling refused ours for a session of its own: that one goes on in
        # our place, and its outcome is ours.
        if held is not None and self._nursery is not None:
            self._answer(peer, held.hello, held.size)
        while report.outcome is SyncOutcome.SUPERSEDED:
            with trio.move_on_after(self.idle_timeout):
                while not (others := self._with(peer)):
                    self._registered = trio.Event()
                    await self._registered.wait()
            if not others:
                reason = (
                    "the sibling refused our session for one of its own, which did not come "
                    f"within {self.idle_timeout:g} s"
                )
                report = replace(report, outcome=SyncOutcome.FAILED, error=reason)
                self._finish(report)
                break
            for other in others:
                await other.done.wait()
                if other.report is not None:
                    report = other.report
        return report

    def _with(self, peer: bytes) -> list[_Running]:
        return self.table.with_peer(peer)

    def _finish(self, report: SyncReport) -> None:
        self.reports.append(report)
        # A sibling that is away (a phone between syncs) is no cause for alarm.
        level = logging.WARNING if report.outcome is SyncOutcome.FAILED else logging.INFO
        log.log(
            level,
            "sync with %s: %s (%d round trips, %d B sent, %d B received, %d applied)%s",
            report.sibling,
            report.outcome.value,
            report.round_trips,
            report.bytes_sent,
            report.bytes_received,
            report.applied,
            f": {report.error}" if report.error else "",
        )
        try:
            record_last_sync(self.node, report)
        except DeviceError as exc:  # a report that cannot be saved is not a failed sync
            log.warning("could not record the sync report: %s", exc)

    # -- one session --------------------------------------------------------------------

    async def _pump(self, running: _Running) -> SyncReport:
        session = running.session
        started = time.monotonic()
        sent = 0

        async def sender(cancel: trio.CancelScope) -> None:
            nonlocal sent
            while True:
                message = await self._call(session.next_message)
                if message is None:
                    if session.finished:
                        break
                    await running.progress.wait()
                    running.progress = trio.Event()
                    continue
                payload = syncwire.encode(message)
                try:
                    sent += await self._send_peer(running.peer, SyncData(payload))
                    if session.opener and running.ping is None:
                        # The presence check goes with the Hello.
                        running.ping = int.from_bytes(self.entropy.token_bytes(4), "big")
                        await self._send_peer(running.peer, Ping(running.ping))
                except RelayUnavailable as exc:
                    await self._call(partial(session.fail, str(exc), tell_peer=False))
                except trio.TooSlowError:
                    reason = f"the relay did not take our bytes within {self.send_timeout:g} s"
                    await self._call(partial(session.fail, reason, tell_peer=False))
            cancel.cancel()  # everything said: stop listening too

        async def receiver() -> None:
            checked = False  # the presence check is over (an opener's first wait)
            rest = 0.0  # what is left of the first wait's allowance after it
            while not session.finished:
                checking = (
                    not checked
                    and session.opener
                    and session.stats.messages_received == 0
                    and self.presence_timeout < self.idle_timeout
                )
                wait = self.presence_timeout if checking else (rest or self.idle_timeout)
                rest = 0.0
                with trio.move_on_after(wait) as scope:
                    running.idle = scope
                    try:
                        message, size = await running.receive.receive()
                    except trio.EndOfChannel:  # the sibling has moved on (syncsteps.Supersede)
                        running.cause = SyncOutcome.SUPERSEDED
                        await self._call(partial(session.fail, MOVED_ON, tell_peer=False))
                        # The sender may be waiting for news: it is that the session
                        # is over (without this, it waited for ever, and so did every
                        # later session with this sibling).
                        running.wake()
                        break
                if scope.cancelled_caught and checking:
                    checked, rest = True, self.idle_timeout - wait
                    if not running.present and self.on_absent is not None:
                        # Said now; the wait goes on for the rest of the allowance.
                        who = await self._name_of(running.peer) or fingerprint(running.peer)
                        self.on_absent(who, wait)
                    continue
                if scope.cancelled_caught:
                    # Nothing heard but the Hello we answered: the sibling is not
                    # there (or that Hello was a leftover). Silence later on fails.
                    if session.stats.messages_received <= (0 if session.opener else 1):
                        running.cause = SyncOutcome.NO_ANSWER
                    reason = f"the sibling was silent for {self.idle_timeout:g} s"
                    await self._call(session.fail, reason)
                else:
                    running.bytes_received += size
                    await self._call(session.receive, message)
                    if self.on_progress is not None:
                        self.on_progress(fingerprint(running.peer), session.stats)
                running.wake()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receiver)
                nursery.start_soon(sender, nursery.cancel_scope)
        finally:
            running.idle = None
            self.table.close(session.session_id)
        stats = session.stats
        if stats.applied:
            await self._reconcile()
        outcome: SyncOutcome
        if session.ending is Ending.DONE:
            outcome = SyncOutcome.IN_SYNC if stats.in_sync_at_hello else SyncOutcome.SYNCED
        elif session.ending is Ending.REFUSED:
            outcome = SyncOutcome.SUPERSEDED  # the sibling's own session does the work
        elif running.cause is not None and session.ending is Ending.FAILED:
            outcome = running.cause
        else:
            outcome = SyncOutcome.FAILED
        name = await self._name_of(running.peer)
        return SyncReport(
            name=name,
            sibling=fingerprint(running.peer),
            role="opener" if session.opener else "responder",
            outcome=outcome,
            round_trips=stats.round_trips,
            messages_sent=stats.messages_sent,
            messages_received=stats.messages_received,
            bytes_sent=sent,
            bytes_received=running.bytes_received,
            records_sent=stats.records_sent,
            records_received=stats.records_received,
            applied=stats.applied,
            repair_rounds=stats.repair_rounds,
            seconds=round(time.monotonic() - started, 3),
            error=session.error,
            finished_at=self.clock.now_us() / 1_000_000,
        )

    async def _send_peer(self, peer: bytes, message: PeerMessage) -> int:
        with trio.fail_after(self.send_timeout):
            return await self.link.send(peer, message)


__all__ = [
    "PairingDesk",
    "PeerService",
    "SyncEndpoint",
    "SyncOutcome",
    "SyncReport",
    "last_syncs",
    "record_last_sync",
]
