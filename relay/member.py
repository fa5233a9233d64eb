"""One relay's membership of a fleet: its NATS connection, the mail it hands
to JetStream, and the mail it pulls for each peer connected to it.

The fleet's design (who stores what, the hashed subjects, what an outage does)
is told in `pixie.relay.fleet`; the bridge to the asyncio NATS client in
`pixie.relay.natsbus`. Beyond a lone relay's bounds a member holds at most
``publish_queue_bytes`` (64 MiB) of mail waiting to be published and as much
again published and waiting for the stream's answer; mail pulled for a peer
sits in that peer's outbox, under the outbox's bounds.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import trio
from nats.aio.msg import Msg

from pixie.protocol import relaywire

from .fleet import STREAM, FleetConfig, FleetConnection, FleetKeys, pack, stream_plan, unpack
from .hotpath import HotPath
from .logs import Throttle, event
from .mailbox import MailboxLimits
from .natsbus import ACK, BusError, NatsBus, nak, status
from .natscore import CoreLink

# An outbox files JetStream's deliveries under FLEET_SENDER (no key is that
# short): the fleet's mail takes its turn with each local sender's, and is
# counted apart so that it is acked only once written (see
# `pixie.relay.outbox.Outbox`).
from .outbox import FLEET_SENDER

INFO, WARNING, ERROR = logging.INFO, logging.WARNING, logging.ERROR
# Messages published and waiting for the stream's answer, at most (and no more
# bytes of them than `FleetConfig.publish_queue_bytes`).
UNCONFIRMED = 4096
PUBLISH_BATCH_BYTES = 4 << 20  # envelope bytes in one batch, past its first envelope
SUBJECTS_CACHED = 65_536  # (recipient, sender) subjects remembered (a keyed hash each)
SENDERS_TRACKED = 65_536  # senders whose bytes published lately are counted


class _Delivery:
    """One connected recipient's mail coming from JetStream."""

    __slots__ = ("conn", "done", "pending", "received", "requested", "room")

    def __init__(self, conn: FleetConnection) -> None:
        self.conn = conn
        # Reply subjects of mail in the outbox (in outbox order), acked once written.
        self.pending: deque[str] = deque()
        self.requested = self.received = 0
        self.done = trio.Event()  # the current pull request is over
        self.room = trio.Event()  # some of ``pending`` was written


# (recipient, sender, envelope): the relay keeps what NATS cannot take.
Park = Callable[[bytes, bytes, bytes], None]


def _nothing() -> None:
    return None


