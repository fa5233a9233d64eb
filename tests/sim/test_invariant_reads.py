"""The simulator's one-read checks fail exactly as the separate checks do.

`invariants.check_all` reads each peer's rows for the per-step checks in one
statement and rebuilds a digest from one read of the rows; `--baseline` runs
the separate checks and `Node.recompute_digest`. Both must pass on the same
worlds and fail on the same damage with the same invariant and detail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pixie.device.store.db import peek
from pixie.protocol.digest import Fingerprint
from pixie.sim import invariants
from pixie.sim.world import InvariantViolated, World


@pytest.fixture
def world() -> Iterator[World]:
    w = World(5)
    try:
        for _ in range(40):
            w.step()
        yield w
    finally:
        w.close()


def _outcome(world: World, *, one_read: bool, full: bool = False) -> tuple[int, str] | None:
    before = invariants.ONE_READ
    invariants.ONE_READ = one_read
    try:
        invariants.check_all(world, full=full)
    except InvariantViolated as exc:
        return exc.number, exc.detail
    finally:
        invariants.ONE_READ = before
    return None


def _write(world: World, name: str, sql: str, params: tuple[object, ...] = ()) -> None:
    with world.peers[name].node.db.writing(plain=True) as conn:
        conn.execute(sql, params)


@pytest.mark.parametrize("seed", [0, 7, 42])
def test_the_rebuilt_digest_is_the_nodes(seed: int) -> None:
    with World(seed) as w:
        for step in range(30):
            w.step()
            if step % 5 == 0:
                for peer in w.peers.values():
                    rebuilt = invariants.rebuilt_digest(peer.node)
                    assert rebuilt == peer.node.recompute_digest() == peer.node.digest()


def test_both_ways_pass_an_intact_world(world: World) -> None:
    edited = {k: set(v) for k, v in world.edited.items()}
    assert _outcome(world, one_read=False, full=True) is None
    assert world.edited == edited
    assert _outcome(world, one_read=True, full=True) is None
    assert world.edited == edited


def _note_ids(world: World, name: str, where: str) -> list[str]:
    rows = peek(world.peers[name].node.db, f"SELECT id FROM note WHERE {where} ORDER BY id")
    return [r[0] for r in rows]


def _point_at_the_homebase(world: World, *, acked: bool) -> None:
    """Clear a resident note's body on the device as if offloaded, without
    the Homebase holding it (and, unless ``acked``, without an ack)."""
    ids = _note_ids(world, "device", "zone = 'clear' AND deleted = 0 AND holder IS NULL")
    note_id = ids[-1]
    _write(
        world,
        "device",
        "UPDATE note SET body = NULL, holder = ? WHERE id = ?",
        (world.homebase.key.hex(), note_id),
    )
    if acked:
        chash = peek(world.device.node.db, "SELECT content_hash FROM note WHERE id = ?", (note_id,))
        world.acked.add((note_id, chash[0][0]))


def _clear_without_ack(world: World) -> None:
    _point_at_the_homebase(world, acked=False)


def _lose_a_holding(world: World) -> None:
    _point_at_the_homebase(world, acked=True)


def _overwrite_an_edit(world: World) -> None:
    edited = sorted(world.edited["device"])
    if not edited:
        ids = _note_ids(world, "device", "zone = 'clear'")
        _write(world, "device", "UPDATE note SET user_edited = 1 WHERE id = ?", (ids[0],))
        invariants.check_all(world)  # the sim now knows it as the user's
        edited = sorted(world.edited["device"])
    _write(world, "device", "UPDATE note SET user_edited = 0 WHERE id = ?", (edited[0],))


def _drift_a_digest(world: World) -> None:
    wrong = world.device.node.digest().update(add=[b"E" + bytes(16)])
    _write(
        world,
        "device",
        "UPDATE meta SET value = ? WHERE key = 'state_fingerprint'",
        (wrong.encode(),),
    )


def _sealed_text_in_clear(world: World) -> None:
    world.sealed_minted = True
    ids = _note_ids(world, "homebase", "zone = 'clear' AND body IS NOT NULL")
    canary = invariants.SEALED_CANARY.decode() + "99999"
    _write(world, "homebase", "UPDATE note SET title = ? WHERE id = ?", (canary, ids[0]))


@pytest.mark.parametrize(
    ("damage", "number"),
    [
        (_clear_without_ack, 2),
        (_lose_a_holding, 1),
        (_overwrite_an_edit, 4),
        (_drift_a_digest, 5),
        (_sealed_text_in_clear, 7),
    ],
)
def test_both_ways_fail_alike(world: World, damage: Callable[[World], None], number: int) -> None:
    damage(world)
    world.tick = 10 * (world.tick // 10 + 1)  # a tick with the fuller checks
    edited = {k: set(v) for k, v in world.edited.items()}
    separate = _outcome(world, one_read=False)
    world.edited = {k: set(v) for k, v in edited.items()}
    combined = _outcome(world, one_read=True)
    assert separate is not None and separate[0] == number
    assert combined == separate


def test_a_drifted_digest_fails_even_when_only_the_node_sees_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the end of a run (``full``) the node's own rebuild is compared too."""
    node = world.device.node
    monkeypatch.setattr(type(node), "recompute_digest", lambda self: Fingerprint())
    assert _outcome(world, one_read=True) is None
    found = _outcome(world, one_read=True, full=True)
    assert found is not None and found[0] == 5
