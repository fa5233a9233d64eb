"""One simulated world: a device, a Homebase and a relay, stepped by one seed.

Everything runs in this thread as plain function calls: the real sans-IO cores
(`SyncSession`, `OffloadAttempt`, `FetchAttempt`, `ReleaseAttempt`), the real
stores (each peer a `Node` over its own SQLite file), the real envelopes
(`seal`, per-sibling counters, and each peer's `Admission`, the gate every
envelope meets in `PeerLink`), the real holder decisions (`HolderCore`: store,
serve, release), the device's (`OffloadLedger`: candidate, clear after the
ack, orphan, pointer, restore) and each peer's `SessionTable` (which session a
sync message is for, and which of two sessions opened at once goes on). No
scheduler runs, so nothing can depend on one's order; every choice is drawn
from the seed. Time and randomness are handed in, never patched
(`pixie.sim.clock`): each peer's node, log, Notebook, seal, hybrid clock and
envelope gate read the peer's own skewed clock, and every id, key and nonce
(data dirs, events, notes, sessions, requests, messages, envelopes) is drawn
from the seed's entropy, so a seed makes the same bytes in any process.

A step is: maybe move the clock, do one thing (a workload operation or a
fault), deliver what the relay has due, let sessions say what they have to
say, time out what waited too long, then check every invariant. `finish` stops
the faults, heals the network, syncs, and checks that the two replicas agree.
"""

from __future__ import annotations

import enum
import logging
import os
import random
import shutil
import tempfile
import uuid
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path

from nacl.signing import SigningKey

from pixie.device.errors import BadInput, NotFound
from pixie.device.logs import Summarised
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.contacts import contact_id_for
from pixie.device.store.db import peek
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.provision import create_data_dir
from pixie.device.store.replica import NodeReplica
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync import admitsteps, offloadsteps, syncsteps
from pixie.device.sync.admission import Admission, Incoming, Rejected
from pixie.device.sync.offload import OffloadLedger
from pixie.device.sync.offloadsteps import Pointer
from pixie.device.sync.sessions import Route, SessionTable
from pixie.homebase import holdsteps
from pixie.homebase.holding import HolderCore
from pixie.protocol import envelope, syncwire
from pixie.protocol.clock import ManualClock, SeededEntropy
from pixie.protocol.envelope import EnvelopeKeys
from pixie.protocol.errors import ProtocolError
from pixie.protocol.hlc import HybridClock
from pixie.protocol.offload import (
    FetchAttempt,
    OffloadAttempt,
    ReleaseAttempt,
    body_hash,
    new_request_id,
)
from pixie.protocol.peerwire import (
    MESSAGE_ID_BYTES,
    FetchPart,
    FetchRequest,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    PeerMessage,
    Release,
    Released,
    SyncData,
    encode_body,
)
from pixie.protocol.sync import Ending, SyncSession
from pixie.sim import invariants
from pixie.sim.clock import PeerClock, world_clock, world_entropy
from pixie.sim.invariants import InvariantViolated
from pixie.sim.network import CLEAR_CANARY, LINKS, PEERS, SEALED_CANARY, FaultRates, SimRelay

TRACE_KEEP = 400
ATTEMPT_TICKS = 8  # an offload, fetch or release unanswered this long has timed out
SESSION_IDLE_TICKS = 10  # a sync session that heard nothing this long is abandoned
PUMP_LIMIT = 64  # messages one session may queue per turn
CONTACTS = ("Ada Lovelace", "Grace Hopper", "Alan Turing")
THREADS = ("t0", "t1", "t2")
BODIES = (
    "talked about the trip to Lyon",
    "wants to start running again",
    "asked about the cello lessons",
    "moving house in the spring",
)
GUIDANCE = ("Be brief", "Use metric units", "No emoji")
FINAL_SYNC_TRIES = 4
MAX_SKEW_MS = 10 * 60 * 1000  # beyond the five minutes a sibling believes, on purpose
IMPORTED_AT = 1_700_000_000_000_000
# What the real gates log goes here, below any level a handler shows: the
# simulator says what happened in its own trace.
QUIET = logging.getLogger("pixie.sim.quiet")


OPERATIONS = (
    "append",
    "distil",
    "edit",
    "delete",
    "pin",
    "sealed",
    "guidance",
    "sync",
    "offload",
    "fetch",
    "recall",
    "release",
    "crash",
    "partition",
    "clock",
)


def default_base() -> Path | None:
    """Where data dirs go: a memory-backed directory where the OS has one (the
    stores fsync every commit, and on a disk that is most of a run), else the
    temp dir."""
    shm = Path("/dev/shm")  # noqa: S108 - a scratch area by design, like the temp dir
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


