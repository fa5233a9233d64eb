"""The sync session: a sans-IO state machine that converges two replicas.

Rules of the session, read top to bottom (both roles run this same code; the
opener is the side that started it, the responder the side that answered):

1. Hello. The opener sends its digest and marks (what it holds, compactly).
   The responder answers with its own. Equal digests end the session for both:
   one round trip, whatever the size of the data. The opener compares the
   answer with the digest it sent, not with its state on the answer's arrival:
   the responder has ended the session if the two matched, even if the opener
   has changed since (its next session carries the change).
2. Stream. Otherwise each side sends, in numbered batches, the records the
   other lacks by its marks, and commits each batch it receives on arrival.
   A side's stream ends with a batch marked last, or is empty: the responder
   says so in its Hello, the opener by sending its Check without a batch.
   Batches must arrive in order: a gap ends the session (the next one resumes,
   because everything that landed is already reflected in the marks).
3. Check. A side that has sent its whole stream and received the peer's sends
   its digest once. With both digests known, equal ends the session.
4. Repair. Unequal digests mean the marks lied or something was lost. The
   opener starts reconciliation (see `reconcile.py`), which trusts no summary:
   turns of `Repair` messages narrow the differing ranges, each side sends the
   records the other lacks and asks for those it lacks, and a side with
   nothing left to ask sends its Check. Equal digests end the session; after
   ``max_repairs`` rounds that still differ, it fails. A responder whose marks
   equal the opener's while the digests differ knows at once that neither side
   has anything to stream: its Hello reply carries the first ranges of a repair
   round instead (``Hello.repair``), and the stream and its Checks are skipped,
   so one difference among a million items is settled in two round trips.

Anything else is a `ProtocolError` ("can't handle X in state Y"): the session
fails, an `Abort` tells the peer why, and nothing half-applied stays behind
(each batch is applied in one transaction by the replica).

5. Refusal. A side that receives a Hello while it opens a session of its own
   with that peer may refuse it with `refusal(session)`, an Abort whose reason
   is `BUSY_REASON`; a session that receives one ends as `Ending.REFUSED` (the
   peer's own session does the work in its place). Which side refuses, and how
   leftovers of sessions long over are told apart, is the driver's business
   (see `pixie.device.sync.driver`): a session only knows its own id. An opener
   may send its Hello again (`SyncSession.hello`) to show the peer that its
   session is still open; the driver hands a session its Hello once, and a
   second Hello that differs from the first fails it like any other.

The session never touches a socket or a database: it calls a `Replica` for the
store's answers and queues messages for the driver to send.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .clock import SYSTEM_ENTROPY, Entropy
from .errors import ProtocolError
from .reconcile import ItemIndex, Range, Reconciler
from .syncmessages import (
    MAX_NEED,
    SESSION_BYTES,
    Abort,
    Ack,
    Batch,
    Check,
    Hello,
    Marks,
    Records,
    Repair,
    SyncMessage,
)
from .syncwire import decode, encode

MAX_REPAIRS = 3
# A Repair message carries at most this many ranges (and about this many bytes
# of them); the rest wait for the next turn.
REPLY_RANGES = 1_024
REPLY_BYTES = 480 * 1024
# Flow control: at most WINDOW batches in flight, unconfirmed; the receiver
# confirms every ACK_EVERY. A sibling's inbox and the relay's per-connection
# outbox (8 MiB) then never overflow, however large the stream.
WINDOW = 8
ACK_EVERY = 4


class Replica(Protocol):
    """What a sync session needs from a store. Every call is synchronous."""

    def state(self) -> tuple[bytes, int]:
        """The 32-byte state digest and the number of items it covers."""
        ...

    def marks(self) -> Marks: ...

    def missing(self, peer: Marks) -> Iterator[Records]:
        """The records a peer with these marks lacks, in bounded chunks, in the
        order they must be applied (per origin: ascending)."""
        ...

    def apply(self, records: Records, *, in_order: bool) -> int:
        """Merge records in one transaction and return how many changed anything.
        ``in_order``: refuse a log batch that skips sequence numbers."""
        ...

    def item_index(self) -> ItemIndex:
        """The items the digest sums, by hash, for reconciliation (see
        `reconcile.ItemIndex`): read as the replica stands at each call."""
        ...

    def records_for(self, keys: Sequence[bytes]) -> Iterator[Records]:
        """The records named by ``keys`` that this replica holds, in bounded chunks."""
        ...


# The reason an Abort carries when a peer refuses a session because one of its
# own with us is opening: part of the protocol, not prose (see `Ending.REFUSED`).
BUSY_REASON = "a session between us is already running"


def refusal(session: bytes) -> Abort:
    """The Abort by which a peer refuses the session ``session`` (rule 5)."""
    return Abort(session, BUSY_REASON)


class Ending(enum.Enum):
    """How a finished session ended."""

    DONE = "done"  # both replicas hold the same
    FAILED = "failed"  # this side ended it (a protocol error, or its driver's reason)
    ABORTED = "aborted"  # the peer ended it with an Abort
    REFUSED = "refused"  # the peer refused it: its own session with us goes on instead


class Phase(enum.Enum):
    IDLE = "idle"
    HELLO_SENT = "hello sent"
    STREAMING = "streaming"
    REPAIRING = "repairing"
    DONE = "done"
    FAILED = "failed"


@dataclass
class SyncStats:
    messages_sent: int = 0
    messages_received: int = 0
    records_sent: int = 0
    records_received: int = 0
    applied: int = 0
    round_trips: int = 0
    repair_rounds: int = 0
    in_sync_at_hello: bool = False
    repair_at_hello: bool = False  # the Hello reply opened the repair (equal marks)
    ignored: int = 0  # messages of other sessions
    # What the sibling's hello says it holds beyond us (its item count less
    # ours): an estimate of the records to come, for a progress display only.
    expected: int = 0


def new_session_id(entropy: Entropy = SYSTEM_ENTROPY) -> bytes:
    return entropy.token_bytes(SESSION_BYTES)


@dataclass
class _Round:
    """Progress of one stream or repair round."""

    sent_all: bool = False
    got_all: bool = False
    my_check: tuple[bytes, int] | None = None
    peer_check: tuple[bytes, int] | None = None


class SyncSession:
    def __init__(
        self,
        replica: Replica,
        *,
        opener: bool,
        session_id: bytes | None = None,
        max_repairs: int = MAX_REPAIRS,
        entropy: Entropy = SYSTEM_ENTROPY,
    ) -> None:
        self.replica = replica
        self.opener = opener
        self.session_id = session_id or (new_session_id(entropy) if opener else b"")
        self.max_repairs = max_repairs
        self.phase = Phase.IDLE
        self.stats = SyncStats()
        self.error: str | None = None
        self.ending: Ending | None = None  # set when the session finishes
        self._out: deque[SyncMessage] = deque()
        self._stream: Iterator[Records] | None = None
        self._ahead: Records | None = None
        self._sent_number = 0
        self._expect_number = 0
        self._round = _Round()
        self._items: Reconciler | None = None
        self._pending_ranges: list[Range] = []
        self._pending_need: list[bytes] = []
        self._acked = 0  # batches the sibling has confirmed applying
        self._said: tuple[bytes, int] | None = None  # the digest our Hello carried
        self._hello: Hello | None = None  # the Hello an opener sent

    @property
    def hello(self) -> Hello | None:
        """The Hello this session opened with (an opener's, once started): what a
        driver sends again to show the sibling that the session is still open."""
        return self._hello

    # -- the driver's side ----------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.DONE, Phase.FAILED)

    def start(self) -> None:
        if not self.opener or self.phase is not Phase.IDLE:
            raise ProtocolError(f"can't start a session in state {self.phase.value}")
        digest, count = self.replica.state()
        self._said = (digest, count)
        self._hello = Hello(self.session_id, False, digest, count, self.replica.marks())
        self._send(self._hello)
        self.phase = Phase.HELLO_SENT

    def next_message(self) -> SyncMessage | None:
        """The next message to send, or None until something is received."""
        if (
            not self._out
            and self.phase is Phase.STREAMING
            and not self._round.sent_all
            and self._sent_number - self._acked < WINDOW
        ):
            try:
                self._pull_batch()
            except ProtocolError as exc:  # a record this side cannot send
                self.fail(str(exc))
        if self._out:
            message = self._out.popleft()
            self.stats.messages_sent += 1
            return message
        return None

    def receive(self, message: SyncMessage) -> None:
        if self.finished:
            return
        self.stats.messages_received += 1
        if self.phase is Phase.IDLE and isinstance(message, Hello) and not self.opener:
            self.session_id = message.session
        if message.session != self.session_id:
            self.stats.ignored += 1
            return
        try:
            self._dispatch(message)
        except ProtocolError as exc:
            self.fail(str(exc))

    def fail(self, reason: str, *, tell_peer: bool = True) -> None:
        if self.finished:
            return
        self.phase = Phase.FAILED
        self.ending = Ending.FAILED
        self.error = reason
        self._out.clear()
        if tell_peer and self.session_id:
            self._out.append(Abort(self.session_id, reason))

    # -- transitions ----------------------------------------------------------------

    def _dispatch(self, message: SyncMessage) -> None:
        if isinstance(message, Abort):
            self.phase = Phase.FAILED
            self.ending = Ending.REFUSED if message.reason == BUSY_REASON else Ending.ABORTED
            self.error = f"the sibling ended the session: {message.reason}"
            self._out.clear()
            return
        match (self.phase, message):
            case (Phase.IDLE, Hello(reply=False)) if not self.opener:
                # Both sides count the exchanges they take part in, so a
                # responder's report reads like its opener's.
                self.stats.round_trips += 1
                self._on_hello(message)
            case (Phase.HELLO_SENT, Hello(reply=True)):
                self.stats.round_trips += 1
                self._on_hello(message)
            case (Phase.STREAMING | Phase.REPAIRING, Batch()):
                self._on_batch(message)
            case (Phase.STREAMING | Phase.REPAIRING | Phase.DONE, Ack()):
                if message.number >= self._sent_number:
                    raise ProtocolError(f"an Ack for batch {message.number}, never sent")
                self._acked = max(self._acked, message.number + 1)
            case (Phase.STREAMING | Phase.REPAIRING, Check()):
                self.stats.round_trips += 1
                self._on_check(message)
            case (Phase.REPAIRING, Repair()):
                self.stats.round_trips += 1
                self._on_repair(message)
            case _:
                raise ProtocolError(
                    f"can't handle {type(message).__name__} in state {self.phase.value}"
                )

    def _on_hello(self, hello: Hello) -> None:
        if self.opener:
            # Our count as our Hello gave it: no second read of the store.
            assert self._said is not None
            self.stats.expected = max(hello.count - self._said[1], 0)
            # Equal to what we said: the responder has ended the session.
            if (hello.digest, hello.count) == self._said:
                if hello.repair:
                    raise ProtocolError("a Hello reply in sync carries repair ranges")
                self.stats.in_sync_at_hello = True
                self._done()
                return
            if hello.repair:
                # The marks agree and the digests do not: repair at once.
                if self.max_repairs < 1:
                    raise ProtocolError("digests differ and this session runs no repair round")
                self.stats.repair_at_hello = True
                self._begin_repair()
                self._on_repair(Repair(self.session_id, hello.repair, ()))
                return
            self._begin_stream(hello.marks)
            self._round.got_all = not hello.streaming
            self._maybe_check()
            return
        digest, count = self.replica.state()
        self.stats.expected = max(hello.count - count, 0)
        marks = self.replica.marks()
        if (hello.digest, hello.count) == (digest, count):
            self.stats.in_sync_at_hello = True
            self._send(Hello(self.session_id, True, digest, count, marks))
            self._done()
            return
        if marks == hello.marks and self.max_repairs > 0:
            # Equal marks: neither side has anything to stream, so the stream
            # could not bring the digests together. Open the repair right here.
            self.stats.repair_at_hello = True
            items = self._begin_repair()
            repair = tuple(items.initial(hello.count))
            self._send(Hello(self.session_id, True, digest, count, marks, False, repair))
            return
        self._begin_stream(hello.marks)
        streaming = self._ahead is not None
        self._send(Hello(self.session_id, True, digest, count, self.replica.marks(), streaming))
        self._round.sent_all = not streaming

    def _begin_stream(self, peer: Marks) -> None:
        self.phase = Phase.STREAMING
        self._stream = self.replica.missing(peer)
        self._ahead = next(self._stream, None)
        if self._ahead is None:
            self._round.sent_all = True

    def _pull_batch(self) -> None:
        assert self._stream is not None
        if self._ahead is None:
            self._round.sent_all = True
            self._maybe_check()
            return
        current, self._ahead = self._ahead, next(self._stream, None)
        last = self._ahead is None
        self._send_batch(current, last)
        if last:
            self._round.sent_all = True
            self._maybe_check()

    def _send_batch(self, records: Records, last: bool) -> None:
        self._send(Batch(self.session_id, self._sent_number, last, records))
        self._sent_number += 1
        self.stats.records_sent += len(records)

    def _on_batch(self, batch: Batch) -> None:
        if batch.number < self._expect_number:
            self.stats.ignored += 1  # a duplicate: already applied
            return
        if batch.number > self._expect_number:
            raise ProtocolError(f"batch {batch.number} arrived before batch {self._expect_number}")
        if self.phase is Phase.STREAMING and self._round.got_all:
            raise ProtocolError("a batch arrived after the sibling's stream had ended")
        self._expect_number += 1
        self.stats.records_received += len(batch.records)
        self.stats.applied += self.replica.apply(
            batch.records, in_order=self.phase is Phase.STREAMING
        )
        if batch.last and self.phase is Phase.STREAMING:
            self._round.got_all = True
            self._maybe_check()
        elif self.phase is Phase.STREAMING and self._expect_number % ACK_EVERY == 0:
            self._send(Ack(self.session_id, batch.number))

    def _maybe_check(self) -> None:
        r = self._round
        if r.sent_all and r.got_all and r.my_check is None:
            r.my_check = self.replica.state()
            self._send(Check(self.session_id, *r.my_check))
            self._compare()

    def _on_check(self, check: Check) -> None:
        r = self._round
        if r.peer_check is not None:
            raise ProtocolError("a second Check in one round")
        if self.phase is Phase.REPAIRING and (self._pending_ranges or self._pending_need):
            # The sibling is done, but we still have ranges for it: go on.
            self._take_turn()
            return
        r.peer_check = (check.digest, check.count)
        if self.phase is Phase.STREAMING:
            # A Check ends the sibling's stream (an empty one has no last batch).
            r.got_all = True
            self._maybe_check()
        elif r.my_check is None:
            r.my_check = self.replica.state()
            self._send(Check(self.session_id, *r.my_check))
        self._compare()

    def _compare(self) -> None:
        r = self._round
        if r.my_check is None or r.peer_check is None or self.finished:
            return
        if r.my_check == r.peer_check:
            self._done()
            return
        if self.stats.repair_rounds >= self.max_repairs:
            raise ProtocolError(
                f"digests still differ after {self.stats.repair_rounds} repair rounds"
            )
        items = self._begin_repair()
        if self.opener:
            self._send(Repair(self.session_id, tuple(items.initial(r.peer_check[1])), ()))

    def _begin_repair(self) -> Reconciler:
        """Start a repair round: both sides' streams are over, the items read afresh."""
        self.stats.repair_rounds += 1
        self.phase = Phase.REPAIRING
        self._round = _Round(sent_all=True, got_all=True)
        self._items = Reconciler(self.replica.item_index())
        self._pending_ranges = []
        self._pending_need = []
        return self._items

    def _on_repair(self, repair: Repair) -> None:
        if self._items is None:
            raise ProtocolError("a Repair arrived outside a repair round")
        # A Repair after a Check (ours or theirs) means the sibling still had
        # ranges to settle: the round goes on and both Checks start over.
        self._round.my_check = self._round.peer_check = None
        outcome = self._items.process(list(repair.ranges))
        send = list(dict.fromkeys([*self._items.keys_for(repair.need), *outcome.send]))
        for chunk in self.replica.records_for(send):
            self._send_batch(chunk, False)
        # What does not fit in one turn waits for the next, never dropped.
        self._pending_ranges.extend(outcome.reply)
        self._pending_need.extend(outcome.need)
        self._take_turn()

    def _take_turn(self) -> None:
        """Send a Repair with what is pending, or, with nothing left, our Check."""
        if self._pending_ranges or self._pending_need:
            count = budget = 0
            for r in self._pending_ranges[:REPLY_RANGES]:
                budget += r.wire_size()
                if budget > REPLY_BYTES and count:
                    break
                count += 1
            ranges = self._pending_ranges[:count]
            need = list(dict.fromkeys(self._pending_need))[:MAX_NEED]
            del self._pending_ranges[:count]
            asked = set(need)
            self._pending_need = [k for k in self._pending_need if k not in asked]
            self._send(Repair(self.session_id, tuple(ranges), tuple(need)))
            return
        self._round.my_check = self.replica.state()
        self._send(Check(self.session_id, *self._round.my_check))

    def _done(self) -> None:
        self.phase = Phase.DONE
        self.ending = Ending.DONE

    def _send(self, message: SyncMessage) -> None:
        self._out.append(message)


@dataclass
class Loopback:
    """Two sessions wired back to back in memory, for tests and benchmarks.

    ``transfer`` moves every queued message across (encoded and decoded, so the
    codec is exercised) until both are finished or nothing moves.
    """

    a: SyncSession
    b: SyncSession
    bytes_a_to_b: int = 0
    bytes_b_to_a: int = 0
    log: list[tuple[str, str]] = field(default_factory=list)

    def run(self, max_steps: int = 1_000_000) -> None:
        self.a.start()
        for _ in range(max_steps):
            moved = False
            for src, dst, name in ((self.a, self.b, "a"), (self.b, self.a, "b")):
                message = src.next_message()
                if message is not None:
                    data = encode(message)
                    if name == "a":
                        self.bytes_a_to_b += len(data)
                    else:
                        self.bytes_b_to_a += len(data)
                    self.log.append((name, type(message).__name__))
                    dst.receive(decode(data))
                    moved = True
            if not moved:
                return
        raise ProtocolError("loopback did not settle")


__all__ = [
    "ACK_EVERY",
    "BUSY_REASON",
    "MAX_REPAIRS",
    "WINDOW",
    "Ending",
    "Loopback",
    "Phase",
    "Replica",
    "SyncSession",
    "SyncStats",
    "new_session_id",
    "refusal",
]
