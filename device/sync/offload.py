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

Every decision over the store is `OffloadLedger`'s, a sans-IO class (plain
calls, no trio, no socket) that the simulator drives step by step too;
`NoteOffloadService` moves the messages.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import trio
from sqlalchemy import bindparam, func, select

from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.store.db import at_once, driver_sql
from pixie.device.store.holdings import PendingRelease, forget_release, release_later
from pixie.device.store.notes import NoteKind, Zone
from pixie.device.store.notetable import Note
from pixie.device.store.siblings import Still, Withdrawn
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

ACK_TIMEOUT = 10.0
DAY_US = 86_400 * 1_000_000

# The candidate and, in the same snapshot, whether a release of that very
# body to this holder is still due (see `OffloadLedger.candidate`).
_CANDIDATE_SQL = (
    "SELECT body, content_hash, holder, deleted, kind, EXISTS (SELECT 1 FROM pending_release "
    "WHERE note_id = note.id AND content_hash = note.content_hash AND holder = ?) "
    "FROM note WHERE zone = 'clear' AND id = ?"
)
# Each holding no note here points at, oldest first (`releases_due`).
_RELEASES_DUE_SQL = driver_sql(
    select(PendingRelease.note_id, PendingRelease.content_hash)
    .where(PendingRelease.holder == bindparam("holder"))
    .order_by(PendingRelease.since, PendingRelease.note_id)
)
_RELEASING_SQL = (
    "SELECT 1 FROM pending_release WHERE note_id = ? AND content_hash = ? AND holder = ?"
)
# The compare-and-clear: the body still here, unchanged (and no release of it
# to this holder due), then the clear itself.
_RESIDENT_SQL = (
    "SELECT body, content_hash, EXISTS (SELECT 1 FROM pending_release "
    "WHERE note_id = note.id AND content_hash = note.content_hash AND holder = ?) FROM note "
    "WHERE zone = 'clear' AND id = ? AND deleted = 0 AND holder IS NULL"
)
_CLEAR_SQL = "UPDATE note SET body = NULL, holder = ? WHERE zone = 'clear' AND id = ?"
_POINTER_SQL = (
    "SELECT content_hash, holder FROM note WHERE zone = 'clear' AND id = ? AND deleted = 0"
)


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