class FleetMember:
    """One relay's part in the fleet: its NATS connection, what it publishes,
    and the mail it pulls for each of its connected peers."""

    def __init__(self, config: FleetConfig, limits: MailboxLimits, bus: NatsBus) -> None:
        self.config = config
        self.keys = FleetKeys(config.secret)
        self.plan = stream_plan(config, limits)
        self._bus = bus
        self.up = True
        self._closing = False
        self._up_changed = trio.Event()
        self._park: Park = _nowhere
        self._restored: Callable[[], None] = _nothing
        self._held: Callable[[], None] = _nothing
        self._subjects: dict[tuple[bytes, bytes], str] = {}
        # What each sender published through this relay lately, and since when.
        self._sent: dict[bytes, tuple[int, float]] = {}
        # Published, waiting for the stream's answer, oldest first, with the time.
        self._unconfirmed: deque[tuple[bytes, bytes, bytes, float]] = deque()
        self._unconfirmed_bytes = 0
        self._confirm_room = trio.Event()
        self._acks_lost = True  # the inbox for the stream's answers must be (re)opened
        self._queue: deque[tuple[bytes, bytes, bytes]] = deque()
        self._queued_bytes = 0
        self._publish_wake = trio.Event()
        self._replies: deque[tuple[str, bytes]] = deque()
        self._reply_wake = trio.Event()
        self._deliveries: dict[FleetConnection, _Delivery] = {}
        try:
            link: CoreLink | None = CoreLink(
                config.url, config.auth, timeout=config.call_timeout, on_down=self._hot_down
            )
        except BusError:  # (ws:// and wss://: JetStream carries everything)
            link = None
        self.hot = HotPath(config, self.keys, link, self._hot_fallback, config.publish_queue_bytes)
        self._log = Throttle(trio.current_time)
        self.counters: dict[str, int] = dict.fromkeys(
            (
                "published",
                "kept_here",  # NATS down or behind: held in this relay's mailboxes
                "over_budget",  # a sender past its share of the stream: held here too
                "pulled",
                "written",
                "acked",
                "nacked",
                "outbox_refused",
                "malformed",
                "outages",
            ),
            0,
        )

    @classmethod
    async def open(cls, config: FleetConfig, limits: MailboxLimits) -> FleetMember:
        """Connect to NATS and set up the stream, or `RelayError` saying why not."""
        holder: list[FleetMember] = []

        def down() -> None:
            if holder:
                holder[0].went_down("connection lost")

        def up() -> None:
            if holder:
                holder[0].came_up()

        bus = await NatsBus.connect(
            config.url, timeout=config.call_timeout, on_down=down, on_up=up, auth=config.auth
        )
        fleet = cls(config, limits, bus)
        holder.append(fleet)
        try:
            await bus.ensure_stream(fleet.plan, config.call_timeout)
        except BusError:
            await bus.close()
            raise
        event(INFO, "fleet", nats=config.url, stream=STREAM, replicas=config.replicas)
        return fleet

    def bind(
        self, park: Park, restored: Callable[[], None], held: Callable[[], None] = _nothing
    ) -> None:
        """``park`` holds mail here that NATS did not take; ``restored`` is called
        when NATS answers again after an outage; ``held`` now and then, to hand
        mail held here to the relays its recipients turned up on."""
        self._park = park
        self._restored = restored
        self._held = held

    async def close(self) -> None:
        self._closing = True  # the disconnection that follows is no outage
        if self.up:
            await self.hot.leaving()
        await self._bus.close(self.config.call_timeout)

    # -- health -------------------------------------------------------------------

    def went_down(self, reason: str) -> None:
        if not self.up or self._closing:
            return
        self.up = False
        self.counters["outages"] += 1
        self._up_changed.set()
        self._up_changed = trio.Event()
        event(
            ERROR,
            "nats_down",
            nats=self.config.url,
            reason=reason,
            effect="serving local peers only; mail for other relays' peers is held here",
        )

    def came_up(self) -> None:
        if self.up:
            return
        self.up = True
        self._up_changed.set()
        self._up_changed = trio.Event()
        event(INFO, "nats_up", nats=self.config.url)
        for delivery in self._deliveries.values():
            delivery.done.set()  # pull requests made before the outage died with it
        self._restored()

    async def _watch(self) -> None:
        """Ask NATS for a round trip now and then: a server that hangs without
        closing the connection is noticed too, and so is its return."""
        interval = self.config.health_interval
        while True:
            try:
                await self._bus.ping(min(interval, self.config.call_timeout))
            except BusError as exc:
                self.went_down(str(exc))
            else:
                self.came_up()
            self._overdue()
            self.hot.sweep()
            if self.up:
                self._held()
            await trio.sleep(interval)

    async def _wait_up(self) -> None:
        while not self.up:
            await self._up_changed.wait()

    # -- publishing ---------------------------------------------------------------

    def forward(self, recipient: bytes, sender: bytes, envelope: bytes) -> bool:
        """Hand ``envelope`` to the relay its recipient is connected to, or else
        queue it for JetStream; False if NATS is down or far behind (the caller
        then keeps it in its own mailbox)."""
        if not self.up:
            self.counters["kept_here"] += 1
            return False
        return self.hot.send_one(recipient, sender, envelope) or self._to_stream(
            recipient, sender, envelope
        )

    def forward_frames(self, recipient: bytes, sender: bytes, frames: list[bytes]) -> bool:
        """Hand Deliver ``frames`` from ``sender`` to the relay its recipient is
        connected to, all together; False if none has it or there is no room
        (the caller then forwards them one by one)."""
        return self.up and self.hot.send(recipient, sender, frames)

    def _hot_down(self, why: str) -> None:
        self._log.event(WARNING, "fleet_hot_down", "link", nats=self.config.url, reason=why)

    def _hot_fallback(self, recipient: bytes, sender: bytes, envelope: bytes) -> None:
        """Mail the hot path gave up on: to JetStream, or else kept here."""
        if not self._to_stream(recipient, sender, envelope):
            self._park(recipient, sender, envelope)

    def _to_stream(self, recipient: bytes, sender: bytes, envelope: bytes) -> bool:
        """Queue ``envelope`` for JetStream; False if NATS is down or far behind."""
        size = len(envelope)
        if (
            not self.up
            or self._queued_bytes + size > self.config.publish_queue_bytes
            # (a server set to take less than the largest envelope: what it cannot
            # take waits here for its recipient instead of failing a whole batch)
            or 1 + len(sender) + size > self._bus.max_payload
        ):
            self.counters["kept_here"] += 1
            return False
        if not self._within_budget(sender, size):
            # Past its share of the stream: what it sends waits here, in this
            # relay's mailboxes, where its share of each mailbox bounds it.
            self.counters["over_budget"] += 1
            return False
        self._queue.append((recipient, sender, envelope))
        self._queued_bytes += size
        self._publish_wake.set()
        return True

    def _subject(self, recipient: bytes, sender: bytes) -> str:
        subject = self._subjects.get((recipient, sender))
        if subject is None:
            if len(self._subjects) >= SUBJECTS_CACHED:
                self._subjects.clear()
            subject = self._subjects[(recipient, sender)] = self.keys.subject(recipient, sender)
        return subject

    def _within_budget(self, sender: bytes, size: int) -> bool:
        """Charge ``size`` to ``sender``'s bytes published through this relay in
        the current mailbox lifetime, if they stay within its budget."""
        now = trio.current_time()
        used, since = self._sent.get(sender, (0, now))
        if now - since >= self.plan.max_age:
            used, since = 0, now
        if used + size > self.plan.sender_bytes:
            return False
        if len(self._sent) >= SENDERS_TRACKED and sender not in self._sent:
            horizon = now - self.plan.max_age
            self._sent = {k: v for k, v in self._sent.items() if v[1] > horizon}
            if len(self._sent) >= SENDERS_TRACKED:
                return False  # more senders at once than are tracked: none new
        self._sent[sender] = (used + size, since)
        return True

    async def _publish_loop(self) -> None:
        """Publish queued mail in batches, in order, without waiting for each
        batch to be stored; at most `UNCONFIRMED` messages wait for the stream's
        answer at once (see `_answered` and `_overdue`)."""
        queue, subject, config, bus = self._queue, self._subject, self.config, self._bus
        while True:
            if not queue:
                self._publish_wake = trio.Event()
                await self._publish_wake.wait()
            # What waits for the stream's answer is bounded like the queue itself.
            while (
                len(self._unconfirmed) >= UNCONFIRMED
                or self._unconfirmed_bytes >= config.publish_queue_bytes
            ):
                self._confirm_room = trio.Event()
                await self._confirm_room.wait()
            if self._acks_lost:
                try:
                    await bus.open_acks(self._answered, config.call_timeout)
                except BusError as exc:
                    self.went_down(str(exc))
                    await self._wait_up()
                    await trio.sleep(config.health_interval)
                    continue
                self._acks_lost = False
            batch: list[tuple[bytes, bytes, bytes]] = []
            size = 0
            while queue and len(batch) < config.publish_batch and size < PUBLISH_BATCH_BYTES:
                batch.append(queue.popleft())
                size += len(batch[-1][2])
            self._queued_bytes -= size
            self._unconfirmed_bytes += size
            # Waiting for answers before any is sent: they may come while we publish.
            now = trio.current_time()
            self._unconfirmed.extend((r, s, e, now) for r, s, e in batch)
            messages = [(subject(r, s), pack(s, e)) for r, s, e in batch]
            try:
                await bus.publish(messages, config.call_timeout)
            except BusError as exc:
                self._give_up(exc)

    def _answered(self, stored: bool) -> None:
        """The stream's answer to the oldest message still waiting for one."""
        if not self._unconfirmed:
            return
        recipient, sender, envelope, _ = self._unconfirmed.popleft()
        self._unconfirmed_bytes -= len(envelope)
        if stored:
            self.counters["published"] += 1
        else:
            self.counters["kept_here"] += 1
            self._park(recipient, sender, envelope)
        if (
            len(self._unconfirmed) < UNCONFIRMED // 2
            and 2 * self._unconfirmed_bytes < self.config.publish_queue_bytes
        ):
            self._confirm_room.set()

    def _overdue(self) -> None:
        """Mail the stream has not answered for within a call's deadline stays
        here, all of it, and answers still on their way will not be counted."""
        unconfirmed = self._unconfirmed
        if not unconfirmed:
            return
        if trio.current_time() - unconfirmed[0][3] < self.config.call_timeout:
            return
        self._give_up(BusError("NATS publish: the stream did not answer in time"))

    def _give_up(self, exc: BusError) -> None:
        """Every message waiting for an answer stays here; answers still on their
        way go to an inbox no longer read (a fresh one is opened)."""
        batch = [(r, s, e) for r, s, e, _ in self._unconfirmed]
        self._unconfirmed.clear()
        self._unconfirmed_bytes = 0
        self._acks_lost = True
        self._confirm_room.set()
        self._not_published(batch, exc)

    def _not_published(self, batch: list[tuple[bytes, bytes, bytes]], exc: BusError) -> None:
        """Mail NATS did not confirm waits here (some of it may have been stored
        after all: a duplicate costs less than a loss)."""
        self.went_down(str(exc))
        self.counters["kept_here"] += len(batch)
        for recipient, sender, envelope in batch:
            self._park(recipient, sender, envelope)

    # -- answering JetStream: acks and naks ----------------------------------------

    def _reply(self, reply: str, payload: bytes) -> None:
        self._replies.append((reply, payload))
        self._reply_wake.set()

    async def _reply_loop(self) -> None:
        replies = self._replies
        while True:
            if not replies:
                self._reply_wake = trio.Event()
                await self._reply_wake.wait()
            batch = [replies.popleft() for _ in range(len(replies))]
            for payload in {p for _, p in batch}:
                subjects = [r for r, p in batch if p == payload]
                try:
                    await self._bus.reply_all(subjects, payload, self.config.call_timeout)
                except BusError as exc:
                    # Unacked mail comes back after ack_wait: a duplicate, not a loss.
                    self.went_down(str(exc))
                    continue
                self.counters["acked" if payload == ACK else "nacked"] += len(subjects)

    # -- delivering to this relay's peers ------------------------------------------

    async def deliver(self, conn: FleetConnection) -> None:
        """Pull ``conn``'s mail from JetStream into its outbox until cancelled (the
        connection closed). Mail in the outbox but not yet written goes back to
        JetStream at once (a nak) for wherever the peer turns up next."""
        delivery = _Delivery(conn)
        self._deliveries[conn] = delivery
        self.hot.join(conn)
        name, subject = self.keys.consumer(conn.key), self.keys.mailbox(conn.key)
        backoff = 0.1
        try:
            while True:
                await self._wait_up()
                try:
                    await self._bus.ensure_consumer(
                        self.plan, name, subject, self.config.call_timeout
                    )
                    inbox, subscription = await self._bus.subscribe(
                        lambda msg: self._arrived(delivery, msg), self.config.call_timeout
                    )
                    try:
                        await self._pull_loop(delivery, name, inbox)
                    finally:
                        with trio.CancelScope(shield=True), suppress(BusError):
                            await self._bus.unsubscribe(subscription, self.config.call_timeout)
                except BusError as exc:
                    self._log.event(WARNING, "fleet_pull_failed", "bus", reason=str(exc))
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, self.config.health_interval * 2)
        finally:
            del self._deliveries[conn]
            self.hot.leave(conn)
            if delivery.pending:
                for reply in delivery.pending:
                    self._reply(reply, nak(0))
                delivery.pending.clear()

    async def _pull_loop(self, delivery: _Delivery, name: str, inbox: str) -> None:
        config = self.config
        while True:
            while len(delivery.pending) >= config.in_flight:
                delivery.room = trio.Event()
                await delivery.room.wait()
            await self._wait_up()
            batch = min(config.pull_batch, config.in_flight - len(delivery.pending))
            delivery.requested, delivery.received = batch, 0
            delivery.done = trio.Event()
            await self._bus.pull(STREAM, name, inbox, batch, config.pull_expires)
            # The request ends by itself (full, or a status at expiry); past this
            # deadline NATS has gone quiet and a fresh request is sent.
            with trio.move_on_after(config.pull_expires + config.call_timeout):
                await delivery.done.wait()

    def _arrived(self, delivery: _Delivery, msg: Msg) -> None:
        code = status(msg)
        if code is not None:
            if code != "100":  # not a heartbeat: the request is over (408 expired, 409 ...)
                delivery.done.set()
            return
        delivery.received += 1
        if delivery.received >= delivery.requested:
            delivery.done.set()
        if not msg.reply:
            return
        self.counters["pulled"] += 1
        unpacked = unpack(msg.data)
        if unpacked is None:
            self.counters["malformed"] += 1
            self._reply(msg.reply, ACK)  # nothing any relay could deliver: gone
            return
        sender, envelope = unpacked
        frame = relaywire.deliver_frame(sender, envelope)
        if delivery.conn.outbox.put(frame, True, FLEET_SENDER) is not None:
            self.counters["outbox_refused"] += 1
            self._reply(msg.reply, nak(self.config.nak_delay))
            return
        delivery.pending.append(msg.reply)

    def written(self, conn: FleetConnection, taken: dict[bytes, int]) -> None:
        """So many frames of each of ``conn``'s fleet senders (``taken``, which
        the caller hands over) reached its peer: ack JetStream's, and tell the
        hot path of the rest."""
        count = taken.pop(FLEET_SENDER, 0)
        if taken:
            self.hot.written(conn, taken)
        if not count:
            return
        delivery = self._deliveries.get(conn)
        if delivery is None:
            return
        pending = delivery.pending
        count = min(count, len(pending))
        self.counters["written"] += count
        for _ in range(count):
            self._reply(pending.popleft(), ACK)
        delivery.room.set()

    # -- the fleet's lifetime -----------------------------------------------------

    async def run(self) -> None:
        """The fleet's background work, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._publish_loop)
            nursery.start_soon(self._reply_loop)
            nursery.start_soon(self._watch)
            nursery.start_soon(self.hot.run)

    def stats(self) -> dict[str, Any]:
        return {
            **self.counters,
            **self.hot.stats(),
            "up": self.up,
            "publish_queue": len(self._queue),
            "recipients_pulling": len(self._deliveries),
        }


def _nowhere(recipient: bytes, sender: bytes, envelope: bytes) -> None:
    return None


__all__ = ["FleetMember"]
