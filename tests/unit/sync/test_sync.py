"""Sync between two real replicas through the sans-IO session, in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import NumberedRows, Row
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.provision import create_data_dir
from pixie.protocol.errors import ProtocolError
from pixie.protocol.sync import Phase, SyncSession
from pixie.protocol.syncmessages import Marks, Records
from tests.support.synchelp import dump, open_pair, replica, say, sync, write_every_kind


def test_empty_replicas_agree_in_one_round_trip(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    loop, opener, responder = sync(a, b)
    assert opener.phase is Phase.DONE and responder.phase is Phase.DONE
    assert opener.stats.round_trips == 1 and opener.stats.in_sync_at_hello
    assert loop.log == [("a", "Hello"), ("b", "Hello")]


def test_a_change_after_the_hello_waits_for_the_next_session(tmp_path: Path) -> None:
    """The responder ends the session when its digest equals the one in the
    opener's Hello. The opener must end it too when that answer comes back,
    even if its own state has moved meanwhile (another process committed):
    streaming into the ended session left it waiting on a silent sibling."""
    a, b = open_pair(tmp_path)
    opener = SyncSession(replica(a), opener=True)
    responder = SyncSession(replica(b), opener=False)
    opener.start()
    hello = opener.next_message()
    assert hello is not None
    say(a, "written by another process while the Hello travelled")
    responder.receive(hello)
    answer = responder.next_message()
    assert responder.phase is Phase.DONE and answer is not None
    opener.receive(answer)
    assert opener.phase is Phase.DONE and opener.stats.in_sync_at_hello
    assert opener.next_message() is None
    _loop, again, _ = sync(a, b)  # the next session carries the change
    assert again.phase is Phase.DONE and not again.stats.in_sync_at_hello
    assert a.digest() == b.digest()


def test_everything_converges_and_a_second_sync_sends_only_digests(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    for i in range(30):
        say(a, f"device message {i}")
        say(b, f"homebase message {i}", contact="Grace Hopper")
    cid = a.contacts.add("Ada Lovelace", ["Ada"], now=0)[0]
    a.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, cid, "Ada", "Runs marathons.", cid, ("sport",))
    )
    b.notebook.add_user_note(NoteKind.GUIDANCE, "Be brief", "Short answers please.")
    a.notebook.record_sealed(SealedKind.HUDDLE_TAKEAWAY, title="t", body="sealed body")
    _loop, opener, responder = sync(a, b)
    assert opener.phase is Phase.DONE, opener.error
    assert responder.phase is Phase.DONE, responder.error
    assert a.digest() == b.digest() == a.recompute_digest() == b.recompute_digest()
    assert dump(a) == dump(b)
    assert opener.stats.repair_rounds == 0
    loop2, opener2, _ = sync(b, a)
    assert opener2.stats.in_sync_at_hello and opener2.stats.round_trips == 1
    assert [m for _, m in loop2.log] == ["Hello", "Hello"]


def test_user_edit_beats_a_later_distillation_on_the_other_side(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    cid = a.contacts.add("Ada Lovelace", [], now=0)[0]
    note = Distilled(NoteKind.PERSON, cid, "Ada", "v1", cid)
    note_id = a.notebook.upsert_clear(note).note_id
    sync(a, b)
    a.notebook.edit(note_id, body="the user's words")
    # b distils later (a newer stamp) without having seen the edit
    b.notebook.upsert_clear(Distilled(NoteKind.PERSON, cid, "Ada", "v2 from the model", cid))
    _, opener, _ = sync(b, a)
    assert opener.phase is Phase.DONE, opener.error
    assert dump(a) == dump(b)
    assert a.notebook.get_clear(note_id).body == "the user's words"


def test_lying_marks_are_caught_by_repair(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    for i in range(200):
        say(a, f"message {i}")
    sync(a, b)
    say(a, "one more")
    # b claims to hold everything a has: the stream sends nothing, repair finds it
    from pixie.device.store.replica import NodeReplica
    from pixie.protocol.sync import Loopback, SyncSession

    class Liar(NodeReplica):
        def marks(self):  # type: ignore[no-untyped-def]
            m = super().marks()
            return type(m)(tuple((o, s + 1000) for o, s in m.log), m.notes, m.contacts)

    opener = SyncSession(NodeReplica(a.db, a.log, a.origin), opener=True)
    responder = SyncSession(Liar(b.db, b.log, b.origin), opener=False)
    Loopback(opener, responder).run()
    assert opener.phase is Phase.DONE, opener.error
    assert opener.stats.repair_rounds == 1
    assert dump(a) == dump(b)


def test_a_replicas_items_sum_to_its_digest(tmp_path: Path) -> None:
    """What repair reconciles is exactly what the digest sums: every event,
    note version (clear, sealed, edited, deleted) and contact item."""
    from pixie.device.store.contactbook import contact_items
    from pixie.device.store.replica import NodeReplica
    from pixie.protocol.digest import MODULUS, Fingerprint, item_hash

    a, _ = open_pair(tmp_path)
    write_every_kind(a)
    items = list(NodeReplica(a.db, a.log, a.origin).items())
    with a.db.reading() as session:
        book = {(i[:17], item_hash(i)) for i in contact_items(session)}
    assert len(book) >= 4 and book <= set(items)  # two contacts, an alias, a detail
    assert len({k for k, _ in items}) == len(items)
    total = Fingerprint(sum(h for _, h in items) % MODULUS, len(items))
    assert (total.digest(), total.count) == NodeReplica(a.db, a.log, a.origin).state()


@pytest.mark.parametrize("extra_on", ["opener", "responder"])
def test_equal_marks_with_unequal_digests_open_the_repair_in_the_hello_reply(
    tmp_path: Path, extra_on: str
) -> None:
    """Equal marks mean neither side has anything to stream: the responder's
    Hello reply carries the first split, and one difference is settled in two
    round trips (the reply, then the Checks)."""
    from pixie.device.store.replica import NodeReplica
    from pixie.protocol.sync import Loopback

    a, b = open_pair(tmp_path)
    for i in range(300):
        say(a, f"message {i}")
    sync(a, b)
    holder = a if extra_on == "opener" else b
    say(holder, "one more")
    frozen = NodeReplica(holder.db, holder.log, holder.origin).marks()
    say(holder, "and the marks stay put")  # a second difference on the same side

    class Frozen(NodeReplica):
        def marks(self) -> Marks:
            return frozen

    opener = SyncSession(Frozen(a.db, a.log, a.origin), opener=True)
    responder = SyncSession(Frozen(b.db, b.log, b.origin), opener=False)
    loop = Loopback(opener, responder)
    loop.run()
    assert opener.phase is Phase.DONE, opener.error
    assert responder.phase is Phase.DONE, responder.error
    assert opener.stats.repair_at_hello and responder.stats.repair_at_hello
    assert opener.stats.repair_rounds == 1
    assert opener.stats.round_trips <= 3
    assert loop.log[:2] == [("a", "Hello"), ("b", "Hello")]
    assert ("a", "Check") in loop.log and ("b", "Check") in loop.log
    assert dump(a) == dump(b)
    assert a.digest() == b.digest() == a.recompute_digest()


@pytest.mark.parametrize("count", [0, 1, 5])
def test_new_events_flow_one_way(tmp_path: Path, count: int) -> None:
    a, b = open_pair(tmp_path)
    say(a, "base")
    sync(a, b)
    for i in range(count):
        say(b, f"new {i}")
    _, opener, _ = sync(a, b)
    assert opener.phase is Phase.DONE
    assert dump(a) == dump(b)


def test_a_batch_repeating_held_events_adds_only_the_new_ones(tmp_path: Path) -> None:
    """Insert-if-absent on id in one statement: held events are skipped, the new
    ones take the next local row numbers in order, the digest counts each once
    and the log's listeners hear of exactly the rows that landed."""
    a, b = open_pair(tmp_path)
    try:
        for i in range(6):
            say(a, f"message {i}")
        (records,) = replica(a).missing(Marks())
        events = records.event_columns
        heard: list[Row] = []
        b.log.subscribe(heard.extend)
        b.mirror.ensure_current()  # built, so it indexes each commit as it comes
        first = Records(contacts=records.contacts, events=events[:3])
        assert replica(b).apply(first, in_order=True) == 4  # and the contact
        assert len(b.mirror) == 3
        assert replica(b).apply(Records(events=events[1:]), in_order=False) == 3
        assert len(b.mirror) == 6
        assert [(r[0], r[1]) for r in heard] == [(1 + i, e.id) for i, e in enumerate(events)]
        assert heard == [(1 + i, *e) for i, e in enumerate(zip(*events.columns(), strict=True))]
        assert heard[2] == NumberedRows(1, events.columns())[-4]
        assert replica(b).apply(Records(events=events), in_order=False) == 0
        assert dump(a) == dump(b)
        assert b.digest() == a.digest() == b.recompute_digest()
        con = sqlite3.connect(b.db.path)
        try:
            numbered = con.execute("SELECT n, id FROM memory_event ORDER BY n").fetchall()
        finally:
            con.close()
        assert numbered == [(1 + i, e.id) for i, e in enumerate(events)]
    finally:
        a.close()
        b.close()


