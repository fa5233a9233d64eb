"""The simulated network: two peers' links to one relay, and the relay itself.

The relay here is what the real one is to the peers: a store-and-forward box
that routes sealed envelopes by recipient key. It keeps a real
`pixie.relay.mailbox.Mailboxes` for a recipient whose link is down, and it
records every byte it carries, so the simulator can scan them for planted
plaintext canaries (a relay that ever sees one has been handed plaintext).

Faults strike envelopes as they cross, each with the probability the seed
chose: drop, delay (held back some ticks), duplicate, and reorder (a due
envelope may overtake others). Links are cut and restored one direction at a
time; an envelope sent over a cut uplink is lost, one due over a cut downlink
waits in the recipient's mailbox. With three peers or more, the route between
two of them can be severed while each still reaches the others (two relays of
a fleet that cannot reach each other, say): an envelope between a severed
pair is lost.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pixie.relay.mailbox import Mailboxes, MailboxLimits

# Every canary begins with one of these; ciphertext matching eight chosen bytes
# by chance is a 2**-64 event per offset.
CLEAR_CANARY = b"PXC4N4RY"
SEALED_CANARY = b"PXS3AL3D"
CANARIES = (CLEAR_CANARY, SEALED_CANARY)
# The peers of a world of N (2 to 5): the device that offloads, the Homebase
# that holds, then further devices of the same account.
NAMES = ("device", "homebase", "laptop", "tablet", "watch")
PEERS = NAMES[:2]


def links_of(peers: tuple[str, ...]) -> tuple[str, ...]:
    """Link names: "<peer>>relay" carries what the peer sends, "relay><peer>" what it receives."""
    return tuple(f"{p}>relay" for p in peers) + tuple(f"relay>{p}" for p in peers)


LINKS = links_of(PEERS)


@dataclass(frozen=True, slots=True)
class FaultRates:
    """Probabilities per envelope (drop, delay, duplicate, reorder)."""

    drop: float = 0.0
    delay: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0

    @classmethod
    def none(cls) -> FaultRates:
        return cls()


@dataclass
class Packet:
    number: int  # in the order the relay took it: ties broken by it, never by chance
    src: str
    dst: str
    data: bytes
    due: int  # the tick it may be delivered from


@dataclass
class SimRelay:
    rng: random.Random
    rates: FaultRates
    note: Callable[[str], None]
    peers: tuple[str, ...] = PEERS
    up: dict[str, bool] = field(default_factory=dict)
    in_flight: list[Packet] = field(default_factory=list)
    mailboxes: Mailboxes = field(
        default_factory=lambda: Mailboxes(MailboxLimits(max_envelopes=512, max_age=1e12))
    )
    carried_envelopes: int = 0
    carried_bytes: int = 0
    # A running hash of every envelope carried: a seeded run seals the same bytes.
    carried_hash: bytes = b""
    leaks: list[tuple[str, str, int]] = field(default_factory=list)  # (canary, src, size)
    lost: int = 0
    severed: set[frozenset[str]] = field(default_factory=set)  # pairs that cannot reach each other
    _numbers: int = 0

    def __post_init__(self) -> None:
        if not self.up:
            self.up = dict.fromkeys(links_of(self.peers), True)

    def submit(self, src: str, dst: str, data: bytes, tick: int) -> None:
        """An envelope handed to the relay by ``src`` for ``dst``."""
        if not self.up[f"{src}>relay"]:
            self.lost += 1
            self.note(f"net {src}>relay cut: envelope of {len(data)} B lost")
            return
        self.carried_envelopes += 1
        self.carried_bytes += len(data)
        self.carried_hash = hashlib.blake2b(self.carried_hash + data, digest_size=16).digest()
        for canary in CANARIES:
            if canary in data:
                self.leaks.append((canary.decode(), src, len(data)))
        if frozenset((src, dst)) in self.severed:
            self.lost += 1
            self.note(f"net {src}-{dst} severed: envelope of {len(data)} B lost")
            return
        r = self.rates
        if self.rng.random() < r.drop:
            self.lost += 1
            self.note(f"net drop {src}->{dst} {len(data)} B")
            return
        due = tick
        if self.rng.random() < r.delay:
            due += self.rng.randint(1, 6)
            self.note(f"net delay {src}->{dst} until tick {due}")
        self._queue(src, dst, data, due)
        if self.rng.random() < r.duplicate:
            self.note(f"net duplicate {src}->{dst}")
            self._queue(src, dst, data, due + self.rng.randint(0, 3))

    def _queue(self, src: str, dst: str, data: bytes, due: int) -> None:
        self._numbers += 1
        self.in_flight.append(Packet(self._numbers, src, dst, data, due))

    def due(self, tick: int) -> list[Packet]:
        """Take the envelopes that reach their recipient at ``tick``, in the order
        they arrive. Those for a recipient whose downlink is cut wait in its
        mailbox and come out, oldest first, once it is restored."""
        out: list[Packet] = []
        for peer in self.peers:
            if self.up[f"relay>{peer}"]:
                for src, data in self.mailboxes.take(peer.encode(), float(tick), 1 << 30, 1 << 40):
                    self._numbers += 1  # the relay attests the sender, as the real one does
                    out.append(Packet(self._numbers, src.decode(), peer, data, tick))
        ready = [p for p in self.in_flight if p.due <= tick]
        self.in_flight = [p for p in self.in_flight if p.due > tick]
        ready.sort(key=lambda p: p.number)
        for packet in ready:
            if self.up[f"relay>{packet.dst}"]:
                out.append(packet)
            else:
                self.mailboxes.put(
                    packet.dst.encode(), packet.data, float(tick), packet.src.encode()
                )
        if len(out) > 1 and self.rng.random() < self.rates.reorder:
            i, j = self.rng.sample(range(len(out)), 2)
            out[i], out[j] = out[j], out[i]
            self.note(f"net reorder {len(out)} envelopes")
        return out

    def crash(self) -> None:
        """The relay restarts: whatever it held in memory is gone."""
        self.lost += len(self.in_flight) + self.mailboxes.envelopes
        self.in_flight = []
        self.mailboxes = Mailboxes(self.mailboxes.limits)

    def idle(self) -> bool:
        return not self.in_flight and self.mailboxes.envelopes == 0


__all__ = [
    "CANARIES",
    "CLEAR_CANARY",
    "LINKS",
    "NAMES",
    "PEERS",
    "SEALED_CANARY",
    "FaultRates",
    "Packet",
    "SimRelay",
    "links_of",
]
