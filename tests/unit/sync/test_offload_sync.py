"""Residency is invisible to sync: offloading moves no digest, an offloaded
note still syncs (the holder fills the body from what it holds), and a newer
version arriving by sync makes the note resident again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from pixie.device.notebook.store import Distilled
from pixie.device.store.holdings import PendingRelease
from pixie.device.store.notes import NoteKind
from tests.support.offloadpair import BODY, MAC, make_pair
from tests.support.synchelp import sync


def body_of(path: Path, note_id: str) -> tuple[object, object]:
    con = sqlite3.connect(path)
    try:
        row = con.execute("SELECT body, holder FROM note WHERE id = ?", (note_id,)).fetchone()
    finally:
        con.close()
    return tuple(row)


async def test_an_offloaded_note_syncs_and_offloading_is_no_change(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    p = make_pair(tmp_path, nursery)
    try:
        note_id = p.note()
        # Parked before the Homebase's replica ever saw the note.
        assert (await p.service.offload(note_id)).cleared
        sync(p.phone, p.mac)
        assert p.phone.digest() == p.mac.digest() == p.mac.recompute_digest()
        assert body_of(p.mac.db.path, note_id) == (BODY, None)  # filled from the holding
        assert body_of(p.phone.db.path, note_id) == (None, MAC.hex())  # still parked here
        # Recall, then offload again: neither is a change to sync.
        assert await p.service.recall(note_id)
        assert (await p.service.offload(note_id)).cleared
        _, again, _ = sync(p.phone, p.mac)
        assert again.stats.in_sync_at_hello and again.stats.round_trips == 1
    finally:
        p.phone.close()
        p.mac.close()


async def test_a_newer_version_by_sync_makes_the_note_resident(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    p = make_pair(tmp_path, nursery)
    try:
        note_id = p.note()
        sync(p.phone, p.mac)
        assert (await p.service.offload(note_id)).cleared
        # The user edits the note on the Homebase; the device hears by sync.
        assert p.mac.notebook.edit(note_id, body="Edited on the Mac.")
        sync(p.mac, p.phone)
        assert p.phone.digest() == p.mac.digest() == p.phone.recompute_digest()
        assert body_of(p.phone.db.path, note_id) == ("Edited on the Mac.", None)
        with p.phone.db.reading() as session:
            pending = [r.note_id for r in session.query(PendingRelease).all()]
        assert pending == [note_id]  # the parked old body is released on our word
        assert await p.service.release_pending() == {note_id}
        assert p.held() == []
    finally:
        p.phone.close()
        p.mac.close()


async def test_distillation_of_identical_content_leaves_an_offloaded_note_alone(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    p = make_pair(tmp_path, nursery)
    try:
        note_id = p.note()
        sync(p.phone, p.mac)
        assert (await p.service.offload(note_id)).cleared
        before = p.phone.digest()
        result = p.phone.notebook.upsert_clear(
            Distilled(NoteKind.PERSON, "ada", "ada page", BODY, tags=("music",))
        )
        assert result.outcome.value == "unchanged"
        assert p.phone.digest() == before
        _, again, _ = sync(p.phone, p.mac)
        assert again.stats.in_sync_at_hello
    finally:
        p.phone.close()
        p.mac.close()