@dataclass(frozen=True, slots=True)
class Plan:
    """What one seed decided about the run: how often each fault strikes."""

    net: FaultRates
    crash: float
    partition: float
    byzantine: float
    skew: float
    lies: bool  # the holder may ack what it never stored (off unless asked)

    @classmethod
    def draw(cls, rng: random.Random, *, faults: bool, lies: bool) -> Plan:
        if not faults:
            return cls(FaultRates.none(), 0.0, 0.0, 0.0, 0.0, False)

        def maybe(top: float) -> float:
            # A quarter of seeds go without each fault, so its absence is tested too.
            return 0.0 if rng.random() < 0.25 else rng.uniform(0.0, top)

        net = FaultRates(maybe(0.15), maybe(0.15), maybe(0.1), maybe(0.3))
        return cls(net, maybe(0.06), maybe(0.06), maybe(0.4), maybe(0.08), lies)

    def as_json(self) -> dict[str, object]:
        r = self.net
        return {
            "drop": round(r.drop, 3),
            "delay": round(r.delay, 3),
            "duplicate": round(r.duplicate, 3),
            "reorder": round(r.reorder, 3),
            "crash": round(self.crash, 3),
            "partition": round(self.partition, 3),
            "byzantine": round(self.byzantine, 3),
            "skew": round(self.skew, 3),
            "lies": self.lies,
        }


class Request(enum.Enum):
    """What the device asked the holder for."""

    OFFLOAD = "offload"
    FETCH = "fetch"
    RECALL = "recall"
    RELEASE = "release"


@dataclass
class Pending:
    """One request of the device's that waits for the holder's answer."""

    kind: Request
    attempt: OffloadAttempt | FetchAttempt | ReleaseAttempt
    since: int
    pointer: Pointer | None = None  # fetch, recall: the pointer the body is restored against


@dataclass
class OpenSession:
    """A sync session open at one peer (what its `SessionTable` tracks)."""

    session: SyncSession
    peer: bytes
    heard_at: int  # the tick the session last moved
    opened_by: syncwire.Hello | None = None
    shown: set[bytes] = field(default_factory=set)
    moved_on: bool = False  # the sibling opened a newer one: it did the work instead


def quiet(what: str, clock: ManualClock) -> Summarised:
    """A gate's summarised log, written where no handler shows it, its
    intervals measured in simulated time."""
    return Summarised(QUIET, what, level=logging.DEBUG, clock=lambda: clock.now_us() / 1e6)


@dataclass
class Peer:
    """One peer: its data dir on disk, and what it holds in memory (lost in a crash).

    Its clock (the world's time plus its skew) and the world's entropy are
    handed to everything it opens: the node (log, Notebook, seal, ids), its
    hybrid clock and its envelope gate.
    """

    name: str
    path: Path
    keys: FileKeyStore
    clock: PeerClock
    entropy: SeededEntropy
    node: Node = field(init=False)
    replica: NodeReplica = field(init=False)
    identity: SigningKey = field(init=False)
    # In memory, so a crash starts them afresh:
    admission: Admission = field(init=False)
    # Its envelopes' ephemeral keys (and those it verified), aged on the
    # world's clock: none from an earlier world or before a crash, as in a
    # fresh process (when a key rotates shows in what a fault strikes).
    envelope_keys: EnvelopeKeys = field(init=False)
    table: SessionTable[OpenSession] = field(init=False)
    key: bytes = b""
    pending: dict[bytes, Pending] = field(default_factory=dict)

    def open(self) -> None:
        node = Node.open(self.path, key_store=self.keys, clock=self.clock, entropy=self.entropy)
        self.node = node
        self.replica = self.new_replica()
        self.identity = node.identity()
        self.key = bytes(self.identity.verify_key)
        self.envelope_keys = EnvelopeKeys()
        self.admission = Admission(
            self.identity,
            node.siblings,
            rejections=quiet("envelopes rejected", self.clock.world),
            clock=self.clock.seconds,
            keys=self.envelope_keys,
        )
        self.table = SessionTable(self.key)

    def new_replica(self) -> NodeReplica:
        """A sync replica of this peer's node whose stamps read the peer's clock."""
        replica = NodeReplica(self.node.db, self.node.log, self.node.origin)
        replica.clock = HybridClock(self.node.origin, clock=self.clock)
        return replica

    def crash(self) -> None:
        """Lose everything in memory; what was committed is there on reopening."""
        self.pending.clear()
        self.node.close()
        self.open()


@dataclass
class Stats:
    ops: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    crashes: int = 0
    rejected_envelopes: int = 0
    sessions: int = 0
    sessions_failed: int = 0
    offloads_cleared: int = 0
    fetches_verified: int = 0
    fetches_refused: int = 0
    recalls: int = 0
    releases: int = 0

    def count(self, op: str) -> None:
        self.ops[op] = self.ops.get(op, 0) + 1


