"""``pixie web``'s command line: refused flags are one line and exit 2, and
the pieces the command hands the page (the daemon gateway, the last syncs)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from pixie.device.cli.web import DaemonOffload
from pixie.device.node.clear import ClearNode
from pixie.device.store.db import Meta
from pixie.device.sync.lastsync import LAST_SYNC_KEY, last_syncs_in
from pixie.device.web.offloaded import NO_DAEMON, HomebaseUnreachable
from pixie.device.web.reads import PersonLines
from pixie.device.web.server import is_loopback, parse_listen
from tests.support.cli import run_cli


@pytest.mark.parametrize(
    ("listen", "words"),
    [
        ("8080", "--listen must be HOST:PORT"),
        ("127.0.0.1:http", "port must be a number from 0 to 65535"),
        ("127.0.0.1:70000", "port must be a number from 0 to 65535"),
        ("example.org:8080", "must be an IP address or localhost"),
        ("0.0.0.0:8080", "not a loopback address"),
        ("192.168.1.5:8080", "not a loopback address"),
        ("[::]:8080", "not a loopback address"),
    ],
)
def test_bad_listen_is_one_line_and_exit_2(data_dir: Path, listen: str, words: str) -> None:
    result = run_cli("--data", str(data_dir), "web", "--listen", listen)
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and words in result.err, result.err


def test_bad_flags_are_one_line_and_exit_2(data_dir: Path) -> None:
    for argv in (["web", "--timeout", "0"], ["web", "--bogus"], ["web", "--listen"]):
        result = run_cli("--data", str(data_dir), *argv)
        assert result.code == 2, argv
        assert result.err.count("\n") == 1 and result.err.startswith("pixie: error:"), result.err


def test_a_missing_data_dir_is_one_line(tmp_path: Path) -> None:
    result = run_cli("--data", str(tmp_path / "nothing"), "web", "--listen", "127.0.0.1:0")
    assert result.code == 2 and result.err.count("\n") == 1


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:8765") == ("::1", 8765)
    assert parse_listen("localhost:80") == ("localhost", 80)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")


def test_without_a_daemon_the_gateway_says_so(data_dir: Path) -> None:
    gateway = DaemonOffload(data_dir, 1.0)
    with pytest.raises(HomebaseUnreachable) as caught:
        gateway.fetch("00000000-0000-7000-8000-000000000000")
    assert str(caught.value) == NO_DAEMON


def test_last_syncs_are_read_from_meta(data_dir: Path) -> None:
    report = {"outcome": "in_sync", "at": 1.5, "applied": 0}
    with ClearNode.open_clear(data_dir) as node:
        with node.db.writing() as session:
            session.merge(Meta(key=f"{LAST_SYNC_KEY}:ab12", value=json.dumps(report)))
            session.merge(Meta(key=f"{LAST_SYNC_KEY}:broken", value="{not json"))
        assert last_syncs_in(node.db) == {"ab12": report}


def test_person_lines_match_only_that_persons_lines() -> None:
    import re2

    text = b"Ada: the cello\nPriya: a cello too\nAda Lovelace: cello\nthe cello alone"
    matcher = PersonLines(re2.compile("cello"), "Ada")
    found = []
    pos = 0
    while (m := matcher.search(text, pos)) is not None:
        start = m.span()[0]  # type: ignore[attr-defined]
        found.append(start)
        pos = text.find(b"\n", start) + 1 if b"\n" in text[start:] else len(text) + 1
    assert found == [text.index(b"cello")]


def test_a_port_in_use_is_one_line_and_exit_2(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("--data", str(data_dir), "web", "--listen", f"127.0.0.1:{port}")
    assert result.code == 2 and result.out == ""
    expected = f"pixie: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert result.err == expected
