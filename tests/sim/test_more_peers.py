"""The simulator with more than two peers: a device, its Homebase and further
devices of the same account, each a sibling of every other, synced pairwise
through the simulated relay under the seed's faults. Every invariant holds,
the end state is the same on every peer, and a lying holder is still caught."""

from __future__ import annotations

import pytest

from pixie.sim.results import run_seed
from pixie.sim.world import World


@pytest.mark.parametrize("peers", [3, 5])
def test_seeds_with_more_peers_hold_every_invariant(peers: int) -> None:
    results = [run_seed(seed, 60, peers=peers) for seed in range(8)]
    assert [r.seed for r in results if not r.ok] == [], [r.detail for r in results if not r.ok]


def test_every_peer_ends_with_the_same_digest() -> None:
    with World(11, peers=4) as world:
        for _ in range(60):
            world.step()
        world.finish()
        digests = {peer.node.digest().digest() for peer in world.peers.values()}
        assert len(world.peers) == 4 and len(digests) == 1


def test_a_lying_holder_is_caught_with_three_peers() -> None:
    results = [run_seed(seed, 60, peers=3, lies=True) for seed in range(40)]
    caught = [r for r in results if not r.ok]
    assert caught and {r.invariant for r in caught} <= {1, 2}


def test_a_world_holds_two_to_five_peers() -> None:
    with pytest.raises(ValueError, match="2 to 5"):
        World(1, peers=6)
