"""What a command imports before it answers: `pixie --version` needs none of
the subcommands, so none of the heavy libraries are loaded for it; neither
does a plain `pixie grep` when the text mirror is current, or a plain
`pixie status`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.node.keyed import Node
from pixie.device.store.keystore import KEYS_ENV, KEYSTORE_ENV, FileKeyStore
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.provision import create_data_dir
from pixie.entry.main import COMMAND_MODULES, build_parser, command_of

HEAVY = ("sqlalchemy", "trio", "nacl", "cryptography", "numpy", "httpx", "re2", "msgpack")

PROBE = """
import json, sys
from pixie.entry.main import main
code = main(["--version"])
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {heavy})]))
"""


def test_version_imports_no_subcommand_and_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=set(HEAVY))],
        capture_output=True,
        text=True,
        check=True,
    )
    version_line, loaded = done.stdout.splitlines()
    assert version_line.startswith("pixie ")
    code, heavy = json.loads(loaded)
    assert (code, heavy) == (0, [])


def test_version_is_what_the_full_parser_prints() -> None:
    full = subprocess.run(
        [sys.executable, "-m", "pixie.entry.main", "--version", "--data", "x"],
        capture_output=True,
        text=True,
        check=True,
    )
    quick = subprocess.run(
        [sys.executable, "-m", "pixie.entry.main", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert full.stdout == quick.stdout


GREP_PROBE = """
import json, sys
from pixie.entry.main import main
code = main({argv!r})
sys.stdout.flush()
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {heavy})]))
"""


def _grep(argv: list[str]) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", GREP_PROBE.format(argv=argv, heavy=set(HEAVY) - {"re2"})],
        capture_output=True,
        text=True,
        check=True,
    )
    *printed, loaded = done.stdout.splitlines()
    code, heavy = json.loads(loaded)
    assert code == 0, done.stderr
    return "\n".join(printed) + "\n", heavy


def test_grep_on_a_current_mirror_answers_without_the_database_layer(tmp_path: Path) -> None:
    data = tmp_path / "d"
    create_data_dir(data, name="t", role="device", key_store=FileKeyStore(tmp_path / "keys"))
    at = 1_700_000_000_000_000
    events = [
        NewEvent(EventKind.MESSAGE, at + i, f"lunch at the café number {i}", contact="Zoë")
        for i in range(20)
    ]
    with Node.open(data, key_store=FileKeyStore(tmp_path / "keys")) as node:
        node.log.append(events, now=at)
        node.mirror.ensure_current()
        want = {q: GrepMemoryTool(node.mirror).run(q) for q in ("café", "zoë", "(unclosed")}
    for query, result in want.items():
        printed, heavy = _grep(["--data", str(data), "grep", query])
        assert printed == result.render() + "\n"
        assert heavy == []  # the quick path answered
        printed, heavy = _grep(["grep", "--json", query, "--data", str(data)])
        assert json.loads(printed) == json.loads(json.dumps(result.as_json()))
        assert heavy == []
    # A row the mirror has not seen: the full command answers, and catches it up.
    with Node.open(data, key_store=FileKeyStore(tmp_path / "keys")) as node:
        node.log.append([NewEvent(EventKind.JOURNAL, at + 99, "a later café")], now=at)
    printed, heavy = _grep(["--data", str(data), "grep", "later"])
    assert "a later café" in printed and "sqlalchemy" in heavy
    printed, heavy = _grep(["--data", str(data), "grep", "later"])
    assert "a later café" in printed and heavy == []


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every command's help text, nested commands too, by their path."""
    out: dict[str, str] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    out[f"{path} {name}".strip()] = child.format_help()
                    walk(child, f"{path} {name}")

    walk(parser, "")
    return out


def test_a_command_line_builds_only_its_commands_and_each_reads_as_in_the_full_parser() -> None:
    full = _helps(build_parser())
    top = {path for path in full if " " not in path}
    assert top == set(COMMAND_MODULES)
    for command in COMMAND_MODULES:
        lazy = _helps(build_parser(command))
        assert command in lazy
        for path, text in lazy.items():
            assert text == full[path], path


def test_the_command_is_read_past_data_and_nothing_else() -> None:
    assert command_of(["--data", "d", "status"]) == "status"
    assert command_of(["--data=d", "notebook", "search", "x"]) == "notebook"
    assert command_of(["status", "--data", "d"]) == "status"
    for line in (["--help"], ["--version", "status"], ["nosuch"], ["--data"], []):
        assert command_of(line) is None


