"""Time and randomness are passed in: seeded runs repeat byte for byte, the
system defaults stay random, and one id minter's ids only ever go up."""

from __future__ import annotations

import itertools
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pixie.device.node.clear import ClearNode
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.provision import create_data_dir
from pixie.protocol import envelope, ids
from pixie.protocol.clock import (
    SYSTEM_CLOCK,
    SYSTEM_ENTROPY,
    Clock,
    Entropy,
    ManualClock,
    SeededEntropy,
)
from pixie.protocol.hlc import HybridClock, Stamp
from pixie.protocol.identity import identity_from_seed
from pixie.protocol.ids import IdMinter, id_time_ms, minter_for, new_id, new_ids
from pixie.protocol.offload import OffloadAttempt, new_request_id
from pixie.protocol.sync import Replica, SyncSession, new_session_id

EPOCH_US = 1_893_456_000_000_000  # 2030-01-01T00:00:00Z


@dataclass(frozen=True)
class Outcome:
    """Everything a run wrote that time or randomness could have touched."""

    origin: str
    identity: bytes
    event_ids: tuple[str, ...]
    pin_id: str
    sealed_id: str
    events: tuple[tuple[object, ...], ...]  # every row, every column
    notes: tuple[tuple[object, ...], ...]  # every row, every column
    stamps: dict[str, Stamp]  # note id -> its stamp
    sealed: tuple[bytes, bytes]  # the sealed note's nonce and ciphertext


def seeded_run(where: Path, seed: int) -> Outcome:
    """Create a data dir and do the same few writes, all from one seed."""
    keys = FileKeyStore(where / "keys")
    path = where / "data"
    create_data_dir(
        path,
        name="seeded",
        role="device",
        key_store=keys,
        clock=ManualClock(EPOCH_US),
        entropy=SeededEntropy(f"data-dir-{seed}"),
    )
    clock = ManualClock(EPOCH_US + 5_000_000)
    with Node.open(path, keys, clock=clock, entropy=SeededEntropy(seed)) as node:
        appended = node.log.append(
            [
                NewEvent(EventKind.MESSAGE, EPOCH_US, "Lunch on Friday?", contact="Ada"),
                NewEvent(EventKind.JOURNAL, EPOCH_US, "Ran 10 km along the river."),
            ]
        )
        clock.advance(1_500)
        pin_id = node.notebook.pin_spark(appended.ids[1], ["run"])
        clock.advance(2_000_000)
        node.notebook.upsert_clear(Distilled(NoteKind.ABOUT_YOU, "", "About you", "Runs."))
        clock.advance(1_000)
        sealed_id = node.notebook.record_sealed(
            SealedKind.HUDDLE_PREP, title="gift idea", body="a pair of trail shoes"
        )
        identity = bytes(node.identity().verify_key)
        origin = node.origin
        db_path = node.db.path
    con = sqlite3.connect(db_path)
    try:
        events = tuple(con.execute("SELECT * FROM memory_event ORDER BY n").fetchall())
        notes = tuple(con.execute("SELECT * FROM note ORDER BY n").fetchall())
        stamps = {i: Stamp.decode(s) for i, s in con.execute("SELECT id, updated_at FROM note")}
        nonce, ciphertext = con.execute(
            "SELECT nonce, ciphertext FROM note WHERE id = ?", (sealed_id,)
        ).fetchone()
    finally:
        con.close()
    return Outcome(
        origin,
        identity,
        appended.ids,
        pin_id,
        sealed_id,
        events,
        notes,
        stamps,
        (nonce, ciphertext),
    )


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    one = seeded_run(tmp_path / "one", 7)
    two = seeded_run(tmp_path / "two", 7)
    assert one == two
    # What was compared is real: three events (two appended, one spark), three
    # notes (pin, about-you, sealed), the sealed one stored only as ciphertext.
    assert len(one.events) == 3 and len(one.notes) == 3
    nonce, ciphertext = one.sealed
    assert len(nonce) == 12 and len(ciphertext) > 16
    assert b"trail shoes" not in ciphertext
    # Ids and stamps carry the injected clock's time, not the machine's.
    start_ms = (EPOCH_US + 5_000_000) // 1000
    assert [id_time_ms(i) for i in one.event_ids] == [start_ms, start_ms]
    assert id_time_ms(one.pin_id) == start_ms + 1  # 1.5 ms later
    assert one.stamps[one.pin_id] == Stamp(start_ms + 1, 0, one.origin)
    assert one.stamps[one.sealed_id] == Stamp(start_ms + 2002, 0, one.origin)
    assert sorted(s.wall_ms for s in one.stamps.values()) == [
        start_ms + 1,
        start_ms + 2001,
        start_ms + 2002,
    ]


def test_another_seed_other_bytes(tmp_path: Path) -> None:
    one = seeded_run(tmp_path / "one", 7)
    two = seeded_run(tmp_path / "two", 8)
    assert one.origin != two.origin and one.identity != two.identity
    assert set(one.event_ids).isdisjoint(two.event_ids)
    assert one.pin_id != two.pin_id and one.sealed_id != two.sealed_id
    assert one.sealed[0] != two.sealed[0] and one.sealed[1] != two.sealed[1]
    # The clock was the same, so the times agree; only the origin differs.
    assert sorted((s.wall_ms, s.counter) for s in one.stamps.values()) == sorted(
        (s.wall_ms, s.counter) for s in two.stamps.values()
    )


