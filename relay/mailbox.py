"""Mailboxes: envelopes waiting for a recipient who is not connected.

Sans-IO: every call that can age envelopes takes the time, so tests drive it
with any clock. Mailboxes are bounded per recipient (count, bytes, age) and in
total (bytes, recipients). At a bound the oldest envelope goes first, because a
peer that reconnects wants the newest state and the sync layer above resends
anything it still needs; every envelope that leaves without being delivered is
counted under the reason it left.

All removals take the oldest envelope of some mailbox, so one arrival-order
queue over every held envelope finds the globally oldest in O(1): entries that
left early stay in that queue, emptied and marked gone, until they reach its
front or the queue is compacted.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .errors import RelayError

# Why an envelope left a mailbox without being delivered.
DROP_REASONS = (
    "mailbox_full",  # the recipient's mailbox was at its envelope count
    "mailbox_bytes",  # ... or at its byte bound
    "relay_full",  # all mailboxes together were at the total byte bound
    "recipients_full",  # too many recipients had mail; the stalest mailbox went
    "expired",  # older than max_age
    "too_large",  # larger than a mailbox can ever hold
)

_COMPACT_AT = 1024  # gone entries tolerated before the arrival queue is rebuilt


@dataclass(frozen=True, slots=True)
class MailboxLimits:
    max_envelopes: int = 256  # per recipient
    max_bytes: int = 8 << 20  # per recipient
    max_age: float = 300.0  # seconds
    total_bytes: int = 256 << 20  # all recipients together
    max_recipients: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_envelopes", "max_bytes", "max_age", "total_bytes", "max_recipients"):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
                raise RelayError(f"mailbox {name} must be a positive number, not {value!r}")


class _Held:
    __slots__ = ("at", "envelope", "gone", "recipient")

    def __init__(self, recipient: bytes, envelope: bytes, at: float) -> None:
        self.recipient = recipient
        self.envelope = envelope
        self.at = at
        self.gone = False


class Mailboxes:
    """Every recipient's queue of undelivered envelopes, oldest first."""

    def __init__(self, limits: MailboxLimits | None = None) -> None:
        self.limits = limits or MailboxLimits()
        self._boxes: dict[bytes, deque[_Held]] = {}
        self._box_bytes: dict[bytes, int] = {}
        self._arrivals: deque[_Held] = deque()  # held envelopes in arrival order, and gone ones
        self._gone_in_arrivals = 0
        self.envelopes = 0  # held now
        self.bytes = 0  # held now
        self.accepted = 0  # ever put (and not refused as too large)
        self.taken = 0  # ever handed out for delivery
        self.drops: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)

    @property
    def recipients(self) -> int:
        return len(self._boxes)

    def count(self, recipient: bytes, now: float) -> int:
        self.expire(now)
        box = self._boxes.get(recipient)
        return len(box) if box is not None else 0

    def put(self, recipient: bytes, envelope: bytes, now: float) -> None:
        """Hold ``envelope`` for ``recipient``, dropping older ones to stay in bounds."""
        self.expire(now)
        limits = self.limits
        size = len(envelope)
        if size > limits.max_bytes or size > limits.total_bytes:
            self.drops["too_large"] += 1
            return
        box = self._boxes.get(recipient)
        # The recipient's own oldest go before anyone else's.
        while box and len(box) >= limits.max_envelopes:
            self._drop_first(recipient, "mailbox_full")
        while box and self._box_bytes[recipient] + size > limits.max_bytes:
            self._drop_first(recipient, "mailbox_bytes")
        while self.bytes + size > limits.total_bytes:
            self._drop_oldest("relay_full")
        box = self._boxes.get(recipient)
        if box is None:
            if len(self._boxes) >= limits.max_recipients:
                self._drop_stalest_mailbox()
            box = self._boxes[recipient] = deque()
            self._box_bytes[recipient] = 0
        held = _Held(recipient, envelope, now)
        box.append(held)
        self._arrivals.append(held)
        self._box_bytes[recipient] += size
        self.envelopes += 1
        self.bytes += size
        self.accepted += 1

    def take(self, recipient: bytes, now: float, max_count: int, max_bytes: int) -> list[bytes]:
        """Remove and return the oldest envelopes for ``recipient``, at least one if any
        are held, then up to ``max_count`` and ``max_bytes`` in all."""
        self.expire(now)
        box = self._boxes.get(recipient)
        out: list[bytes] = []
        total = 0
        while box and len(out) < max_count:
            size = len(box[0].envelope)
            if out and total + size > max_bytes:
                break
            out.append(self._remove_first(recipient))
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
                self._drop_first(first.recipient, "expired")
            else:
                break
        return self.drops["expired"] - before

    # -- removal: always the oldest of some mailbox -----------------------------

    def _remove_first(self, recipient: bytes) -> bytes:
        box = self._boxes[recipient]
        held = box.popleft()
        envelope = held.envelope
        size = len(envelope)
        held.gone = True
        held.envelope = b""  # the arrival queue may keep the entry a while; not the bytes
        self._gone_in_arrivals += 1
        self._box_bytes[recipient] -= size
        self.envelopes -= 1
        self.bytes -= size
        if not box:
            del self._boxes[recipient]
            del self._box_bytes[recipient]
        if self._gone_in_arrivals > _COMPACT_AT and 2 * self._gone_in_arrivals > len(
            self._arrivals
        ):
            self._arrivals = deque(h for h in self._arrivals if not h.gone)
            self._gone_in_arrivals = 0
        return envelope

    def _drop_first(self, recipient: bytes, reason: str) -> None:
        self._remove_first(recipient)
        self.drops[reason] += 1

    def _oldest(self) -> _Held:
        arrivals = self._arrivals
        while arrivals[0].gone:
            arrivals.popleft()
            self._gone_in_arrivals -= 1
        return arrivals[0]

    def _drop_oldest(self, reason: str) -> None:
        self._drop_first(self._oldest().recipient, reason)

    def _drop_stalest_mailbox(self) -> None:
        recipient = self._oldest().recipient
        while recipient in self._boxes:
            self._drop_first(recipient, "recipients_full")
