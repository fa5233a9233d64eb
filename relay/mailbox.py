"""Mailboxes: envelopes waiting for a recipient who is not connected.

Sans-IO: every call that can age envelopes takes the time, so tests drive it
with any clock. Mailboxes are bounded per recipient (count, bytes, age) and in
total (bytes, recipients). Every envelope is charged its size plus a fixed
`ENVELOPE_OVERHEAD` (what holding it costs in objects and bookkeeping), so a
flood of tiny envelopes holds no more memory than the byte bounds say.

Within one recipient's mailbox every sender (the key its connection proved) has
a share: at the mailbox's count or byte bound the sender holding the most goes
first, its oldest envelope first, so one sender's flood pushes out its own mail,
not an honest sender's. When every sender holds a single envelope the newcomer
is refused instead, so keys minted by the hundred cannot push out anyone's only
envelope. Within a sender the oldest goes first, because a peer that reconnects
wants the newest state and the sync layer above resends anything it still
needs. At the relay-wide bounds (total bytes, recipients, age) the globally
oldest goes. Every envelope that leaves without being delivered is counted
under the reason it left.

Removals take the oldest envelope of some sender, so arrival-order queues (one
over every held envelope, one per mailbox) find the oldest in O(1): entries that
left early stay in them, emptied and marked gone, until they reach the front or
the queue is compacted.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .errors import RelayError

# Why an envelope left a mailbox (or never entered one) without being delivered.
DROP_REASONS = (
    "mailbox_full",  # the recipient's mailbox was at its envelope count
    "mailbox_bytes",  # ... or at its byte bound
    "mailbox_shared",  # ... full of single envelopes from as many senders: the newcomer
    "relay_full",  # all mailboxes together were at the total byte bound
    "recipients_full",  # too many recipients had mail; the stalest mailbox went
    "expired",  # older than max_age
    "too_large",  # larger than a mailbox can ever hold
)

# What holding one envelope costs beyond its bytes: the bytes object's header, its
# `_Held` record, and its places in three queues and a sender's table (measured
# with tracemalloc at about 130 bytes on CPython 3.11; rounded up).
ENVELOPE_OVERHEAD = 192

_COMPACT_AT = 1024  # gone entries tolerated before the arrival queue is rebuilt
_BOX_COMPACT_AT = 64  # ... and in one mailbox's queue


@dataclass(frozen=True, slots=True)
class MailboxLimits:
    max_envelopes: int = 256  # per recipient
    max_bytes: int = 8 << 20  # per recipient, overhead included
    max_age: float = 300.0  # seconds
    total_bytes: int = 256 << 20  # all recipients together, overhead included
    max_recipients: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_envelopes", "max_bytes", "max_age", "total_bytes", "max_recipients"):
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

    def biggest(self, by_bytes: bool, newcomer: bytes, charge: int) -> bytes:
        """The sender holding the most envelopes (or bytes), counting the one
        ``newcomer`` brings and preferring any that would hold more than one; of
        equals, the one first seen (dicts keep insertion order)."""
        senders, shares = self.senders, self.shares

        def share(s: bytes) -> tuple[bool, int]:
            count = len(senders[s]) + (s == newcomer)
            return count > 1, (shares[s] + charge * (s == newcomer)) if by_bytes else count

        return max(senders, key=share)


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

    @property
    def recipients(self) -> int:
        return len(self._boxes)

    def count(self, recipient: bytes, now: float) -> int:
        self.expire(now)
        box = self._boxes.get(recipient)
        return box.count if box is not None else 0

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
        if box is not None:
            while box.count and box.count >= limits.max_envelopes:
                if not self._make_room(box, sender, charge, False, "mailbox_full"):
                    return
            while box.count and box.bytes + charge > limits.max_bytes:
                if not self._make_room(box, sender, charge, True, "mailbox_bytes"):
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

    def _make_room(
        self, box: _Box, sender: bytes, charge: int, by_bytes: bool, reason: str
    ) -> bool:
        """Drop one envelope from ``box`` for a newcomer from ``sender`` (``charge``
        bytes): the biggest sender's oldest, unless that would take another sender's
        only envelope; then the newcomer is refused (False)."""
        victim = box.biggest(by_bytes, sender, charge)
        if victim != sender and len(box.senders[victim]) == 1:
            self.drops["mailbox_shared"] += 1  # every sender there holds one, and not this one
            return False
        self._remove(box.senders[victim][0], reason)
        return True

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
