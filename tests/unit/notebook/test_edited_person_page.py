"""A person page the user edited keeps their text and keeps growing below it."""

from __future__ import annotations

import sqlite3

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled, UpsertOutcome
from pixie.device.store.notes import (
    DISTILLED_MARKER,
    MAX_BODY_CHARS,
    NoteKind,
    distilled_part,
    user_part,
    with_distilled,
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


def test_the_users_text_stays_and_only_what_it_does_not_say_is_added() -> None:
    mine = "My notes on Priya.\n- Works at Helix Bio"
    body = with_distilled(mine, PAGE)
    assert body == "\n".join(
        [
            mine,
            "",
            DISTILLED_MARKER,
            "Who they are",
            "- Lives in Leeds",
            "Open threads",
            "- Nothing open.",
        ]
    )
    assert user_part(body) == mine
    assert distilled_part(body).startswith("Who they are\n- Lives in Leeds")


def test_a_heading_whose_lines_are_all_said_goes_and_a_paragraph_stays() -> None:
    mine = "- works at  HELIX bio\n- Lives in Leeds"
    assert (
        with_distilled(mine, PAGE) == f"{mine}\n\n{DISTILLED_MARKER}\nOpen threads\n- Nothing open."
    )
    assert (
        with_distilled("Mine.", "A model's summary.")
        == f"Mine.\n\n{DISTILLED_MARKER}\nA model's summary."
    )


def test_nothing_new_leaves_the_users_text_alone() -> None:
    assert with_distilled(PAGE, PAGE) == PAGE


def test_a_later_pass_replaces_its_section_and_never_stacks_markers() -> None:
    first = with_distilled("Mine.", PAGE)
    second = with_distilled(first, "Who they are\n- Lives in York")
    assert second == f"Mine.\n\n{DISTILLED_MARKER}\nWho they are\n- Lives in York"
    assert second.count(DISTILLED_MARKER) == 1


def test_the_section_is_cut_from_the_end_to_fit() -> None:
    mine = "x" * (MAX_BODY_CHARS - 200)
    many = "Who they are\n" + "\n".join(f"- fact number {i}" for i in range(100))
    body = with_distilled(mine, many)
    assert len(body) <= MAX_BODY_CHARS
    assert user_part(body) == mine
    assert distilled_part(body).startswith("Who they are\n- fact number 0")
    assert with_distilled("y" * MAX_BODY_CHARS, many) == "y" * MAX_BODY_CHARS


def test_an_edited_page_grows_below_the_users_words(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    assert node.notebook.edit(note_id, body="Priya: met at the climbing gym.", title="Priya")
    edited = node.notebook.get_clear(note_id)
    later = Distilled(item.kind, item.identity_key, "Priya Raman", PAGE + "\n- Visiting in May")
    result = node.notebook.upsert_clear(later)
    assert result.outcome is UpsertOutcome.UPDATED
    grown = node.notebook.get_clear(note_id)
    assert grown.body is not None and user_part(grown.body) == "Priya: met at the climbing gym."
    assert "- Visiting in May" in distilled_part(grown.body)
    # Title, tags and link stay the user's; the page stays theirs.
    assert (grown.title, grown.tags, grown.contact_id) == ("Priya", edited.tags, edited.contact_id)
    assert grown.user_edited and grown.updated_at > edited.updated_at
    # The same findings again: a true no-op.
    snapshot = rows(node)
    assert node.notebook.upsert_clear(later).outcome is UpsertOutcome.UNCHANGED
    assert rows(node) == snapshot


def test_the_users_next_edit_above_the_line_is_kept_through_later_passes(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.edit(note_id, body="Old words.")
    node.notebook.upsert_clear(item)
    body = node.notebook.get_clear(note_id).body or ""
    node.notebook.edit(note_id, body=body.replace("Old words.", "New words."))
    node.notebook.upsert_clear(
        Distilled(item.kind, item.identity_key, item.title, "Who they are\n- Lives in York")
    )
    body = node.notebook.get_clear(note_id).body or ""
    assert user_part(body) == "New words."
    assert distilled_part(body) == "Who they are\n- Lives in York"


def test_a_deleted_page_and_other_edited_kinds_are_kept_as_they_are(node: Node) -> None:
    item = page(node)
    note_id = node.notebook.upsert_clear(item).note_id
    node.notebook.delete(note_id)
    snapshot = rows(node)
    assert node.notebook.upsert_clear(item).outcome is UpsertOutcome.KEPT_USER_EDIT
    assert rows(node) == snapshot
