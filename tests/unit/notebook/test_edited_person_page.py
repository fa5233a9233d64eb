"""A person page the user edited stays theirs; what distillation learns later
goes to a page of its own beside it."""

from __future__ import annotations

import sqlite3

from pixie.device.cli.display import show_note
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled, UpsertOutcome
from pixie.device.store.notes import (
    KEPT_UP_TITLE,
    MAX_TITLE_CHARS,
    NoteKind,
    is_kept_up_identity,
    kept_up_identity,
    kept_up_title,
    unsaid,
)

PAGE = "Who they are\n- Works at Helix Bio\n- Lives in Leeds\nOpen threads\n- Nothing open."


def page(node: Node, body: str = PAGE) -> Distilled:
    cid, _ = node.contacts.add("Priya Raman", [], now=0)
    return Distilled(NoteKind.PERSON, cid, "Priya Raman", body, cid, ("friend",))


def rows(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute("SELECT * FROM note ORDER BY n").fetchall()
    finally:
        con.close()


def test_only_what_the_users_page_does_not_say_is_kept() -> None:
    mine = "My notes on Priya.\n- Works at Helix Bio"
    assert unsaid(mine, PAGE) == "Who they are\n- Lives in Leeds\nOpen threads\n- Nothing open."
    # Case and spacing aside; a heading whose lines are all said goes.
    assert (
        unsaid("- works at  HELIX bio\n- Lives in Leeds", PAGE) == "Open threads\n- Nothing open."
    )
    assert unsaid("Mine.", "A model's summary.") == "A model's summary."
    assert unsaid(PAGE, PAGE) == ""


def test_the_kept_up_page_is_named_and_keyed_beside_the_users() -> None:
    assert kept_up_title("Priya Raman") == "Priya Raman" + KEPT_UP_TITLE
    assert len(kept_up_title("x" * MAX_TITLE_CHARS)) == MAX_TITLE_CHARS
    key = kept_up_identity("abc")
    assert is_kept_up_identity(key) and not is_kept_up_identity("abc")


def test_an_edited_page_stays_the_users_and_a_page_beside_it_grows(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    assert node.notebook.edit(note_id, body="Priya: met at the climbing gym.\n- Lives in Leeds")
    edited = node.notebook.get_clear(note_id)
    snapshot_mine = rows(node)
    later = Distilled(item.kind, item.identity_key, "Priya Raman", PAGE + "\n- Visiting in May")
    result = node.notebook.upsert_clear(later)
    assert result.outcome is UpsertOutcome.CREATED and result.note_id != note_id
    assert node.notebook.get_clear(note_id) == edited  # not a byte of the user's page moved
    beside = node.notebook.get_clear(result.note_id)
    assert beside.kind is NoteKind.PERSON and not beside.user_edited
    assert beside.title == kept_up_title("Priya Raman")
    assert beside.contact_id == edited.contact_id
    assert beside.body == (
        "Who they are\n- Works at Helix Bio\nOpen threads\n- Nothing open.\n- Visiting in May"
    )
    assert len(rows(node)) == len(snapshot_mine) + 1
    # The same findings again: a true no-op; new ones rewrite the page beside.
    snapshot = rows(node)
    assert node.notebook.upsert_clear(later).outcome is UpsertOutcome.UNCHANGED
    assert rows(node) == snapshot
    newer = Distilled(item.kind, item.identity_key, "Priya Raman", "Who they are\n- Lives in York")
    assert node.notebook.upsert_clear(newer) == type(result)(result.note_id, UpsertOutcome.UPDATED)
    assert node.notebook.get_clear(result.note_id).body == "Who they are\n- Lives in York"
    assert node.notebook.get_clear(note_id) == edited


def test_nothing_new_writes_nothing(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(note_id, body=PAGE + "\n- and my own line")
    snapshot = rows(node)
    assert node.notebook.upsert_clear(item).outcome is UpsertOutcome.KEPT_USER_EDIT
    assert rows(node) == snapshot


def test_an_edited_kept_up_page_and_a_deleted_page_are_left_alone(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(note_id, body="Mine.")
    beside = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(beside, body="Mine too.")
    snapshot = rows(node)
    other = Distilled(item.kind, item.identity_key, item.title, "Who they are\n- Lives in York")
    assert node.notebook.upsert_clear(other).outcome is UpsertOutcome.KEPT_USER_EDIT
    assert rows(node) == snapshot
    node.notebook.delete(note_id)
    snapshot = rows(node)
    assert node.notebook.upsert_clear(other).outcome is UpsertOutcome.KEPT_USER_EDIT
    assert rows(node) == snapshot


def test_showing_an_edited_page_names_the_page_beside_it(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(note_id, body="Mine.")
    shown = show_note(node.notebook, note_id, {}).splitlines()
    assert "what Pixie learns later goes to: Priya Raman · kept up to date by Pixie" in shown
    beside = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(beside, body="Mine too.")
    assert not any(
        "learns later" in line for line in show_note(node.notebook, beside, {}).splitlines()
    )