class World:
    """A device, a Homebase and a relay, driven by one seed."""

    def __init__(
        self,
        seed: int,
        *,
        base: Path | None = None,
        faults: bool = True,
        lies: bool = False,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(f"pixie-sim-{seed}")
        self.entropy = world_entropy(seed)
        self.clock = world_clock()
        self.plan = Plan.draw(self.rng, faults=faults, lies=lies)
        self.drawn = self.plan  # what the seed chose, kept once the faults stop
        self.tick = 0
        self.trace: deque[str] = deque(maxlen=TRACE_KEEP)
        self.trace_sink = trace
        self.stats = Stats()
        self.skew: dict[str, int] = dict.fromkeys(PEERS, 0)
        self.relay = SimRelay(self.rng, self.plan.net, self.note)
        self.swizzle: deque[tuple[str, bool]] = deque()
        self.acked: set[tuple[str, str]] = set()  # (note id, hash hex) the sim saw validly acked
        self.edited: dict[str, set[str]] = {p: set() for p in PEERS}
        self.canary_count = 0
        self.sealed_minted = False  # a sealed canary exists (see `invariants.check_all`)
        self.finished = False
        self.tmp = Path(tempfile.mkdtemp(prefix="pixie-sim-", dir=base or default_base()))
        keys = FileKeyStore(self.tmp / "keys")
        self.peers: dict[str, Peer] = {}
        try:
            self._create(keys)
        except BaseException:
            self.close()
            raise
        self.device, self.homebase = self.peers["device"], self.peers["homebase"]
        self.holder = self._holder()
        self.ledger = OffloadLedger(self.device.node, self.homebase.key)
        self.note(f"seed {seed}: plan {self.plan.as_json()}")

    def _create(self, keys: FileKeyStore) -> None:
        """Two fresh data dirs, paired as siblings (what `pixie pair` leaves behind).

        A data dir made from the seed's entropy is the same every run: its
        origin, its identity key and, once it seals a note, its seal key.
        """
        for name in PEERS:
            path = self.tmp / name
            clock = PeerClock(self.clock, self._skew_of(name))
            create_data_dir(
                path, name=name, role=name, key_store=keys, clock=clock, entropy=self.entropy
            )
            peer = Peer(name, path, keys, clock, self.entropy)
            peer.open()
            self.peers[name] = peer
        for name, peer in self.peers.items():
            other = self.peers[self.other(name)]
            peer.node.siblings.add(
                SiblingInfo(other.key, other.name, other.name, "sim", peer.clock.now_us())
            )

    # -- plumbing -------------------------------------------------------------------------

    def _skew_of(self, name: str) -> Callable[[], int]:
        return lambda: self.skew[name]

    def _holder(self) -> HolderCore:
        home = self.homebase
        return HolderCore(
            home.node,
            refusals=quiet("requests refused", self.clock),
            clock=home.clock,
            entropy=self.entropy,
        )

    @staticmethod
    def other(name: str) -> str:
        return "homebase" if name == "device" else "device"

    def note(self, what: str) -> None:
        line = f"{self.tick:4d} {what}"
        self.trace.append(line)
        if self.trace_sink is not None:
            self.trace_sink(line)

    def close(self) -> None:
        for peer in self.peers.values():  # only peers whose node opened are listed
            peer.node.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def canary(self, sealed: bool = False) -> str:
        self.canary_count += 1
        self.sealed_minted = self.sealed_minted or sealed
        prefix = SEALED_CANARY if sealed else CLEAR_CANARY
        return f"{prefix.decode()}{self.canary_count:05d}"

    # -- messages ---------------------------------------------------------------------------

    def send(self, sender: Peer, message: PeerMessage) -> None:
        recipient = self.peers[self.other(sender.name)]
        counter = sender.node.siblings.next_send_counter(recipient.key)
        # The message id comes from the world's entropy, like every other id.
        body = encode_body(message, counter, self.entropy.token_bytes(MESSAGE_ID_BYTES))
        data = envelope.seal(
            sender.identity,
            recipient.key,
            body,
            now=self.clock.now_us() / 1_000_000,
            entropy=self.entropy,
            keys=sender.envelope_keys,
        )
        self.relay.submit(sender.name, recipient.name, data, self.tick)
        if self.relay.leaks:
            canary, src, size = self.relay.leaks[0]
            raise InvariantViolated(6, f"the relay carried {canary!r} from {src} ({size} B)")

    def admit(self, peer: Peer, src: str, data: bytes) -> Incoming | None:
        """``peer`` takes in an envelope the relay attests ``src`` sent: the
        steps of `admitsteps` (which `PeerLink` takes under trio), answered by
        ``peer``'s `Admission` at once."""
        admission = peer.admission
        steps = admitsteps.admitting(self.peers[src].key, data)
        answer: object = None
        try:
            while True:
                step = steps.send(answer)
                if isinstance(step, admitsteps.Screen):
                    answer = admission.screen(step.sender, step.size, strangers=step.strangers)
                else:
                    answer = admission.admit(step.sender, step.envelope, step.strangers)
        except StopIteration as end:
            admitted = end.value
        if isinstance(admitted, Incoming):
            return admitted
        self.stats.rejected_envelopes += 1
        if isinstance(admitted, Rejected):
            self.note(f"{peer.name} rejects an envelope ({admitted.reason}): {admitted.detail}")
        else:
            self.note(f"{peer.name} rejects an envelope: {src} is not a sibling")
        return None

    def deliver(self, src: str, dst: str, data: bytes) -> None:
        peer = self.peers[dst]
        admitted = self.admit(peer, src, data)
        if admitted is None:
            return
        sender, body = admitted.sender, admitted.body
        message = body.message
        self.note(f"{dst} <- {type(message).__name__}")
        if isinstance(message, SyncData):
            self._on_sync(peer, sender, message)
        elif peer is self.homebase and isinstance(message, OffloadRequest | FetchRequest | Release):
            self._on_holder_request(sender, message, body.counter)
        elif peer is self.device and isinstance(
            message, OffloadAck | HolderRefusal | FetchPart | Released
        ):
            self._on_holder_reply(sender, message)

    # -- sync -------------------------------------------------------------------------------

    def open_sync(self, opener: Peer) -> None:
        """``opener`` opens a session with its sibling, unless one is open with it
        here (a peer opens one only after its earlier ones have ended)."""
        other = self.peers[self.other(opener.name)].key
        if opener.table.with_peer(other):
            self.note(f"sync: {opener.name} has a session open; none started")
            return
        session = SyncSession(opener.replica, opener=True, entropy=self.entropy)
        syncsteps.open_ours(opener.table, OpenSession(session, other, self.tick))
        self.stats.sessions += 1
        session.start()
        self.note(f"sync opened by {opener.name}")
        self.pump(opener)

    def _answer(self, peer: Peer, sender: bytes, hello: syncwire.Hello) -> None:
        """Start a responder session for ``hello``."""
        session = SyncSession(peer.replica, opener=False, session_id=hello.session)
        peer.table.open(OpenSession(session, sender, self.tick, opened_by=hello))
        session.receive(hello)

    def _on_sync(self, peer: Peer, sender: bytes, data: SyncData) -> None:
        try:
            message = syncwire.decode(data.payload)
        except ProtocolError as exc:
            self.note(f"{peer.name} refuses a sync message: {exc}")
            return
        # The peer's own dispatch (`syncsteps`, which `SyncEndpoint` runs under
        # trio), its steps taken at once.
        for step in syncsteps.receive(peer.table, sender, message, len(data.payload)):
            if isinstance(step, syncsteps.Deliver):
                step.entry.heard_at = self.tick
                step.entry.session.receive(step.message)
            elif isinstance(step, syncsteps.SayAgain):
                hello = step.entry.session.hello
                assert hello is not None
                self.note(f"sync {peer.name}: says its Hello again")
                self.send(peer, SyncData(syncwire.encode(hello)))
                step.entry.heard_at = self.tick
            elif isinstance(step, syncsteps.Send):
                self.note(f"sync {peer.name}: both sides opened a session; keeps its own")
                self.send(peer, SyncData(syncwire.encode(step.message)))
            elif isinstance(step, syncsteps.Supersede):
                step.entry.moved_on = True
                step.entry.session.fail("the sibling opened a newer session", tell_peer=False)
            elif isinstance(step, syncsteps.Answer):
                self.pump(peer)
                self._answer(peer, sender, step.hello)
            elif step.route is Route.NEW_HELLO:
                self.pump(peer)
                self.note(f"sync {peer.name}: holds back or refuses the sibling's Hello")
            else:
                self.note(f"{peer.name} drops {step.kind}: {step.route.value}")
                return
        self.pump(peer)

    def pump(self, peer: Peer) -> None:
        for entry in list(peer.table.sessions.values()):
            session = entry.session
            if peer.table.sessions.get(session.session_id) is not entry:
                continue  # closed meanwhile (by a turn this one started)
            for _ in range(PUMP_LIMIT):
                message = session.next_message()
                if message is None:
                    break
                self.send(peer, SyncData(syncwire.encode(message)))
            if not session.finished:
                continue
            peer.table.close(session.session_id)
            ending = session.ending
            failed = ending in (Ending.FAILED, Ending.ABORTED) and not entry.moved_on
            if failed:
                self.stats.sessions_failed += 1
            why = f" ({session.error})" if failed and session.error else ""
            self.note(f"sync {peer.name}: {ending.value if ending else 'ended'}{why}")
            if not session.opener:
                continue
            refused = ending is Ending.REFUSED
            held = syncsteps.after_ours(peer.table, entry.peer, refused=refused)
            if held is not None:
                # The sibling refused ours for its own: the Hello held back goes on.
                self._answer(peer, entry.peer, held.hello)
                self.pump(peer)

    # -- the holder (the Homebase's side) -----------------------------------------------------

    def _byzantine(self, choices: tuple[str, ...]) -> str | None:
        if self.rng.random() < self.plan.byzantine:
            return self.rng.choice(choices)
        return None

    def _on_holder_request(
        self, sender: bytes, message: OffloadRequest | FetchRequest | Release, counter: int
    ) -> None:
        """The Homebase answers with the holder's own steps (`holdsteps`, which
        `Holder` runs under trio), the seed's faults struck into them."""
        home, holder = self.homebase, self.holder
        steps = holdsteps.answer(sender, message, counter)
        answered = holder.run(holdsteps.faulted(steps, self._pick_fault, holder.entropy))
        for name in answered.faults:
            self.note(f"holder fault: {name}")
        for reply in answered.replies:
            self.send(home, reply)
        if answered.crash is not None:
            self.note(f"holder fault: {answered.crash}")
            self.crash("homebase")

    def _pick_fault(self, stage: str) -> tuple[str, float] | None:
        """The seed's fault for the holder at ``stage``, drawn where the
        holder's own plan is consulted."""
        if stage == holdsteps.OFFLOAD:
            lies = (holdsteps.ACK_UNSTORED,) if self.plan.lies else ()
            choices = ("ack-timeout", "ack-wrong-hash", "ack-wrong-id", "crash-after-commit")
            fault = self._byzantine((*choices, *lies))
        else:
            fault = self._byzantine(("corrupt-serve",))
        return None if fault is None else (fault, 0.0)

    # -- the device's side of offloading -----------------------------------------------------

    def offload(self, note_id: str) -> None:
        candidate = self.ledger.candidate(note_id)
        attempt = OffloadAttempt(
            self.homebase.key,
            candidate.id,
            bytes.fromhex(candidate.content_hash),
            request=new_request_id(self.entropy),
        )
        self.device.pending[attempt.request] = Pending(Request.OFFLOAD, attempt, self.tick)
        self.send(self.device, attempt.request_message(candidate.body))

    def fetch(self, note_id: str, *, recall: bool) -> None:
        pointer = self.ledger.pointer(note_id)
        attempt = FetchAttempt(
            self.homebase.key,
            note_id,
            bytes.fromhex(pointer.content_hash),
            request=new_request_id(self.entropy),
        )
        kind = Request.RECALL if recall else Request.FETCH
        self.device.pending[attempt.request] = Pending(kind, attempt, self.tick, pointer)
        self.send(self.device, attempt.request_message())

    def release(self) -> None:
        for note_id, chash in self.ledger.releases_due()[:3]:
            attempt = ReleaseAttempt(
                self.homebase.key,
                note_id,
                bytes.fromhex(chash),
                request=new_request_id(self.entropy),
            )
            self.device.pending[attempt.request] = Pending(Request.RELEASE, attempt, self.tick)
            self.send(self.device, attempt.request_message())

    def _on_holder_reply(self, sender: bytes, message: PeerMessage) -> None:
        request = getattr(message, "request", b"")
        pending = self.device.pending.get(request)
        if pending is None:
            self.note(f"device sets aside a stale {type(message).__name__}")
            return
        attempt = pending.attempt
        # The simulator's own judgement of a valid ack, made before the real
        # gate's: a clear it did not see a valid ack for breaks invariant 2.
        if (
            isinstance(message, OffloadAck)
            and isinstance(attempt, OffloadAttempt)
            and sender == self.homebase.key
            and message.note_id == attempt.note_id
            and message.content_hash == attempt.content_hash
        ):
            self.acked.add((attempt.note_id, attempt.content_hash.hex()))
        verdict = attempt.on_message(sender, message)
        if verdict is None:
            return
        del self.device.pending[request]
        self.note(f"device {pending.kind.value} {attempt.note_id[:8]}: {verdict.outcome.value}")
        chash = attempt.content_hash.hex()
        # The device's own steps after a verdict (`offloadsteps`, which
        # `NoteOffloadService` takes under trio), taken at once.
        steps: Generator[offloadsteps.OffloadStep, bool | None, object]
        if pending.kind is Request.OFFLOAD:
            steps = offloadsteps.after_offload(attempt.note_id, chash, verdict)
        elif pending.kind in (Request.FETCH, Request.RECALL):
            recall = pending.pointer if pending.kind is Request.RECALL else None
            steps = offloadsteps.after_fetch(verdict, recall)
        else:
            steps = offloadsteps.after_release(attempt.note_id, chash, verdict)
        answer: bool | None = None
        try:
            while True:
                step = steps.send(answer)
                if isinstance(step, offloadsteps.BeforeClear) and self._crashes_here():
                    self.note("device crashes between the ack and the clear")
                    self.crash("device")
                    return
                answer = self.ledger.take(step)
                if isinstance(step, offloadsteps.Clear) and answer:
                    self.stats.offloads_cleared += 1
        except StopIteration as end:
            ended = end.value
        if isinstance(ended, offloadsteps.Fetched):
            if ended.body is None:
                self.stats.fetches_refused += 1
                return
            if body_hash(ended.body) != attempt.content_hash:
                raise InvariantViolated(
                    2, f"fetched body of {attempt.note_id} accepted without re-hashing to it"
                )
            self.stats.fetches_verified += 1
            if ended.restored:
                self.stats.recalls += 1
        elif ended is True:
            self.stats.releases += 1

    def _crashes_here(self) -> bool:
        return self.rng.random() < self.plan.crash

    # -- faults -----------------------------------------------------------------------------

    def crash(self, name: str) -> None:
        self.stats.crashes += 1
        self.note(f"crash {name}")
        if name == "relay":
            self.relay.crash()
            return
        peer = self.peers[name]
        peer.crash()
        if peer is self.homebase:
            self.holder = self._holder()
        else:
            self.ledger = OffloadLedger(peer.node, self.homebase.key)

    def _partition(self) -> None:
        cut = [link for link in LINKS if not self.relay.up[link]]
        roll = self.rng.random()
        if roll < 0.3 and not self.swizzle:
            # FoundationDB's swizzle: cut the links one by one, restore them in
            # another random order.
            order = list(LINKS)
            self.rng.shuffle(order)
            back = list(order)
            self.rng.shuffle(back)
            self.swizzle.extend([(link, False) for link in order] + [(link, True) for link in back])
            self.note("swizzle begins")
        elif cut and roll < 0.65:
            link = self.rng.choice(cut)
            self.relay.up[link] = True
            self.note(f"link {link} restored")
        else:
            link = self.rng.choice(LINKS)
            self.relay.up[link] = False
            self.note(f"link {link} cut")

    def _skew(self) -> None:
        name = self.rng.choice(PEERS)
        if self.rng.random() < 0.5:
            self.skew[name] = self.rng.randint(-MAX_SKEW_MS, MAX_SKEW_MS)
            self.note(f"clock of {name} skewed by {self.skew[name]} ms")
        else:
            jump = self.rng.randint(1, 3_600_000)
            self.clock.advance(jump * 1000)
            self.note(f"the clock jumps {jump} ms ahead")

    # -- the workload -------------------------------------------------------------------------

    def _live_clear(self, peer: Peer, *, resident: bool | None = None) -> list[str]:
        sql = "SELECT id FROM note WHERE zone = 'clear' AND deleted = 0"
        if resident is True:
            sql += " AND holder IS NULL"
        elif resident is False:
            sql += " AND holder IS NOT NULL"
        return [r[0] for r in peek(peer.node.db, sql + " ORDER BY id")]

    def _distilled(self, index: int, variant: int) -> Distilled:
        if index < len(THREADS):
            thread = THREADS[index]
            return Distilled(
                NoteKind.CONVERSATION_DIGEST,
                f"thread:{thread}",
                f"Conversation {thread}",
                f"{BODIES[variant]} {CLEAR_CANARY.decode()}d{index}v{variant}",
                source_ref=f"thread:{thread}",
                tags=("family",) if variant % 2 else (),
            )
        name = CONTACTS[index - len(THREADS)]
        return Distilled(
            NoteKind.PERSON,
            contact_id_for(name),
            name,
            f"{name} {BODIES[variant]} {CLEAR_CANARY.decode()}p{index}v{variant}",
            contact_id=contact_id_for(name),
        )

    def _distil(self, peer: Peer) -> None:
        item = self._distilled(
            self.rng.randrange(len(THREADS) + len(CONTACTS)), self.rng.randrange(len(BODIES))
        )
        noop = invariants.upsert_is_noop(peer.node, item)
        before = peer.node.digest() if noop or not invariants.SKIP_FOREGONE else None
        result = peer.node.notebook.upsert_clear(item)
        self.note(f"{peer.name} distils {item.identity_key[:12]}: {result.outcome.value}")
        if noop and peer.node.digest() != before:
            raise InvariantViolated(
                5, f"{peer.name}: an upsert of unchanged content changed the digest"
            )

    def _append(self, peer: Peer) -> None:
        count = self.rng.randint(1, 3)
        events = []
        for _ in range(count):
            contact = self.rng.choice(CONTACTS)
            text = f"{self.rng.choice(BODIES)} {self.canary()}"
            at = self.clock.now_us() - self.rng.randint(0, 86_400_000_000)
            thread = self.rng.choice(THREADS)
            event_id = None
            if self.rng.random() < 0.3:
                # An import both peers may make (the same file on both): one of
                # eight events, each wholly determined by its id, merges to one.
                which = self.rng.randrange(8)
                raw = random.Random(which).randbytes(16)
                event_id = str(uuid.UUID(bytes=raw, version=4))
                text = f"imported {which} {CLEAR_CANARY.decode()}i{which}"
                at, contact, thread = IMPORTED_AT + which, CONTACTS[which % 3], THREADS[which % 3]
            events.append(
                NewEvent(EventKind.MESSAGE, at, text, contact=contact, thread=thread, id=event_id)
            )
        result = peer.node.log.append(events)
        self.note(f"{peer.name} appends {count} events ({result.skipped} already held)")

    def _edit(self, peer: Peer) -> None:
        ids = self._live_clear(peer)
        if not ids:
            return
        note_id = self.rng.choice(ids)
        body = f"my own words {self.rng.randrange(5)} {self.canary()}"
        changed = peer.node.notebook.edit(note_id, body=body)
        self.note(f"{peer.name} edits {note_id[:8]}: {'changed' if changed else 'no change'}")

    def _delete(self, peer: Peer) -> None:
        ids = self._live_clear(peer)
        if ids:
            note_id = self.rng.choice(ids)
            peer.node.notebook.delete(note_id)
            self.note(f"{peer.name} deletes {note_id[:8]}")

    def _pin(self, peer: Peer) -> None:
        rows = peek(peer.node.db, "SELECT id FROM memory_event WHERE kind = 'message' ORDER BY id")
        if rows:
            event_id = self.rng.choice(rows)[0]
            note_id = peer.node.notebook.pin_spark(event_id, ["pinned"])
            self.note(f"{peer.name} pins {event_id[:8]} as {note_id[:8]}")

    def _sealed(self, peer: Peer) -> None:
        kind = self.rng.choice(list(SealedKind))
        secret = self.canary(sealed=True)
        note_id = peer.node.notebook.record_sealed(
            kind, title=f"prep {secret}", body=f"what Ada's agent said {secret}"
        )
        self.note(f"{peer.name} seals {note_id[:8]}")

    def _user_note(self, peer: Peer) -> None:
        title = self.rng.choice(GUIDANCE)
        peer.node.notebook.add_user_note(NoteKind.GUIDANCE, title, f"{title}. {self.canary()}")
        self.note(f"{peer.name} adds guidance {title!r}")

    def _recall_or_fetch(self, recall: bool) -> None:
        ids = self._live_clear(self.device, resident=False)
        if ids:
            self.fetch(self.rng.choice(ids), recall=recall)

    def _offload(self) -> None:
        ids = self._live_clear(self.device, resident=True)
        if ids:
            self.offload(self.rng.choice(ids))

    def _operations(self) -> list[tuple[str, float, Callable[[], None]]]:
        d, h = self.device, self.homebase
        plan = self.plan
        return [
            ("append", 3, lambda: self._append(self.rng.choice([d, h]))),
            ("distil", 4, lambda: self._distil(self.rng.choice([d, h]))),
            ("edit", 2, lambda: self._edit(self.rng.choice([d, h]))),
            ("delete", 0.5, lambda: self._delete(self.rng.choice([d, h]))),
            ("pin", 1, lambda: self._pin(self.rng.choice([d, h]))),
            ("sealed", 1, lambda: self._sealed(self.rng.choice([d, h]))),
            ("guidance", 0.5, lambda: self._user_note(self.rng.choice([d, h]))),
            ("sync", 3, lambda: self.open_sync(self.rng.choice([d, h]))),
            ("offload", 3, self._offload),
            ("fetch", 1.5, lambda: self._recall_or_fetch(False)),
            ("recall", 1, lambda: self._recall_or_fetch(True)),
            ("release", 1, self.release),
            ("crash", 40 * plan.crash, lambda: self.crash(self.rng.choice([*PEERS, "relay"]))),
            ("partition", 40 * plan.partition, self._partition),
            ("clock", 40 * plan.skew, self._skew),
        ]

    # -- stepping -----------------------------------------------------------------------------

    def step(self, op: str | None = None, pick: int | None = None) -> None:
        """One step of the schedule, then every invariant; raises `InvariantViolated`.

        ``op`` names the operation (see `OPERATIONS`) instead of drawing it, and
        ``pick`` reseeds the step's choices, so that a front end such as
        Hypothesis can choose the schedule and shrink it: with a pick per step,
        removing one step leaves the choices of the others as they were.
        """
        if pick is not None:
            self.rng.seed(f"pixie-sim-{self.seed}-{pick}")
        self.tick += 1
        self.clock.advance(self.rng.randint(1_000, 20_000_000))
        if self.swizzle:
            link, up = self.swizzle.popleft()
            self.relay.up[link] = up
            self.note(f"swizzle: link {link} {'restored' if up else 'cut'}")
        ops = self._operations()
        if op is None:
            name, _, run = self.rng.choices(ops, weights=[w for _, w, _ in ops])[0]
        else:
            name, run = op, {n: r for n, _, r in ops}[op]
        self.stats.count(name)
        try:
            run()
        except (BadInput, NotFound) as exc:
            self.stats.refused += 1
            self.note(f"{name} refused: {exc}")
        self.network()
        invariants.check_all(self)

    def network(self) -> None:
        for packet in self.relay.due(self.tick):
            self.deliver(packet.src, packet.dst, packet.data)
        for peer in self.peers.values():
            self.pump(peer)
            for entry in list(peer.table.sessions.values()):
                if self.tick - entry.heard_at > SESSION_IDLE_TICKS:
                    entry.session.fail("the sibling went quiet", tell_peer=False)
                    self.note(f"sync {peer.name}: timed out")
                    self.stats.sessions_failed += 1
                    peer.table.close(entry.session.session_id)
        for request, pending in list(self.device.pending.items()):
            if self.tick - pending.since > ATTEMPT_TICKS:
                del self.device.pending[request]
                self.note(f"device {pending.kind.value} {pending.attempt.note_id[:8]}: timeout")

    def quiet(self) -> None:
        """Faults stop: links heal, clocks agree, and time passes the skewed stamps."""
        self.plan = Plan.draw(self.rng, faults=False, lies=False)
        self.relay.rates = self.plan.net
        self.swizzle.clear()
        for link in LINKS:
            self.relay.up[link] = True
        for name in PEERS:
            self.skew[name] = 0
        self.clock.advance(3_600 * 1_000_000)
        self.note("faults stop")

    def settle(self, limit: int = 200) -> None:
        """Tick until nothing is in flight, no session is open and nothing waits."""
        for _ in range(limit):
            busy = (
                not self.relay.idle()
                or any(p.table.sessions for p in self.peers.values())
                or self.device.pending
            )
            if not busy:
                return
            self.tick += 1
            self.clock.advance(1_000)
            self.network()
            invariants.check_all(self)
        raise InvariantViolated(3, f"the network did not settle in {limit} quiet ticks")

    def finish(self) -> None:
        """Stop the faults, release, sync until converged, and check the end state."""
        self.quiet()
        self.settle()
        for _ in range(3):
            self.release()
            self.settle()
        for attempt in range(FINAL_SYNC_TRIES):
            self.open_sync(self.peers[PEERS[attempt % 2]])
            self.settle()
            if self.device.node.digest() == self.homebase.node.digest():
                break
        invariants.check_converged(self)
        invariants.check_digest_only(self)
        invariants.check_all(self, full=True)
        self.finished = True


def run_seed(
    seed: int,
    steps: int,
    *,
    base: Path | None = None,
    lies: bool = False,
    trace: Callable[[str], None] | None = None,
) -> RunResult:
    """Run one seed to the end (or to its first violation) and say how it went."""
    world = World(seed, base=base, lies=lies, trace=trace)
    try:
        try:
            for _ in range(steps):
                world.step()
            world.finish()
        except InvariantViolated as exc:
            return RunResult.failed(world, exc.number, exc.detail)
        except Exception as exc:  # an error escaping real code is a finding too
            return RunResult.failed(world, 0, f"{type(exc).__name__}: {exc}")
        return RunResult.passed(world)
    finally:
        world.close()


@dataclass(frozen=True)
class RunResult:
    seed: int
    ok: bool
    step: int
    invariant: int | None
    detail: str
    trace: tuple[str, ...]
    digests: tuple[str, str]
    stats: dict[str, object]

    @classmethod
    def passed(cls, world: World) -> RunResult:
        return cls(
            world.seed,
            True,
            world.tick,
            None,
            "",
            tuple(world.trace),
            _digests(world),
            _stats(world),
        )

    @classmethod
    def failed(cls, world: World, number: int, detail: str) -> RunResult:
        world.note(f"VIOLATION of invariant {number}: {detail}")
        return cls(
            world.seed,
            False,
            world.tick,
            number,
            detail,
            tuple(world.trace),
            _digests(world),
            _stats(world),
        )

    @property
    def invariant_name(self) -> str:
        return "" if self.invariant is None else invariants.NAMES[self.invariant]

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "seed": self.seed,
            "ok": self.ok,
            "step": self.step,
            "digests": list(self.digests),
            "stats": self.stats,
        }
        if not self.ok:
            out.update(
                invariant=self.invariant,
                invariant_name=self.invariant_name,
                detail=self.detail,
                trace=list(self.trace[-30:]),
            )
        return out


def _digests(world: World) -> tuple[str, str]:
    try:
        return (
            world.device.node.digest().digest().hex(),
            world.homebase.node.digest().digest().hex(),
        )
    except Exception:  # a world that broke mid-crash
        return ("", "")


def _stats(world: World) -> dict[str, object]:
    s = world.stats
    return {
        "ops": dict(sorted(s.ops.items())),
        "refused": s.refused,
        "crashes": s.crashes,
        "envelopes": world.relay.carried_envelopes,
        "relay_bytes": world.relay.carried_bytes,
        "relay_hash": world.relay.carried_hash.hex(),
        "lost": world.relay.lost,
        "rejected_envelopes": s.rejected_envelopes,
        "sessions": s.sessions,
        "sessions_failed": s.sessions_failed,
        "offloads_cleared": s.offloads_cleared,
        "fetches_verified": s.fetches_verified,
        "fetches_refused": s.fetches_refused,
        "recalls": s.recalls,
        "releases": s.releases,
        "plan": world.drawn.as_json(),
    }


__all__ = [
    "OPERATIONS",
    "InvariantViolated",
    "Plan",
    "RunResult",
    "World",
    "default_base",
    "run_seed",
]