def test_clear_node_takes_the_clock_too(tmp_path: Path) -> None:
    path = tmp_path / "data"
    create_data_dir(path, name="c", role="device")
    clock = ManualClock(EPOCH_US)
    with ClearNode.open_clear(path, clock=clock, entropy=SeededEntropy(3)) as node:
        first = node.log.append([NewEvent(EventKind.JOURNAL, 0, "one")]).ids[0]
        clock.advance(3_000)
        upsert = node.notebook.upsert_clear(
            Distilled(NoteKind.GUIDANCE, "", "Use metric units", "Kilometres, not miles.")
        )
        note = node.notebook.get_clear(upsert.note_id)
    assert id_time_ms(first) == EPOCH_US // 1000
    assert note.updated_at.wall_ms == EPOCH_US // 1000 + 3
    again = IdMinter(ManualClock(EPOCH_US), SeededEntropy(3)).new_ids(1)[0]
    assert first == again  # the node's log drew from exactly that clock and seed


# -- the id minter ------------------------------------------------------------------------


def test_ids_increase_while_the_clock_stands_still_or_steps_back() -> None:
    clock = ManualClock(EPOCH_US)
    minter = IdMinter(clock, SeededEntropy(11))
    minted = [minter.new_id() for _ in range(5000)]  # past the 4096 a millisecond's counter holds
    clock.set(EPOCH_US - 3_600_000_000)  # an hour back
    minted += [minter.new_id() for _ in range(10)]
    minted += minter.new_ids(5000)
    clock.set(EPOCH_US - 7_200_000_000)
    minted += [*minter.new_ids(3), minter.new_id()]
    assert all(a < b for a, b in itertools.pairwise(minted))
    assert len(set(minted)) == len(minted)
    times = [id_time_ms(i) for i in minted]
    assert times[0] == EPOCH_US // 1000
    assert min(t for t in times if t is not None) == EPOCH_US // 1000  # never went back
    assert max(t for t in times if t is not None) > EPOCH_US // 1000  # borrowed ahead


