"""Bad input of every kind: one line on stderr, exit status 2, nothing changed.

Each case here once ended otherwise: in a traceback, in a silent success, in
writing somewhere it should not, or in deleting what pixie had not made.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from pixie.device.cli import datadir as datadir_cli
from pixie.device.cli import nudges as nudges_cli
from pixie.device.errors import BadInput
from tests.support.cli import CliResult, run_cli


def files_state(data: Path) -> str:
    """The bytes of every file in the data dir but SQLite's shared-memory
    index (a reader may rewrite that), to show a refused command wrote nothing."""
    digest = hashlib.sha256()
    for f in sorted(data.iterdir()):
        if f.name.endswith("-shm"):
            continue
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def refused(res: CliResult, needle: str = "") -> None:
    assert res.code == 2, (res.code, res.err)
    assert res.err.startswith("pixie: error: "), res.err
    assert res.err.count("\n") == 1 and res.err.endswith("\n"), res.err
    assert needle in res.err, res.err


def cli(data: Path, *argv: str) -> CliResult:
    return run_cli("--data", str(data), *argv)


@pytest.fixture
def full_dir(data_dir: Path) -> Path:
    """A data dir with a contact, events and a note, all durably on disk."""
    assert cli(data_dir, "contacts", "add", "Ada Lovelace", "--alias", "Ada").code == 0
    for i in range(3):
        added = cli(
            data_dir, "log", "add", "--kind", "message", "--text", f"tea {i}", "--contact", "Ada"
        )
        assert added.code == 0, added.err
    note = ["notebook", "add", "--kind", "guidance", "--title", "T", "--body", "be brief"]
    assert cli(data_dir, *note).code == 0
    return data_dir


# -- notebook export never deletes what it did not make ------------------------------------


def test_export_leaves_an_existing_partial_directory_alone(full_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "out"
    theirs = tmp_path / "out.partial"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("precious")
    res = cli(full_dir, "notebook", "export", str(target))
    assert res.code == 0, res.err
    assert (theirs / "keep.txt").read_text() == "precious"
    assert len(list(target.iterdir())) == 1
    # Nothing of the export's own staging is left beside the target.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["data", "out", "out.partial"])


def test_a_failed_export_leaves_nothing_behind(full_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    refused(cli(full_dir, "notebook", "export", str(blocker / "deeper" / "out")), "cannot export")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# -- a data dir path is a path, never SQLite URI syntax -------------------------------------


@pytest.mark.parametrize(
    ("name", "decoy"),
    [
        ("victim.db?x", "victim.db"),  # '?' would end the path and start the URI's query
        ("notes#1", "notes"),  # '#' would start a fragment
        ("p%41q", "pAq"),  # '%41' would be decoded to 'A'
        ("x?mode=ro", "x"),
    ],
)
def test_a_data_dir_name_is_never_read_as_uri_syntax(tmp_path: Path, name: str, decoy: str) -> None:
    victim = tmp_path / decoy
    con = sqlite3.connect(victim)
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    victim_bytes = victim.read_bytes()
    data = tmp_path / name
    res = run_cli("--data", str(data), "init")
    assert res.code == 0, res.err
    assert (data / "pixie.db").is_file()
    assert cli(data, "log", "add", "--kind", "journal", "--text", "lighthouse").code == 0
    assert "lighthouse" in cli(data, "grep", "lighthouse").out
    assert victim.read_bytes() == victim_bytes


# -- nudges never name someone only sealed material knows -----------------------------------


def test_nudges_never_show_a_sealed_huddle_name_the_contact_book_lacks(
    data_dir: Path, tmp_path: Path
) -> None:
    f = tmp_path / "h.json"
    f.write_text(
        json.dumps(
            {"contact": "Quentin Zephyrine", "prep": ["ask"], "from_other_agents": ["CANARY"]}
        )
    )
    assert cli(data_dir, "huddle", "record", str(f)).code == 0
    for argv in (["nudges"], ["nudges", "--json"]):
        res = cli(data_dir, *argv)
        assert res.code == 0, res.err
        assert "Quentin" not in res.out and "Zephyrine" not in res.out, res.out
        assert "CANARY" not in res.out


# -- hostile files --------------------------------------------------------------------------

EVENT = '{"kind":"journal","at":"2024-01-01T00:00:00Z","text":"x"'
BIG_NUMBER = "1" * 5000


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (EVENT.replace('"x"', '"a\\ud800b"') + "}", "lone surrogate"),
        (EVENT + ',"contact":"Bo\\udc80"}', "lone surrogate"),
        (EVENT + ',"thread":"t\\udfff"}', "lone surrogate"),
        (EVENT + f',"from_me":{BIG_NUMBER}}}', "number too long"),
        (EVENT + ',"from_me":NaN}', "NaN"),
    ],
)
def test_a_hostile_event_file_is_refused_whole(
    full_dir: Path, tmp_path: Path, line: str, needle: str
) -> None:
    f = tmp_path / "events.jsonl"
    f.write_text(EVENT + "}\n" + line + "\n")
    before = files_state(full_dir)
    res = cli(full_dir, "log", "import", str(f))
    refused(res, "line 2")
    assert needle in res.err
    assert files_state(full_dir) == before


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"contact":"Bob\\udc80","prep":["x"]}', "lone surrogate"),
        ('{"contact":"Bob","prep":["x\\ud800"]}', "lone surrogate"),
        ('{"contact":"Bob","from_other_agents":["y\\ud800"]}', "lone surrogate"),
        (f'{{"contact":"Bob","prep":[{BIG_NUMBER}]}}', "number too long"),
        ('{"contact":"Bob","prep":[Infinity]}', "Infinity"),
    ],
)
def test_a_hostile_huddle_file_is_refused(
    full_dir: Path, tmp_path: Path, text: str, needle: str
) -> None:
    f = tmp_path / "h.json"
    f.write_text(text)
    before = files_state(full_dir)
    refused(cli(full_dir, "huddle", "record", str(f)), needle)
    assert files_state(full_dir) == before


# -- hostile arguments ----------------------------------------------------------------------

# Python hands an argument that is not UTF-8 over with lone surrogates for the bad bytes.
NOT_UTF8 = b"a\xffb".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    "argv",
    [
        ["log", "add", "--kind", "journal", "--text", NOT_UTF8],
        ["log", "add", "--kind", "journal", "--text", "x", "--contact", NOT_UTF8],
        ["contacts", "add", NOT_UTF8],
        ["grep", NOT_UTF8],
        ["notebook", "search", NOT_UTF8],
        ["notebook", "add", "--kind", "guidance", "--title", NOT_UTF8, "--body", "b"],
    ],
)
def test_an_argument_that_is_not_utf8_is_refused(full_dir: Path, argv: list[str]) -> None:
    before = files_state(full_dir)
    refused(cli(full_dir, *argv), "not valid UTF-8")
    assert files_state(full_dir) == before


def test_a_data_dir_from_the_environment_that_is_not_utf8_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIXIE_DATA", str(tmp_path / NOT_UTF8))
    refused(run_cli("init"), "not valid UTF-8")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["log", "show", "--last", "-5"],
        ["log", "show", "--last", "0"],
        ["log", "show", "--last", BIG_NUMBER],
        ["notebook", "search", "x", "--days", "0"],
        ["notebook", "search", "x", "--days", "-3"],
        ["invite", "--relay", "127.0.0.1:9", "--timeout", "inf"],
        ["invite", "--relay", "127.0.0.1:9", "--timeout", "1e999"],
        ["invite", "--relay", "127.0.0.1:9", "--timeout", "-1"],
        ["pair", "CODE", "--timeout", "nan"],
        ["sync", "--timeout", "inf"],
        ["sync", "--timeout", "0"],
        ["run", "--interval", "inf"],
        ["run", "--interval", "-2"],
        ["distill", "--offline", "--timeout", "inf"],
        ["chat", "hello", "--timeout", "-1"],
        ["offload", "--older-than", "inf"],
        ["offload", "--older-than", "nan"],
        ["offload", "--older-than", "-1"],
        ["offload", "--older-than", "1", "--timeout", "inf"],
        ["fetch", "0" * 32, "--timeout", "nan"],
        ["recall", "0" * 32, "--timeout", "1e400"],
        ["mcp", "--turn-gap", "inf"],
    ],
)
def test_nonsense_numbers_in_flags_are_refused(full_dir: Path, argv: list[str]) -> None:
    before = files_state(full_dir)
    refused(cli(full_dir, *argv))
    assert files_state(full_dir) == before


def test_log_show_last_still_shows_the_last_events(full_dir: Path) -> None:
    res = cli(full_dir, "log", "show", "--last", "2")
    assert res.code == 0, res.err
    assert [json.loads(line)["text"] for line in res.out.splitlines()] == ["tea 1", "tea 2"]


# -- a damaged data dir ---------------------------------------------------------------------


def _set_meta(data: Path, key: str, value: str | None) -> None:
    con = sqlite3.connect(data / "pixie.db")
    try:
        if value is None:
            con.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            con.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
        con.commit()
    finally:
        con.close()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schema_version", "²"),  # a digit to str.isdigit, not to int()
        ("schema_version", "9" * 5000),
        ("schema_version", None),
        ("identity", None),
        ("identity", "not hex"),
        ("role", "toaster"),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["log", "show"]])
def test_damaged_meta_is_refused(
    data_dir: Path, key: str, value: str | None, command: list[str]
) -> None:
    _set_meta(data_dir, key, value)
    before = files_state(data_dir)
    refused(cli(data_dir, *command), "pixie.db")
    assert files_state(data_dir) == before


def test_a_damaged_schema_is_reported_on_one_line(full_dir: Path) -> None:
    # A damaged schema makes SQLite quote the schema text, newlines included.
    con = sqlite3.connect(full_dir / "pixie.db")
    con.execute("PRAGMA writable_schema=ON")
    con.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'contact_id', '`\n\tcontact_id') "
        "WHERE name = 'memory_event'"
    )
    con.commit()
    con.close()
    before = files_state(full_dir)
    for command in (
        ["status"],
        ["grep", "tea"],
        ["log", "add", "--kind", "journal", "--text", "y"],
    ):
        refused(cli(full_dir, *command), "damaged")
    assert files_state(full_dir) == before


def test_a_file_that_is_not_a_database_is_refused(full_dir: Path) -> None:
    db = full_dir / "pixie.db"
    db.write_bytes(b"\xff" * 100 + db.read_bytes()[100:])
    before = files_state(full_dir)
    for command in (["status"], ["log", "show"], ["nudges"]):
        refused(cli(full_dir, *command), "pixie.db")
    assert files_state(full_dir) == before


# -- the last line of defence ---------------------------------------------------------------


def _raising(exc: Exception) -> Callable[..., int]:
    def fail(*_args: object) -> int:
        raise exc

    return fail


def test_an_unexpected_error_is_one_line_naming_its_type(
    full_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datadir_cli, "cmd_config_show", _raising(RuntimeError("boom\nsecond line")))
    res = cli(full_dir, "config", "show")
    refused(res, "unexpected RuntimeError: boom")
    assert "PIXIE_DEBUG=1" in res.err
    assert "Traceback" not in res.err


def test_pixie_debug_shows_the_traceback(full_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datadir_cli, "cmd_config_show", _raising(KeyError("identity")))
    monkeypatch.setenv("PIXIE_DEBUG", "1")
    res = cli(full_dir, "config", "show")
    assert res.code == 2
    assert "Traceback" in res.err
    assert res.err.splitlines()[-1].startswith("pixie: error: unexpected KeyError")


def test_a_database_error_anywhere_is_reported_as_damage(
    full_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = sqlite3.DatabaseError("database disk image is malformed")
    monkeypatch.setattr(nudges_cli, "cmd_nudges", _raising(broken))
    refused(cli(full_dir, "nudges"), "damaged or not a Pixie database (DatabaseError: database")


# -- paths no file could have ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["huddle", "record", "h\x00.json"],
        ["log", "import", "e\x00.jsonl"],
        ["notebook", "export", "out\x00dir"],
    ],
)
def test_a_path_with_a_nul_is_refused(full_dir: Path, argv: list[str]) -> None:
    before = files_state(full_dir)
    refused(cli(full_dir, *argv), "NUL")
    assert files_state(full_dir) == before


@pytest.mark.parametrize("command", [["init"], ["status"]])
def test_a_data_dir_path_with_a_nul_is_refused(tmp_path: Path, command: list[str]) -> None:
    refused(run_cli("--data", str(tmp_path / "d\x00x"), *command), "NUL")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["init"], ["status"], ["log", "show"]])
def test_a_data_dir_name_too_long_for_the_file_system_is_refused(
    tmp_path: Path, command: list[str]
) -> None:
    refused(run_cli("--data", str(tmp_path / ("x" * 300)), *command), "too long")
    assert list(tmp_path.iterdir()) == []


def test_an_export_name_too_long_for_the_file_system_is_refused(
    full_dir: Path, tmp_path: Path
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    refused(cli(full_dir, "notebook", "export", str(tmp_path / ("x" * 300))), "too long")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_huddle_file_that_never_ends_is_refused(full_dir: Path) -> None:
    before = files_state(full_dir)
    refused(cli(full_dir, "huddle", "record", "/dev/zero"), "larger than 1 MiB")
    assert files_state(full_dir) == before


def test_an_event_of_no_known_kind_is_reported_as_damage(full_dir: Path) -> None:
    con = sqlite3.connect(full_dir / "pixie.db")
    # The log is append-only by trigger; damage does not ask the triggers.
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f'DROP TRIGGER "{name}"')
    con.execute("UPDATE memory_event SET kind = 'mussage' WHERE n = 1")
    con.commit()
    con.close()
    before = files_state(full_dir)
    refused(cli(full_dir, "log", "show"), "the database is damaged")
    assert files_state(full_dir) == before


def test_a_database_error_that_is_not_damage_is_not_called_damage(
    full_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(nudges_cli, "cmd_nudges", _raising(busy))
    res = cli(full_dir, "nudges")
    refused(res, "database error (OperationalError: database is locked)")
    assert "damaged" not in res.err


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ExceptionGroup("g", [BadInput("no such thing")]), "pixie: error: no such thing\n"),
        (
            ExceptionGroup("g", [ExceptionGroup("h", [RuntimeError("boom")])]),
            "pixie: error: unexpected RuntimeError: boom (set PIXIE_DEBUG=1 to see where)\n",
        ),
    ],
)
def test_an_error_inside_a_task_group_is_reported_as_itself(
    full_dir: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception, expected: str
) -> None:
    monkeypatch.setattr(nudges_cli, "cmd_nudges", _raising(exc))
    res = cli(full_dir, "nudges")
    assert (res.code, res.err) == (2, expected)


# -- an import that would run for minutes ------------------------------------------------


def test_an_import_past_its_cpu_budget_stops_in_one_line_and_imports_nothing(
    full_dir: Path, tmp_path: Path
) -> None:
    """Whatever shape makes an importer slow, its CPU time is bounded: the
    import stops where the budget runs out, even inside one item's work,
    rolls back, and leaves the timer as it found it."""
    import signal

    cards = tmp_path / "cards.vcf"
    cards.write_text(
        "".join(
            f"BEGIN:VCARD\nVERSION:3.0\nFN:Person {i}\nEMAIL:same@example.com\nEND:VCARD\n"
            for i in range(20_000)
        )
    )
    before = files_state(full_dir)
    handler = signal.getsignal(signal.SIGPROF)
    # A budget far below what 20,000 cards cost on any machine, so the
    # outcome does not hang on this machine's speed or load.
    refused(
        cli(full_dir, "import", str(cards), "--cpu-budget", "0.001"),
        "stopped after 0.001 s of CPU",
    )
    assert files_state(full_dir) == before
    assert signal.getsignal(signal.SIGPROF) is handler
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    # Within the default budget the same file imports.
    assert cli(full_dir, "import", str(cards)).code == 0


def test_an_import_that_fails_on_its_own_leaves_no_timer_behind(
    full_dir: Path, tmp_path: Path
) -> None:
    import signal

    broken = tmp_path / "broken.vcf"
    broken.write_text("BEGIN:VCARD\nVERSION:3.0\nFN:Ann\nEND:VCARD\nEND:VCARD\n")
    refused(cli(full_dir, "import", str(broken)), "END without BEGIN")
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_a_hundred_thousand_digit_number_in_an_export_is_one_clear_line(
    full_dir: Path, tmp_path: Path
) -> None:
    export = tmp_path / "result.json"
    export.write_text(
        '{"name": "Chat", "type": "personal_chat", "id": ' + "9" * 100_000 + ', "messages": []}'
    )
    before = files_state(full_dir)
    refused(cli(full_dir, "import", str(export), "--format", "telegram"), "more than 40 digits")
    assert files_state(full_dir) == before


def test_a_time_zone_name_longer_than_any_file_name_is_one_clear_line(
    full_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cards = tmp_path / "one.vcf"
    cards.write_text("BEGIN:VCARD\nVERSION:3.0\nFN:Ann\nEND:VCARD\n")
    refused(cli(full_dir, "import", str(cards), "--tz", "A" * 10_000), "unknown time zone")
    # From the environment, a zone nobody knows falls back to the machine's offset.
    monkeypatch.setenv("TZ", "B" * 10_000)
    assert cli(full_dir, "import", str(cards)).code == 0


def test_a_damaged_event_row_is_one_line_and_no_exception_text(full_dir: Path) -> None:
    """A bit flipped in an event's id made `grep` print "Exception ignored
    ... Cannot operate on a closed database" after its error line."""
    con = sqlite3.connect(full_dir / "pixie.db")
    with con:
        triggers = [
            name
            for (name,) in con.execute(
                "SELECT name FROM sqlite_master"
                " WHERE type = 'trigger' AND tbl_name = 'memory_event'"
            )
        ]
        for name in triggers:
            con.execute(f"DROP TRIGGER {name}")
        con.execute("UPDATE memory_event SET id = 'not-hex-' || substr(id, 9) WHERE n = 1")
    con.close()
    shutil.rmtree(full_dir / "mirror", ignore_errors=True)
    res = cli(full_dir, "grep", "tea")
    refused(res, "is damaged (an event row that cannot be read)")
    assert "Exception ignored" not in res.err and "Traceback" not in res.err
