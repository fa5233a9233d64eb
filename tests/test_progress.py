"""Long work shows progress on a terminal and stays quiet when piped.

The commands run as real processes with their stderr on a pseudo-terminal (so
``isatty`` is true, as for a person at a shell) or on a pipe (as in a script).
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import trio

from pixie.device import display

from .test_sync_processes import PIXIE, pixie, start_relay


def _life(path: Path, events: int) -> Path:
    lines = (
        json.dumps(
            {
                "kind": "message",
                "at": f"2026-01-{1 + i % 28:02d}T10:00:00Z",
                "text": f"message number {i}",
                "contact": "Ada Lovelace",
            }
        )
        for i in range(events)
    )
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


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
    life = _life(tmp_path / "life.jsonl", 20_000)
    on_tty, piped = tmp_path / "tty", tmp_path / "piped"
    for data in (on_tty, piped):
        assert pixie(data, "init", "--name", data.name).returncode == 0

    code, out, terminal = run_on_terminal("--data", str(on_tty), "log", "import", str(life))
    assert code == 0, terminal
    assert out.startswith("imported 20000 events")
    size = life.stat().st_size
    assert f"bytes read: {size:,} of {size:,} (100%)\r\n" in terminal
    assert "events written: 20,000 of 20,000 (100%)\r\n" in terminal

    quiet = pixie(piped, "log", "import", str(life))
    assert quiet.returncode == 0
    assert quiet.stdout.startswith("imported 20000 events")
    assert quiet.stderr == ""  # no progress, no carriage returns, nothing


async def test_initial_sync_of_a_large_log_shows_progress(tmp_path: Path) -> None:
    relay, port = await start_relay(tmp_path)
    phone, mac = tmp_path / "phone", tmp_path / "mac"
    try:
        assert pixie(phone, "init", "--name", "phone").returncode == 0
        assert pixie(mac, "init", "--role", "homebase", "--name", "mac").returncode == 0
        inviter = subprocess.Popen(
            [*PIXIE, "--data", str(mac), "invite", "--relay", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert inviter.stdout is not None
        joined = pixie(phone, "pair", inviter.stdout.readline().strip())
        assert joined.returncode == 0, joined.stderr
        assert inviter.wait(timeout=30) == 0
        imported = pixie(mac, "log", "import", str(_life(tmp_path / "life.jsonl", 5000)))
        assert imported.returncode == 0, imported.stderr

        with (tmp_path / "run.log").open("wb") as run_log:
            daemon = await trio.lowlevel.open_process(
                [*PIXIE, "--data", str(mac), "run"], stderr=run_log
            )
            try:
                code, out, terminal = await trio.to_thread.run_sync(
                    lambda: run_on_terminal("--data", str(phone), "sync", "--timeout", "30")
                )
                assert code == 0, terminal
                assert "synced" in out
                # The line counts up to what the Homebase said it holds beyond us
                # and ends with a newline before anything else is written.
                assert "records applied:" in terminal
                assert terminal.endswith("\r\n")
                assert "(100%)" in terminal

                piped = pixie(phone, "sync", "--timeout", "30")
                assert piped.returncode == 0 and "already in sync" in piped.stdout
                assert "records applied" not in piped.stderr
            finally:
                daemon.send_signal(signal.SIGTERM)
                with trio.fail_after(20):
                    await daemon.wait()
    finally:
        relay.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            await relay.wait()


def test_progress_stays_quiet_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    display.progress(5, 10, "things:")  # pytest's captured stderr is not a terminal
    display.progress(10, 10, "things:")
    display.end_progress()
    assert capsys.readouterr().err == ""
