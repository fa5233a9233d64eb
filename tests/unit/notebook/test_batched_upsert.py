"""upsert_many writes a batch through the driver: the same outcomes, rows,
search index, state digest and marks as the same upserts made one by one."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled, UpsertOutcome, UpsertResult
from pixie.device.store.notes import NoteKind, content_hash, identity_note_id, kept_up_title
from pixie.device.store.provision import create_data_dir

# Columns that do not depend on when a version was written (stamps differ
# between two stores, everything else must not).
_SAME = (
    "id, zone, content_hash, deleted, user_edited, kind, identity_key, title, body, "
    "contact_id, tags, source_ref, about_date, holder"
)


def _rows(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute(f"SELECT n, {_SAME} FROM note ORDER BY n").fetchall()
    finally:
        con.close()


def _all(node: Node, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _digest(item: int, body: str, *, kind: NoteKind = NoteKind.CALL_DIGEST) -> Distilled:
    return Distilled(kind, f"call:{item}", f"Call {item}", body, None, ("work",), f"call:{item}")


def _one_by_one(node: Node, items: Sequence[Distilled]) -> list[UpsertResult]:
    return [node.notebook.upsert_clear(item) for item in items]


def _mixed(page_id: str) -> list[Distilled]:
    """New notes, an identity twice (created then changed, then unchanged),
    an edited person page whose news goes to the page beside it."""
    return [
        _digest(1, "Talked about the Lyon marathon."),
        _digest(2, "Booked the flight."),
        _digest(1, "Talked about the Lyon marathon and the hotel."),
        _digest(1, "Talked about the Lyon marathon and the hotel."),
        Distilled(NoteKind.PERSON, page_id, "Ada", "- Runs marathons\n- Likes Lyon", page_id),
        _digest(3, "Rent is due."),
        Distilled(NoteKind.PERSON, page_id, "Ada", "- Runs marathons\n- Likes Lyon", page_id),
    ]


def _prepared(node: Node) -> str:
    """A data dir with an edited person page and a stored digest to change."""
    cid, _ = node.contacts.add("Ada Lovelace", [], now=0)
    page = node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, cid, "Ada", "Old summary.", cid)
    ).note_id
    node.notebook.edit(page, body="My friend Ada.\n- Runs marathons")
    node.notebook.upsert_clear(_digest(2, "Thinking about a flight."))
    return cid


def _node(where: Path) -> Node:
    create_data_dir(where, name=where.name, role="device")
    return Node.open(where)


def _comparable(node: Node, contact: str) -> list[tuple[object, ...]]:
    """The rows with the contact's id (and so its page's id) made a placeholder."""
    return [tuple("C" if v == contact else v for v in row[1:]) for row in _rows(node)]


def test_a_batch_ends_where_the_same_upserts_one_by_one_end(tmp_path: Path) -> None:
    with _node(tmp_path / "single") as single, _node(tmp_path / "batched") as batched:
        single_cid, batched_cid = _prepared(single), _prepared(batched)
        one = _one_by_one(single, _mixed(single_cid))
        many = batched.notebook.upsert_many(_mixed(batched_cid))
        assert (
            [r.outcome for r in one]
            == [r.outcome for r in many]
            == [
                UpsertOutcome.CREATED,
                UpsertOutcome.UPDATED,
                UpsertOutcome.UPDATED,
                UpsertOutcome.UNCHANGED,
                UpsertOutcome.CREATED,
                UpsertOutcome.CREATED,
                UpsertOutcome.UNCHANGED,
            ]
        )
        assert [r.note_id for r in one][:4] == [r.note_id for r in many][:4]
        single_page = single.notebook.get_clear(one[4].note_id)
        batched_page = batched.notebook.get_clear(many[4].note_id)
        assert single_page.body == batched_page.body
        rows_single = _comparable(single, single_cid)
        rows_batched = _comparable(batched, batched_cid)
        page_ids = (one[4].note_id, many[4].note_id)
        assert [r for r in rows_single if r[0] not in page_ids] == [
            r for r in rows_batched if r[0] not in page_ids
        ]
        # The user's page stays theirs; what it does not say went beside it.
        assert not batched_page.user_edited and batched_page.body == "- Likes Lyon"
        assert batched_page.title == kept_up_title("Ada")
        mine = batched.notebook.get_clear(identity_note_id(NoteKind.PERSON.value, batched_cid))
        assert mine.user_edited and mine.body == "My friend Ada.\n- Runs marathons"
        for node in (single, batched):
            assert node.digest() == node.recompute_digest()


def test_the_search_index_follows_batched_inserts_and_updates(node: Node) -> None:
    node.notebook.upsert_many([_digest(i, f"Note {i} about pottery.") for i in range(5)])
    assert len(node.notebook.search_clear("pottery")) == 5
    node.notebook.upsert_many([_digest(i, f"Note {i} about climbing.") for i in range(3)])
    assert len(node.notebook.search_clear("pottery")) == 2
    assert len(node.notebook.search_clear("climbing")) == 3
    assert _all(node, "SELECT count(*) FROM note_tag") == [(5,)]
    assert node.digest() == node.recompute_digest()


def test_a_batch_of_unchanged_notes_leaves_no_trace(node: Node) -> None:
    items = [_digest(i, f"Note {i}.") for i in range(20)]
    node.notebook.upsert_many(items)
    before = (
        _all(node, "SELECT * FROM note ORDER BY n"),
        _all(node, "SELECT * FROM note_mark"),
        node.digest(),
    )
    results = node.notebook.upsert_many(items)
    assert {r.outcome for r in results} == {UpsertOutcome.UNCHANGED}
    after = (
        _all(node, "SELECT * FROM note ORDER BY n"),
        _all(node, "SELECT * FROM note_mark"),
        node.digest(),
    )
    assert after == before


def test_a_batch_is_all_or_nothing(node: Node) -> None:
    node.notebook.upsert_clear(_digest(1, "First."))
    before = (_all(node, "SELECT * FROM note ORDER BY n"), node.digest())

    def then(_session: object, _results: object) -> None:
        raise RuntimeError("the watermark could not be written")

    with pytest.raises(RuntimeError):
        node.notebook.upsert_with(
            lambda _s: [_digest(1, "Changed."), _digest(2, "New.")],
            then,  # type: ignore[arg-type]
        )
    assert (_all(node, "SELECT * FROM note ORDER BY n"), node.digest()) == before


def test_a_new_version_of_an_offloaded_note_queues_the_release(node: Node) -> None:
    note_id = node.notebook.upsert_clear(_digest(1, "Parked body.")).note_id
    holder = "ab" * 32
    with node.db.writing() as session:
        session.connection().exec_driver_sql(
            "UPDATE note SET body = NULL, holder = ? WHERE id = ?", (holder, note_id)
        )
    same = node.notebook.upsert_many([_digest(1, "Parked body.")])
    assert same[0].outcome is UpsertOutcome.UNCHANGED  # by the acknowledged hash
    (changed,) = node.notebook.upsert_many([_digest(1, "A new body.")])
    assert changed.outcome is UpsertOutcome.UPDATED
    assert _all(node, "SELECT note_id, content_hash, holder FROM pending_release") == [
        (note_id, content_hash("Parked body."), holder)
    ]
    assert _all(node, f"SELECT body, holder FROM note WHERE id = '{note_id}'") == [
        ("A new body.", None)
    ]
    assert node.digest() == node.recompute_digest()
