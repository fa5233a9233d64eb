"""Sync as a state machine: random writes on a device and a Homebase, and random
sync sessions over a lossy channel that drops, duplicates, reorders and cuts.

Each session is two `SyncSession`s driven one message at a time; every message
crosses the channel as bytes (`syncwire.encode`, then `decode` on delivery).
After every step:

- each replica's maintained digest equals its full recomputation;
- each replica's version of every note only moves up in the merge order
  (user_edited, stamp), so a distillation never replaces a user's edit;
- a note both replicas hold in the same version, that the user wrote on,
  holds the latest (by stamp) of the user's writes, word for word;
- a session that both sides call DONE, with no local write meanwhile, left
  the two replicas identical.

At the end a clean sync must converge them completely, and a second one must
stop at the Hello.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pixie.device.errors import BadInput
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled, UpsertOutcome
from pixie.device.store import itemindex, replicarows
from pixie.device.store.contacts import contact_id_for
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.replica import NodeReplica
from pixie.protocol.hlc import Stamp
from pixie.protocol.sync import Phase, SyncSession
from pixie.protocol.syncmessages import Marks
from pixie.protocol.syncwire import decode, encode
from pixie.sim.invariants import index_is_maintained
from tests.support.synchelp import dump, open_pair, replica

SIDES = st.sampled_from([0, 1])  # 0: the device, 1: the Homebase
PEOPLE = ["Ada Lovelace", "Grace Hopper", "Alan Turing"]
ALIASES = ["Ada", "Grace", "Amazing Grace", "Turing", "Countess"]
WORDS = [
    "likes tea",
    "runs marathons",
    "moved to Lyon",
    "allergic to cats",
    "plays the cello",
    "birthday in May",
]
GUIDANCE = ["Be brief", "Use metric units", "No emoji"]
TAGS: list[tuple[str, ...]] = [(), ("family",), ("work", "sport")]
# Local writes, weighted toward the ones that race: distillations of the same
# person pages on both sides, and the user's edits of them.
WRITES = ["distil"] * 3 + ["edit"] * 2 + ["race"] * 2 + ["append"] * 2
WRITES += ["add_contact", "add_user_note", "delete", "pin", "sealed"]
WRITE_STEPS = st.lists(
    st.tuples(
        st.sampled_from(WRITES),
        SIDES,
        st.sampled_from(PEOPLE),
        st.sampled_from(WORDS),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=4,
)
# One step of the network: an operation, a side (that sends, or that a message
# goes to) and a pick (which queued message a drop or a reorder takes). Mostly
# progress, some faults.
NETWORK = st.lists(
    st.tuples(
        st.sampled_from(
            ["send"] * 2 + ["send_all"] + ["deliver"] * 4 + ["drop", "duplicate", "reorder"]
        ),
        SIDES,
        st.integers(0, 10),
    ),
    min_size=1,
    max_size=12,
)
BASE_US = 1_700_000_000_000_000
SMALL_BATCH = 3
FAR_AHEAD_MS = 10**14  # a wall clock in the year 5138


@dataclass
class Link:
    """One session between the two replicas over a lossy in-memory channel.

    ``sessions[i]`` runs against node i; ``queues[i]`` holds the encoded
    messages on their way to node i, oldest first.
    """

    sessions: tuple[SyncSession, SyncSession]
    queues: tuple[list[bytes], list[bytes]] = field(default_factory=lambda: ([], []))
    faults: int = 0  # drops, duplicates, reorders, stale deliveries
    writes: int = 0  # local writes while the session was open
    sent: int = 0

    def send(self, side: int) -> bool:
        message = self.sessions[side].next_message()
        if message is None:
            return False
        self.queues[1 - side].append(encode(message))
        self.sent += 1
        return True

    def deliver(self, side: int, index: int = 0, *, keep: bool = False) -> None:
        queue = self.queues[side]
        data = queue[index] if keep else queue.pop(index)
        self.sessions[side].receive(decode(data))

    @property
    def finished(self) -> bool:
        return all(s.finished for s in self.sessions)

    def run_clean(self, max_steps: int = 100_000) -> None:
        """Send and deliver everything in order until nothing moves."""
        for _ in range(max_steps):
            moved = False
            for side in (0, 1):
                moved |= self.send(side)
            for side in (0, 1):
                while self.queues[side]:
                    self.deliver(side)
                    moved = True
            if not moved:
                return
        raise AssertionError("a clean session did not settle")


class Overstating(NodeReplica):
    """A replica whose marks claim more than it holds (every log and every
    origin's notes far ahead): the sibling's stream skips what this replica
    lacks, and only range repair can find it."""

    def __init__(self, node: Node, sibling: Node) -> None:
        super().__init__(node.db, node.log, node.origin)
        self.origins = sorted({node.origin, sibling.origin})

    def marks(self) -> Marks:
        m = super().marks()
        log = tuple((o, m.log_mark(o) + 1000) for o in self.origins)
        notes = tuple((o, Stamp(FAR_AHEAD_MS, 0, o).encode()) for o in self.origins)
        return Marks(log, notes, m.contacts)


def open_link(nodes: tuple[Node, Node], opener: int, *, overstate: bool = False) -> Link:
    a = SyncSession(replica(nodes[opener]), opener=True)
    responder, sibling = nodes[1 - opener], nodes[opener]
    store = Overstating(responder, sibling) if overstate else replica(responder)
    b = SyncSession(store, opener=False)
    link = Link((a, b) if opener == 0 else (b, a))
    a.start()
    return link


def clean_sync(nodes: tuple[Node, Node], opener: int) -> Link:
    link = open_link(nodes, opener)
    link.run_clean()
    return link


def note_rows(node: Node) -> dict[str, tuple[bool, str, str, bool, str | None]]:
    """id -> (user_edited, stamp, content hash, deleted, body)."""
    con = sqlite3.connect(node.db.path)
    try:
        rows = con.execute(
            "SELECT id, user_edited, updated_at, content_hash, deleted, body FROM note"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: (bool(r[1]), r[2], r[3], bool(r[4]), r[5]) for r in rows}


def assert_converged(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    assert a.digest() == b.digest()
    assert dump(a) == dump(b)


class SyncMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pixie-sync-machine-"))
        self.nodes: tuple[Node, Node] = open_pair(self.tmp)
        self.link: Link | None = None
        self.stale: list[bytes] = []  # messages of abandoned sessions, still "in the network"
        self.at = BASE_US
        self.writes_since_clean = 0
        # note id -> (stamp, body, deleted) of the user's latest write on it, by stamp
        self.user_writes: dict[str, tuple[str, str, bool]] = {}
        # per node, note id -> the (user_edited, stamp) it held at the last check
        self.held: tuple[dict[str, tuple[bool, str]], dict[str, tuple[bool, str]]] = ({}, {})

    # -- helpers ------------------------------------------------------------------

    def _wrote(self) -> None:
        self.writes_since_clean += 1
        if self.link is not None:
            self.link.writes += 1

    def _user_wrote(self, side: int, note_id: str) -> None:
        """Record a user's write on a note, with the stamp it was given."""
        self._wrote()
        user_edited, stamp, _, deleted, body = note_rows(self.nodes[side])[note_id]
        assert user_edited
        known = self.user_writes.get(note_id)
        if known is None or stamp > known[0]:
            self.user_writes[note_id] = (stamp, body or "", deleted)

    def _live_notes(self, side: int) -> list[str]:
        return sorted(n.id for n in self.nodes[side].notebook.clear_notes() if not n.deleted)

    def _abandon(self) -> None:
        if self.link is not None:
            for queue in self.link.queues:
                self.stale.extend(queue)
            self.stale = self.stale[-20:]
            self.link = None

    # -- local writes ---------------------------------------------------------------

    @rule(writes=WRITE_STEPS)
    def write(self, writes: list[tuple[str, int, str, str, int]]) -> None:
        """A few local writes, each on one side: ``pick`` chooses among notes or
        events, ``person`` and ``words`` fill in the rest."""
        for what, side, person, words, pick in writes:
            getattr(self, f"_{what}")(side, person, words, pick)

    def _append(self, side: int, person: str, words: str, pick: int) -> None:
        self.at += 1_000_000
        event = NewEvent(EventKind.MESSAGE, self.at, f"{person}: {words}", contact=person)
        self.nodes[side].log.append([event], now=self.at)
        self._wrote()

    def _add_contact(self, side: int, person: str, words: str, pick: int) -> None:
        try:
            self.nodes[side].contacts.add(person, [ALIASES[pick % len(ALIASES)]], now=self.at)
        except BadInput:
            return  # the alias names someone else here: refused, nothing written
        self._wrote()

    def _distil(self, side: int, person: str, words: str, pick: int) -> str:
        cid = contact_id_for(person)
        tags = TAGS[pick % len(TAGS)]
        note = Distilled(NoteKind.PERSON, cid, person, f"{person} {words}.", cid, tags)
        node = self.nodes[side]
        before = note_rows(node)
        result = node.notebook.upsert_clear(note)
        self._wrote()
        if result.note_id in before and before[result.note_id][0]:
            assert result.outcome is UpsertOutcome.KEPT_USER_EDIT
        return result.note_id

    def _race(self, side: int, person: str, words: str, pick: int) -> None:
        """The user edits a person page on one side while, on the other, the
        distiller rewrites the same page, neither having seen the other."""
        note_id = self._distil(side, person, words, pick)
        if note_id in self._live_notes(side):
            body = f"in the user's words: {person} {words}"
            if self.nodes[side].notebook.edit(note_id, body=body):
                self._user_wrote(side, note_id)
        other = WORDS[(WORDS.index(words) + 1 + pick) % len(WORDS)]
        self._distil(1 - side, person, other, pick)

    def _add_user_note(self, side: int, person: str, words: str, pick: int) -> None:
        title = GUIDANCE[pick % len(GUIDANCE)]
        try:
            note_id = self.nodes[side].notebook.add_user_note(NoteKind.GUIDANCE, title, words)
        except BadInput:
            return  # already there and live: the user is told to edit it
        self._user_wrote(side, note_id)

    def _edit(self, side: int, person: str, words: str, pick: int) -> None:
        notes = self._live_notes(side)
        if notes:
            note_id = notes[pick % len(notes)]
            if self.nodes[side].notebook.edit(note_id, body=f"in the user's words: {words}"):
                self._user_wrote(side, note_id)

    def _delete(self, side: int, person: str, words: str, pick: int) -> None:
        notes = self._live_notes(side)
        if notes:
            note_id = notes[pick % len(notes)]
            self.nodes[side].notebook.delete(note_id)
            self._user_wrote(side, note_id)

    def _pin(self, side: int, person: str, words: str, pick: int) -> None:
        events = [e.id for e in self.nodes[side].log.all_records() if e.kind is EventKind.MESSAGE]
        if events:
            note_id = self.nodes[side].notebook.pin_spark(events[pick % len(events)])
            self._user_wrote(side, note_id)

    def _sealed(self, side: int, person: str, words: str, pick: int) -> None:
        self.nodes[side].notebook.record_sealed(
            SealedKind.HUDDLE_TAKEAWAY, title=f"about {person}", body=words
        )
        self._wrote()

    # -- sync sessions --------------------------------------------------------------

    @rule(opener=SIDES, overstate=st.booleans())
    def open_session(self, opener: int, overstate: bool) -> None:
        """A new session (cutting whatever was still open), perhaps with a
        responder whose marks overstate what it holds."""
        self._abandon()
        self.link = open_link(self.nodes, opener, overstate=overstate)

    @rule(ops=NETWORK, overstate=st.booleans())
    def network(self, ops: list[tuple[str, int, int]], overstate: bool) -> None:
        """A few things happen on the wire: sends, deliveries and faults. With no
        session open, the side of the first operation opens one."""
        if self.link is None:
            self.link = open_link(self.nodes, opener=ops[0][1], overstate=overstate)
        for op, side, pick in ops:
            link = self.link
            if link is None:
                return  # the session ended
            if op == "send":
                link.send(side)
            elif op == "send_all":
                while link.send(side):
                    pass
            else:
                # Nothing on its way to that side: act on the other queue.
                to = side if link.queues[side] else 1 - side
                queue = link.queues[to]
                if not queue:
                    pass
                elif op == "drop":
                    queue.pop(pick % len(queue))
                    link.faults += 1
                elif op == "duplicate":
                    link.deliver(to, keep=True)
                    link.faults += 1
                elif op == "reorder" and len(queue) > 1:
                    link.deliver(to, 1 + pick % (len(queue) - 1))
                    link.faults += 1
                else:
                    link.deliver(to)
            self._settle()

    @precondition(lambda self: self.link is not None and bool(self.stale))
    @rule(side=SIDES, pick=st.integers(0, 20))
    def deliver_stale(self, side: int, pick: int) -> None:
        """A message of an abandoned session turns up late."""
        assert self.link is not None
        self.link.faults += 1
        self.link.sessions[side].receive(decode(self.stale[pick % len(self.stale)]))
        self._settle()

    @precondition(lambda self: self.link is not None)
    @rule()
    def cut(self) -> None:
        """The connection drops mid-session: both sides give up."""
        self._abandon()

    @precondition(lambda self: self.link is not None)
    @rule()
    def run_out(self) -> None:
        """The network heals: everything still to say is said, in order."""
        assert self.link is not None
        self.link.run_clean()
        self._settle()

    @precondition(lambda self: self.writes_since_clean >= 4)
    @rule(opener=SIDES)
    def clean_sync(self, opener: int) -> None:
        """A fault-free session mid-run: it must converge the replicas completely."""
        self.writes_since_clean = 0
        self._abandon()
        self._final_check(opener)

    def _settle(self) -> None:
        """End the open session once both sides have finished, or once it is stuck
        (nothing in flight, nothing to send: a driver's timeout would end it)."""
        link = self.link
        if link is None:
            return
        if not link.finished:
            if any(link.queues) or link.send(0) or link.send(1):
                return
            assert link.faults or link.writes, "a session on a perfect network got stuck"
            self._abandon()
            return
        if link.faults == 0 and link.writes == 0:
            for s in link.sessions:
                assert s.phase is Phase.DONE, s.error
        if all(s.phase is Phase.DONE for s in link.sessions) and link.writes == 0:
            assert_converged(self.nodes)
        self._abandon()

    def _final_check(self, opener: int) -> None:
        first = clean_sync(self.nodes, opener)
        for s in first.sessions:
            assert s.phase is Phase.DONE, s.error
        assert_converged(self.nodes)
        self.check_user_writes()
        second = clean_sync(self.nodes, 1 - opener)
        for s in second.sessions:
            assert s.phase is Phase.DONE, s.error
            assert s.stats.in_sync_at_hello
        assert second.sent == 2

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def digests_are_maintained(self) -> None:
        for node in self.nodes:
            assert node.digest() == node.recompute_digest()

    @invariant()
    def the_item_index_is_maintained(self) -> None:
        for node in self.nodes:
            assert index_is_maintained(node)

    @invariant()
    def versions_only_move_up(self) -> None:
        for side, node in enumerate(self.nodes):
            held = self.held[side]
            for note_id, (user_edited, stamp, *_) in note_rows(node).items():
                now = (user_edited, stamp)
                before = held.get(note_id)
                assert before is None or now >= before, (note_id, before, now)
                held[note_id] = now

    @invariant()
    def check_user_writes(self) -> None:
        a, b = (note_rows(n) for n in self.nodes)
        for note_id, (stamp, body, deleted) in self.user_writes.items():
            if note_id in a and note_id in b and a[note_id][:4] == b[note_id][:4]:
                user_edited, held_stamp, _, held_deleted, held_body = a[note_id]
                assert user_edited, note_id
                assert held_stamp == stamp, (note_id, held_stamp, stamp)
                assert (held_body, held_deleted) == (body, deleted)

    def teardown(self) -> None:
        try:
            # Only after a run without error: after a failed step, that is the
            # failure to report, not whatever this check would add to it.
            if sys.exc_info()[0] is None:
                self._abandon()
                self._final_check(0)
        finally:
            for node in self.nodes:
                node.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.mark.slow
def test_sync_state_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small batches, so a stream spans several and ordering faults have something to hit.
    monkeypatch.setattr(replicarows, "BATCH_RECORDS", SMALL_BATCH)
    # Pending item-index rows merged every few writes, so merges meet every
    # kind of write, repair's included.
    monkeypatch.setattr(itemindex, "PENDING_MAX", 7)
    run_state_machine_as_test(
        SyncMachine, settings=settings(max_examples=25, stateful_step_count=25, deadline=None)
    )
