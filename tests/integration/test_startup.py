"""What a command imports before it answers: `pixie --version` needs none of
the subcommands, so none of the heavy libraries are loaded for it; neither
does a plain `pixie grep` when the text mirror is current."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

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
