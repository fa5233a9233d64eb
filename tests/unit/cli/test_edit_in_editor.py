"""``pixie notebook edit ID`` with no flags: the note in $VISUAL/$EDITOR,
applied with the same guards and no-op rule as the flags; an unchanged file
or a failed editor changes nothing; ``--body -`` reads standard input."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.notes import NoteKind
from tests.support.cli import run_cli

# A stand-in editor: does what FAKE_EDIT says to the file it is given.
FAKE = """
import os, sys
path = sys.argv[-1]
text = open(path, encoding="utf-8").read()
mode = os.environ["FAKE_EDIT"]
if mode == "fail":
    sys.exit(3)
if mode == "retitle":
    text = text.replace("title: Priya Raman", "title: Priya R.")
    text = text.replace("tags: work", "tags: work, family")
    text = text.replace("Lead data engineer", "Head of data")
if mode == "garble":
    text = text.replace("title: Priya Raman", "name = Priya")
if mode == "touch":
    text = text.replace("\\n", "\\r\\n")  # an editor that saves CR LF: no real change
open(path, "w", encoding="utf-8", newline="").write(text)
"""


@pytest.fixture
def note(node: Node) -> str:
    result = node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "priya", "Priya Raman", "Lead data engineer at Helix Bio.",
                  None, ("work",))
    )  # fmt: skip
    return result.note_id


@pytest.fixture
def fake_editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake_editor.py"
    script.write_text(FAKE)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")


def shown(node: Node, note_id: str) -> tuple[str, tuple[str, ...], str | None, bool]:
    got = node.notebook.clear_view().get_clear(note_id)
    assert got is not None
    return got.title, tuple(got.tags), got.body, got.user_edited


@pytest.mark.usefixtures("fake_editor")
def test_an_edit_in_the_editor_is_applied_and_marks_the_note_yours(
    node: Node, data_dir: Path, note: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EDIT", "retitle")
    out = run_cli("--data", str(data_dir), "notebook", "edit", note)
    assert out.code == 0, out.err
    assert out.out.strip() == f"{note} edited"
    assert shown(node, note) == ("Priya R.", ("work", "family"), "Head of data at Helix Bio.", True)


@pytest.mark.usefixtures("fake_editor")
@pytest.mark.parametrize("mode", ["none", "touch"])
def test_an_unchanged_file_changes_nothing(
    node: Node, data_dir: Path, note: str, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    before = shown(node, note)
    monkeypatch.setenv("FAKE_EDIT", mode)
    out = run_cli("--data", str(data_dir), "notebook", "edit", note)
    assert out.code == 0 and out.out.strip() == f"{note} unchanged"
    assert shown(node, note) == before


@pytest.mark.usefixtures("fake_editor")
@pytest.mark.parametrize(
    ("mode", "message"),
    [("fail", "the editor exited with status 3; nothing changed"), ("garble", "line 2: expected")],
)
def test_a_failed_editor_or_a_garbled_file_changes_nothing(
    node: Node, data_dir: Path, note: str, monkeypatch: pytest.MonkeyPatch, mode: str, message: str
) -> None:
    before = shown(node, note)
    monkeypatch.setenv("FAKE_EDIT", mode)
    out = run_cli("--data", str(data_dir), "notebook", "edit", note)
    assert out.code == 2 and message in out.err, out.err
    assert shown(node, note) == before


def test_no_editor_set_says_what_to_do(
    data_dir: Path, note: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    out = run_cli("--data", str(data_dir), "notebook", "edit", note)
    assert out.code == 2 and "set $VISUAL or $EDITOR" in out.err


def test_body_from_stdin(node: Node, data_dir: Path, note: str) -> None:
    out = run_cli(
        "--data", str(data_dir), "notebook", "edit", note, "--body", "-",
        stdin=b"Moved to Porto in May.\n",
    )  # fmt: skip
    assert out.code == 0, out.err
    assert shown(node, note)[2] == "Moved to Porto in May."
    bad = run_cli(
        "--data", str(data_dir), "notebook", "edit", note, "--body", "-", stdin=b"caf\xe9"
    )
    assert bad.code == 2 and "not UTF-8" in bad.err
    assert shown(node, note)[2] == "Moved to Porto in May."
