"""Mailboxes: envelopes waiting for a recipient who is not connected.

Sans-IO: every call that can age envelopes takes the time, so tests drive it
with any clock. Mailboxes are bounded per recipient (count, bytes, age) and in
total (bytes, recipients). Every envelope is charged its size plus a fixed
`ENVELOPE_OVERHEAD` (what holding it costs in objects and bookkeeping), so a
flood of tiny envelopes holds no more memory than the byte bounds say.

Within one recipient's mailbox every sender (the key its connection proved) has
a share, and the recipient's correspondents come first. The relay sees every
Send, so it knows whom each key writes to (`Correspondents`: a few dozen keys
each, for a day); a minted key can never make a recipient write to it. At the
mailbox's count or byte bound the senders that are not the recipient's
correspondents give way first: the one holding the most, its oldest envelope
first, so one sender's flood pushes out its own mail; when each of them holds a
single envelope, the oldest of those goes, so keys minted by the hundred push
out only each other. A correspondent's envelope goes only when every envelope
held is a correspondent's: then the correspondent holding the most loses its
oldest, unless each holds one, and the newcomer is refused. A newcomer that is
not a correspondent is refused, dropping nothing, when its room could only come
from correspondents' mail. Within a sender the oldest goes first, because a
peer that reconnects wants the newest state and the sync layer above resends
anything it still needs. At the relay-wide bounds (total bytes,
recipients, age) the globally oldest goes. Every envelope that leaves without
being delivered is counted under the reason it left.

Removals take the oldest envelope of some sender, so arrival-order queues (one
over every held envelope, one per mailbox) find the oldest in O(1): entries that
left early stay in them, emptied and marked gone, until they reach the front or
the queue is compacted.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass

from .errors import RelayError

# Why an envelope left a mailbox (or never entered one) without being delivered.
DROP_REASONS = (
    "mailbox_full",  # the recipient's mailbox was at its envelope count
    "mailbox_bytes",  # ... or at its byte bound
    "mailbox_shared",  # ... full of single envelopes from as many correspondents: the newcomer
    "mailbox_correspondents",  # ... full of correspondents' mail: a newcomer that is not one
    "relay_full",  # all mailboxes together were at the total byte bound
    "recipients_full",  # too many recipients had mail; the stalest mailbox went
    "expired",  # older than max_age
    "too_large",  # larger than a mailbox can ever hold
)

# What holding one envelope costs beyond its bytes: the bytes object's header, its
# `_Held` record, and its places in three queues and a sender's table (measured
# with tracemalloc at about 130 bytes on CPython 3.11; rounded up).
ENVELOPE_OVERHEAD = 192

# What remembering one correspondent costs at most (both keys, a float and its
# places in two tables; measured at about 610 bytes when each key has written to
# one other, the worst case; rounded up): 24 MiB for the default 32,768.
CORRESPONDENT_COST = 768

_COMPACT_AT = 1024  # gone entries tolerated before the arrival queue is rebuilt
_BOX_COMPACT_AT = 64  # ... and in one mailbox's queue


@dataclass(frozen=True, slots=True)
class MailboxLimits:
    max_envelopes: int = 256  # per recipient
    max_bytes: int = 8 << 20  # per recipient, overhead included
    max_age: float = 300.0  # seconds
    total_bytes: int = 256 << 20  # all recipients together, overhead included
    max_recipients: int = 10_000
    correspondents: int = 64  # remembered per key, the least recently written to first out
    all_correspondents: int = 32_768  # ... for all keys together, the oldest first out
    correspondent_age: float = 86_400.0  # seconds a correspondent is remembered unwritten

    def __post_init__(self) -> None:
        for name in (
            "max_envelopes",
            "max_bytes",
            "max_age",
            "total_bytes",
            "max_recipients",
            "correspondents",
            "all_correspondents",
            "correspondent_age",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
                raise RelayError(f"mailbox {name} must be a positive number, not {value!r}")


class _Held:
    # The keys are the mailbox's own objects, shared by all its envelopes.
    __slots__ = ("at", "envelope", "gone", "recipient", "sender")

    def __init__(self, recipient: bytes, sender: bytes, envelope: bytes, at: float) -> None:
        self.recipient = recipient
        self.sender = sender
        self.envelope = envelope
        self.at = at
        self.gone = False


class _Box:
    """One recipient's mail: in arrival order, and by sender (each oldest first)."""

    __slots__ = ("bytes", "count", "gone", "key", "order", "senders", "shares")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.order: deque[_Held] = deque()  # arrival order, with gone entries
        self.gone = 0
        self.senders: dict[bytes, deque[_Held]] = {}
        self.shares: dict[bytes, int] = {}  # bytes charged per sender
        self.count = 0
        self.bytes = 0

    def first(self) -> _Held:
        order = self.order
        while order[0].gone:
            order.popleft()
            self.gone -= 1
        return order[0]

    def biggest(self, among: list[bytes], by_bytes: bool, newcomer: bytes, charge: int) -> bytes:
        """Of the senders ``among``, the one holding the most envelopes (or bytes),
        counting the one ``newcomer`` brings and preferring any that would hold more
        than one; of equals, the one first seen (dicts keep insertion order)."""
        senders, shares = self.senders, self.shares

        def share(s: bytes) -> tuple[bool, int]:
            count = len(senders[s]) + (s == newcomer)
            return count > 1, (shares[s] + charge * (s == newcomer)) if by_bytes else count

        return max(among, key=share)


