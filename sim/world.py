"""One simulated world: a device, a Homebase (and, with ``peers`` above 2,
further devices of the account) and a relay, stepped by one seed.

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

import random
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Generator
from pathlib import Path

from pixie.device.errors import BadInput, NotFound
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync import admitsteps, offloadsteps, syncsteps
from pixie.device.sync.admission import Incoming, Rejected, Rejection
from pixie.device.sync.offload import OffloadLedger
from pixie.device.sync.sessions import Route
from pixie.homebase import holdsteps
from pixie.homebase.holding import HolderCore
from pixie.protocol import envelope, syncwire
from pixie.protocol.errors import ProtocolError
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
    PairReject,
    PeerMessage,
    Release,
    Released,
    SyncData,
    encode_body,
)
from pixie.protocol.sync import Ending, SyncSession
from pixie.sim import invariants
from pixie.sim.account import Account, check_removed
from pixie.sim.clock import PeerClock, world_clock, world_entropy
from pixie.sim.faults import Faults
from pixie.sim.invariants import InvariantViolated
from pixie.sim.network import CLEAR_CANARY, NAMES, SEALED_CANARY, SimRelay, links_of
from pixie.sim.peer import (
    OpenSession,
    Peer,
    Pending,
    Plan,
    Request,
    Stats,
    default_base,
    quiet,
)
from pixie.sim.workload import Workload

TRACE_KEEP = 400
ATTEMPT_TICKS = 8  # an offload, fetch or release unanswered this long has timed out
SESSION_IDLE_TICKS = 10  # a sync session that heard nothing this long is abandoned
PUMP_LIMIT = 64  # messages one session may queue per turn
FINAL_SYNC_TRIES = 4


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
    "revoke",
)


class World(Workload, Faults, Account):
    """A device, a Homebase (perhaps further devices) and a relay, driven by one seed."""

    def __init__(
        self,
        seed: int,
        *,
        base: Path | None = None,
        faults: bool = True,
        lies: bool = False,
        trace: Callable[[str], None] | None = None,
        peers: int = 2,
    ) -> None:
        """``peers``: 2 (a device and its Homebase) to 5 (more devices of the
        same account, each a sibling of every other; only the device offloads)."""
        if not 2 <= peers <= len(NAMES):
            raise ValueError(f"a world has 2 to {len(NAMES)} peers")
        self.names: tuple[str, ...] = NAMES[:peers]
        self.links = links_of(self.names)
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
        self.skew: dict[str, int] = dict.fromkeys(self.names, 0)
        self.relay = SimRelay(self.rng, self.plan.net, self.note, self.names)
        self.swizzle: deque[tuple[str, bool]] = deque()
        self.acked: set[tuple[str, str]] = set()  # (note id, hash hex) the sim saw validly acked
        self.edited: dict[str, set[str]] = {p: set() for p in self.names}
        self.canary_count = 0
        self.revoked: set[str] = set()
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
        """Fresh data dirs, each a sibling of every other (what pairing and
        the membership records leave behind).

        A data dir made from the seed's entropy is the same every run: its
        origin, its identity key and, once it seals a note, its seal key.
        """
        for name in self.names:
            path = self.tmp / name
            clock = PeerClock(self.clock, self._skew_of(name))
            role = "homebase" if name == "homebase" else "device"
            create_data_dir(
                path, name=name, role=role, key_store=keys, clock=clock, entropy=self.entropy
            )
            peer = Peer(name, path, keys, clock, self.entropy)
            peer.open()
            self.peers[name] = peer
        for peer in self.peers.values():
            for other in self.peers.values():
                if other is not peer:
                    peer.node.siblings.add(
                        SiblingInfo(
                            other.key, other.name, other.node.role, "sim", peer.clock.now_us()
                        )
                    )
        self.by_key = {peer.key: peer for peer in self.peers.values()}

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

    def send(self, sender: Peer, recipient: Peer, message: PeerMessage) -> None:
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
            if self.revoked and self.peers[src].key in peer.node.siblings.removed():
                raise InvariantViolated(8, f"{peer.name} took in an envelope of the removed {src}")
            return admitted
        self.stats.rejected_envelopes += 1
        if isinstance(admitted, Rejected):
            self.note(f"{peer.name} rejects an envelope ({admitted.reason}): {admitted.detail}")
            if admitted.reason is Rejection.REMOVED:
                self.tell_removed(peer, self.peers[src])
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
        elif isinstance(message, PairReject):
            self.refused(peer, sender, message.reason)

    # -- sync -------------------------------------------------------------------------------

    def open_sync(self, opener: Peer, to: Peer | None = None) -> None:
        """``opener`` opens a session with a sibling (``to``, or one the seed
        picks), unless one is open with it here (a peer opens one only after
        its earlier ones have ended)."""
        if self.revoked and self.knows_removed(opener):
            self.note(f"sync: {opener.name} was removed from the account; none started")
            return
        if to is None:
            # Its siblings (all the others, until one is removed).
            book = {s.key for s in opener.node.siblings.all()} if self.revoked else None
            others = [
                p
                for p in self.peers.values()
                if p is not opener and (book is None or p.key in book)
            ]
            if not others:
                return
            to = others[0] if len(others) == 1 else self.rng.choice(others)
        other = to.key
        if opener.table.with_peer(other):
            self.note(f"sync: {opener.name} has a session open; none started")
            return
        session = SyncSession(opener.replica, opener=True, entropy=self.entropy)
        syncsteps.open_ours(opener.table, OpenSession(session, other, self.tick))
        self.stats.sessions += 1
        session.start()
        self.note(f"sync opened by {opener.name} with {to.name}")
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
                self.send(peer, self.by_key[step.entry.peer], SyncData(syncwire.encode(hello)))
                step.entry.heard_at = self.tick
            elif isinstance(step, syncsteps.Send):
                self.note(f"sync {peer.name}: both sides opened a session; keeps its own")
                self.send(peer, self.by_key[sender], SyncData(syncwire.encode(step.message)))
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
                self.send(peer, self.by_key[entry.peer], SyncData(syncwire.encode(message)))
            if not session.finished:
                continue
            peer.table.close(session.session_id)
            if session.stats.applied:
                self.reconcile(peer)  # as the driver does after each session
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
            self.send(home, self.by_key[sender], reply)
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
        self.ledger.asking(attempt.request, candidate.id, candidate.content_hash)
        self.send(self.device, self.homebase, attempt.request_message(candidate.body))

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
        self.send(self.device, self.homebase, attempt.request_message())

    def release(self) -> None:
        for note_id, chash in self.ledger.releases_due()[:3]:
            attempt = ReleaseAttempt(
                self.homebase.key,
                note_id,
                bytes.fromhex(chash),
                request=new_request_id(self.entropy),
            )
            self.device.pending[attempt.request] = Pending(Request.RELEASE, attempt, self.tick)
            self.send(self.device, self.homebase, attempt.request_message())

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
            steps = offloadsteps.after_offload(attempt.note_id, chash, verdict, request)
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
        self.ledger.answered(request)
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

    # -- the workload -------------------------------------------------------------------------

    def _recall_or_fetch(self, recall: bool) -> None:
        ids = self._live_clear(self.device, resident=False)
        if ids:
            self.fetch(self.rng.choice(ids), recall=recall)

    def _offload(self) -> None:
        ids = self._live_clear(self.device, resident=True)
        if ids:
            self.offload(self.rng.choice(ids))

    def _operations(self) -> list[tuple[str, float, Callable[[], None]]]:
        every = list(self.peers.values())
        plan = self.plan
        return [
            ("append", 3, lambda: self._append(self.rng.choice(every))),
            ("distil", 4, lambda: self._distil(self.rng.choice(every))),
            ("edit", 2, lambda: self._edit(self.rng.choice(every))),
            ("delete", 0.5, lambda: self._delete(self.rng.choice(every))),
            ("pin", 1, lambda: self._pin(self.rng.choice(every))),
            ("sealed", 1, lambda: self._sealed(self.rng.choice(every))),
            ("guidance", 0.5, lambda: self._user_note(self.rng.choice(every))),
            ("sync", 3, lambda: self.open_sync(self.rng.choice(every))),
            ("offload", 3, self._offload),
            ("fetch", 1.5, lambda: self._recall_or_fetch(False)),
            ("recall", 1, lambda: self._recall_or_fetch(True)),
            ("release", 1, self.release),
            ("crash", 40 * plan.crash, lambda: self.crash(self.rng.choice([*self.names, "relay"]))),
            ("partition", 40 * plan.partition, self._partition),
            ("clock", 40 * plan.skew, self._skew),
            ("revoke", 0.3 if self.can_revoke() else 0.0, self._revoke),
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
                    if entry.session.stats.applied:
                        self.reconcile(peer)
        for request, pending in list(self.device.pending.items()):
            if self.tick - pending.since > ATTEMPT_TICKS:
                del self.device.pending[request]
                self.ledger.answered(request)
                self.note(f"device {pending.kind.value} {pending.attempt.note_id[:8]}: timeout")

    def quiet(self) -> None:
        """Faults stop: links heal, clocks agree, and time passes the skewed stamps."""
        self.plan = Plan.draw(self.rng, faults=False, lies=False)
        self.relay.rates = self.plan.net
        self.swizzle.clear()
        self.relay.severed.clear()
        for link in self.links:
            self.relay.up[link] = True
        for name in self.names:
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
        ring = self.members_left()
        for attempt in range(FINAL_SYNC_TRIES):
            if len(ring) == 2:
                self.open_sync(ring[attempt % 2], ring[(attempt + 1) % 2])
                self.settle()
            else:
                # Each peer with the next, round the ring, twice: what any
                # one holds reaches every other.
                for _ in range(2):
                    for i, peer in enumerate(ring):
                        self.open_sync(peer, ring[(i + 1) % len(ring)])
                        self.settle()
            if len({p.node.digest() for p in ring}) == 1:
                break
        for late in self.last_attempts():  # each removed peer syncs once more, and is told
            self.open_sync(late, self.device)
            self.settle()
        check_removed(self)
        invariants.check_converged(self)
        invariants.check_digest_only(self)
        invariants.check_all(self, full=True)
        self.finished = True


__all__ = [
    "OPERATIONS",
    "InvariantViolated",
    "Peer",
    "Plan",
    "World",
    "default_base",
]
