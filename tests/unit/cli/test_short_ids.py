"""Short ids: lists show each note's id cut to its shortest unique prefix
(8 characters at least), and every command taking an id takes any unique
prefix; an ambiguous one lists the candidates and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.shortids import resolve_event_id, resolve_note_id, short_forms
from tests.support.cli import run_cli


def test_short_forms_are_the_shortest_unique_prefixes() -> None:
    ids = ["0193aaaa-0000-7000", "0193aaaa-0001-7000", "0194bbbb-0000-7000"]
    assert short_forms(ids) == {
        "0193aaaa-0000-7000": "0193aaaa-0000",
        "0193aaaa-0001-7000": "0193aaaa-0001",
        "0194bbbb-0000-7000": "0194bbbb",
    }
    assert short_forms(["abc"], minimum=8) == {"abc": "abc"}


@pytest.fixture
def notes(node: Node) -> list[str]:
    made = []
    for i in range(3):
        r = node.notebook.upsert_clear(
            Distilled(NoteKind.CONVERSATION_DIGEST, f"t{i}", "Lunch plans", f"body {i}",
                      None, (), source_ref=f"thread-{i}")
        )  # fmt: skip
        made.append(r.note_id)
    return made


def test_list_shows_short_ids_that_commands_accept(
    node: Node, data_dir: Path, notes: list[str]
) -> None:
    out = run_cli("--data", str(data_dir), "notebook", "list")
    assert out.code == 0, out.err
    lines = out.out.splitlines()
    shown = {line.split()[0] for line in lines}
    assert len(shown) == 3 and all(8 <= len(s) < 36 for s in shown)
    # Three notes titled alike are told apart by their sources.
    assert {line.rsplit("(", 1)[-1] for line in lines} == {
        "from thread-0)",
        "from thread-1)",
        "from thread-2)",
    }
    for short in shown:
        got = run_cli("--data", str(data_dir), "notebook", "show", short, "--json")
        assert got.code == 0, got.err
        full = got.json()["id"]  # type: ignore[index]
        assert isinstance(full, str) and full.startswith(short)
    victim = sorted(shown)[0]
    gone = run_cli("--data", str(data_dir), "notebook", "delete", victim)
    assert gone.code == 0 and gone.out.split()[0] in notes  # the full id is reported


def test_an_ambiguous_prefix_lists_candidates_and_changes_nothing(
    node: Node, data_dir: Path
) -> None:
    # Events appended together have time-ordered ids sharing their first characters.
    at = 1_700_000_000_000_000
    ids = node.log.append([NewEvent(EventKind.MESSAGE, at + i, f"m{i}") for i in range(3)]).ids
    common = ids[0][:8]
    assert all(i.startswith(common) for i in ids)
    before = len(node.notebook.clear_view().clear_notes())
    out = run_cli("--data", str(data_dir), "pin", common)
    assert out.code == 2
    assert "is the start of more than one event id" in out.err
    assert all(i in out.err for i in ids)
    assert len(node.notebook.clear_view().clear_notes()) == before


def test_sealed_and_deleted_notes_are_never_candidates(node: Node, notes: list[str]) -> None:
    sealed = node.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="s", body="secret")
    with pytest.raises(NotFound):
        resolve_note_id(node.db, sealed)
    node.notebook.delete(notes[0])
    with pytest.raises(NotFound):
        resolve_note_id(node.db, notes[0])
    assert resolve_note_id(node.db, notes[1].upper()[:20]) == notes[1]
    with pytest.raises(BadInput, match="not a note id"):
        resolve_note_id(node.db, "0193%")


def test_pin_takes_an_event_prefix(node: Node, data_dir: Path) -> None:
    result = node.log.append([NewEvent(EventKind.MESSAGE, 1_700_000_000_000_000, "hello")])
    (event_id,) = result.ids
    assert resolve_event_id(node.db, event_id[:13]) == event_id
    out = run_cli("--data", str(data_dir), "pin", event_id[:13])
    assert out.code == 0, out.err