def test_a_batch_of_several_origins_is_checked_origin_by_origin(tmp_path: Path) -> None:
    """A Homebase streams every device's log, so one batch can hold several
    origins: each must run on from what the receiver holds of it."""
    a, b = open_pair(tmp_path)
    create_data_dir(tmp_path / "tablet", name="tablet", role="device")
    tablet = Node.open(tmp_path / "tablet")
    try:
        for i in range(3):
            say(a, f"phone {i}")
            say(b, f"homebase {i}")
        sync(a, b)
        (records,) = replica(b).missing(Marks())
        assert len(set(records.event_columns.origins)) == 2
        events = list(records.events)
        swapped = [events[1], events[0], *events[2:]]  # one origin out of order
        with pytest.raises(ProtocolError, match="not in sequence order"):
            replica(tablet).apply(Records(records.contacts, swapped), in_order=True)
        assert replica(tablet).apply(records, in_order=True) == len(events) + 1  # + the contact
        assert dump(tablet) == dump(b)
        assert tablet.digest() == b.digest() == tablet.recompute_digest()
    finally:
        for node in (a, b, tablet):
            node.close()


def test_repair_ranges_in_a_hello_reply_are_refused_when_they_make_no_sense(
    tmp_path: Path,
) -> None:
    """In sync, or with no repair round allowed, a Hello reply that opens a
    repair fails the session with a clear error."""
    from pixie.protocol.reconcile import CELL_BYTES, Part, Range
    from pixie.protocol.syncmessages import Hello

    a, _ = open_pair(tmp_path)
    say(a, "something")
    split = (Range(Part.SPLIT, 0, 0, bytes(2 * CELL_BYTES)),)
    for max_repairs, same in ((3, True), (0, False)):
        opener = SyncSession(replica(a), opener=True, max_repairs=max_repairs)
        opener.start()
        hello = opener.next_message()
        assert isinstance(hello, Hello)
        digest = hello.digest if same else bytes(32)
        opener.receive(Hello(opener.session_id, True, digest, hello.count, Marks(), False, split))
        assert opener.phase is Phase.FAILED
        assert opener.error is not None and "repair" in opener.error
