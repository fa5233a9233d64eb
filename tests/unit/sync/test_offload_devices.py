"""Offloading with more than one device: the Homebase stays the holder of
every device's bodies. Two devices may park the very same body (a note they
both hold); each is one owner of the one holding, each fetches it, and it
goes only when the last lets go. A device that offloaded a note and then
takes in a newer version (an edit on the laptop) releases its own share,
never another device's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pixie.device.node.keyed import Node
from pixie.device.store.db import peek
from pixie.device.store.notes import NoteKind
from pixie.device.sync import membership as account
from pixie.device.sync.offload import OffloadLedger
from pixie.homebase import holdsteps
from pixie.homebase.holding import HolderCore
from pixie.protocol.offload import FetchAttempt, OffloadAttempt, Outcome, ReleaseAttempt
from tests.support.synchelp import open_laptop, pair_in_account, paired_siblings, sync

BODY = "Ada wants to start running again"


def _offload(device: Node, home: Node, holder: HolderCore, note_id: str, counter: int) -> str:
    """Park ``note_id``'s body from ``device``: offload, valid ack, clear."""
    ledger = OffloadLedger(device, home.public_key())
    candidate = ledger.candidate(note_id)
    attempt = OffloadAttempt(home.public_key(), note_id, bytes.fromhex(candidate.content_hash))
    (ack,) = holder.run(
        holdsteps.answer(device.public_key(), attempt.request_message(candidate.body), counter)
    ).replies
    verdict = attempt.on_message(home.public_key(), ack)
    assert verdict is not None and verdict.outcome is Outcome.HELD, verdict
    assert ledger.compare_and_clear(note_id, candidate.content_hash)
    return candidate.content_hash


def _fetch(device: Node, home: Node, holder: HolderCore, note_id: str, counter: int) -> bytes:
    pointer = OffloadLedger(device, home.public_key()).pointer(note_id)
    fetch = FetchAttempt(home.public_key(), note_id, bytes.fromhex(pointer.content_hash))
    verdict = None
    for part in holder.run(
        holdsteps.answer(device.public_key(), fetch.request_message(), counter)
    ).replies:
        verdict = fetch.on_message(home.public_key(), part)
    assert verdict is not None and verdict.body is not None, verdict
    return verdict.body


def _release(device: Node, home: Node, holder: HolderCore, counter: int) -> list[str]:
    ledger = OffloadLedger(device, home.public_key())
    gone = []
    for note_id, chash in ledger.releases_due():
        release = ReleaseAttempt(home.public_key(), note_id, bytes.fromhex(chash))
        (answer,) = holder.run(
            holdsteps.answer(device.public_key(), release.request_message(), counter)
        ).replies
        verdict = release.on_message(home.public_key(), answer)
        assert verdict is not None and verdict.outcome is Outcome.RELEASED, verdict
        ledger.released(note_id, chash)
        gone.append(note_id)
    return gone


def _holdings(home: Node) -> list[tuple[object, ...]]:
    return peek(home.db, "SELECT note_id, owner FROM holding_owner ORDER BY owner")


@contextmanager
def _three(tmp: Path) -> Iterator[tuple[Node, Node, Node, str, HolderCore]]:
    """A phone, a Homebase and a laptop in one account, a note of the phone's
    on both devices, and the Homebase's holder."""
    with paired_siblings(tmp) as (phone, home):
        laptop = open_laptop(tmp)
        try:
            pair_in_account(phone, laptop)
            note_id = phone.notebook.add_user_note(NoteKind.GUIDANCE, "Running", BODY)
            sync(laptop, phone)
            account.reconcile(laptop)
            yield phone, home, laptop, note_id, HolderCore(home)
        finally:
            laptop.close()


def test_two_devices_share_one_holding_and_it_goes_with_the_last(tmp_path: Path) -> None:
    with _three(tmp_path) as (phone, home, laptop, note_id, holder):
        chash = _offload(phone, home, holder, note_id, 1)
        assert _offload(laptop, home, holder, note_id, 1) == chash  # shared, not refused
        assert len(_holdings(home)) == 2
        assert peek(home.db, "SELECT count(*) FROM holding")[0][0] == 1
        assert _fetch(phone, home, holder, note_id, 2) == BODY.encode()
        assert _fetch(laptop, home, holder, note_id, 2) == BODY.encode()

        # The laptop edits the note; the phone takes the new version in
        # and lets go of its own share only: the laptop's still stands.
        ledger = OffloadLedger(laptop, home.public_key())
        restored = ledger.restore(ledger.pointer(note_id), BODY.encode())
        assert restored and _release(laptop, home, holder, 3) == [note_id]
        assert laptop.notebook.edit(note_id, body="Ada runs on Sundays now")
        sync(phone, laptop)
        assert _release(phone, home, holder, 4) == [note_id]
        assert _holdings(home) == []
        assert peek(home.db, "SELECT count(*) FROM holding")[0][0] == 0
        body = peek(phone.db, "SELECT body, holder FROM note WHERE id = ?", (note_id,))
        assert body == [("Ada runs on Sundays now", None)]


def test_one_device_letting_go_leaves_the_others_copy(tmp_path: Path) -> None:
    with _three(tmp_path) as (phone, home, laptop, note_id, holder):
        chash = _offload(phone, home, holder, note_id, 1)
        _offload(laptop, home, holder, note_id, 1)
        # The phone recalls its body and lets go; the laptop still fetches.
        ledger = OffloadLedger(phone, home.public_key())
        assert ledger.restore(ledger.pointer(note_id), BODY.encode())
        assert _release(phone, home, holder, 2) == [note_id]
        assert [row[1] for row in _holdings(home)] == [laptop.public_key().hex()]
        assert _fetch(laptop, home, holder, note_id, 2) == BODY.encode()
        # The phone releasing that holding again is refused (its share is
        # gone) and changes nothing for the laptop.
        release = ReleaseAttempt(home.public_key(), note_id, bytes.fromhex(chash))
        answered = holder.run(holdsteps.answer(phone.public_key(), release.request_message(), 3))
        (refusal,) = answered.replies
        verdict = release.on_message(home.public_key(), refusal)
        assert verdict is not None and verdict.outcome is Outcome.REFUSED
        assert _fetch(laptop, home, holder, note_id, 3) == BODY.encode()