# A key written to again within this many seconds keeps its place and its time, so
# a Send on the hot path costs two dict lookups; order and age are right to within it.
_REFRESH = 1.0


class Correspondents:
    """Whom each key has written to lately (its correspondents): at most ``per_key``
    for each key, the least recently written to forgotten first; at most ``total``
    for all keys together, the least recently written to of any key forgotten
    first; and none left unwritten to for longer than ``max_age``. Bounded by
    count, each at most `CORRESPONDENT_COST` bytes."""

    def __init__(self, per_key: int, total: int, max_age: float) -> None:
        self.per_key = per_key
        self.total = total
        self.max_age = max_age
        # writer -> {correspondent: when last written to}, least recently first
        self._of: dict[bytes, dict[bytes, float]] = {}
        # (writer, correspondent) over all writers, least recently written first
        self._order: OrderedDict[tuple[bytes, bytes], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._order)

    def note(self, writer: bytes, to: bytes, now: float) -> None:
        """``writer`` sent an envelope to ``to``."""
        mine = self._of.get(writer)
        if mine is not None:
            at = mine.get(to)
            if at is not None and now - at < _REFRESH:
                return
        self._note(writer, to, now)

    def _note(self, writer: bytes, to: bytes, now: float) -> None:
        self.forget(now)
        mine = self._of.get(writer)
        if mine is None:
            mine = {}
        pair = (writer, to)
        if mine.pop(to, None) is not None:
            self._order.move_to_end(pair)
        else:
            if len(mine) >= self.per_key:
                oldest = next(iter(mine))
                del mine[oldest]
                del self._order[writer, oldest]
            elif len(self._order) >= self.total:
                self._forget_first()  # (perhaps this writer's only one)
            self._order[pair] = None
        mine[to] = now  # last: least recently written first
        self._of[writer] = mine

    def of(self, writer: bytes, now: float) -> set[bytes]:
        """``writer``'s correspondents."""
        mine = self._of.get(writer)
        if mine is None:
            return set()
        cutoff = now - self.max_age
        return {to for to, at in mine.items() if at >= cutoff}

    def forget(self, now: float) -> None:
        """Forget every correspondent not written to for ``max_age``."""
        cutoff = now - self.max_age
        order = self._order
        while order:
            writer, to = next(iter(order))
            if self._of[writer][to] >= cutoff:
                break
            self._forget_first()

    def _forget_first(self) -> None:
        writer, to = self._order.popitem(last=False)[0]
        mine = self._of[writer]
        del mine[to]
        if not mine:
            del self._of[writer]


