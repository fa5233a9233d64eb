"""NoteOffloadService: park clear note bodies with the Homebase, fetch and recall them.

The gates, in the order a body meets them:

1. Clear zone only, structurally: every query here selects from the clear zone
   first (``zone = 'clear'`` in the WHERE clause of the one query that loads a
   candidate), so a sealed row never reaches the code past it.
2. The body travels in a sealed envelope with its note id and content hash.
3. Never clear before ack: `OffloadLedger.compare_and_clear` is the one place a local body
   is erased, and it runs only after `OffloadAttempt` has judged a reply the
   valid ack (from the holder's key, this request, same id, same hash), in one
   transaction that re-hashes the body still there and clears it only if it
   still matches (an edit that raced the offload wins; nothing is cleared).
4. Residency is invisible to sync: clearing touches neither ``updated_at`` nor
   the state digest (the digest covers version keys, not where bodies live).

Fetching verifies the returned bytes against the stamped hash (fail closed) and
never writes them back. Recall restores the verified body and clears the
pointer in one transaction, and only afterwards asks the holder to release its
copy: the mirror image of never clear before ack.

What follows a holder's verdict is `offloadsteps`' stream (clear, orphan,
restore, forget), written once; `OffloadLedger` (plain calls, no trio, no
socket; its statements in `pixie.device.store.offloads`) answers each step,
for `NoteOffloadService`, which moves the messages, and for the simulator.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import trio

from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.store import offloads
from pixie.device.store.db import at_once
from pixie.device.store.notes import NoteKind
from pixie.device.store.siblings import Still, Withdrawn
from pixie.device.sync import offloadsteps
from pixie.device.sync.offloadsteps import (
    BeforeClear,
    Clear,
    Forget,
    OffloadStep,
    Orphan,
    Pointer,
    Restore,
)
from pixie.device.sync.peers import Incoming, PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient, RelayUnavailable
from pixie.protocol.clock import Clock, Entropy
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.offload import (
    FetchAttempt,
    OffloadAttempt,
    Outcome,
    ReleaseAttempt,
    Verdict,
    body_hash,
    new_request_id,
)
from pixie.protocol.peerwire import MAX_OFFLOAD_BYTES, PeerMessage

log = logging.getLogger("pixie.offload")
T = TypeVar("T")
R = TypeVar("R")

ACK_TIMEOUT = 10.0
DAY_US = 86_400 * 1_000_000


class Send(Protocol):
    """How the service sends (`PeerLink.send`): ``still`` is checked where the
    envelope's counter is reserved (a release is sent only while it is due)."""

    def __call__(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> Awaitable[int]: ...


Receive = Callable[[], Awaitable[Incoming]]


@dataclass(frozen=True, slots=True)
class OffloadReport:
    """What one offload did. ``cleared`` is True only after a valid ack and a
    successful compare-and-clear."""

    note_id: str
    outcome: Outcome
    detail: str
    cleared: bool
    bytes: int = 0
    holder: str | None = None  # fingerprint

    def as_json(self) -> dict[str, object]:
        return {
            "note_id": self.note_id,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "cleared": self.cleared,
            "bytes": self.bytes,
            "holder": self.holder,
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A body that may be offloaded: clear, live, resident, matching its hash."""

    id: str
    body: bytes
    content_hash: str


class OffloadFailed(BadInput):
    """A fetch or recall that ended without a verified body; nothing changed.
    ``verdict.outcome`` says how it ended."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"{verdict.outcome.value}: {verdict.detail}")
        self.verdict = verdict

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome


class RecallRaced(BadInput):
    """A recall whose note changed while its body was fetched; nothing changed."""

    def __init__(self, note_id: str) -> None:
        super().__init__(f"note {note_id} changed while its body was fetched; try again")
        self.note_id = note_id


class OffloadLedger:
    """The device's offload decisions over its store, for one holder: what may
    be offloaded, the clear after a valid ack, the restore after a verified
    fetch, and the releases the holder still owes."""

    def __init__(self, node: Node, holder: bytes, *, clock: Clock | None = None) -> None:
        self.node = node
        self.holder = holder
        self.holder_hex = holder.hex()
        self.clock = node.clock if clock is None else clock  # what dates a queued release
        # The offload requests in flight (request id: note, hash), and those a
        # release queued since has made void: the holder may take that release
        # after the offload, so the ack of such a request says nothing about
        # what it holds by the time the ack arrives (see `compare_and_clear`).
        self._asking: dict[bytes, tuple[str, str]] = {}
        self._void: set[bytes] = set()

    # -- the gate: what may be offloaded (storage) --------------------------------------

    def candidate(self, note_id: str) -> Candidate:
        """The body to offload for ``note_id``; raises `NotFound` or `BadInput`
        if it may not go."""
        # The gate: the clear zone is the first condition of the only query
        # that loads what offloading sends.
        row = offloads.candidate(self.node.db, self.holder_hex, note_id)
        if row is None or row.deleted:
            # The same words whether the id is unknown, deleted or sealed.
            raise NotFound(f"no note with id {note_id}")
        if row.kind == NoteKind.ABOUT_YOU.value:
            # Distillation keeps merging new facts into it; parked elsewhere it
            # could take none, and the facts of each pass would be lost.
            raise BadInput(
                f"note {note_id} is About you, which distillation keeps adding to; "
                "it stays on this device"
            )
        if row.holder is not None:
            raise BadInput(f"note {note_id} is already offloaded")
        body = str(row.body).encode("utf-8")
        if len(body) > MAX_OFFLOAD_BYTES:
            raise BadInput(f"note {note_id} is larger than {MAX_OFFLOAD_BYTES} bytes")
        if body_hash(body).hex() != row.content_hash:
            raise BadInput(f"note {note_id}: its body does not match its content hash")
        if row.releasing:
            # The holder would ack this body at once (it still holds it), and
            # the release already queued, or on its way, would then drop the
            # copy the new pointer relies on: the note would exist nowhere.
            raise BadInput(
                f"note {note_id}: the Homebase has not yet confirmed letting go of an "
                "earlier copy of this body; offload it again once it has"
            )
        return Candidate(note_id, body, row.content_hash)

    def asking(self, request: bytes, note_id: str, content_hash: str) -> None:
        """An offload of ``note_id`` goes out as ``request``; `answered` when its
        verdict comes or it times out."""
        self._asking[request] = (note_id, content_hash)

    def answered(self, request: bytes) -> None:
        self._asking.pop(request, None)
        self._void.discard(request)

    def _void_asked(self, note_id: str, content_hash: str) -> None:
        """A release of (``note_id``, ``content_hash``) was queued: the offloads
        of that very body in flight may be overtaken by it at the holder."""
        for request, asked in self._asking.items():
            if asked == (note_id, content_hash):
                self._void.add(request)

    def compare_and_clear(self, note_id: str, content_hash: str, request: bytes = b"") -> bool:
        """The one place a local body is erased: only if it still hashes to the
        acknowledged hash, no release of that very copy is due (the ack of an
        offload under way when the body came home by a recall: the holder was
        asked to let go of it), and none was queued since ``request`` went
        out (that release may have been confirmed already, and taken by the
        holder after this offload: its holding is gone). True if it was
        cleared."""
        if request in self._void:
            return False
        return offloads.clear_if_unchanged(self.node.db, self.holder_hex, note_id, content_hash)

    def orphaned(self, note_id: str, content_hash: str) -> None:
        """The holder holds a body this device ended up not pointing at: queue
        its release (unless a pointer here relies on that very holding, when
        another offload of the same body won the race)."""
        self._void_asked(note_id, content_hash)
        offloads.release_unless_pointed_at(
            self.node.db, note_id, content_hash, self.holder_hex, clock=self.clock
        )

    def pointer(self, note_id: str) -> Pointer:
        """Where ``note_id``'s body is; raises `NotFound`, or `BadInput` if the
        body is here."""
        row = offloads.pointer(self.node.db, note_id)
        if row is None:
            raise NotFound(f"no note with id {note_id}")
        chash, holder = row
        if holder is None:
            raise BadInput(f"note {note_id} is not offloaded: its body is here")
        return Pointer(note_id, chash, holder)

    def restore(self, pointer: Pointer, body: bytes) -> bool:
        """Recall: body back and pointer gone in one transaction, the holding
        queued for release in the same one. False if the row moved on."""
        restored = offloads.restore(
            self.node.db, pointer.id, pointer.content_hash, pointer.holder, body, clock=self.clock
        )
        if restored:
            self._void_asked(pointer.id, pointer.content_hash)
        return restored

    # -- releases -----------------------------------------------------------------------

    def releases_due(self) -> list[tuple[str, str]]:
        """(note id, content hash) of each holding no note here points at."""
        return offloads.releases_due(self.node.db, self.holder_hex)

    def released(self, note_id: str, content_hash: str) -> None:
        """The holder confirmed letting go: the release is no longer due."""
        offloads.released(self.node.db, note_id, content_hash, self.holder_hex)

    def still_due(self, note_id: str, content_hash: str) -> Still:
        """Checked as a release's counter is reserved: a release another
        process got confirmed, followed by a new offload of the same body,
        must not be sent after that offload (the holder would drop the copy
        the new pointer relies on)."""
        return offloads.still_releasing(note_id, content_hash, self.holder_hex)

    # -- what follows a verdict (the steps of `offloadsteps`) ---------------------------

    def take(self, step: OffloadStep) -> bool | None:
        """One step, at once: the answer the stream is sent. `BeforeClear`
        is the driver's own (it answers None here)."""
        if isinstance(step, Clear):
            return self.compare_and_clear(step.note_id, step.content_hash, step.request)
        if isinstance(step, Orphan):
            self.orphaned(step.note_id, step.content_hash)
        elif isinstance(step, Restore):
            return self.restore(step.pointer, step.body)
        elif isinstance(step, Forget):
            self.released(step.note_id, step.content_hash)
        return None


class NoteOffloadService:
    """Offload, fetch, recall and release for one device and one holder.

    ``before_clear``, if given, is called with the note id and content hash
    on the event loop after the holder's valid ack and just before the
    compare-and-clear: a test's way to stop the device between the two (a
    process crash test kills it there). Production passes nothing.
    """

    def __init__(
        self,
        node: Node,
        holder: bytes,
        send: Send,
        receive: Receive,
        *,
        timeout: float = ACK_TIMEOUT,
        lane: trio.CapacityLimiter | None = None,
        clock: Clock | None = None,
        entropy: Entropy | None = None,
        before_clear: Callable[[str, str], None] | None = None,
    ) -> None:
        self.node = node
        self.holder = holder
        self.holder_hex = holder.hex()
        self.before_clear = before_clear
        # Where request ids and the dates of queued releases come from: the
        # node's unless given.
        self.clock = node.clock if clock is None else clock
        self.entropy = node.entropy if entropy is None else entropy
        self.ledger = OffloadLedger(node, holder, clock=self.clock)
        self._send = send
        self._receive = receive
        self.timeout = timeout
        self.lane = lane

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    async def _quick(self, fn: Callable[..., T], *args: Any) -> T:
        """Small reads and unsynced writes: on the event loop unless they would
        wait (see `at_once`)."""
        return await at_once(fn, *args, otherwise=self._call)

    # -- talking to the holder ----------------------------------------------------------

    async def _exchange(
        self,
        attempt: OffloadAttempt | FetchAttempt | ReleaseAttempt,
        message: PeerMessage,
        still: Still | None = None,
    ) -> Verdict:
        try:
            with trio.fail_after(self.timeout):
                if still is None:
                    await self._send(self.holder, message)
                else:
                    await self._send(self.holder, message, still=still)
        except Withdrawn:
            # Only releases are sent with a check: that one was confirmed
            # meanwhile (by another process of this device).
            return Verdict(Outcome.RELEASED, "released meanwhile by another process")
        except RelayUnavailable as exc:
            return Verdict(Outcome.RELAY_DOWN, f"the relay is unavailable: {exc}")
        except trio.TooSlowError:
            return Verdict(Outcome.RELAY_DOWN, "the relay did not take our bytes in time")
        with trio.move_on_after(self.timeout):
            try:
                while True:
                    incoming = await self._receive()
                    verdict = attempt.on_message(incoming.sender, incoming.body.message)
                    if verdict is not None:
                        return verdict
            except RelayUnavailable as exc:
                return Verdict(Outcome.RELAY_DOWN, f"lost the relay while waiting: {exc}")
        return attempt.timed_out(self.timeout)

    async def offload(self, note_id: str) -> OffloadReport:
        """Park one note's body; the local body is cleared only after a valid ack."""
        candidate = await self._quick(self.ledger.candidate, note_id)
        attempt = OffloadAttempt(
            self.holder,
            candidate.id,
            bytes.fromhex(candidate.content_hash),
            request=new_request_id(self.entropy),
        )
        try:
            request = attempt.request_message(candidate.body)
        except ProtocolError as exc:  # pragma: no cover - bounded above
            raise BadInput(str(exc)) from None
        self.ledger.asking(attempt.request, candidate.id, candidate.content_hash)
        try:
            verdict = await self._exchange(attempt, request)
            ended = await self._take(
                offloadsteps.after_offload(
                    candidate.id, candidate.content_hash, verdict, attempt.request
                )
            )
        finally:
            self.ledger.answered(attempt.request)
        who = fingerprint(self.holder)
        size = len(candidate.body)
        if ended.outcome is not Outcome.HELD:
            log.warning("offload of %s not acknowledged: %s", note_id, ended.detail)
        elif ended.cleared:
            log.info("offloaded %s (%d bytes) to %s", note_id, size, who)
        return OffloadReport(note_id, ended.outcome, ended.detail, ended.cleared, size, who)

    async def _take(self, steps: Generator[OffloadStep, bool | None, R]) -> R:
        """Take the steps that follow a verdict (`offloadsteps`): the store's
        on the event loop when they would not wait, in a thread otherwise."""
        answer: bool | None = None
        try:
            while True:
                step = steps.send(answer)
                answer = None
                if isinstance(step, BeforeClear):
                    if self.before_clear is not None:
                        self.before_clear(step.note_id, step.content_hash)
                elif isinstance(step, Clear):
                    answer = await self._quick(self.ledger.take, step)
                else:
                    answer = await self._call(self.ledger.take, step)
        except StopIteration as end:
            return cast(R, end.value)

    async def fetch(self, note_id: str) -> str:
        """The verified body of an offloaded note, for showing; never stored."""
        pointer = await self._quick(self.ledger.pointer, note_id)
        fetched = await self._fetch(pointer, recall=False)
        assert fetched.body is not None
        return fetched.body.decode("utf-8")

    async def _fetch(self, pointer: Pointer, *, recall: bool) -> offloadsteps.Fetched:
        if pointer.holder != self.holder_hex:
            raise BadInput(
                f"note {pointer.id} is held by {fingerprint(bytes.fromhex(pointer.holder))}, "
                "which is not the sibling asked"
            )
        attempt = FetchAttempt(
            self.holder,
            pointer.id,
            bytes.fromhex(pointer.content_hash),
            request=new_request_id(self.entropy),
        )
        verdict = await self._exchange(attempt, attempt.request_message())
        fetched = await self._take(offloadsteps.after_fetch(verdict, pointer if recall else None))
        if fetched.body is None:
            log.warning("fetch of %s failed: %s", pointer.id, verdict.detail)
            raise OffloadFailed(verdict)
        return fetched

    async def recall(self, note_id: str) -> bool:
        """Bring an offloaded note's body home; then ask the holder to let go.
        True if the holder confirmed the release (else it is retried later)."""
        pointer = await self._quick(self.ledger.pointer, note_id)
        if not (await self._fetch(pointer, recall=True)).restored:
            raise RecallRaced(note_id)
        log.info("recalled %s from %s", note_id, fingerprint(self.holder))
        released = await self.release_pending()
        return note_id in released

    async def release_pending(self) -> set[str]:
        """Tell the holder which holdings no note here points at; forget each
        one it confirms. Returns the note ids released."""

        released: set[str] = set()
        for note_id, content_hash in await self._call(self.ledger.releases_due):
            attempt = ReleaseAttempt(
                self.holder,
                note_id,
                bytes.fromhex(content_hash),
                request=new_request_id(self.entropy),
            )
            verdict = await self._exchange(
                attempt, attempt.request_message(), self.ledger.still_due(note_id, content_hash)
            )
            if await self._take(offloadsteps.after_release(note_id, content_hash, verdict)):
                released.add(note_id)
            else:
                log.warning("release of %s not confirmed: %s", note_id, verdict.detail)
                break
        return released


def candidates(node: Node, older_than_days: float) -> list[str]:
    """Live, resident clear notes about a date (or last changed) more than
    ``older_than_days`` ago (by the node's clock), oldest first."""
    if not older_than_days >= 0:
        raise BadInput("--older-than must be a number of days, at least 0")
    cutoff = int(node.clock.now_us() - older_than_days * DAY_US)
    return offloads.offload_candidates(node.db, cutoff)


def relay_down_report(note_id: str, why: str) -> OffloadReport:
    return OffloadReport(note_id, Outcome.RELAY_DOWN, f"the relay is unavailable: {why}", False)


def holder_of(node: Node) -> bytes:
    """The paired Homebase: the sibling that holds this device's bodies."""
    homebases = [s for s in node.siblings.all() if s.role == "homebase"]
    if not homebases:
        raise BadInput("no Homebase is paired: pair one first (`pixie invite` / `pixie pair`)")
    return homebases[0].key


async def with_service(
    node: Node,
    relay: RelayAddress,
    fn: Callable[[NoteOffloadService], Awaitable[T]],
    *,
    timeout: float = ACK_TIMEOUT,
) -> T:
    """Connect to the relay, run ``fn`` with a service for the paired Homebase,
    disconnect. A relay that cannot be reached raises `RelayUnavailable`."""
    holder = await trio.to_thread.run_sync(holder_of, node)
    identity = await trio.to_thread.run_sync(node.identity)
    client = await RelayClient.connect(relay, identity, timeout=timeout)
    try:
        link = PeerLink(identity, node.siblings, client, entropy=node.entropy)
        return await fn(NoteOffloadService(node, holder, link.send, link.receive, timeout=timeout))
    finally:
        await client.aclose()


__all__ = [
    "ACK_TIMEOUT",
    "Candidate",
    "NoteOffloadService",
    "OffloadFailed",
    "OffloadLedger",
    "OffloadReport",
    "Pointer",
    "RecallRaced",
    "candidates",
    "holder_of",
    "relay_down_report",
    "with_service",
]
