"""A simulated peer and what a run decides about it: its data dir, what it
holds in memory (lost in a crash), the requests it waits on, the plan of
faults a seed draws, and the run's counters."""

from __future__ import annotations

import enum
import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from nacl.signing import SigningKey

from pixie.device.logs import Summarised
from pixie.device.node.keyed import Node
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.replica import NodeReplica
from pixie.device.sync.admission import Admission
from pixie.device.sync.offloadsteps import Pointer
from pixie.device.sync.sessions import SessionTable
from pixie.protocol import syncwire
from pixie.protocol.clock import ManualClock, SeededEntropy
from pixie.protocol.envelope import EnvelopeKeys
from pixie.protocol.hlc import HybridClock
from pixie.protocol.offload import FetchAttempt, OffloadAttempt, ReleaseAttempt
from pixie.protocol.sync import SyncSession
from pixie.sim.clock import PeerClock
from pixie.sim.network import FaultRates

# What the real gates log goes here, below any level a handler shows: the
# simulator says what happened in its own trace.
QUIET = logging.getLogger("pixie.sim.quiet")


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


__all__ = [
    "QUIET",
    "OpenSession",
    "Peer",
    "Pending",
    "Plan",
    "Request",
    "Stats",
    "default_base",
    "quiet",
]
