"""The faults a seed strikes a simulated world with, besides those on each
envelope (`pixie.sim.network`): a peer or the relay crashes, links are cut
and restored (one at a time, or FoundationDB's swizzle), two peers lose their
route to each other while each still reaches the rest, and clocks skew or
jump.

`Faults` is mixed into `pixie.sim.world.World`, which supplies the peers,
the relay, the seed's random stream and the trace.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from typing import TYPE_CHECKING

from pixie.device.sync.offload import OffloadLedger
from pixie.homebase.holding import HolderCore
from pixie.protocol.clock import ManualClock
from pixie.sim.network import SimRelay
from pixie.sim.peer import Peer, Stats

MAX_SKEW_MS = 10 * 60 * 1000  # beyond the five minutes a sibling believes, on purpose
PAIR_SHARE = 0.4  # of partition faults, with three peers or more, that sever or heal a pair


class Faults:
    """Crashes, partitions and clock faults (see `World._operations`)."""

    rng: random.Random
    clock: ManualClock
    names: tuple[str, ...]
    links: tuple[str, ...]
    peers: dict[str, Peer]
    relay: SimRelay
    stats: Stats
    skew: dict[str, int]
    swizzle: deque[tuple[str, bool]]
    device: Peer
    homebase: Peer
    holder: HolderCore
    ledger: OffloadLedger

    if TYPE_CHECKING:

        def note(self, what: str) -> None: ...

        def _holder(self) -> HolderCore: ...

        def reconcile(self, peer: Peer) -> None: ...

    def crash(self, name: str) -> None:
        self.stats.crashes += 1
        self.note(f"crash {name}")
        if name == "relay":
            self.relay.crash()
            return
        peer = self.peers[name]
        peer.crash()
        self.reconcile(peer)  # as the driver does when it starts serving
        if peer is self.homebase:
            self.holder = self._holder()
        elif peer is self.device:  # the one that offloads: its ledger opens afresh
            self.ledger = OffloadLedger(peer.node, self.homebase.key)

    def _partition(self) -> None:
        if len(self.names) > 2 and self.rng.random() < PAIR_SHARE:
            self._pair_partition()
            return
        cut = [link for link in self.links if not self.relay.up[link]]
        roll = self.rng.random()
        if roll < 0.3 and not self.swizzle:
            # FoundationDB's swizzle: cut the links one by one, restore them in
            # another random order.
            order = list(self.links)
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
            link = self.rng.choice(self.links)
            self.relay.up[link] = False
            self.note(f"link {link} cut")

    def _pair_partition(self) -> None:
        """Sever the route between two peers, each still reaching the rest,
        or heal one severed."""
        severed = sorted(sorted(pair) for pair in self.relay.severed)
        if severed and self.rng.random() < 0.5:
            a, b = self.rng.choice(severed)
            self.relay.severed.discard(frozenset((a, b)))
            self.note(f"{a} and {b} reach each other again")
        else:
            a, b = self.rng.choice(list(itertools.combinations(self.names, 2)))
            self.relay.severed.add(frozenset((a, b)))
            self.note(f"{a} and {b} are cut off from each other")

    def _skew(self) -> None:
        name = self.rng.choice(self.names)
        if self.rng.random() < 0.5:
            self.skew[name] = self.rng.randint(-MAX_SKEW_MS, MAX_SKEW_MS)
            self.note(f"clock of {name} skewed by {self.skew[name]} ms")
        else:
            jump = self.rng.randint(1, 3_600_000)
            self.clock.advance(jump * 1000)
            self.note(f"the clock jumps {jump} ms ahead")


__all__ = ["MAX_SKEW_MS", "Faults"]
