"""Search by meaning beside the term ranking: the term ranking is unchanged
(which notes match, their scores, the order of different scores); meaning
breaks ties and fills the places term matches leave, after them; vectors are
kept for clear notes only, follow edits and deletions, and can be turned off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import BadInput
from pixie.device.node.keyed import Node
from pixie.device.notebook import meaning, nearby
from pixie.device.notebook.clear import Distilled
from pixie.device.notebook.clearview import ClearNotebook
from pixie.device.store import meanings
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind

pytestmark = pytest.mark.skipif(not meaning.available(), reason="the embedding model is missing")

NOTES = [
    ("Maria", "She said she'd love that teal Le Creuset teapot for her kitchen."),
    ("Boiler", "The boiler needs servicing before winter; the engineer comes Tuesday."),
    ("Climbing", "Climbing at the Depot on Thursday with Priya."),
    ("Dentist", "Dentist check-up moved to 14 December at 09:30."),
    ("Running", "Ran the Leeds 10k in 52 minutes, knee a bit sore."),
    ("Priya moves", "Priya moved to Bristol in March for the new job."),
]


@pytest.fixture
def book(node: Node, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    monkeypatch.setenv(nearby.ENV, "1")
    for i, (title, body) in enumerate(NOTES):
        node.notebook.upsert_clear(
            Distilled(NoteKind.CONVERSATION_DIGEST, f"n:{i}", title, body, tags=("life",))
        )
    yield node


def titles(found: list[object]) -> list[str]:
    return [s.note.title for s in found]  # type: ignore[attr-defined]


def test_term_matches_keep_the_term_ranking(book: Node) -> None:
    plain = ClearNotebook(book.db, meaning=False)
    near = ClearNotebook(book.db, meaning=True)
    for query in ("climbing thursday", "dentist", "priya", "life", "teapot kitchen boiler"):
        terms = plain.search_clear(query)
        both = near.search_clear(query)
        # Every term match comes first, exactly as the term ranking has it.
        assert both[: len(terms)] == terms
        assert all(not s.by_meaning for s in both[: len(terms)])
        assert all(s.by_meaning and s.score == 0 for s in both[len(terms) :])


def test_meaning_fills_the_places_terms_leave(book: Node) -> None:
    near = ClearNotebook(book.db, meaning=True)
    found = near.search_clear("where does Priya live now")
    matched = [s for s in found if not s.by_meaning]
    assert sorted(titles(matched)) == ["Climbing", "Priya moves"]  # both name Priya
    assert found[: len(matched)] == matched  # term matches first, then the rest
    assert len(found) > len(matched) and all(s.score == 0 for s in found[len(matched) :])
    # A query no note shares a word with still finds the note it means.
    assert titles(near.search_clear("where is Priya living"))[0] == "Priya moves"
    # Off: nothing but term matches.
    assert titles(ClearNotebook(book.db, meaning=False).search_clear("gift")) == []


def test_meaning_respects_the_filters(book: Node) -> None:
    other = book.notebook.upsert_clear(
        Distilled(NoteKind.CONVERSATION_DIGEST, "n:x", "Shelf", "A new bookshelf.", tags=("home",))
    )
    near = ClearNotebook(book.db, meaning=True)
    found = near.search_clear("gift ideas", topic="home")
    assert [s.note.id for s in found] in ([], [other.note_id])


def test_vectors_are_for_clear_notes_and_follow_changes(book: Node) -> None:
    sealed_text = "A sealed note about a secret anniversary plan"
    book.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="Prep", body=sealed_text)
    assert nearby.refresh(book.db) == len(NOTES)
    with book.db.reading(plain=True) as conn:
        stored = {n for (n,) in conn.execute("SELECT note_n FROM note_meaning")}
        clear = {
            n for (n,) in conn.execute("SELECT n FROM note WHERE zone = 'clear' AND NOT deleted")
        }
        sealed = {n for (n,) in conn.execute("SELECT n FROM note WHERE zone = 'sealed'")}
    assert stored == clear and not stored & sealed and sealed
    assert nearby.refresh(book.db) == 0  # nothing changed, nothing embedded
    note = book.notebook.clear_notes()[0]
    book.notebook.edit(note.id, body="Completely different words now.")
    assert nearby.refresh(book.db) == 1
    book.notebook.delete(note.id)
    nearby.refresh(book.db)
    with book.db.reading(plain=True) as conn:
        assert len(meanings.every(conn, meaning.MODEL_NAME)) == len(NOTES) - 1


def test_turned_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(nearby.ENV, "off")
    assert not nearby.enabled()
    monkeypatch.setenv(nearby.ENV, "1")
    assert nearby.enabled()


def test_a_deleted_note_loses_its_vector_at_once(
    book: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    nearby.refresh(book.db)
    note = book.notebook.clear_notes()[0]
    monkeypatch.setenv(nearby.ENV, "0")  # even with meaning off afterwards
    book.notebook.delete(note.id)
    with book.db.reading(plain=True) as conn:
        (n,) = conn.execute("SELECT n FROM note WHERE id = ?", (note.id,)).fetchone()
        assert conn.execute("SELECT 1 FROM note_meaning WHERE note_n = ?", (n,)).fetchone() is None


def test_a_note_written_with_an_older_stamp_is_embedded_again(book: Node) -> None:
    # A note merged from a sibling keeps the sibling's stamp, which may be
    # older than the newest here: every write counts, whatever its stamp.
    nearby.refresh(book.db)
    note = book.notebook.clear_notes()[-1]  # the oldest
    with book.db.writing() as session:
        conn = session.connection().connection.driver_connection
        (n, stamp) = conn.execute(
            "SELECT n, updated_at FROM note WHERE id = ?", (note.id,)
        ).fetchone()
        conn.execute(
            "UPDATE note SET body = 'Completely new words.', updated_at = ? WHERE n = ?",
            (stamp[:-1] + chr(ord(stamp[-1]) + 1), n),
        )
    assert nearby.refresh(book.db) == 1


async def test_turned_off_by_the_data_dir_s_settings(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(nearby.ENV, raising=False)
    (data_dir / "config.toml").write_text('[search]\nmeaning = "off"\n')
    with Node.open(data_dir) as node:
        view = node.notebook.clear_view()
        assert view.meaning_off() and not view.meaning_on()
        for i, (title, body) in enumerate(NOTES):
            node.notebook.upsert_clear(
                Distilled(NoteKind.CONVERSATION_DIGEST, f"n:{i}", title, body, tags=("life",))
            )
        found = view.search_clear("where does Priya live now")
        assert found and not any(s.by_meaning for s in found)  # the term ranking alone
        node.log.append(
            [
                NewEvent(
                    EventKind.MESSAGE, 1_790_000_000_000_000, "Lovely to see you", contact="Ada"
                )
            ],
            now=0,
        )
        router = LLMRouter((OfflineDistiller(),))
        report = await NotetakingService(node.db, node.notebook, router).run_pass()
        assert report.written and report.embedded == 0
        with node.db.reading(plain=True) as conn:
            assert meanings.every(conn, meaning.MODEL_NAME) == []  # nothing embedded


def test_a_setting_that_is_neither_on_nor_off_is_refused(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(nearby.ENV, raising=False)  # the environment would win
    (data_dir / "config.toml").write_text('[search]\nmeaning = "sometimes"\n')
    with Node.open(data_dir) as node:  # opening reads no setting
        view = node.notebook.clear_view()
        with pytest.raises(BadInput, match="search meaning must be on or off"):
            view.search_clear("teapot")
        with pytest.raises(BadInput, match="search meaning must be on or off"):
            view.meaning_off()
