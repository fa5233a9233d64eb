"""Sync across three real processes: a relay, a Homebase running `pixie run`,
and a device running `pixie sync`, each its own OS process on loopback."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
import trio

from tests.support.daemons import Setup
from tests.support.processes import PIXIE, pixie, status


@pytest.mark.slow
async def test_device_and_homebase_processes_converge(setup: Setup) -> None:
    tmp_path, phone, mac = setup.tmp, setup.phone, setup.mac
    lines = "".join(
        json.dumps(
            {
                "kind": "message",
                "at": f"2026-01-0{1 + i % 9}T10:00:00Z",
                "text": f"hi {i}",
                "contact": "Ada Lovelace",
            }
        )
        + "\n"
        for i in range(20)
    )
    imported = subprocess.run(
        [*PIXIE, "--data", str(phone), "log", "import", "-"],
        input=lines,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    note = pixie(
        mac,
        "notebook",
        "add",
        "--kind",
        "guidance",
        "--title",
        "Be brief",
        "--body",
        "Short answers.",
    )
    assert note.returncode == 0, note.stderr

    with (tmp_path / "run.log").open("wb") as run_log:
        daemon = await trio.lowlevel.open_process(
            [*PIXIE, "--data", str(mac), "run"], stderr=run_log
        )
        try:
            synced = pixie(phone, "sync", "--json", "--timeout", "20")
            assert synced.returncode == 0, synced.stderr
            (session,) = json.loads(synced.stdout)["sessions"]
            assert session["outcome"] == "synced"
            again = pixie(phone, "sync", "--json", "--timeout", "20")
            (second,) = json.loads(again.stdout)["sessions"]
            assert (second["outcome"], second["round_trips"]) == ("in_sync", 1)
        finally:
            daemon.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                code_at_exit = await daemon.wait()
    assert code_at_exit == 0, (tmp_path / "run.log").read_text()
    a, b = status(phone), status(mac)
    assert a["digest"] == b["digest"]
    assert (a["events"], a["clear_notes"]) == (b["events"], b["clear_notes"]) == (20, 1)
    (sibling,) = a["siblings"]  # type: ignore[misc]
    assert sibling["last_sync"]["outcome"] == "in_sync"