STATUS_PROBE = """
import json, sys
from pixie.entry.main import main
code = main({argv!r})
sys.stdout.flush()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pixie.device.cli."))))
"""


def test_status_imports_no_other_command(tmp_path: Path) -> None:
    data = tmp_path / "d"
    create_data_dir(data, name="t", role="device", key_store=FileKeyStore(tmp_path / "keys"))
    done = subprocess.run(
        [sys.executable, "-c", STATUS_PROBE.format(argv=["--data", str(data), "status"])],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, KEYS_ENV: str(tmp_path / "keys"), KEYSTORE_ENV: "file"},
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    others = {m for m in set(COMMAND_MODULES.values()) if m != "pixie.device.cli.datadir"}
    assert not loaded & others


def _status(argv: list[str], keys: Path) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", GREP_PROBE.format(argv=argv, heavy=set(HEAVY))],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, KEYS_ENV: str(keys), KEYSTORE_ENV: "file"},
    )
    *printed, loaded = done.stdout.splitlines()
    code, heavy = json.loads(loaded)
    assert code == 0, done.stderr
    return "\n".join(printed) + "\n", heavy


def test_status_answers_without_the_database_layer_as_the_full_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pixie status` reads its counts on the driver alone, and says exactly
    what the full command (which opens the node) says: events, contacts,
    notes by zone (offloaded and deleted ones too), siblings and their last
    sync."""
    from pixie.device.cli import datadir
    from pixie.device.notebook.store import Distilled
    from pixie.device.store.notes import NoteKind, SealedKind
    from pixie.device.store.siblinginfo import SiblingInfo
    from pixie.device.sync.lastsync import LAST_SYNC_KEY

    keys = tmp_path / "keys"
    monkeypatch.setenv(KEYS_ENV, str(keys))
    monkeypatch.setenv(KEYSTORE_ENV, "file")
    data = tmp_path / "d"
    create_data_dir(data, name="phone", role="device", key_store=FileKeyStore(keys))
    at = 1_700_000_000_000_000
    with Node.open(data, key_store=FileKeyStore(keys)) as node:
        node.log.append(
            [NewEvent(EventKind.MESSAGE, at + i, f"hello {i}", contact="Zoë") for i in range(7)],
            now=at,
        )
        cid = node.contacts.add("Ada Lovelace", ["ada@example.org"], now=0)[0]
        node.notebook.upsert_clear(Distilled(NoteKind.PERSON, cid, "Ada", "Runs.", cid, ()))
        gone = node.notebook.add_user_note(NoteKind.GUIDANCE, "Be brief", "Short answers.")
        node.notebook.delete(gone)
        node.notebook.record_sealed(SealedKind.HUDDLE_TAKEAWAY, title="t", body="sealed")
        mac = bytes(range(32))
        node.siblings.add(SiblingInfo(mac, "mac", "homebase", "relay.example:7000", at))
        report = {"at": 1_700_000_100, "outcome": "done", "round_trips": 1, "applied": 3}
        with node.db.writing() as session:
            from pixie.device.store.db import Meta

            fp = SiblingInfo(mac, "mac", "homebase", "r", 0).fingerprint
            session.add(Meta(key=f"{LAST_SYNC_KEY}:{fp}", value=json.dumps(report)))
    for flags in ([], ["--json"]):
        argv = ["--data", str(data), "status", *flags]
        printed, heavy = _status(argv, keys)
        assert heavy == []  # the quick path answered
        parser = build_parser("status")
        datadir.cmd_status(parser.parse_args(argv))
        assert printed == capsys.readouterr().out
    assert '"events": 7' in printed
    assert '"sealed_notes": 1' in printed and '"clear_notes": 1' in printed
    assert "1 round trip, 3 items taken in" in _status(["--data", str(data), "status"], keys)[0]


def test_status_of_an_older_schema_is_left_to_the_full_command(tmp_path: Path) -> None:
    """A database the quick reader cannot take as it is (here: one a version
    behind, which opening migrates) goes to the full command."""
    import sqlite3

    keys = tmp_path / "keys"
    data = tmp_path / "d"
    create_data_dir(data, name="phone", role="device", key_store=FileKeyStore(keys))
    con = sqlite3.connect(data / "pixie.db")
    with con:
        con.execute("DELETE FROM meta WHERE key = 'item_index'")
        con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    printed, heavy = _status(["--data", str(data), "status"], keys)
    assert "events: 0" in printed and "sqlalchemy" in heavy
    printed, heavy = _status(["--data", str(data), "status"], keys)
    assert "events: 0" in printed and heavy == []  # migrated by the first


def test_notebook_search_answers_without_the_database_layer_as_the_full_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain `pixie notebook search` runs check_notebook on a plain
    connection: no ORM, no sync stack, no crypto; and prints what the full
    command prints, filters, misses and refusals included."""
    from pixie.device.cli import notebook as notebook_cli
    from pixie.device.notebook.store import Distilled
    from pixie.device.store.notes import NoteKind
    from pixie.entry.main import main

    keys = tmp_path / "keys"
    monkeypatch.setenv(KEYS_ENV, str(keys))
    monkeypatch.setenv(KEYSTORE_ENV, "file")
    data = tmp_path / "d"
    create_data_dir(data, name="phone", role="device", key_store=FileKeyStore(keys))
    with Node.open(data, key_store=FileKeyStore(keys)) as node:
        cid = node.contacts.add("Claire Dubois", ["claire@example.org"], now=0)[0]
        node.notebook.upsert_clear(
            Distilled(NoteKind.PERSON, cid, "Claire Dubois", "Sister; an architect.", cid, ())
        )
        node.notebook.add_user_note(
            NoteKind.GUIDANCE, "Kitchen cabinets", "Claire wants oak cabinets.", ("home",)
        )
        node.notebook.add_user_note(NoteKind.ABOUT_YOU, "Running", "Runs on Sundays.")
    heavy = set(HEAVY) - {"numpy", "msgpack"}  # meaning may load its model
    cases = [
        ["cabinets"],
        ["cabinets", "--json"],
        ["oak", "--person", "Claire"],
        ["--topic", "home"],
        ["--days", "30", "running"],
        ["nothing matches this"],
        ["x", "--person", "Nobody At All"],
    ]
    for case in cases:
        argv = ["--data", str(data), "notebook", "search", *case]
        done = subprocess.run(
            [sys.executable, "-c", GREP_PROBE.format(argv=argv, heavy=heavy)],
            capture_output=True,
            text=True,
            check=True,
        )
        *printed, loaded = done.stdout.splitlines()
        code, imported = json.loads(loaded)
        assert (code, imported) == (0, []), (case, done.stderr)
        parser = build_parser("notebook")
        notebook_cli.cmd_notebook_search(parser.parse_args(argv))
        assert "\n".join(printed) + "\n" == capsys.readouterr().out, case
    # A command line the quick parser refuses goes to the full one, which says why.
    assert main(["--data", str(data), "notebook", "search", "--days", "0", "x"]) == 2
    assert "--days: must be at least 1" in capsys.readouterr().err


def test_notebook_search_by_meaning_keeps_its_vectors_through_the_plain_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With meaning on, the quick search embeds the notes it lacks vectors
    for and keeps them (a bookkeeping write on its plain connection), and
    answers as the full command does."""
    import sqlite3

    from pixie.device.cli import notebook as notebook_cli
    from pixie.device.notebook import nearby
    from pixie.device.store.notes import NoteKind

    keys = tmp_path / "keys"
    monkeypatch.setenv(KEYS_ENV, str(keys))
    monkeypatch.setenv(KEYSTORE_ENV, "file")
    monkeypatch.delenv(nearby.ENV, raising=False)
    data = tmp_path / "d"
    create_data_dir(data, name="phone", role="device", key_store=FileKeyStore(keys))
    with Node.open(data, key_store=FileKeyStore(keys)) as node:
        node.notebook.add_user_note(NoteKind.GUIDANCE, "Kitchen", "New oak cupboards and a sink.")
        node.notebook.add_user_note(NoteKind.ABOUT_YOU, "Running", "Runs ten miles on Sundays.")
    argv = ["--data", str(data), "notebook", "search", "carpentry for the kitchen"]
    env = {k: v for k, v in os.environ.items() if k != nearby.ENV}
    done = subprocess.run(
        [sys.executable, "-c", GREP_PROBE.format(argv=argv, heavy={"sqlalchemy", "nacl"})],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    *printed, loaded = done.stdout.splitlines()
    assert json.loads(loaded) == [0, []], done.stderr
    con = sqlite3.connect(data / "pixie.db")
    try:
        (vectors,) = con.execute("SELECT count(*) FROM note_meaning").fetchone()
    finally:
        con.close()
    assert vectors == 2
    notebook_cli.cmd_notebook_search(build_parser("notebook").parse_args(argv))
    assert "\n".join(printed) + "\n" == capsys.readouterr().out
    assert any("Kitchen" in line for line in printed)
