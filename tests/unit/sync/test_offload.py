"""Offloading in one process: the device's NoteOffloadService against a real
Holder (both on real data dirs), over an in-memory wire that can misbehave.

Every holder fault leaves the local body intact, or (after a valid ack) the
holder able to serve the exact bytes; a corrupted body is refused; residency
never moves the state digest or a note's stamp.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.store import Distilled
from pixie.device.store.holdings import forget_release
from pixie.device.store.notes import ABOUT_YOU_KEY, NoteKind, SealedKind, content_hash
from pixie.device.sync import offload
from pixie.device.sync.offload import OffloadFailed
from pixie.device.sync.peers import Incoming
from pixie.protocol.faults import HOLDER_FAULTS, FaultSpecError, parse_faults
from pixie.protocol.offload import (
    FetchAttempt,
    OffloadAttempt,
    Outcome,
    body_hash,
    holder_parts,
)
from pixie.protocol.peerwire import (
    Body,
    FetchPart,
    HolderRefusal,
    OffloadAck,
    PeerMessage,
    Release,
    Released,
)
from tests.support.offloadpair import BODY, MAC, PHONE, ROGUE, Pair, Wire, make_pair


@pytest.fixture
async def pair(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Pair]:
    p = make_pair(tmp_path, nursery)
    yield p
    p.phone.close()
    p.mac.close()


async def test_offload_clears_only_after_ack_and_keeps_the_index(pair: Pair) -> None:
    note_id = pair.note()
    stamp_before = pair.row(note_id)[3]
    digest_before = pair.phone.digest()

    report = await pair.service.offload(note_id)

    assert (report.outcome, report.cleared) == (Outcome.HELD, True)
    body_now, holder, chash, stamp_now = pair.row(note_id)
    assert body_now is None and holder == MAC.hex()
    assert chash == content_hash(BODY) and stamp_now == stamp_before  # residency is no edit
    assert pair.phone.digest() == digest_before == pair.phone.recompute_digest()
    assert pair.held() == [(note_id, BODY.encode())]
    assert pair.phone.notebook.counts()["offloaded"] == 1
    # Still found by topic and title (the body's words are gone with it), and
    # shown as offloaded.
    view = pair.phone.notebook.clear_view()
    assert [h.note.id for h in view.search_clear("", topic="music")] == [note_id]
    (by_title,) = view.search_clear("ada page")
    assert by_title.note.id == note_id and by_title.note.body is None
    assert view.search_clear("cello") == []
    # Viewing fetches and verifies, and writes nothing back.
    assert await pair.service.fetch(note_id) == BODY
    assert pair.row(note_id)[0] is None


async def test_recall_restores_then_releases(pair: Pair) -> None:
    note_id = pair.note()
    await pair.service.offload(note_id)
    with pytest.raises(BadInput, match="recall"):
        pair.phone.notebook.edit(note_id, title="New title")
    assert await pair.service.recall(note_id) is True
    assert pair.row(note_id)[:2] == (BODY, None)
    assert pair.held() == [] and pair.pending() == []
    assert pair.phone.notebook.edit(note_id, title="New title") is True
    with pytest.raises(BadInput, match="not offloaded"):
        await pair.service.fetch(note_id)


async def test_sealed_notes_never_pass_the_gate(pair: Pair) -> None:
    sealed_id = pair.phone.notebook.record_sealed(
        SealedKind.HUDDLE_PREP, title="secret", body="the plan"
    )
    with pytest.raises(NotFound, match="no note with id"):
        await pair.service.offload(sealed_id)
    assert pair.held() == []


async def test_about_you_stays_on_the_device(pair: Pair) -> None:
    """Distillation keeps merging facts into it, so it is never parked."""
    about = pair.phone.notebook.upsert_clear(
        Distilled(NoteKind.ABOUT_YOU, ABOUT_YOU_KEY, "About you", "- I live in Porto")
    ).note_id
    with pytest.raises(BadInput, match="stays on this device"):
        await pair.service.offload(about)
    assert pair.held() == []
    assert about not in offload.candidates(pair.phone, 0)
    assert pair.note() in offload.candidates(pair.phone, 0)


async def test_an_edit_racing_the_offload_wins(pair: Pair) -> None:
    note_id = pair.note()

    def edit_in_flight(message: PeerMessage) -> None:
        pair.phone.notebook.edit(note_id, body="Changed while the body travelled.")

    pair.wire.before_deliver = edit_in_flight
    report = await pair.service.offload(note_id)
    assert (report.outcome, report.cleared) == (Outcome.HELD, False)
    assert pair.row(note_id)[0] == "Changed while the body travelled."
    assert pair.pending() == [note_id]  # the parked copy points at nothing now
    pair.wire.before_deliver = None
    assert await pair.service.release_pending() == {note_id}
    assert pair.held() == [] and pair.pending() == []


@pytest.mark.parametrize(
    ("spec", "outcome", "held_after"),
    [
        ("ack-timeout=#1", Outcome.TIMEOUT, False),
        ("ack-delay=#1@2", Outcome.TIMEOUT, True),
        ("refuse=#1", Outcome.REFUSED, False),
        ("ack-wrong-hash=#1", Outcome.WRONG_HASH, True),
        ("ack-wrong-id=#1", Outcome.WRONG_ID, True),
        ("crash-before-commit=#1", Outcome.TIMEOUT, False),
        ("crash-after-commit=#1", Outcome.TIMEOUT, True),
    ],
)
async def test_every_holder_fault_leaves_the_body_here(
    tmp_path: Path, nursery: trio.Nursery, spec: str, outcome: Outcome, held_after: bool
) -> None:
    p = make_pair(tmp_path, nursery, spec, timeout=0.5)
    try:
        note_id = p.note()
        digest = p.phone.digest()
        report = await p.service.offload(note_id)
        assert (report.outcome, report.cleared) == (outcome, False), report.detail
        assert p.row(note_id)[:2] == (BODY, None)
        assert p.phone.digest() == digest
        if held_after:
            # Whatever the holder says, anything it holds is the exact bytes.
            with trio.fail_after(10):
                while not p.held():  # the delayed ack's holder commits before it sleeps
                    await trio.sleep(0.01)
            assert p.held() == [(note_id, BODY.encode())]
        else:
            assert p.held() == []
        # The fault struck once (#1): the next attempt goes through.
        again = await p.service.offload(note_id)
        assert again.cleared, again.detail
        assert await p.service.fetch(note_id) == BODY
    finally:
        p.phone.close()
        p.mac.close()


async def test_corrupt_body_never_lands(tmp_path: Path, nursery: trio.Nursery) -> None:
    p = make_pair(tmp_path, nursery, "corrupt-serve=#1")
    try:
        note_id = p.note()
        assert (await p.service.offload(note_id)).cleared
        with pytest.raises(OffloadFailed) as failed:
            await p.service.recall(note_id)
        assert failed.value.outcome is Outcome.CORRUPT
        assert p.row(note_id)[:2] == (None, MAC.hex())  # still offloaded, nothing written
        assert await p.service.fetch(note_id) == BODY  # the fault struck once
    finally:
        p.phone.close()
        p.mac.close()


async def test_acks_from_other_keys_and_replayed_acks_are_set_aside(pair: Pair) -> None:
    first = pair.note(identity="ada")
    assert (await pair.service.offload(first)).cleared
    old_request: list[bytes] = []
    second = pair.note(identity="grace")

    def hijack(message: PeerMessage) -> None:
        request = message.request  # type: ignore[union-attr]
        old_request.append(request)
        pair.wire.holder.faults = parse_faults("ack-timeout=1", HOLDER_FAULTS)

        async def forge() -> None:
            chash = bytes.fromhex(content_hash(BODY))
            await pair.wire.inject(ROGUE, OffloadAck(request, second, chash))
            await pair.wire.inject(MAC, OffloadAck(os.urandom(16), second, chash))

        pair.wire.nursery.start_soon(forge)

    pair.wire.before_deliver = hijack
    pair.service.timeout = 0.5
    report = await pair.service.offload(second)
    assert (report.outcome, report.cleared) == (Outcome.TIMEOUT, False)
    assert "not the holder" in report.detail and "stale or replayed" in report.detail
    assert pair.row(second)[0] == BODY


async def test_residency_follows_new_versions(pair: Pair) -> None:
    note_id = pair.note()
    assert (await pair.service.offload(note_id)).cleared
    same = pair.phone.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "ada", "ada page", BODY, tags=("music",))
    )
    assert same.outcome.value == "unchanged"  # re-deriving the same content is a no-op
    assert pair.row(note_id)[0] is None
    pair.phone.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "ada", "ada page", "New facts.", tags=("music",))
    )
    assert pair.row(note_id)[:2] == ("New facts.", None)  # resident again
    assert pair.pending() == [note_id]
    assert pair.phone.digest() == pair.phone.recompute_digest()


async def test_deleting_an_offloaded_note_releases_its_holding(pair: Pair) -> None:
    note_id = pair.note()
    assert (await pair.service.offload(note_id)).cleared
    pair.phone.notebook.delete(note_id)
    assert pair.pending() == [note_id]
    assert await pair.service.release_pending() == {note_id}
    assert pair.held() == []


async def test_a_release_sent_before_the_latest_offload_keeps_the_holding(pair: Pair) -> None:
    """The relay may deliver a (retried) release after the device has parked
    the same body again: envelope counters tell the holder which came first."""
    note_id = pair.note()
    chash = bytes.fromhex(content_hash(BODY))
    stale = pair.wire.sent + 1  # a release sealed before the offload below
    pair.wire.sent += 1
    assert (await pair.service.offload(note_id)).cleared
    replies: list[PeerMessage] = []

    async def reply(_to: bytes, message: PeerMessage) -> int:
        replies.append(message)
        return 0

    release = Body(b"", stale, Release(b"r" * 16, note_id, chash))
    await pair.wire.holder.handle(Incoming(PHONE, release), reply, Wire.call)
    assert isinstance(replies[-1], Released)
    assert pair.held() == [(note_id, BODY.encode())]
    assert await pair.service.fetch(note_id) == BODY
    # A release sent after that offload does let go.
    release = Body(b"", pair.wire.sent + 1, Release(b"s" * 16, note_id, chash))
    await pair.wire.holder.handle(Incoming(PHONE, release), reply, Wire.call)
    assert isinstance(replies[-1], Released)
    assert pair.held() == []


async def test_a_release_confirmed_elsewhere_is_not_sent_again(pair: Pair) -> None:
    """Between reading what is due and sealing the release, another process of
    the device had it confirmed (and could have parked the body again): the
    release is withdrawn where its counter would be reserved, never sent."""
    note_id = pair.note()
    assert (await pair.service.offload(note_id)).cleared
    pointer = pair.service.ledger.pointer(note_id)
    assert pair.service.ledger.restore(pointer, BODY.encode())  # as a recall does
    assert pair.pending() == [note_id]

    def confirmed_elsewhere() -> None:
        with pair.phone.db.writing() as session:
            forget_release(session, note_id, pointer.content_hash, MAC.hex())

    pair.wire.before_seal = confirmed_elsewhere
    sent = pair.wire.sent
    assert await pair.service.release_pending() == {note_id}
    assert pair.wire.sent == sent  # nothing went out
    assert pair.held() == [(note_id, BODY.encode())]  # and nothing was dropped


async def test_only_the_owner_may_release(pair: Pair) -> None:
    note_id = pair.note()
    assert (await pair.service.offload(note_id)).cleared
    chash = bytes.fromhex(content_hash(BODY))
    replies: list[PeerMessage] = []

    async def reply(_to: bytes, message: PeerMessage) -> int:
        replies.append(message)
        return 0

    release = Body(b"", 1, Release(b"r" * 16, note_id, chash))
    await pair.wire.holder.handle(Incoming(ROGUE, release), reply, Wire.call)
    assert isinstance(replies[0], HolderRefusal)
    assert pair.held() == [(note_id, BODY.encode())]


# -- the sans-IO judgements ---------------------------------------------------------------


def test_holder_parts_reassemble_in_any_order() -> None:
    body = os.urandom(600_000)
    attempt = FetchAttempt(MAC, "0" * 8 + "-0000-0000-0000-" + "0" * 12, body_hash(body))
    parts = holder_parts(attempt.request_message(), body)
    assert len(parts) == 3
    verdicts = [attempt.on_message(MAC, part) for part in reversed(parts)]
    assert verdicts[:2] == [None, None]
    final = verdicts[2]
    assert final is not None and final.outcome is Outcome.FETCHED and final.body == body


@given(
    st.binary(min_size=1, max_size=64),
    st.lists(st.integers(min_value=1, max_value=63), max_size=6),
    st.randoms(use_true_random=False),
    st.sampled_from(["clean", "flipped", "duplicated", "overlapping"]),
)
def test_a_fetch_is_judged_on_the_whole_body_whatever_the_order(
    body: bytes, cuts: list[int], rng: Any, fault: str
) -> None:
    """The hash taken as the parts arrive judges exactly the bytes assembled:
    any order, any split, a part sent twice; a flipped bit or overlapping
    parts are corrupt."""
    note_id = "01234567-89ab-8def-8123-456789abcdef"
    attempt = FetchAttempt(MAC, note_id, body_hash(body))
    request = attempt.request_message()
    bounds = sorted({0, len(body), *(c for c in cuts if c < len(body))})
    spans = list(itertools.pairwise(bounds))
    parts = [
        FetchPart(request.request, note_id, request.content_hash, len(body), a, body[a:b])
        for a, b in spans
    ]
    if fault == "flipped":
        k = rng.randrange(len(parts))
        data = parts[k].data
        parts[k] = FetchPart(
            request.request,
            note_id,
            request.content_hash,
            len(body),
            parts[k].offset,
            bytes([data[0] ^ 0x01]) + data[1:],
        )
    elif fault == "duplicated":
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(parts))
    overlap = None
    if fault == "overlapping" and len(body) > 1:
        # A part that starts inside the first one: the parts overlap.
        overlap = FetchPart(request.request, note_id, request.content_hash, len(body), 1, b"x")
        parts.append(overlap)
    rng.shuffle(parts)
    verdicts = [attempt.on_message(MAC, part) for part in parts]
    final = next((v for v in verdicts if v is not None), None)
    assert final is not None
    # An overlapping part spoils the fetch only if it came before the body was whole.
    spoiled = overlap is not None and parts.index(overlap) < max(
        i for i, part in enumerate(parts) if part is not overlap
    )
    if fault == "flipped" or spoiled:
        assert final.outcome is Outcome.CORRUPT and final.body is None
    else:
        assert final.outcome is Outcome.FETCHED and final.body == body


NOTE = "01234567-89ab-8def-8123-456789abcdef"
HASH = body_hash(b"the body")


@given(
    st.lists(
        st.tuples(
            st.sampled_from([MAC, ROGUE]),
            st.sampled_from(["ack", "refusal", "part", "released"]),
            st.booleans(),  # right request id
            st.sampled_from([NOTE, "ffffffff-89ab-8def-8123-456789abcdef"]),
            st.sampled_from([HASH, body_hash(b"other")]),
        ),
        max_size=8,
    )
)
def test_only_a_valid_ack_is_held(replies: list[tuple[bytes, str, bool, str, bytes]]) -> None:
    attempt = OffloadAttempt(MAC, NOTE, HASH)
    for sender, kind, right, note_id, chash in replies:
        request = attempt.request if right else b"x" * 16
        message: PeerMessage
        if kind == "ack":
            message = OffloadAck(request, note_id, chash)
        elif kind == "refusal":
            message = HolderRefusal(request, "no")
        elif kind == "part":
            message = FetchPart(request, note_id, chash, 1, 0, b"x")
        else:
            message = Released(request, note_id, chash)
        verdict = attempt.on_message(sender, message)
        valid = kind == "ack" and sender == MAC and right and note_id == NOTE and chash == HASH
        if valid:
            assert verdict is not None and verdict.outcome is Outcome.HELD
        else:
            assert verdict is None or verdict.outcome is not Outcome.HELD
        if verdict is not None:
            break


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("bogus=1", "unknown fault"),
        ("refuse=2", "not in"),
        ("ack-delay=0.5", "needs a duration"),
        ("refuse=0.1@3", "takes no duration"),
        ("refuse=#0", "count from"),
        ("refuse", "expected NAME=P"),
        ("refuse=1,refuse=1", "twice"),
        ("refuse=nan", "bad rule"),
    ],
)
def test_bad_fault_specs_are_refused(spec: str, error: str) -> None:
    with pytest.raises(FaultSpecError, match=error):
        parse_faults(spec, HOLDER_FAULTS)


def test_nth_rules_strike_once() -> None:
    plan = parse_faults("refuse=#3", HOLDER_FAULTS)
    assert [plan.strikes("refuse") is not None for _ in range(5)] == [
        False,
        False,
        True,
        False,
        False,
    ]