@dataclass(frozen=True, slots=True)
class Pointer:
    """An offloaded note: the hash its body must re-hash to, and who holds it."""

    id: str
    content_hash: str
    holder: str


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

    # -- the gate: what may be offloaded (storage) --------------------------------------

    def candidate(self, note_id: str) -> Candidate:
        """The body to offload for ``note_id``; raises `NotFound` or `BadInput`
        if it may not go."""
        # The gate: the clear zone is the first condition of the only query
        # that loads what offloading sends.
        rows = self.node.db.peek(_CANDIDATE_SQL, (self.holder_hex, note_id))
        if not rows or rows[0][3]:
            # The same words whether the id is unknown, deleted or sealed.
            raise NotFound(f"no note with id {note_id}")
        body_text, chash, holder, _, kind, releasing = rows[0]
        if kind == NoteKind.ABOUT_YOU.value:
            # Distillation keeps merging new facts into it; parked elsewhere it
            # could take none, and the facts of each pass would be lost.
            raise BadInput(
                f"note {note_id} is About you, which distillation keeps adding to; "
                "it stays on this device"
            )
        if holder is not None:
            raise BadInput(f"note {note_id} is already offloaded")
        body = str(body_text).encode("utf-8")
        if len(body) > MAX_OFFLOAD_BYTES:
            raise BadInput(f"note {note_id} is larger than {MAX_OFFLOAD_BYTES} bytes")
        if body_hash(body).hex() != chash:
            raise BadInput(f"note {note_id}: its body does not match its content hash")
        if releasing:
            # The holder would ack this body at once (it still holds it), and
            # the release already queued, or on its way, would then drop the
            # copy the new pointer relies on: the note would exist nowhere.
            raise BadInput(
                f"note {note_id}: the Homebase has not yet confirmed letting go of an "
                "earlier copy of this body; offload it again once it has"
            )
        return Candidate(note_id, body, chash)

    def compare_and_clear(self, note_id: str, content_hash: str) -> bool:
        """The one place a local body is erased: only if it still hashes to the
        acknowledged hash. True if it was cleared.

        On the plain driver connection (a SQLAlchemy session cost twenty times
        these three statements on the offload path). Not fsynced: a power cut
        that undoes a clear leaves the body here as well as with the holder,
        which loses nothing."""
        with self.node.db.bookkeeping() as conn:
            row = conn.execute(_RESIDENT_SQL, (self.holder_hex, note_id)).fetchone()
            if row is None or row[0] is None or row[1] != content_hash:
                return False
            if body_hash(str(row[0]).encode("utf-8")).hex() != content_hash:
                return False
            if row[2]:
                # The ack of an offload that was under way when the body came
                # home (a recall): the holder has been asked to let go of that
                # very copy, so pointing at it again would leave the note nowhere.
                return False
            conn.execute(_CLEAR_SQL, (self.holder_hex, note_id))
            return True

    def orphaned(self, note_id: str, content_hash: str) -> None:
        """The holder holds a body this device ended up not pointing at: queue
        its release (unless a pointer here relies on that very holding)."""
        with self.node.db.writing() as session:
            pointer = session.execute(
                select(Note.id).where(
                    Note.id == note_id,
                    Note.holder == self.holder_hex,
                    Note.content_hash == content_hash,
                )
            ).first()
            if pointer is not None:
                # Another offload of the same body won the race and points at
                # this very holding: releasing it would leave the note nowhere.
                return
            release_later(session, note_id, content_hash, self.holder_hex, clock=self.clock)

    def pointer(self, note_id: str) -> Pointer:
        """Where ``note_id``'s body is; raises `NotFound`, or `BadInput` if the
        body is here."""
        rows = self.node.db.peek(_POINTER_SQL, (note_id,))
        if not rows:
            raise NotFound(f"no note with id {note_id}")
        chash, holder = rows[0]
        if holder is None:
            raise BadInput(f"note {note_id} is not offloaded: its body is here")
        return Pointer(note_id, chash, holder)

    def restore(self, pointer: Pointer, body: bytes) -> bool:
        """Recall: body back and pointer gone in one transaction, the holding
        queued for release in the same one. False if the row moved on."""
        with self.node.db.writing() as session:
            row = session.scalar(
                select(Note).where(
                    Note.zone == Zone.CLEAR.value,
                    Note.id == pointer.id,
                    Note.holder == pointer.holder,
                    Note.content_hash == pointer.content_hash,
                )
            )
            if row is None:
                return False
            row.body = body.decode("utf-8")
            row.holder = None
            release_later(
                session, pointer.id, pointer.content_hash, pointer.holder, clock=self.clock
            )
            return True

    # -- releases -----------------------------------------------------------------------

    def releases_due(self) -> list[tuple[str, str]]:
        """(note id, content hash) of each holding no note here points at."""
        with self.node.db.snapshot() as conn:
            return conn.execute(_RELEASES_DUE_SQL, (self.holder_hex,)).fetchall()

    def released(self, note_id: str, content_hash: str) -> None:
        """The holder confirmed letting go: the release is no longer due."""
        with self.node.db.writing() as session:
            forget_release(session, note_id, content_hash, self.holder_hex)

    def still_due(self, note_id: str, content_hash: str) -> Still:
        """Checked as a release's counter is reserved: a release another
        process got confirmed, followed by a new offload of the same body,
        must not be sent after that offload (the holder would drop the copy
        the new pointer relies on)."""
        key = (note_id, content_hash, self.holder_hex)
        return lambda conn: conn.execute(_RELEASING_SQL, key).fetchone() is not None


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
        verdict = await self._exchange(attempt, request)
        who = fingerprint(self.holder)
        size = len(candidate.body)
        if verdict.outcome is not Outcome.HELD:
            log.warning("offload of %s not acknowledged: %s", note_id, verdict.detail)
            return OffloadReport(note_id, verdict.outcome, verdict.detail, False, size, who)
        if self.before_clear is not None:
            self.before_clear(note_id, candidate.content_hash)
        cleared = await self._quick(self.ledger.compare_and_clear, note_id, candidate.content_hash)
        if not cleared:
            # The note changed while its body travelled: the edit wins, the
            # parked copy points at nothing and is released later.
            await self._call(self.ledger.orphaned, note_id, candidate.content_hash)
            detail = "held, but the note changed meanwhile; kept the local body"
            return OffloadReport(note_id, Outcome.HELD, detail, False, size, who)
        log.info("offloaded %s (%d bytes) to %s", note_id, size, who)
        return OffloadReport(note_id, Outcome.HELD, verdict.detail, True, size, who)

    async def fetch(self, note_id: str) -> str:
        """The verified body of an offloaded note, for showing; never stored."""
        pointer = await self._quick(self.ledger.pointer, note_id)
        body = await self._fetch(pointer)
        return body.decode("utf-8")

    async def _fetch(self, pointer: Pointer) -> bytes:
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
        if verdict.outcome is not Outcome.FETCHED or verdict.body is None:
            log.warning("fetch of %s failed: %s", pointer.id, verdict.detail)
            raise OffloadFailed(verdict)
        return verdict.body

    async def recall(self, note_id: str) -> bool:
        """Bring an offloaded note's body home; then ask the holder to let go.
        True if the holder confirmed the release (else it is retried later)."""
        pointer = await self._quick(self.ledger.pointer, note_id)
        body = await self._fetch(pointer)
        if not await self._call(self.ledger.restore, pointer, body):
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
            if verdict.outcome is Outcome.RELEASED:
                await self._call(self.ledger.released, note_id, content_hash)
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
    when = func.coalesce(Note.about_date, Note.updated_wall)
    with node.db.reading() as session:
        return list(
            session.scalars(
                select(Note.id)
                .where(
                    Note.zone == Zone.CLEAR.value,
                    Note.deleted.is_(False),
                    Note.holder.is_(None),
                    Note.kind != NoteKind.ABOUT_YOU.value,
                    when < cutoff,
                )
                .order_by(when, Note.id)
            )
        )


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
