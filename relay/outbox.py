"""What waits for one connection's writer: its outbox, and the byte budget all
outboxes share.

Everything here is bookkeeping over frames already encoded; the relay
(`pixie.relay.server`) fills outboxes as it routes and empties each in its
connection's writing task. No I/O, no clock.
"""

from __future__ import annotations

import trio

from pixie.protocol import relaywire

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


__all__ = ["FLEET_SENDER", "FRAME_OVERHEAD", "HOT_SENDER", "ByteBudget", "Outbox"]