def test_ids_follow_the_clock_forward() -> None:
    clock = ManualClock(EPOCH_US)
    minter = IdMinter(clock, SeededEntropy(12))
    first = minter.new_id()
    clock.advance_ms(250)
    second = minter.new_id()
    assert (id_time_ms(first), id_time_ms(second)) == (EPOCH_US // 1000, EPOCH_US // 1000 + 250)
    assert first < second


def test_a_minter_is_independent_of_the_rest_of_the_process() -> None:
    def mint() -> list[str]:
        minter = IdMinter(ManualClock(EPOCH_US), SeededEntropy("same"))
        return [minter.new_id(), *minter.new_ids(3), minter.new_id()]

    first = mint()
    new_ids(50)  # the default minter moves on; a fresh seeded one does not care
    assert mint() == first
    other = IdMinter(ManualClock(EPOCH_US), SeededEntropy("other"))
    assert other.new_id() != first[0]


def test_minter_state_round_trips() -> None:
    minter = IdMinter(ManualClock(EPOCH_US), SeededEntropy(5))
    minter.new_id()
    saved = minter.state
    assert saved[0] == EPOCH_US // 1000
    minter.state = (EPOCH_US // 1000 + 10, 0)
    assert id_time_ms(minter.new_id()) == EPOCH_US // 1000 + 10
    minter.state = saved
    assert minter.state == saved


# -- the seam's other users -------------------------------------------------------------


def test_hybrid_clock_reads_the_given_clock() -> None:
    clock = ManualClock(EPOCH_US)
    hlc = HybridClock("a", clock=clock)
    first = hlc.now()
    assert (first.wall_ms, first.counter) == (EPOCH_US // 1000, 0)
    assert hlc.now() == Stamp(EPOCH_US // 1000, 1, "a")  # standing still: the counter
    clock.set(EPOCH_US - 60_000_000)  # back a minute: still later than before
    assert hlc.now() == Stamp(EPOCH_US // 1000, 2, "a")
    clock.set(EPOCH_US + 1_000)
    assert hlc.now() == Stamp(EPOCH_US // 1000 + 1, 0, "a")
    # A `wall` callable, when given, wins over the clock.
    assert HybridClock("b", wall=lambda: 42, clock=clock).now() == Stamp(42, 0, "b")


def test_session_and_request_ids_come_from_the_entropy() -> None:
    assert new_session_id(SeededEntropy(9)) == new_session_id(SeededEntropy(9))
    assert new_session_id(SeededEntropy(9)) != new_session_id(SeededEntropy(10))
    assert new_request_id(SeededEntropy(9)) == new_request_id(SeededEntropy(9))
    assert len(new_request_id(SeededEntropy(9))) == 16

    # An opener draws its session id before it asks its replica anything.
    replica = cast(Replica, object())
    session_ids = {
        SyncSession(replica, opener=True, entropy=SeededEntropy(4)).session_id for _ in range(3)
    }
    assert len(session_ids) == 1
    request = new_request_id(SeededEntropy(4))
    attempt = OffloadAttempt(b"k" * 32, new_id(), b"h" * 32, request=request)
    assert attempt.request == new_request_id(SeededEntropy(4))


def test_a_seeded_envelope_is_the_same_bytes_and_opens() -> None:
    """The ephemeral key and the nonce come from the entropy: the same seed
    seals the same bytes (in a process that holds no ephemeral key for the
    pair yet, as a fresh one would), another seed other bytes, and every one
    of them opens to the body."""
    alice, bob = identity_from_seed(b"a" * 32), identity_from_seed(b"b" * 32)
    to_bob = bytes(bob.verify_key)
    body = b"lunch on friday?"

    def fresh_seal(seed: int) -> bytes:
        fresh = envelope.EnvelopeKeys()
        return envelope.seal(alice, to_bob, body, now=0.0, entropy=SeededEntropy(seed), keys=fresh)

    first, second, other = fresh_seal(7), fresh_seal(7), fresh_seal(8)
    assert first == second
    assert other != first and other[:32] != first[:32]  # another ephemeral key too
    for sealed in (first, second, other):
        opened = envelope.open_envelope(bob, sealed)
        assert (opened.sender, opened.body) == (bytes(alice.verify_key), body)

    # The key is kept for the pair; each envelope still draws its own nonce.
    keys, entropy = envelope.EnvelopeKeys(), SeededEntropy(7)
    a, b = (
        envelope.seal(alice, to_bob, body, now=0.0, entropy=entropy, keys=keys) for _ in range(2)
    )
    assert a == first and a[:32] == b[:32] and a != b
    assert envelope.open_envelope(bob, b).body == body


def test_default_envelopes_are_random() -> None:
    alice, bob = identity_from_seed(b"c" * 32), identity_from_seed(b"d" * 32)
    to_bob = bytes(bob.verify_key)
    sealed = []
    for _ in range(2):
        sealed.append(envelope.seal(alice, to_bob, b"same", now=0.0, keys=envelope.EnvelopeKeys()))
    assert sealed[0][:32] != sealed[1][:32] and sealed[0][32:56] != sealed[1][32:56]
    assert all(envelope.open_envelope(bob, s).body == b"same" for s in sealed)


# -- the system defaults ----------------------------------------------------------------


def test_system_defaults_read_the_real_world() -> None:
    assert isinstance(SYSTEM_CLOCK, Clock) and isinstance(SYSTEM_ENTROPY, Entropy)
    before = time.time_ns() // 1000
    now = SYSTEM_CLOCK.now_us()
    after = time.time_ns() // 1000
    assert before <= now <= after
    assert before // 1000 <= SYSTEM_CLOCK.now_ms() <= time.time_ns() // 1_000_000
    draws = {SYSTEM_ENTROPY.token_bytes(16) for _ in range(8)}
    assert len(draws) == 8 and all(len(d) == 16 for d in draws)
    assert new_session_id() != new_session_id() and new_request_id() != new_request_id()


def test_default_ids_are_fresh_random_and_current() -> None:
    assert minter_for(SYSTEM_CLOCK, SYSTEM_ENTROPY) is ids.DEFAULT_MINTER
    lo = time.time_ns() // 1_000_000
    batch = [new_id() for _ in range(100)] + new_ids(100)
    fresh = [IdMinter().new_id() for _ in range(2)]
    hi = time.time_ns() // 1_000_000
    assert len(set(batch + fresh)) == len(batch) + len(fresh)
    assert all(a < b for a, b in itertools.pairwise(batch))
    # Never before the real time (the default minter may run ahead of it, if
    # more than 4096 ids fell in one millisecond somewhere earlier).
    assert all((id_time_ms(i) or 0) >= lo for i in batch)
    assert all(lo <= (id_time_ms(i) or 0) <= hi for i in fresh)
    # Two fresh minters in the same moment differ in their random bits, not
    # only in a counter.
    assert fresh[0][19:] != fresh[1][19:]


def test_default_nodes_are_not_seeded(tmp_path: Path) -> None:
    paths = [tmp_path / "a", tmp_path / "b"]
    for path in paths:
        create_data_dir(path, name="d", role="device")
    outcomes = []
    for path in paths:
        with Node.open(path) as node:
            assert node.clock is SYSTEM_CLOCK and node.entropy is SYSTEM_ENTROPY
            assert node.ids is ids.DEFAULT_MINTER
            event = node.log.append([NewEvent(EventKind.JOURNAL, 0, "same text")]).ids[0]
            sealed = node.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="t", body="b")
            outcomes.append((node.origin, bytes(node.identity().verify_key), event, sealed))
    (origin_a, key_a, event_a, sealed_a), (origin_b, key_b, event_b, sealed_b) = outcomes
    assert origin_a != origin_b and key_a != key_b
    assert event_a < event_b  # one process, one default minter: still increasing
    assert sealed_a != sealed_b
