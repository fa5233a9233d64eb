"""The sans-IO peer cores, driven step by step with plain calls (no trio, no relay):
envelope admission, the sync session table, the holder's decisions and the
device's offload decisions. These are what the trio drivers and the simulator
both run."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from pixie.device.errors import BadInput
from pixie.device.node.keyed import Node
from pixie.device.store.db import peek
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.sync.admission import Admission, Incoming, Rejected, Rejection
from pixie.device.sync.offload import OffloadLedger
from pixie.device.sync.sessions import Route, SessionTable
from pixie.homebase import holdsteps
from pixie.homebase.holding import HolderCore
from pixie.protocol import syncwire
from pixie.protocol.envelope import seal
from pixie.protocol.identity import new_identity
from pixie.protocol.offload import (
    FetchAttempt,
    OffloadAttempt,
    Outcome,
    ReleaseAttempt,
    body_hash,
    holder_parts,
)
from pixie.protocol.peerwire import (
    FetchPart,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    PairRequest,
    PeerMessage,
    Ping,
    Released,
    encode_body,
)
from pixie.protocol.sync import SyncSession
from tests.support.synchelp import paired_siblings, replica

STRANGER = new_identity()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    """A device and a Homebase, paired as siblings."""
    with paired_siblings(tmp_path) as nodes:
        yield nodes


def envelope(sender: SigningKey, recipient: Node, message: PeerMessage, counter: int) -> bytes:
    return seal(sender, recipient.public_key(), encode_body(message, counter), now=time.monotonic())


# -- admission ------------------------------------------------------------------------------


def test_a_siblings_envelope_is_admitted_once(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    gate = Admission(phone.identity(), phone.siblings)
    data = envelope(mac.identity(), phone, Ping(7), 1)
    assert gate.screen(mac.public_key(), len(data))
    admitted = gate.admit(mac.public_key(), data)
    assert isinstance(admitted, Incoming)
    assert (admitted.sender, admitted.body.counter, admitted.body.message) == (
        mac.public_key(),
        1,
        Ping(7),
    )
    again = gate.admit(mac.public_key(), data)
    assert isinstance(again, Rejected) and again.reason is Rejection.REPLAY
    assert gate.rejected == {"replay": 1}


def test_a_strangers_envelope_is_screened_out_before_it_is_opened(
    pair: tuple[Node, Node],
) -> None:
    phone, _ = pair
    gate = Admission(phone.identity(), phone.siblings)
    stranger = bytes(STRANGER.verify_key)
    assert not gate.screen(stranger, 400)
    assert not gate.screen(stranger, 400)
    assert gate.rejected == {"unpaired": 2}


def test_while_strangers_are_admitted_they_may_only_pair(pair: tuple[Node, Node]) -> None:
    phone, _ = pair
    gate = Admission(phone.identity(), phone.siblings)
    gate.admit_strangers = True
    stranger = bytes(STRANGER.verify_key)
    assert gate.screen(stranger, 100)
    pairing = gate.admit(
        stranger, envelope(STRANGER, phone, PairRequest("pad", "device", bytes(32)), 1)
    )
    assert isinstance(pairing, Incoming)
    window = gate.seen_from_stranger(stranger)
    assert window is not None and window.high == 1
    ping = gate.admit(stranger, envelope(STRANGER, phone, Ping(1), 2))
    assert isinstance(ping, Rejected) and ping.reason is Rejection.UNPAIRED


def test_an_envelope_signed_by_one_key_and_sent_by_another_is_refused(
    pair: tuple[Node, Node],
) -> None:
    phone, mac = pair
    gate = Admission(phone.identity(), phone.siblings)
    data = envelope(mac.identity(), phone, Ping(1), 1)
    refused = gate.admit(bytes(STRANGER.verify_key), data, True)
    assert isinstance(refused, Rejected) and refused.reason is Rejection.MISATTRIBUTED
    tampered = bytearray(data)
    tampered[-1] ^= 1
    broken = gate.admit(mac.public_key(), bytes(tampered))
    assert isinstance(broken, Rejected) and broken.reason is Rejection.TAMPERED
    # Neither touched the replay window: the envelope itself is still new.
    assert isinstance(gate.admit(mac.public_key(), data), Incoming)


# -- the sync session table -----------------------------------------------------------------


@dataclass
class Entry:
    session: SyncSession
    peer: bytes
    opened_by: syncwire.Hello | None = None
    shown: set[bytes] = field(default_factory=set)


def opener(node: Node, peer: bytes) -> Entry:
    session = SyncSession(replica(node), opener=True)
    session.start()
    return Entry(session, peer)


def test_messages_are_routed_to_the_session_they_name(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    me, sibling = phone.public_key(), mac.public_key()
    table: SessionTable[Entry] = SessionTable(me)
    ours = opener(phone, sibling)
    table.open(ours)
    check = syncwire.Check(ours.session.session_id, b"d" * 32, 0)
    assert table.route(sibling, check) == (Route.DELIVER, ours)
    assert table.route(bytes(STRANGER.verify_key), check) == (Route.MISADDRESSED, None)
    stray = syncwire.Check(b"x" * 16, b"d" * 32, 0)
    assert table.route(sibling, stray) == (Route.NO_SESSION, None)
    theirs = opener(mac, me).session.hello
    assert theirs is not None
    assert table.route(sibling, theirs) == (Route.NEW_HELLO, None)


def test_two_sessions_opened_at_once_settle_on_one(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    a, b = phone.public_key(), mac.public_key()
    low, high = (phone, mac) if a < b else (mac, phone)
    low_key, high_key = low.public_key(), high.public_key()
    low_table: SessionTable[Entry] = SessionTable(low_key)
    high_table: SessionTable[Entry] = SessionTable(high_key)
    low_ours, high_ours = opener(low, high_key), opener(high, low_key)
    low_table.open(low_ours)
    high_table.open(high_ours)
    low_hello, high_hello = low_ours.session.hello, high_ours.session.hello
    assert low_hello is not None and high_hello is not None

    # The lower key refuses the sibling's session and says its own Hello again.
    refused = low_table.settle(high_key, high_hello, 100)
    assert (refused.answer, refused.refuse, refused.say_again) == (False, True, [low_ours])
    assert table_route(low_table, high_key, high_hello) is Route.NO_SESSION  # refused: ended
    # The higher one holds the sibling's Hello back, and says its own again too.
    held = high_table.settle(low_key, low_hello, 120)
    assert (held.answer, held.refuse, held.say_again) == (False, False, [high_ours])
    # Once per Hello of the sibling's: a copy of it is not answered again.
    assert high_table.settle(low_key, low_hello, 120).say_again == []
    # Its own session refused, the higher one takes up the Hello it held back.
    assert high_table.take_held(low_key) == (low_hello, 120)
    assert high_table.take_held(low_key) is None


def table_route(table: SessionTable[Entry], sender: bytes, message: syncwire.Hello) -> Route:
    return table.route(sender, message)[0]


def test_a_hello_with_no_session_opening_supersedes_the_old_ones(
    pair: tuple[Node, Node],
) -> None:
    phone, mac = pair
    me, sibling = phone.public_key(), mac.public_key()
    table: SessionTable[Entry] = SessionTable(me)
    first = opener(mac, me).session.hello
    assert first is not None
    old = Entry(SyncSession(replica(phone), opener=False, session_id=first.session), sibling, first)
    table.open(old)
    assert table.route(sibling, first) == (Route.REPEAT, old)
    newer = opener(mac, me).session.hello
    assert newer is not None
    settled = table.settle(sibling, newer, 90)
    assert (settled.answer, settled.superseded) == (True, [old])
    table.close(old.session.session_id)
    assert table.route(sibling, first) == (Route.NO_SESSION, None)  # over: opens nothing


def test_sessions_over_are_remembered_within_a_bound(pair: tuple[Node, Node]) -> None:
    phone, _ = pair
    table: SessionTable[Entry] = SessionTable(phone.public_key(), ended_kept=3)
    for n in range(5):
        table.close(bytes([n]) * 16)
    assert list(table.ended) == [bytes([n]) * 16 for n in (2, 3, 4)]


# -- offload: the device's ledger and the holder's core, in turn ----------------------------


BODY = "Ada wants to start running again"


def clear_note(node: Node) -> str:
    return node.notebook.add_user_note(NoteKind.GUIDANCE, "Running", BODY)


def resident(node: Node, note_id: str) -> tuple[object, object]:
    rows = peek(node.db, "SELECT body, holder FROM note WHERE id = ?", (note_id,))
    return rows[0][0], rows[0][1]


def test_offload_then_recall_step_by_step(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    me, home = phone.public_key(), mac.public_key()
    ledger, holder = OffloadLedger(phone, home), HolderCore(mac)
    note_id = clear_note(phone)

    candidate = ledger.candidate(note_id)
    attempt = OffloadAttempt(home, candidate.id, bytes.fromhex(candidate.content_hash))
    request = attempt.request_message(candidate.body)
    (ack,) = holder.run(holdsteps.answer(me, request, 1)).replies
    verdict = attempt.on_message(home, ack)
    assert verdict is not None and verdict.outcome is Outcome.HELD
    assert ledger.compare_and_clear(note_id, candidate.content_hash)
    assert resident(phone, note_id) == (None, home.hex())
    with pytest.raises(BadInput, match="already offloaded"):
        ledger.candidate(note_id)

    pointer = ledger.pointer(note_id)
    fetch = FetchAttempt(home, note_id, bytes.fromhex(pointer.content_hash))
    got = None
    for part in holder.run(holdsteps.answer(me, fetch.request_message(), 2)).replies:
        got = fetch.on_message(home, part)
    assert got is not None and got.outcome is Outcome.FETCHED and got.body == BODY.encode()
    assert ledger.restore(pointer, got.body)
    assert resident(phone, note_id) == (BODY, None)
    assert ledger.releases_due() == [(note_id, pointer.content_hash)]

    release = ReleaseAttempt(home, note_id, bytes.fromhex(pointer.content_hash))
    (released,) = holder.run(holdsteps.answer(me, release.request_message(), 3)).replies
    done = release.on_message(home, released)
    assert done is not None and done.outcome is Outcome.RELEASED
    ledger.released(note_id, pointer.content_hash)
    assert ledger.releases_due() == []
    assert holder.serve(fetch.request_message())[0] is None  # let go


def test_an_offload_overtaken_by_a_release_of_the_same_body_never_clears(
    pair: tuple[Node, Node],
) -> None:
    """Two offloads of one body in flight; the first is acked and clears, a
    recall brings the body home and queues the release of that holding.
    The holder takes the second offload, then the release, and the device
    hears "released" before the second ack: that ack says nothing about
    what the holder still holds, so the body stays (the simulator's seed 361
    with three peers cleared it, and the note existed nowhere)."""
    phone, mac = pair
    me, home = phone.public_key(), mac.public_key()
    ledger, holder = OffloadLedger(phone, home), HolderCore(mac)
    note_id = clear_note(phone)
    candidate = ledger.candidate(note_id)
    chash = bytes.fromhex(candidate.content_hash)
    first, second = (OffloadAttempt(home, note_id, chash, request=bytes([n]) * 16) for n in (1, 2))
    for attempt in (first, second):
        ledger.asking(attempt.request, note_id, candidate.content_hash)
    (ack,) = holder.run(holdsteps.answer(me, first.request_message(candidate.body), 1)).replies
    assert first.on_message(home, ack) is not None
    assert ledger.compare_and_clear(note_id, candidate.content_hash, first.request)
    ledger.answered(first.request)

    pointer = ledger.pointer(note_id)
    assert ledger.restore(pointer, BODY.encode())  # the recall
    (late,) = holder.run(holdsteps.answer(me, second.request_message(candidate.body), 2)).replies
    release = ReleaseAttempt(home, note_id, chash)
    holder.run(holdsteps.answer(me, release.request_message(), 3))
    ledger.released(note_id, candidate.content_hash)
    assert holder.serve(FetchAttempt(home, note_id, chash).request_message())[0] is None

    verdict = second.on_message(home, late)
    assert verdict is not None and verdict.outcome is Outcome.HELD
    assert not ledger.compare_and_clear(note_id, candidate.content_hash, second.request)
    assert resident(phone, note_id) == (BODY, None)


def test_a_corrupted_serve_never_verifies(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    home, holder = mac.public_key(), HolderCore(mac)
    note_id = clear_note(phone)
    chash = body_hash(BODY.encode())
    assert (
        holder.hold(phone.public_key(), OffloadRequest(b"r" * 16, note_id, chash, BODY.encode()), 1)
        is None
    )
    fetch = FetchAttempt(home, note_id, chash)
    verdict = None
    steps = holdsteps.answer(phone.public_key(), fetch.request_message(), 2)
    answered = holder.run(holdsteps.faulted(steps, lambda stage: ("corrupt-serve", 0.0)))
    assert answered.faults == ["corrupt-serve"]
    for part in answered.replies:
        verdict = fetch.on_message(home, part)
    assert verdict is not None and verdict.outcome is Outcome.CORRUPT and verdict.body is None


def test_an_edit_racing_the_offload_wins_and_the_copy_is_released_later(
    pair: tuple[Node, Node],
) -> None:
    phone, mac = pair
    ledger = OffloadLedger(phone, mac.public_key())
    note_id = clear_note(phone)
    candidate = ledger.candidate(note_id)
    assert phone.notebook.edit(note_id, body="changed meanwhile")
    assert not ledger.compare_and_clear(note_id, candidate.content_hash)
    ledger.orphaned(note_id, candidate.content_hash)
    assert resident(phone, note_id) == ("changed meanwhile", None)
    assert ledger.releases_due() == [(note_id, candidate.content_hash)]
    with pytest.raises(BadInput, match="not offloaded"):
        ledger.pointer(note_id)


def test_the_holder_refuses_what_it_must(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    me, holder = phone.public_key(), HolderCore(mac)
    note_id = clear_note(phone)
    chash = body_hash(BODY.encode())
    lying = OffloadRequest(b"a" * 16, note_id, chash, b"another body")
    why = holder.hold(me, lying, 1)
    assert why == "the body does not match its content hash"
    refusal = holder.refuse(me, lying, why)
    assert refusal == HolderRefusal(b"a" * 16, why)
    assert holder.refused == {why: 1}
    sealed = mac.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="plan", body="secret")
    sealed_req = OffloadRequest(b"b" * 16, sealed, chash, BODY.encode())
    assert holder.hold(me, sealed_req, 2) == (
        "that id names a sealed note; sealed notes are never offloaded"
    )
    # Only the device that parked a holding can release it; a release older
    # than the offload that last backed the holding changes nothing.
    good = OffloadRequest(b"c" * 16, note_id, chash, BODY.encode())
    assert holder.hold(me, good, 5) is None
    release = ReleaseAttempt(mac.public_key(), note_id, chash).request_message()
    assert holder.let_go(bytes(STRANGER.verify_key), release, 9) == (
        "only a device that parked a holding can release it"
    )
    assert holder.let_go(me, release, 4) is None
    assert holder.serve(FetchAttempt(b"", note_id, chash).request_message())[0] == BODY.encode()


def test_the_holder_serves_only_a_held_body_that_still_matches_and_never_a_sealed_id(
    pair: tuple[Node, Node],
) -> None:
    phone, mac = pair
    me, holder = phone.public_key(), HolderCore(mac)
    note_id = clear_note(phone)
    chash = body_hash(BODY.encode())

    def serve(which: str, digest: bytes) -> tuple[bytes | None, str]:
        return holder.serve(FetchAttempt(b"", which, digest).request_message())

    assert serve(note_id, chash) == (None, "no holding for that note and hash")
    assert holder.hold(me, OffloadRequest(b"a" * 16, note_id, chash, BODY.encode()), 1) is None
    assert serve(note_id, chash) == (BODY.encode(), "")
    assert serve(note_id, body_hash(b"other")) == (None, "no holding for that note and hash")
    sealed = mac.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="plan", body="secret")
    assert serve(sealed, chash) == (None, "that id names a sealed note")
    # A holding under an id this replica knows as sealed (planted behind the
    # holder's back) is not served either.
    con = sqlite3.connect(mac.db.path)
    with con:
        con.execute(
            "INSERT INTO holding (note_id, content_hash, owner, body, held_at) "
            "VALUES (?, ?, ?, ?, 0)",
            (sealed, chash.hex(), me.hex(), BODY.encode()),
        )
        # And a held body that no longer matches its hash (damaged at rest).
        con.execute("UPDATE holding SET body = ? WHERE note_id = ?", (b"rotten", note_id))
    con.close()
    assert serve(sealed, chash) == (None, "that id names a sealed note")
    assert serve(note_id, chash) == (None, "the held body no longer matches its hash")


def test_twisted_acks_are_never_taken_as_held(pair: tuple[Node, Node]) -> None:
    phone, mac = pair
    home = mac.public_key()
    note_id = clear_note(phone)
    attempt = OffloadAttempt(home, note_id, body_hash(BODY.encode()))
    request = attempt.request_message(BODY.encode())
    holder = HolderCore(mac)
    for counter, (twist, outcome) in enumerate(
        (("ack-wrong-hash", Outcome.WRONG_HASH), ("ack-wrong-id", Outcome.WRONG_ID)), 1
    ):
        steps = holdsteps.answer(phone.public_key(), request, counter)
        answered = holder.run(holdsteps.faulted(steps, lambda stage, t=twist: (t, 0.0)))
        (ack,) = answered.replies
        assert isinstance(ack, OffloadAck) and answered.faults == [twist]
        verdict = attempt.on_message(home, ack)
        assert verdict is not None and verdict.outcome is outcome
    parts = holder_parts(FetchAttempt(home, note_id, b"h" * 32).request_message(), b"")
    assert [type(p) for p in parts] == [FetchPart]
    release = ReleaseAttempt(home, note_id, b"h" * 32).request_message()
    replies = holder.run(holdsteps.answer(phone.public_key(), release, 9)).replies
    assert [type(r) for r in replies] == [Released]