class Mailboxes:
    """Every recipient's queue of undelivered envelopes, oldest first."""

    def __init__(self, limits: MailboxLimits | None = None) -> None:
        self.limits = limits or MailboxLimits()
        self._boxes: dict[bytes, _Box] = {}
        self._arrivals: deque[_Held] = deque()  # held envelopes in arrival order, and gone ones
        self._gone_in_arrivals = 0
        self.envelopes = 0  # held now
        self.bytes = 0  # charged now: envelope bytes plus the overhead of each
        self.accepted = 0  # ever put (and not refused)
        self.taken = 0  # ever handed out for delivery
        self.drops: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        limits = self.limits
        self.correspondents = Correspondents(
            limits.correspondents, limits.all_correspondents, limits.correspondent_age
        )

    @property
    def recipients(self) -> int:
        return len(self._boxes)

    def count(self, recipient: bytes, now: float) -> int:
        self.expire(now)
        box = self._boxes.get(recipient)
        return box.count if box is not None else 0

    def holding(self) -> list[bytes]:
        """Every recipient with mail waiting."""
        return list(self._boxes)

    def senders(self, recipient: bytes) -> dict[bytes, int]:
        """How many envelopes each sender has waiting for ``recipient``."""
        box = self._boxes.get(recipient)
        return {s: len(q) for s, q in box.senders.items()} if box is not None else {}

    def put(self, recipient: bytes, envelope: bytes, now: float, sender: bytes = b"") -> None:
        """Hold ``envelope`` from ``sender`` for ``recipient``, dropping others to stay
        in bounds (or refusing it: see the module's account of shares)."""
        self.expire(now)
        limits = self.limits
        charge = len(envelope) + ENVELOPE_OVERHEAD
        if charge > limits.max_bytes or charge > limits.total_bytes:
            self.drops["too_large"] += 1
            return
        box = self._boxes.get(recipient)
        if (
            box is not None
            and (box.count >= limits.max_envelopes or box.bytes + charge > limits.max_bytes)
            and not self._make_room(box, sender, charge, now)
        ):
            return
        while self.bytes + charge > limits.total_bytes:
            self._drop_oldest("relay_full")
        box = self._boxes.get(recipient)
        if box is None:
            if len(self._boxes) >= limits.max_recipients:
                self._drop_stalest_mailbox()
            box = self._boxes[recipient] = _Box(recipient)
        queue = box.senders.get(sender)
        if queue is None:
            queue = box.senders[sender] = deque()
            box.shares[sender] = 0
        else:
            sender = queue[0].sender  # the object the mailbox holds already
        held = _Held(box.key, sender, envelope, now)
        box.order.append(held)
        queue.append(held)
        box.shares[sender] += charge
        box.count += 1
        box.bytes += charge
        self._arrivals.append(held)
        self.envelopes += 1
        self.bytes += charge
        self.accepted += 1

    def _make_room(self, box: _Box, sender: bytes, charge: int, now: float) -> bool:
        """Drop envelopes from ``box`` until a newcomer from ``sender`` (``charge``
        bytes) fits, or refuse it (False) without dropping any: see the module's
        account of shares."""
        limits = self.limits
        known = self.correspondents.of(box.key, now)
        if sender not in known:
            # Only mail from senders that are not correspondents may make its room.
            count = size = 0
            for s, queue in box.senders.items():
                if s in known:
                    count += len(queue)
                    size += box.shares[s]
            if count >= limits.max_envelopes or size + charge > limits.max_bytes:
                self.drops["mailbox_correspondents"] += 1
                return False
        while box.count and box.count >= limits.max_envelopes:
            victim = self._victim(box, known, sender, charge, False)
            if victim is None:
                return False
            self._remove(victim, "mailbox_full")
        while box.count and box.bytes + charge > limits.max_bytes:
            victim = self._victim(box, known, sender, charge, True)
            if victim is None:
                return False
            self._remove(victim, "mailbox_bytes")
        return True

    def _victim(
        self, box: _Box, known: set[bytes], sender: bytes, charge: int, by_bytes: bool
    ) -> _Held | None:
        """The envelope to drop for a newcomer from ``sender``, or None (counted) if
        it is refused."""
        strangers = [s for s in box.senders if s not in known]
        if strangers:  # senders that are not correspondents pay first
            victim = box.biggest(strangers, by_bytes, sender, charge)
            if victim == sender or len(box.senders[victim]) > 1:
                return box.senders[victim][0]
            for held in box.order:  # each holds one: the oldest of them goes
                if not held.gone and held.sender not in known:
                    return held
        if sender not in known:  # (the check in `_make_room` keeps this from happening)
            self.drops["mailbox_correspondents"] += 1
            return None
        victim = box.biggest(list(box.senders), by_bytes, sender, charge)
        if victim != sender and len(box.senders[victim]) == 1:
            self.drops["mailbox_shared"] += 1  # every correspondent there holds one
            return None
        return box.senders[victim][0]

    def take(
        self, recipient: bytes, now: float, max_count: int, max_bytes: int
    ) -> list[tuple[bytes, bytes]]:
        """Remove and return the oldest envelopes for ``recipient``, each with its
        sender, at least one if any are held, then up to ``max_count`` and
        ``max_bytes`` (envelope bytes) in all."""
        self.expire(now)
        box = self._boxes.get(recipient)
        out: list[tuple[bytes, bytes]] = []
        total = 0
        while box is not None and box.count and len(out) < max_count:
            first = box.first()
            size = len(first.envelope)
            if out and total + size > max_bytes:
                break
            out.append((first.sender, first.envelope))
            self._remove(first, None)
            total += size
        self.taken += len(out)
        return out

    def expire(self, now: float) -> int:
        """Drop every envelope older than ``max_age``; return how many went."""
        cutoff = now - self.limits.max_age
        before = self.drops["expired"]
        arrivals = self._arrivals
        while arrivals:
            first = arrivals[0]
            if first.gone:
                arrivals.popleft()
                self._gone_in_arrivals -= 1
            elif first.at < cutoff:
                self._remove(first, "expired")
            else:
                break
        return self.drops["expired"] - before

    # -- removal: always the oldest of some sender in some mailbox -------------------

    def _remove(self, held: _Held, reason: str | None) -> None:
        box = self._boxes[held.recipient]
        queue = box.senders[held.sender]
        assert queue[0] is held  # removals take a sender's oldest
        queue.popleft()
        charge = len(held.envelope) + ENVELOPE_OVERHEAD
        if queue:
            box.shares[held.sender] -= charge
        else:
            del box.senders[held.sender]
            del box.shares[held.sender]
        held.gone = True
        held.envelope = b""  # the queues may keep the entry a while; not the bytes
        box.gone += 1
        box.count -= 1
        box.bytes -= charge
        self._gone_in_arrivals += 1
        self.envelopes -= 1
        self.bytes -= charge
        if reason is not None:
            self.drops[reason] += 1
        if not box.count:
            del self._boxes[held.recipient]
        elif box.gone > _BOX_COMPACT_AT and 2 * box.gone > len(box.order):
            box.order = deque(h for h in box.order if not h.gone)
            box.gone = 0
        if self._gone_in_arrivals > _COMPACT_AT and 2 * self._gone_in_arrivals > len(
            self._arrivals
        ):
            self._arrivals = deque(h for h in self._arrivals if not h.gone)
            self._gone_in_arrivals = 0

    def _oldest(self) -> _Held:
        arrivals = self._arrivals
        while arrivals[0].gone:
            arrivals.popleft()
            self._gone_in_arrivals -= 1
        return arrivals[0]

    def _drop_oldest(self, reason: str) -> None:
        self._remove(self._oldest(), reason)

    def _drop_stalest_mailbox(self) -> None:
        recipient = self._oldest().recipient
        box = self._boxes[recipient]
        while recipient in self._boxes:
            self._remove(box.first(), "recipients_full")
