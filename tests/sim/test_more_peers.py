"""The simulator with more than two peers: a device, its Homebase and further
devices of the same account, each a sibling of every other, synced pairwise
through the simulated relay under the seed's faults. Every invariant holds,
the end state is the same on every peer, and a lying holder is still caught.
Two peers may lose their route to each other while each reaches the rest,
and a device removed from the account is refused by every member that holds
the removal, told so, and left out of the end state."""

from __future__ import annotations

import pytest

from pixie.device.sync import membership
from pixie.device.sync.admission import Admission
from pixie.sim.invariants import InvariantViolated
from pixie.sim.results import run_seed
from pixie.sim.world import World


@pytest.mark.parametrize("peers", [3, 5])
def test_seeds_with_more_peers_hold_every_invariant(peers: int) -> None:
    results = [run_seed(seed, 60, peers=peers) for seed in range(8)]
    assert [r.seed for r in results if not r.ok] == [], [r.detail for r in results if not r.ok]


def test_every_peer_still_in_the_account_ends_with_the_same_digest() -> None:
    with World(11, peers=4) as world:
        for _ in range(60):
            world.step()
        world.finish()
        left = world.members_left()
        digests = {peer.node.digest().digest() for peer in left}
        assert len(left) == 4 - len(world.revoked) >= 2 and len(digests) == 1


def test_a_lying_holder_is_caught_with_three_peers() -> None:
    results = [run_seed(seed, 60, peers=3, lies=True) for seed in range(40)]
    caught = [r for r in results if not r.ok]
    assert caught and {r.invariant for r in caught} <= {1, 2}


def test_a_world_holds_two_to_five_peers() -> None:
    with pytest.raises(ValueError, match="2 to 5"):
        World(1, peers=6)


def test_a_severed_pair_loses_what_it_sends_while_each_reaches_the_rest() -> None:
    with World(3, peers=3, faults=False) as world:
        device, home, laptop = (world.peers[n] for n in ("device", "homebase", "laptop"))
        world.relay.severed.add(frozenset(("device", "laptop")))
        world._append(laptop)
        lost = world.relay.lost
        world.open_sync(laptop, device)
        world.settle()
        assert world.relay.lost > lost  # the Hello, and the tries after it
        assert laptop.node.digest() != device.node.digest()
        world.open_sync(laptop, home)  # the route through the Homebase is there
        world.settle()
        world.open_sync(home, device)
        world.settle()
        assert laptop.node.digest() == home.node.digest() == device.node.digest()
        world.finish()


def test_pair_partitions_are_drawn_only_with_three_peers_or_more() -> None:
    drawn = {
        peers: [r.trace for r in (run_seed(seed, 60, peers=peers) for seed in range(12))]
        for peers in (2, 3)
    }
    assert not any("cut off from each other" in line for t in drawn[2] for line in t)
    assert any("cut off from each other" in line for t in drawn[3] for line in t)


def _removed_laptop(seed: int) -> World:
    """A world whose laptop, after syncing with both others (so that their
    gates know it), is removed from the account."""
    world = World(seed, peers=3, faults=False)
    laptop = world.peers["laptop"]
    for other in world.members_left():
        world.open_sync(laptop, other)
        world.settle()
    world.step(op="revoke")
    assert world.revoked == {"laptop"}
    return world


def test_a_removed_device_is_refused_and_told_and_the_rest_converge() -> None:
    with _removed_laptop(5) as world:
        laptop = world.peers["laptop"]
        for peer in world.members_left():
            world._append(peer)
        world._append(laptop)
        for _ in range(40):
            world.step()
        world.finish()  # raises if any member still counts the laptop, or it was never told
        members = world.members_left()
        assert [p.name for p in members] == ["device", "homebase"]
        assert len({p.node.digest() for p in members}) == 1
        for peer in members:
            assert laptop.key in peer.node.siblings.removed()
            assert peer.node.siblings.get(laptop.key) is None
        assert membership.removed_from(laptop.node) is not None
        sessions = world.stats.sessions
        world.open_sync(laptop)  # as its `pixie sync` does from now on: none started
        assert world.stats.sessions == sessions


def test_a_member_that_takes_in_a_removed_devices_envelope_breaks_invariant_8(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The planted bug: the gate never hears of a removal.
    monkeypatch.setattr(Admission, "forget", lambda self, key: None)
    monkeypatch.setattr(Admission, "_reread_removed", lambda self: None)
    with _removed_laptop(5) as world:
        remover = next(p for p in world.members_left() if p.node.siblings.removed())
        with pytest.raises(InvariantViolated) as caught:
            world.open_sync(world.peers["laptop"], remover)
            world.settle()
        assert caught.value.number == 8


def test_removals_in_seeded_runs_hold_every_invariant() -> None:
    results = [run_seed(seed, 60, peers=3) for seed in range(16)]
    assert [r.seed for r in results if not r.ok] == []
    removed = [r for r in results if r.stats["ops"].get("revoked")]
    told = [r for r in removed if r.stats["ops"].get("told removed")]
    assert removed and told == removed
