"""The Notebook's command line, including every kind of bad input."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.cli import db_fingerprint, run_cli


def notes_fingerprint(data: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(data / "pixie.db")
    try:
        return con.execute("SELECT * FROM note ORDER BY n").fetchall()
    finally:
        con.close()


def cli(data: Path, *argv: str):  # type: ignore[no-untyped-def]
    return run_cli("--data", str(data), *argv)


def test_notebook_round_trip(data_dir: Path, tmp_path: Path) -> None:
    added = cli(
        data_dir,
        "notebook",
        "add",
        "--kind",
        "guidance",
        "--title",
        "Tone",
        "--body",
        "Keep it short.",
        "--tag",
        "style",
        "--json",
    )
    note_id = added.json()["id"]  # type: ignore[index]
    listed = cli(data_dir, "notebook", "list").out
    assert f"{note_id[:8]}  " in listed and "Guidance · Tone [style] (edited)" in listed
    assert "Keep it short." in cli(data_dir, "notebook", "show", note_id).out
    assert cli(data_dir, "notebook", "edit", note_id, "--body", "Keep it very short.").code == 0
    found = cli(data_dir, "notebook", "search", "short").out
    assert found.splitlines()[0] == '1 note matching "short":'
    assert "Guidance · Tone" in found
    export = tmp_path / "out"
    assert cli(data_dir, "notebook", "export", str(export)).code == 0
    (md,) = export.iterdir()
    assert "Keep it very short." in md.read_text()
    assert cli(data_dir, "notebook", "delete", note_id).code == 0
    assert cli(data_dir, "notebook", "list", "--json").json() == []


def test_pin_from_the_cli(data_dir: Path) -> None:
    event_id = cli(
        data_dir, "log", "add", "--kind", "post", "--text", "First snow!", "--contact", "Zoë"
    ).out.strip()
    pin = cli(data_dir, "pin", event_id, "--tag", "winter", "--json")
    assert pin.code == 0
    shown = cli(data_dir, "notebook", "show", pin.json()["id"]).out  # type: ignore[index]
    assert shown.startswith("Sparked by the user (remember this) · First snow!")
    assert "person: Zoë" in shown
    grep = cli(data_dir, "grep", "first snow", "--json").json()
    assert [h["kind"] for h in grep["hits"]] == ["spark", "post"]  # type: ignore[index]


def test_huddle_and_nudges_from_the_cli(data_dir: Path, tmp_path: Path) -> None:
    cli(data_dir, "contacts", "add", "Ada Lovelace", "--alias", "Ada")
    f = tmp_path / "h.json"
    f.write_text(json.dumps({"contact": "ada", "prep": ["ask"], "from_other_agents": ["CANARY"]}))
    rec = cli(data_dir, "huddle", "record", str(f), "--json")
    assert rec.code == 0 and len(rec.json()["ids"]) == 2  # type: ignore[index]
    out = cli(data_dir, "nudges").out
    assert "Check in with Ada Lovelace" in out and "CANARY" not in out
    assert cli(data_dir, "notebook", "list").out == ""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["notebook", "list", "--kind", "diary"], "unknown note kind"),
        (["notebook", "add", "--kind", "person", "--title", "t", "--body", "b"], "guidance or"),
        (["notebook", "add", "--kind", "guidance", "--title", "t" * 201, "--body", "b"], "title"),
        (["notebook", "add", "--kind", "guidance", "--title", "t", "--body", "b" * 40_000], "body"),
        (
            [
                "notebook",
                "add",
                "--kind",
                "guidance",
                "--title",
                "t",
                "--body",
                "b",
                "--tag",
                "a/b",
            ],
            "bad tag",
        ),
        (["notebook", "show", "01900000-0000-7000-8000-000000000000"], "no note with id"),
        (["notebook", "edit", "01900000-0000-7000-8000-000000000000", "--body", "x"], "no note"),
        (["notebook", "edit", "x"], "'x' is not a note id"),
        (["notebook", "delete", "nope"], "'nope' is not a note id"),
        (["notebook", "delete", "0190"], "no note with id 0190"),
        (["notebook", "show", "019"], "at least 4 characters"),
        (["notebook", "search", "x", "--days", "0"], "--days"),
        (["notebook", "search", "x", "--days", "soon"], "invalid int"),
        (["notebook", "search", "x" * 600], "longer than 512"),
        (["pin", "not-an-id"], "not an event id"),
        (["pin", "01900000-0000-7000-8000-000000000000"], "no event"),
        (["huddle", "record", "/no/such/file.json"], "cannot read"),
        (["huddle", "record", "x", "--zone", "public"], "invalid choice"),
    ],
)
def test_bad_notebook_input_changes_nothing(data_dir: Path, argv: list[str], needle: str) -> None:
    before = (db_fingerprint(data_dir), notes_fingerprint(data_dir))
    res = cli(data_dir, *argv)
    assert res.code == 2, res
    assert needle in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert (db_fingerprint(data_dir), notes_fingerprint(data_dir)) == before


@pytest.mark.parametrize(
    "content",
    [
        "{",
        "[]",
        '{"contact": "a"}',
        '{"contact": "a", "prep": "not a list"}',
        '{"contact": "a", "prep": ["x"], "gossip": 1}',
        '{"prep": ["x"]}',
    ],
)
def test_bad_huddle_files(data_dir: Path, tmp_path: Path, content: str) -> None:
    f = tmp_path / "h.json"
    f.write_text(content)
    before = notes_fingerprint(data_dir)
    res = cli(data_dir, "huddle", "record", str(f))
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1
    assert notes_fingerprint(data_dir) == before


def test_missing_key_and_tampered_ciphertext_fail_clearly(data_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "h.json"
    f.write_text(json.dumps({"contact": "Ada", "prep": ["x"]}))
    assert cli(data_dir, "huddle", "record", str(f)).code == 0
    # tamper with the ciphertext: the nudge pass refuses it, in one line
    con = sqlite3.connect(data_dir / "pixie.db")
    con.execute(
        "UPDATE note SET ciphertext = CAST((CASE WHEN substr(ciphertext, 1, 1) = x'00'"
        " THEN x'01' ELSE x'00' END) || substr(ciphertext, 2) AS BLOB) WHERE zone = 'sealed'"
    )
    con.commit()
    con.close()
    res = cli(data_dir, "nudges")
    assert res.code == 2 and "failed authentication" in res.err
    # remove the key: writing to the sealed zone is refused, nothing is written
    for key_file in Path(os.environ["PIXIE_KEYS"]).iterdir():
        key_file.unlink()
    before = notes_fingerprint(data_dir)
    res = cli(data_dir, "huddle", "record", str(f))
    assert res.code == 2 and "missing from the key store" in res.err
    assert notes_fingerprint(data_dir) == before
    # the clear zone is unaffected
    assert cli(data_dir, "notebook", "list").code == 0


def test_export_refuses_a_non_empty_directory(data_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "full"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    res = cli(data_dir, "notebook", "export", str(target))
    assert res.code == 2 and "not an empty directory" in res.err
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
