"""The fleet's hot path: mail for a key connected to another relay goes to that
relay directly, on core NATS, and JetStream holds only mail that must wait.

DERP's mesh forwards packets for online peers between regions and stores
nothing; this does the same over NATS. Each relay

- tells the fleet which keys are connected to it (`pixie.relay.hotwire`'s
  presence, a lease renewed every third of `FleetConfig.presence_lease`, and
  a fresh relay asks everyone to announce again), and keeps the fleet's
  claims in a `Presence` table;
- sends an envelope for a key another relay claims to that relay's own
  subject, batched per relay (everything queued for it when the publishing
  task gets its turn, up to `FleetConfig.hot_batch_bytes`: no envelope waits
  for more to come), and keeps it until that relay answers;
- puts each envelope it receives that way into its recipient's outbox, under
  the sender's own share (`pixie.relay.outbox.HOT_SENDER`), and answers
  *written* once the writer has handed it to the recipient's connection, or at
  once *refused* (the outbox is full) or *gone* (the key is not connected here).

Delivery stays at least once. An envelope goes to JetStream, as it would for a
recipient connected nowhere, when no relay claims its recipient, when the
owning relay refuses it or no longer has the key, when publishing fails, and
when no answer comes within `FleetConfig.hot_deadline` (the owning relay died
or froze between publish and delivery). What then was written anyway arrives
twice; the peers' replay protection drops the copy.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import trio

from pixie.protocol import relaywire

from . import hotwire
from .fleet import FleetConfig, FleetConnection, FleetKeys
from .natsbus import BusError
from .natscore import CoreLink
from .outbox import HOT_SENDER

NAMES_CACHED = 65_536  # keys whose fleet name is remembered (a keyed hash each)
# Answers wait this long for more to go with them: an answer frees memory on
# the sending relay but delays no envelope, and each message through NATS
# costs every process on its way a write or a read.
ANSWER_LINGER = 0.01
# (recipient, sender, envelope): where mail goes that the hot path gave up on.
Fallback = Callable[[bytes, bytes, bytes], None]
# A parcel sent and not yet answered for: recipient, sender, frames, when sent,
# the relay it went to, and the bytes it holds.
_Sent = tuple[bytes, bytes, list[bytes], float, bytes, int]


class _Local:
    """A key connected here: its connection, and the mail other relays handed
    over for it that is in its outbox or being written, by outbox sender,
    oldest first, as [sending relay, number, frames not yet written]."""

    __slots__ = ("conn", "name", "pending")

    def __init__(self, conn: FleetConnection, name: bytes) -> None:
        self.conn = conn
        self.name = name
        self.pending: dict[bytes, deque[list[Any]]] = {}


class _Answers:
    __slots__ = ("gone", "refused", "written")

    def __init__(self) -> None:
        self.written: list[int] = []
        self.refused: list[int] = []
        self.gone: list[int] = []


class HotPath:
    """One relay's side of the hot path; see the module's docstring."""

    def __init__(
        self,
        config: FleetConfig,
        keys: FleetKeys,
        link: CoreLink | None,
        fallback: Fallback,
        inflight_bytes: int,
        relay_id: bytes | None = None,
    ) -> None:
        """``link``: the core NATS connection the hot path uses (None: no hot
        path; every envelope for another relay's peer goes to JetStream)."""
        self.config = config
        self.id = relay_id if relay_id is not None else os.urandom(hotwire.RELAY_ID_BYTES)
        self.presence = hotwire.Presence()
        self._keys = keys
        self.link = link
        self._fallback = fallback
        self._names: dict[bytes, bytes] = {}
        # Sending: parcels by number.
        self._numbers = itertools.count(1)
        self._inflight: dict[int, _Sent] = {}
        self._inflight_bytes = 0
        self._max_inflight_bytes = inflight_bytes
        # relay -> [(number, parcel head, frames)]
        self._queues: dict[bytes, list[tuple[int, bytes, list[bytes]]]] = {}
        self._wake = trio.Event()
        # Receiving: keys connected here by name, and what to answer whom.
        self._local: dict[bytes, _Local] = {}
        self._by_conn: dict[FleetConnection, _Local] = {}
        self._answers: dict[bytes, _Answers] = {}
        self._answer_wake = trio.Event()
        # Presence to say: names joined and left since the last word, or everything.
        self._joined: list[bytes] = []
        self._left: list[bytes] = []
        self._announce_all = True
        self._query = True  # ask every relay to announce (on start, after an outage)
        self._presence_wake = trio.Event()
        self._link_up = trio.Event()
        self.counters: dict[str, int] = dict.fromkeys(
            (
                "hot_sent",  # handed to another relay
                "hot_written",  # ... and reported written there
                "hot_refused",  # ... refused or gone there: to JetStream
                "hot_overdue",  # ... no answer in time: to JetStream
                "hot_received",  # handed to this relay by another
                "hot_malformed",
            ),
            0,
        )

    # -- names ----------------------------------------------------------------------

    def name(self, key: bytes) -> bytes:
        name = self._names.get(key)
        if name is None:
            if len(self._names) >= NAMES_CACHED:
                self._names.clear()
            name = self._names[key] = self._keys.raw_name(key)
        return name

    # -- sending ----------------------------------------------------------------------

    def _holder(self, recipient: bytes) -> tuple[bytes, bytes] | None:
        """(``recipient``'s name, the relay that has it), if another relay
        claims it and the link is up."""
        if self.link is None or not self.link.up:
            return None
        name = self.name(recipient)
        relay = self.presence.where(name, trio.current_time())
        if relay is None or relay == self.id:
            return None
        return name, relay

    def elsewhere(self, recipient: bytes) -> bool:
        """Whether another relay claims ``recipient`` and the link is up."""
        return self._holder(recipient) is not None

    def send(self, recipient: bytes, sender: bytes, frames: list[bytes]) -> bool:
        """Hand ``frames`` (Deliver frames from ``sender``) to the relay that has
        ``recipient``, if another relay claims it and there is room; False
        otherwise (JetStream's turn)."""
        holder = self._holder(recipient)
        return holder is not None and self._send(*holder, recipient, sender, frames)

    def send_one(self, recipient: bytes, sender: bytes, envelope: bytes) -> bool:
        """`send` for one envelope."""
        holder = self._holder(recipient)
        if holder is None:
            return False
        frames = [relaywire.deliver_frame(sender, envelope)]
        return self._send(*holder, recipient, sender, frames)

    def _send(
        self,
        name: bytes,
        relay: bytes,
        recipient: bytes,
        sender: bytes,
        frames: list[bytes],
    ) -> bool:
        body = sum(map(len, frames))
        size = hotwire.ENTRY_OVERHEAD + body
        if (
            self._inflight_bytes + size > self._max_inflight_bytes
            or size + hotwire.BATCH_OVERHEAD > self._max_payload
        ):
            return False
        number = next(self._numbers)
        self._inflight[number] = (recipient, sender, frames, trio.current_time(), relay, size)
        self._inflight_bytes += size
        queue = self._queues.get(relay)
        if queue is None:
            queue = self._queues[relay] = []
        # The parcel's parts, joined only as the batch is written.
        queue.append((number, hotwire.parcel_head(name, number, sender, len(frames), body), frames))
        self.counters["hot_sent"] += len(frames)
        self._wake.set()
        return True

    async def _publish_loop(self) -> None:
        """Send what is queued, per relay, in batches bounded by size (what a
        connection's reading task has not sent itself: see `flush`)."""
        while True:
            if not self._queues:
                self._wake = trio.Event()
                await self._wake.wait()
            await self._publish()

    async def flush(self) -> None:
        """Send what is queued now, unless a send is under way (whoever makes
        it sends the rest after): a connection's reading task calls this once
        it has routed a chunk, so an envelope goes out without waiting for
        another task's turn."""
        if self._queues and self.link is not None and not self.link.busy:
            await self._publish()

    async def _publish(self) -> None:
        """Send everything queued, per relay, in batches bounded by size."""
        limit = self.config.hot_batch_bytes
        queues, self._queues = self._queues, {}
        messages: list[tuple[str, list[bytes]]] = []
        numbers: list[int] = []
        cap = min(limit, self._max_payload - hotwire.BATCH_OVERHEAD)
        for relay, queue in queues.items():
            subject = hotwire.batch_subject(relay)
            parts: list[bytes] = []
            count = size = 0
            for number, head, frames in queue:
                item = self._inflight.get(number)
                if item is None:
                    continue  # (given up meanwhile)
                if count and size + item[5] > cap:
                    messages.append((subject, [hotwire.batch_head(self.id, count), *parts]))
                    parts, count, size = [], 0, 0
                parts.append(head)
                parts += frames
                count += 1
                size += item[5]
                numbers.append(number)
            if count:
                messages.append((subject, [hotwire.batch_head(self.id, count), *parts]))
        try:
            await self._send_all(messages)
        except BusError:
            for number in numbers:
                self._give_up(number)
        if self._queues:
            self._wake.set()  # queued while this send was under way

    def _settled(self, number: int) -> _Sent | None:
        item = self._inflight.pop(number, None)
        if item is not None:
            self._inflight_bytes -= item[5]
        return item

    def _give_up(self, number: int) -> int:
        """Parcel ``number`` goes to JetStream after all; how many envelopes."""
        item = self._settled(number)
        if item is None:
            return 0
        recipient, sender, frames = item[0], item[1], item[2]
        for frame in frames:
            self._fallback(recipient, sender, relaywire.deliver_envelope(frame))
        return len(frames)

    def on_answer(self, data: bytes) -> None:
        numbers = hotwire.read_answer(data)
        if numbers is None:
            self.counters["hot_malformed"] += 1
            return
        written, refused, gone = numbers
        settled, counters = self._settled, self.counters
        for number in written:
            item = settled(number)
            if item is not None:
                counters["hot_written"] += len(item[2])
        for number in refused:
            counters["hot_refused"] += self._give_up(number)
        for number in gone:
            item = self._inflight.get(number)
            if item is not None:
                # That relay no longer has the key: stop sending it there.
                self.presence.withdraw(item[4], (self.name(item[0]),))
                counters["hot_refused"] += self._give_up(number)

    def sweep(self) -> None:
        """What has waited past the deadline for an answer goes to JetStream."""
        cutoff = trio.current_time() - self.config.hot_deadline
        overdue = []
        for number, item in self._inflight.items():
            if item[3] > cutoff:
                break
            overdue.append(number)
        for number in overdue:
            self.counters["hot_overdue"] += self._give_up(number)

    # -- receiving --------------------------------------------------------------------

    def on_batch(self, data: bytes) -> None:
        batch = hotwire.read_batch(data)
        if batch is None:
            self.counters["hot_malformed"] += 1
            return
        relay, entries = batch
        answers = self._answers.get(relay)
        if answers is None:
            answers = self._answers[relay] = _Answers()
        local_of = self._local.get
        for name, number, sender, frames, size in entries:
            self.counters["hot_received"] += len(frames)
            local = local_of(name)
            if local is None:
                answers.gone.append(number)
                continue
            share = HOT_SENDER + sender
            if not local.conn.outbox.put_all(frames, size, share):
                answers.refused.append(number)
                continue
            pending = local.pending.get(share)
            if pending is None:
                pending = local.pending[share] = deque()
            pending.append([relay, number, len(frames)])
        if answers.refused or answers.gone:
            self._answer_wake.set()

    def written(self, conn: FleetConnection, taken: dict[bytes, int]) -> None:
        """The writer handed ``conn`` so many frames of each outbox sender."""
        local = self._by_conn.get(conn)
        if local is None:
            return
        answers = self._answers
        for share, frames in taken.items():
            pending = local.pending.get(share)
            if pending is None:
                continue
            count = frames
            while count and pending:
                head = pending[0]
                if head[2] > count:  # a parcel written in part
                    head[2] -= count
                    break
                count -= head[2]
                pending.popleft()
                held = answers.get(head[0])
                if held is None:
                    held = answers[head[0]] = _Answers()
                held.written.append(head[1])
            if not pending:
                del local.pending[share]
        self._answer_wake.set()

    async def _answer_loop(self) -> None:
        while True:
            if not self._answers:
                self._answer_wake = trio.Event()
                await self._answer_wake.wait()
            await trio.sleep(ANSWER_LINGER)
            await self.answer()

    async def answer(self) -> None:
        """Send every answer gathered, to each relay its own."""
        answers, self._answers = self._answers, {}
        messages = []
        for relay, held in answers.items():
            subject = hotwire.answer_subject(relay)
            items = [
                *((n, 0) for n in held.written),
                *((n, 1) for n in held.refused),
                *((n, 2) for n in held.gone),
            ]
            for at in range(0, len(items), hotwire.MAX_ANSWERS):
                part = items[at : at + hotwire.MAX_ANSWERS]
                messages.append(
                    (
                        subject,
                        hotwire.answer(
                            [n for n, k in part if k == 0],
                            [n for n, k in part if k == 1],
                            [n for n, k in part if k == 2],
                        ),
                    )
                )
        # A lost answer costs a duplicate through JetStream at the deadline.
        with suppress(BusError):
            await self._send_all(messages)

    # -- presence ---------------------------------------------------------------------

    def join(self, conn: FleetConnection) -> None:
        """``conn``'s key is connected here: claim it."""
        name = self.name(conn.key)
        local = _Local(conn, name)
        replaced = self._local.get(name)
        if replaced is not None:
            self._release(replaced)
        self._local[name] = local
        self._by_conn[conn] = local
        self._joined.append(name)
        self._presence_wake.set()

    def leave(self, conn: FleetConnection) -> None:
        """``conn`` closed: what it was handed and did not write goes back to
        its senders' relays (refused: JetStream's turn), and, unless the key is
        connected here again, the claim is withdrawn."""
        local = self._by_conn.get(conn)
        if local is None:
            return
        self._release(local)
        if self._local.get(local.name) is local:
            del self._local[local.name]
            self._left.append(local.name)
            self._presence_wake.set()

    def _release(self, local: _Local) -> None:
        self._by_conn.pop(local.conn, None)
        answers = self._answers
        for pending in local.pending.values():
            for relay, number, _ in pending:
                held = answers.get(relay)
                if held is None:
                    held = answers[relay] = _Answers()
                held.refused.append(number)
        if local.pending:
            local.pending.clear()
            self._answer_wake.set()

    def on_presence(self, data: bytes) -> None:
        said = hotwire.read_presence(data)
        if said is None:
            self.counters["hot_malformed"] += 1
            return
        if said.relay == self.id:
            return  # our own word, back from NATS
        now = trio.current_time()
        if said.kind == hotwire.ANNOUNCE:
            self.presence.claim(said.relay, said.names, now + said.lease, now)
        elif said.kind == hotwire.WITHDRAW:
            self.presence.withdraw(said.relay, said.names)
        elif said.kind == hotwire.QUERY:
            self.announce_all()
        else:  # LEAVING
            self.presence.drop_relay(said.relay)

    def announce_all(self) -> None:
        self._announce_all = True
        self._presence_wake.set()

    def ask(self) -> None:
        """Ask every relay to announce its keys, and announce ours (after a
        start or an outage)."""
        self._query = True
        self.announce_all()

    async def _presence_loop(self) -> None:
        """Say who joined and left as it happens, and everyone connected here
        every third of a lease (or when a relay asks)."""
        lease = self.config.presence_lease
        renew_at = trio.current_time()
        while True:
            with trio.move_on_at(renew_at):
                while not (self._joined or self._left or self._announce_all):
                    self._presence_wake = trio.Event()
                    await self._presence_wake.wait()
            messages: list[bytes] = []
            if self._query:
                self._query = False
                messages.append(hotwire.presence(hotwire.QUERY, self.id))
            if trio.current_time() >= renew_at or self._announce_all:
                renew_at = trio.current_time() + lease / 3
                self._announce_all = False
                self._joined.clear()
                names = list(self._local)
                messages += hotwire.announcements(hotwire.ANNOUNCE, self.id, names, lease)
            elif self._joined:
                joined, self._joined = self._joined, []
                messages += hotwire.announcements(hotwire.ANNOUNCE, self.id, joined, lease)
            if self._left:
                left, self._left = self._left, []
                # (a key that left and came back is announced again below)
                back = [n for n in left if n in self._local]
                gone = [n for n in left if n not in self._local]
                messages += hotwire.announcements(hotwire.WITHDRAW, self.id, gone)
                messages += hotwire.announcements(hotwire.ANNOUNCE, self.id, back, lease)
            subject = hotwire.PRESENCE_SUBJECT
            try:
                await self._send_all([(subject, m) for m in messages])
            except BusError:
                self.ask()  # say it all, and hear it all, once NATS answers again
                self._link_up = trio.Event()
                if self.link is not None and not self.link.up:
                    await self._link_up.wait()

    # -- lifetime ---------------------------------------------------------------------

    def _came_up(self) -> None:
        self.ask()  # claims may have lapsed on either side meanwhile
        self._link_up.set()

    @property
    def _max_payload(self) -> int:
        return self.link.max_payload if self.link is not None else 0

    async def _send_all(self, messages: Sequence[tuple[str, bytes | list[bytes]]]) -> None:
        if self.link is None:
            raise BusError("no hot path")
        await self.link.send(messages, self.config.call_timeout)

    async def run(self) -> None:
        """Keep the link up and the hot path's work going, until cancelled."""
        link = self.link
        if link is None:
            return
        link.listen(hotwire.PRESENCE_SUBJECT, self.on_presence)
        link.listen(hotwire.batch_subject(self.id), self.on_batch)
        link.listen(hotwire.answer_subject(self.id), self.on_answer)
        link.on_up = self._came_up
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.run)
            nursery.start_soon(self._publish_loop)
            nursery.start_soon(self._answer_loop)
            nursery.start_soon(self._presence_loop)

    async def leaving(self) -> None:
        """Tell the fleet this relay is going (best effort)."""
        if self.link is not None and self.link.up:
            with suppress(BusError):
                await self._send_all(
                    [(hotwire.PRESENCE_SUBJECT, hotwire.presence(hotwire.LEAVING, self.id))]
                )

    def stats(self) -> dict[str, Any]:
        return {
            **self.counters,
            "hot_waiting": len(self._inflight),
            "claims_known": len(self.presence),
            "claims_here": len(self._local),
            "hot_link_up": self.link is not None and self.link.up,
            # NATS messages the link sent and received (batches, answers, presence)
            "hot_link_sent": self.link.sent if self.link is not None else 0,
            "hot_link_received": self.link.received if self.link is not None else 0,
        }


__all__ = ["HotPath"]
