"""The pixie command line: happy paths and every kind of bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pixie.device.agent.grep import EMPTY_MEMORY
from pixie.device.ingest.jsonl import MAX_LINE_BYTES
from tests.support.cli import db_fingerprint, run_cli


def test_init_log_and_grep_round_trip(tmp_path: Path) -> None:
    d = str(tmp_path / "d")
    assert run_cli("--data", d, "init", "--name", "phone").code == 0
    assert run_cli("--data", d, "grep", "x").out.strip() == EMPTY_MEMORY
    added = run_cli(
        "--data",
        d,
        "log",
        "add",
        "--kind",
        "message",
        "--text",
        "Lyon marathon in May",
        "--contact",
        "Ada",
        "--at",
        "2025-03-01T10:00:00+01:00",
        "--json",
    )
    assert added.code == 0, added.err
    event_id = added.json()["id"]  # type: ignore[index]
    res = run_cli("grep", "--data", d, "MARATHON", "--json")
    payload = res.json()
    assert payload["hits"] == [  # type: ignore[index]
        {
            "event_id": event_id,
            "kind": "message",
            "at": "2025-03-01T09:00:00Z",
            "contact": "Ada",
            "from_me": False,
            "snippet": "Lyon marathon in May",
        }
    ]
    text = run_cli("--data", d, "grep", "marathon").out
    assert text.splitlines()[1] == "- 2025-03-01 · message · Ada: Lyon marathon in May"


def test_data_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIXIE_DATA", str(tmp_path / "env"))
    assert run_cli("init").code == 0
    assert (tmp_path / "env" / "pixie.db").is_file()
    assert run_cli("status", "--json").json()["events"] == 0  # type: ignore[index]


def test_import_reports_and_is_idempotent(tmp_path: Path, data_dir: Path) -> None:
    lines = [
        {
            "kind": "message",
            "at": "2025-01-01T00:00:00Z",
            "text": "hello",
            "contact": "Zoë",
            "thread": "t-zoe",
            "id": "0190a1b2-0000-7000-8000-000000000001",
        },
        {"kind": "journal", "at": "2025-01-02T00:00:00Z", "text": "I live in Porto"},
    ]
    f = tmp_path / "life.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    first = run_cli("--data", str(data_dir), "log", "import", str(f), "--json")
    counts = ("imported", "already_present", "new_contacts")
    assert {k: first.json()[k] for k in counts} == {
        "imported": 2,
        "already_present": 0,
        "new_contacts": 1,
    }
    again = run_cli("--data", str(data_dir), "log", "import", "-", "--json", stdin=f.read_bytes())
    # the line with an id keeps it; the one without gets an id derived from
    # what it says, so the second import adds nothing
    assert {k: again.json()[k] for k in counts} == {
        "imported": 0,
        "already_present": 2,
        "new_contacts": 0,
    }


GOOD = '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "fine"}'


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (GOOD + "\n{not json\n", "line 2: not valid JSON"),
        (
            GOOD + '\n{"kind": "memo", "at": "2025-01-01T00:00:00Z", "text": "x"}\n',
            "line 2: unknown kind 'memo'",
        ),
        ('{"kind": "journal", "at": "yesterday", "text": "x"}\n', "line 1: not an ISO 8601"),
        ('{"kind": "journal", "at": "2025-01-01T00:00:00", "text": "x"}\n', "no UTC offset"),
        ('{"kind": "journal", "at": "3025-01-01T00:00:00Z", "text": "x"}\n', "outside"),
        ('{"kind": "journal", "text": "x"}\n', "line 1: missing field 'at'"),
        ('{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": ""}\n', "text is empty"),
        (
            '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "x", "mood": 1}\n',
            "unknown field 'mood'",
        ),
        (
            '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "x", "id": "nope"}\n',
            "not a UUID",
        ),
        (
            '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "x", "contact": 3}\n',
            "contact name must be a string",
        ),
        ('["a list"]\n', "must be a JSON object"),
        (
            GOOD
            + "\n"
            + '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "'
            + "x" * (MAX_LINE_BYTES + 10)
            + '"}\n',
            "line 2: longer than",
        ),
        (
            '{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "' + "x" * 70_000 + '"}\n',
            "longer than 65536",
        ),
        ("[" * 100_000 + "\n", "line 1"),
    ],
)
def test_bad_import_writes_nothing(
    tmp_path: Path, data_dir: Path, content: str, needle: str
) -> None:
    run_cli("--data", str(data_dir), "log", "add", "--kind", "journal", "--text", "before")
    before = db_fingerprint(data_dir)
    f = tmp_path / "bad.jsonl"
    f.write_text(content, encoding="utf-8")
    res = run_cli("--data", str(data_dir), "log", "import", str(f))
    assert res.code == 2
    assert needle in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert res.out == ""
    assert db_fingerprint(data_dir) == before


def test_non_utf8_import(tmp_path: Path, data_dir: Path) -> None:
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(b'{"kind": "journal", "at": "2025-01-01T00:00:00Z", "text": "caf\xe9"}\n')
    res = run_cli("--data", str(data_dir), "log", "import", str(f))
    assert res.code == 2 and "not valid UTF-8" in res.err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["log", "add", "--kind", "journal"], "--text"),
        (["log", "add", "--kind", "gossip", "--text", "x"], "unknown kind"),
        (
            ["log", "add", "--kind", "journal", "--text", "x", "--at", "2025-13-01T00:00:00Z"],
            "--at",
        ),
        (["log", "add", "--kind", "journal", "--text", "   "], "text is empty"),
        (["log", "add", "--kind", "journal", "--text", "x", "--contact", ""], "empty"),
        (["log", "import", "/definitely/not/here.jsonl"], "cannot read"),
        (["grep", ""], "query is empty"),
        (["grep", "x" * 600], "longer than 512"),
        (["grep", "a\nb"], "one line"),
        (["contacts", "add", "x" * 300], "longer than 200"),
        (["frobnicate"], "invalid choice"),
        (["grep", "x", "--colour"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_change_nothing(data_dir: Path, argv: list[str], needle: str) -> None:
    before = db_fingerprint(data_dir)
    res = run_cli("--data", str(data_dir), *argv)
    assert res.code == 2, res
    assert needle in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert db_fingerprint(data_dir) == before


def test_missing_and_corrupt_data_dir(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    res = run_cli("--data", str(missing), "log", "add", "--kind", "journal", "--text", "x")
    assert res.code == 2 and "pixie init" in res.err
    assert not missing.exists()

    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    junk = os.urandom(8192)
    (corrupt / "pixie.db").write_bytes(junk)
    for argv in (["grep", "x"], ["log", "add", "--kind", "journal", "--text", "x"], ["status"]):
        res = run_cli("--data", str(corrupt), *argv)
        assert res.code == 2, argv
        assert len(res.err.strip().splitlines()) == 1
    assert (corrupt / "pixie.db").read_bytes() == junk

    afile = tmp_path / "afile"
    afile.write_text("x")
    assert run_cli("--data", str(afile), "init").code == 2
    assert afile.read_text() == "x"


def test_init_twice_is_refused(data_dir: Path) -> None:
    before = db_fingerprint(data_dir)
    res = run_cli("--data", str(data_dir), "init")
    assert res.code == 2 and "already" in res.err
    assert db_fingerprint(data_dir) == before


def test_real_console_script(tmp_path: Path) -> None:
    """The installed entry point, as a separate process."""
    env = {**os.environ, "PIXIE_DATA": str(tmp_path / "d")}
    cmd = [sys.executable, "-m", "pixie.entry.main"]
    subprocess.run([*cmd, "init"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        [*cmd, "log", "import", "-"],
        env=env,
        input=GOOD.encode(),
        check=True,
        capture_output=True,
    )
    assert b"imported 1 event (" in out.stdout
    bad = subprocess.run(
        [*cmd, "log", "import", "-"], env=env, input=b"{", capture_output=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.decode().startswith("pixie: error: line 1")
