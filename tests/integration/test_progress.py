"""Long work shows progress on a terminal and stays quiet when piped.

The commands run as real processes with their stderr on a pseudo-terminal (so
``isatty`` is true, as for a person at a shell) or on a pipe (as in a script).
"""

from __future__ import annotations

import os
import pty
import subprocess
import threading
from pathlib import Path

import pytest
import trio

from pixie.device.cli import display
from tests.support.daemons import Setup, stop
from tests.support.life import write_life
from tests.support.processes import PIXIE, pixie


def run_on_terminal(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """Run ``pixie ARGS`` with stderr on a pseudo-terminal; return the exit
    status, stdout, and everything written to the terminal."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run(
            [*PIXIE, *args],
            stdout=subprocess.PIPE,
            stderr=slave,
            check=False,
            timeout=timeout,
        )
    finally:
        os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    return done.returncode, done.stdout.decode(), b"".join(chunks).decode()


def test_import_progress_on_a_terminal_and_none_when_piped(tmp_path: Path) -> None:
    life = write_life(tmp_path / "life.jsonl", 20_000)
    on_tty, piped = tmp_path / "tty", tmp_path / "piped"
    for data in (on_tty, piped):
        assert pixie(data, "init", "--name", data.name).returncode == 0

    code, out, terminal = run_on_terminal("--data", str(on_tty), "log", "import", str(life))
    assert code == 0, terminal
    assert out.startswith("imported 20,000 events")
    size = life.stat().st_size
    assert f"bytes read: {size:,} of {size:,} (100%)\r\n" in terminal
    # events are written as they are read, in one transaction: the bytes
    # read are the import's progress
    assert terminal.count("(100%)") == 1

    quiet = pixie(piped, "log", "import", str(life))
    assert quiet.returncode == 0
    assert quiet.stdout.startswith("imported 20,000 events")
    assert quiet.stderr == ""  # no progress, no carriage returns, nothing


@pytest.mark.slow
async def test_initial_sync_of_a_large_log_shows_progress(setup: Setup) -> None:
    imported = pixie(setup.mac, "log", "import", str(write_life(setup.tmp / "life.jsonl", 5000)))
    assert imported.returncode == 0, imported.stderr
    homebase = await setup.homebase()
    try:
        code, out, terminal = await trio.to_thread.run_sync(
            lambda: run_on_terminal("--data", str(setup.phone), "sync", "--timeout", "30")
        )
        assert code == 0, terminal
        assert "synced" in out
        # The line counts up to what the Homebase said it holds beyond us and
        # ends with a newline before anything else is written.
        assert "records applied:" in terminal
        assert "(100%)" in terminal
        assert terminal.endswith("\r\n")

        piped = setup.run("sync", "--timeout", "30")
        assert piped.returncode == 0 and "already in sync" in piped.stdout
        assert piped.stderr == ""
    finally:
        assert await stop(homebase) == 0, (setup.tmp / "run.log").read_text()


def test_progress_stays_quiet_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    display.progress(5, 10, "things:")  # pytest's captured stderr is not a terminal
    display.progress(10, 10, "things:")
    display.end_progress()
    assert capsys.readouterr().err == ""
