"""Offload outcomes stay typed across the control socket: a fetch or recall the
daemon could not verify comes back to the command as `OffloadFailed` with its
`Outcome`, in the same words as before."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pixie.device.app.control import call as control_call
from pixie.device.app.control import control_path
from pixie.device.errors import BadInput
from pixie.device.sync.offload import OffloadFailed
from pixie.protocol.offload import Outcome, Verdict


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="px-"))  # AF_UNIX paths must stay short
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def answering(data_dir: Path, answer: dict[str, Any]) -> threading.Thread:
    """A stand-in daemon that reads one request and sends ``answer``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(control_path(data_dir)))
    server.listen(1)

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                data = b""
                while b"\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(json.dumps(answer).encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_failed_fetch_comes_back_typed(data_dir: Path) -> None:
    failed = OffloadFailed(Verdict(Outcome.CORRUPT, "the served body does not match"))
    thread = answering(
        data_dir,
        {"ok": False, "error": str(failed), "outcome": "corrupt", "detail": failed.verdict.detail},
    )
    with pytest.raises(OffloadFailed) as raised:
        control_call(data_dir, "fetch", {"note_id": "n"}, 5)
    thread.join(5)
    assert raised.value.outcome is Outcome.CORRUPT
    assert str(raised.value) == str(failed) == "corrupt: the served body does not match"


def test_other_errors_stay_plain(data_dir: Path) -> None:
    thread = answering(data_dir, {"ok": False, "error": "no note with id n"})
    with pytest.raises(BadInput) as raised:
        control_call(data_dir, "fetch", {"note_id": "n"}, 5)
    thread.join(5)
    assert not isinstance(raised.value, OffloadFailed)
    assert str(raised.value) == "no note with id n"


def test_an_outcome_the_command_does_not_know_is_a_plain_error(data_dir: Path) -> None:
    thread = answering(
        data_dir, {"ok": False, "error": "odd: x", "outcome": "no such outcome", "detail": "x"}
    )
    with pytest.raises(BadInput) as raised:
        control_call(data_dir, "fetch", {"note_id": "n"}, 5)
    thread.join(5)
    assert not isinstance(raised.value, OffloadFailed)
    assert str(raised.value) == "odd: x"
