"""NotebookStore: upserts, user edits, pins, tombstones, the seal and its key."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.notebook.huddle import HuddleRecord, nudges, record_huddle
from pixie.device.notebook.seal import NotebookSeal, SealError
from pixie.device.notebook.store import Distilled, UpsertOutcome
from pixie.device.store.keystore import FileKeyStore, KeyStoreError
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind, Zone
from pixie.protocol.timestamps import now_us


def person(node: Node, name: str = "Ada Lovelace", body: str = "Runs marathons.") -> Distilled:
    cid, _ = node.contacts.add(name, [], now=0)
    return Distilled(NoteKind.PERSON, cid, name, body, cid, ("sport",))


def rows(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute("SELECT * FROM note ORDER BY n").fetchall()
    finally:
        con.close()


def test_upsert_is_idempotent_and_updates_in_place(node: Node) -> None:
    item = person(node)
    first = node.notebook.upsert_clear(item)
    created_stamp = node.notebook.get_clear(first.note_id).updated_at
    snapshot = rows(node)
    again = node.notebook.upsert_clear(item)
    assert (first.outcome, again.outcome) == (UpsertOutcome.CREATED, UpsertOutcome.UNCHANGED)
    assert rows(node) == snapshot  # not one byte touched, stamp included
    changed = node.notebook.upsert_clear(
        Distilled(item.kind, item.identity_key, item.title, "Runs ultras now.", item.contact_id)
    )
    assert changed == type(changed)(first.note_id, UpsertOutcome.UPDATED)
    notes = node.notebook.clear_notes()
    assert len(notes) == 1 and notes[0].body == "Runs ultras now."
    assert notes[0].updated_at > created_stamp


def test_user_edits_win_over_distillation(node: Node) -> None:
    item = Distilled(NoteKind.CONVERSATION_DIGEST, "thread:t1", "Ada", "Runs marathons.")
    note_id = node.notebook.upsert_clear(item).note_id
    assert node.notebook.edit(note_id, body="My own words about Ada.")
    before = node.notebook.get_clear(note_id)
    assert before.user_edited
    result = node.notebook.upsert_clear(
        Distilled(item.kind, item.identity_key, item.title, "A model's new summary.")
    )
    assert result.outcome is UpsertOutcome.KEPT_USER_EDIT
    assert node.notebook.get_clear(note_id) == before


def test_edit_that_changes_nothing_is_a_no_op(node: Node) -> None:
    note_id = node.notebook.upsert_clear(person(node)).note_id
    snapshot = rows(node)
    assert node.notebook.edit(note_id, body="Runs marathons.", tags=["Sport"]) is False
    assert rows(node) == snapshot


def test_edit_bumps_the_stamp(node: Node) -> None:
    note_id = node.notebook.upsert_clear(person(node)).note_id
    old = node.notebook.get_clear(note_id).updated_at
    node.notebook.edit(note_id, title="Ada")
    assert node.notebook.get_clear(note_id).updated_at > old


def test_delete_is_a_tombstone_that_distillation_respects(node: Node) -> None:
    item = person(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.delete(note_id)
    assert node.notebook.clear_notes() == []
    assert node.notebook.clear_view().get_clear(note_id) is None
    (row,) = rows(node)
    assert row[5] == 1  # deleted flag kept, so the deletion can sync
    assert node.notebook.upsert_clear(item).outcome is UpsertOutcome.KEPT_USER_EDIT
    assert node.notebook.clear_notes() == []
    with pytest.raises(NotFound):
        node.notebook.delete(note_id)


def test_pins_accumulate_and_file_a_spark_event(node: Node) -> None:
    result = node.log.append(
        [NewEvent(EventKind.MESSAGE, now_us(), "The view from the summit!", contact="Zoë")], now=0
    )
    (event_id,) = result.ids
    a = node.notebook.pin_spark(event_id, ["hiking"])
    b = node.notebook.pin_spark(event_id)
    assert a != b
    pins = node.notebook.clear_notes(NoteKind.SPARKED)
    assert len(pins) == 2
    assert {p.source_ref for p in pins} == {f"event:{event_id}"}
    assert all(p.contact_id == node.log.get(event_id).contact_id for p in pins)  # type: ignore[union-attr]
    sparks = [r for r in node.log.all_records() if r.kind is EventKind.SPARK]
    assert len(sparks) == 2
    assert [h.kind for h in GrepMemoryTool(node.mirror).run("summit").hits][:2] == [
        EventKind.SPARK
    ] * 2
    with pytest.raises(NotFound):
        node.notebook.pin_spark("01900000-0000-7000-8000-000000000000")


def test_guidance_and_about_you_by_hand(node: Node) -> None:
    g = node.notebook.add_user_note(NoteKind.GUIDANCE, "Tone", "Be brief.")
    with pytest.raises(BadInput, match="already"):
        node.notebook.add_user_note(NoteKind.GUIDANCE, "  TONE ", "Be chatty.")
    a = node.notebook.add_user_note(NoteKind.ABOUT_YOU, "About me", "I live in Porto.")
    with pytest.raises(BadInput):
        node.notebook.add_user_note(NoteKind.ABOUT_YOU, "Me again", "x")
    with pytest.raises(BadInput):
        node.notebook.add_user_note(NoteKind.PERSON, "x", "y")
    assert {n.id for n in node.notebook.clear_notes()} == {g, a}
    assert all(n.user_edited for n in node.notebook.clear_notes())


@pytest.mark.parametrize(
    "item",
    [
        Distilled(NoteKind.PERSON, "", "t", "b"),
        Distilled(NoteKind.PERSON, "k", "", "b"),
        Distilled(NoteKind.PERSON, "k", "t" * 201, "b"),
        Distilled(NoteKind.PERSON, "k", "two\nlines", "b"),
        Distilled(NoteKind.PERSON, "k", "t", "b" * 40_000),
        Distilled(NoteKind.PERSON, "k", "t", "b", tags=("x" * 41,)),
        Distilled(NoteKind.PERSON, "k", "t", "b", tags=tuple(f"t{i}" for i in range(17))),
        Distilled(NoteKind.PERSON, "k", "t", "b", tags=("bad/tag",)),
        Distilled(NoteKind.SPARKED, "k", "t", "b"),
    ],
)
def test_bad_notes_are_refused_and_write_nothing(node: Node, item: Distilled) -> None:
    with pytest.raises(BadInput):
        node.notebook.upsert_clear(item)
    assert rows(node) == []


# -- the sealed zone -------------------------------------------------------------


def seal_one(node: Node, body: str = "CANARY-private", contact: str | None = None) -> str:
    return node.notebook.record_sealed(
        SealedKind.HUDDLE_TAKEAWAY, title="takeaway", body=body, contact_id=contact
    )


def test_sealed_rows_hold_only_ciphertext(node: Node) -> None:
    note_id = seal_one(node, body="CANARY-body", contact="somebody")
    con = sqlite3.connect(node.db.path)
    con.row_factory = sqlite3.Row
    row = dict(con.execute("SELECT * FROM note WHERE id = ?", (note_id,)).fetchone())
    con.close()
    readable = {k for k, v in row.items() if v is not None}
    assert readable == {
        "n",
        "id",
        "zone",
        "updated_at",
        "content_hash",
        "deleted",
        "user_edited",
        "nonce",
        "ciphertext",
    }
    assert b"CANARY" not in row["ciphertext"]
    (sealed,) = node.notebook.sealed_notes_for_huddle_reasoning()
    assert (sealed.body, sealed.contact_id) == ("CANARY-body", "somebody")


def test_database_refuses_a_readable_sealed_row(node: Node) -> None:
    con = sqlite3.connect(node.db.path)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            con.execute(
                "INSERT INTO note (id, zone, updated_at, content_hash, deleted, user_edited, "
                "title, ciphertext) VALUES ('x', 'sealed', 's', 'h', 0, 0, 'leak', x'00')"
            )
    finally:
        con.close()


def test_ciphertext_is_bound_to_its_row(node: Node) -> None:
    a = seal_one(node, "first")
    b = seal_one(node, "second")
    con = sqlite3.connect(node.db.path)
    nonce_a, blob_a = con.execute(
        "SELECT nonce, ciphertext FROM note WHERE id = ?", (a,)
    ).fetchone()
    con.execute("UPDATE note SET nonce = ?, ciphertext = ? WHERE id = ?", (nonce_a, blob_a, b))
    con.commit()
    con.close()
    with pytest.raises(SealError, match="failed authentication"):
        node.notebook.sealed_notes_for_huddle_reasoning()


def test_tampered_ciphertext_is_refused(node: Node) -> None:
    a = seal_one(node)
    con = sqlite3.connect(node.db.path)
    blob = bytearray(con.execute("SELECT ciphertext FROM note WHERE id = ?", (a,)).fetchone()[0])
    blob[20] ^= 1
    con.execute("UPDATE note SET ciphertext = ? WHERE id = ?", (bytes(blob), a))
    con.commit()
    con.close()
    with pytest.raises(SealError):
        node.notebook.sealed_notes_for_huddle_reasoning()


def test_tampered_nonce_is_refused(node: Node) -> None:
    a = seal_one(node)
    con = sqlite3.connect(node.db.path)
    nonce = bytearray(con.execute("SELECT nonce FROM note WHERE id = ?", (a,)).fetchone()[0])
    nonce[0] ^= 1
    con.execute("UPDATE note SET nonce = ? WHERE id = ?", (bytes(nonce), a))
    con.commit()
    con.close()
    with pytest.raises(SealError, match="failed authentication"):
        node.notebook.sealed_notes_for_huddle_reasoning()


def test_key_is_minted_once_and_kept_apart_with_0600(node: Node) -> None:
    seal_one(node)
    seal_one(node)
    key_dir = Path(os.environ["PIXIE_KEYS"])
    files = list(key_dir.glob("*-notebook-seal.key"))
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    assert not key_dir.is_relative_to(node.data.path)
    assert not any(p.suffix == ".key" for p in node.data.path.rglob("*"))


def test_world_readable_key_file_is_refused(node: Node) -> None:
    seal_one(node)
    (key_file,) = Path(os.environ["PIXIE_KEYS"]).glob("*-notebook-seal.key")
    key_file.chmod(0o644)
    with Node.open(node.data.path) as fresh, pytest.raises(KeyStoreError, match="chmod 600"):
        fresh.notebook.sealed_notes_for_huddle_reasoning()


def test_wiping_data_and_key_makes_the_sealed_zone_unreadable(node: Node, tmp_path: Path) -> None:
    seal_one(node, "CANARY-gone-forever")
    node.close()
    # Someone kept a copy of the database file, but the app's data and its key
    # store entry are deleted.
    copy = tmp_path / "stolen"
    shutil.copytree(node.data.path, copy)
    shutil.rmtree(node.data.path)
    for key_file in Path(os.environ["PIXIE_KEYS"]).iterdir():
        key_file.unlink()
    with Node.open(copy) as thief:
        with pytest.raises(SealError, match="missing from the key store"):
            thief.notebook.sealed_notes_for_huddle_reasoning()
        # A freshly minted key does not open the old ciphertext either.
        FileKeyStore(Path(os.environ["PIXIE_KEYS"])).put(
            f"{thief.origin}-notebook-seal", os.urandom(32)
        )
        with pytest.raises(SealError, match="different key"):
            thief.notebook.sealed_notes_for_huddle_reasoning()
    # and with the fingerprint check bypassed, AES-GCM itself refuses
    con = sqlite3.connect(copy / "pixie.db")
    note_id, nonce, blob = con.execute("SELECT id, nonce, ciphertext FROM note").fetchone()
    con.close()
    with pytest.raises(SealError):
        NotebookSeal(os.urandom(32)).open(note_id, Zone.SEALED.value, nonce, blob)


def test_clear_zone_works_without_the_key(node: Node) -> None:
    seal_one(node)
    node.notebook.upsert_clear(person(node))
    for key_file in Path(os.environ["PIXIE_KEYS"]).iterdir():
        key_file.unlink()
    with Node.open(node.data.path) as fresh:
        assert len(fresh.notebook.clear_notes()) == 1
        assert len(fresh.notebook.search_clear("marathons")) == 1
        with pytest.raises(SealError):
            fresh.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="t", body="b")


# -- huddles and nudges ------------------------------------------------------------


def test_material_from_other_agents_is_sealed_whatever_is_asked(node: Node) -> None:
    node.contacts.add("Priya Raman", ["P"], now=0)
    record = HuddleRecord("Priya Raman", ("ask about the job",), ("she got it",), ("CANARY-x",))
    ids = record_huddle(node.notebook, node.contacts, record, zone=Zone.CLEAR)
    sealed = node.notebook.sealed_notes_for_huddle_reasoning()
    assert [s.body for s in sealed] == ["CANARY-x"]
    assert sealed[0].from_other_agents
    clear = node.notebook.clear_notes()
    assert len(clear) == 1 and "CANARY" not in (clear[0].body or "")
    assert len(ids) == 2


def test_huddle_never_creates_a_contact(node: Node) -> None:
    record = HuddleRecord("Jimmy", ("prep",), (), ("CANARY-jimmy",))
    record_huddle(node.notebook, node.contacts, record)
    assert node.contacts.all() == []
    assert {s.contact_name for s in node.notebook.sealed_notes_for_huddle_reasoning()} == {"Jimmy"}


def test_nudges_name_a_person_and_never_quote_sealed_text(node: Node) -> None:
    now = now_us()
    day = 86_400_000_000
    node.log.append(
        [
            NewEvent(EventKind.MESSAGE, now - 60 * day - i, f"old chat {i}", contact="Jimmy")
            for i in range(6)
        ]
        + [NewEvent(EventKind.CALENDAR, now + 2 * day, "Dinner", contact="Ada")],
        now=0,
    )
    record_huddle(
        node.notebook,
        node.contacts,
        HuddleRecord("Ada", ("CANARY-prep",), ("CANARY-take",), ("CANARY-other",)),
    )
    found = nudges(node.notebook, now)
    people = {n.person for n in found}
    assert people == {"Jimmy", "Ada"}
    assert all(n.person in n.action for n in found)
    assert not any("CANARY" in n.action for n in found)


def test_distilled_notes_a_sibling_would_refuse_are_refused_here(node: Node) -> None:
    with pytest.raises(BadInput, match="contact's id"):
        node.notebook.upsert_clear(Distilled(NoteKind.PERSON, "x", "Ada", "b", "ada"))
    with pytest.raises(BadInput, match="source reference"):
        node.notebook.upsert_clear(
            Distilled(NoteKind.POST_DIGEST, "p1", "Post", "b", None, (), "s" * 201)
        )
    assert node.notebook.counts()["clear"] == 0
