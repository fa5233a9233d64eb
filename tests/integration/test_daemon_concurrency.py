"""Every other command works while the daemons run.

Both peers run `pixie run` (the device's answers on its control socket). While
they sync and distil, a burst of commands hits both data dirs at once: a large
import, notes, a pin, a distillation pass, searches, status, syncs and an
offload. Each must succeed, none may show "database is locked" or "busy", and
the peers must converge afterwards.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import trio

from tests.support.daemons import Setup, stop
from tests.support.life import write_life
from tests.support.processes import PIXIE, pixie


@pytest.mark.slow
async def test_commands_run_beside_both_daemons(setup: Setup) -> None:
    note_id = setup.note("Recital")
    first = setup.run("log", "add", "--kind", "journal", "--text", "a walk by the river", "--json")
    assert first.returncode == 0, first.stderr
    event_id = json.loads(first.stdout)["id"]
    life = write_life(setup.tmp / "life.jsonl", 20_000)

    homebase = await setup.homebase()
    log = (setup.tmp / "device-run.log").open("ab")
    device = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(setup.phone), "run", "--json-logs"], stderr=log
    )
    try:
        socket_path = setup.phone / "control.sock"
        with trio.fail_after(30):
            while not socket_path.exists():  # the daemon listens once it is up
                assert device.returncode is None
                await trio.sleep(0.02)

        phone, mac = str(setup.phone), str(setup.mac)
        commands: list[list[str]] = [
            [phone, "log", "import", str(life)],
            [phone, "notebook", "add", "--kind", "guidance", "--title", "A", "--body", "a"],
            [phone, "notebook", "add", "--kind", "about_you", "--title", "B", "--body", "b"],
            [phone, "pin", event_id, "--tag", "walks"],
            [phone, "distill", "--offline"],
            [phone, "grep", "river"],
            [phone, "notebook", "search", "Ada"],
            [phone, "status", "--json"],
            [phone, "sync", "--json", "--timeout", "20"],
            [phone, "offload", note_id, "--json", "--timeout", "20"],
            [phone, "sync", "--json", "--timeout", "20"],
            [mac, "notebook", "add", "--kind", "guidance", "--title", "C", "--body", "c"],
            [mac, "status", "--json"],
            [mac, "grep", "river"],
        ]
        results: dict[int, subprocess.CompletedProcess[str]] = {}

        async def one(i: int, argv: list[str]) -> None:
            data, *rest = argv
            results[i] = await trio.to_thread.run_sync(lambda: pixie(Path(data), *rest))

        with trio.fail_after(240):
            async with trio.open_nursery() as nursery:
                for i, argv in enumerate(commands):
                    nursery.start_soon(one, i, argv)

        for i, argv in enumerate(commands):
            done = results[i]
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
            for word in ("locked", "busy"):
                assert word not in done.stderr, (argv, done.stderr)
        offloaded = json.loads(results[9].stdout)
        assert offloaded["cleared"] is True, offloaded

        final = setup.run("sync", "--json", "--timeout", "30")
        assert final.returncode == 0, final.stderr
        a = json.loads(setup.run("status", "--json").stdout)
        b = json.loads(pixie(setup.mac, "status", "--json").stdout)
        assert a["digest"] == b["digest"]
        assert a["events"] == b["events"] >= 20_001
    finally:
        assert await stop(device) == 0, (setup.tmp / "device-run.log").read_text()
        assert await stop(homebase) == 0, (setup.tmp / "run.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_run_stops_cleanly_on_a_signal(
    setup: Setup,
    signum: signal.Signals,
) -> None:
    """A device daemon that has begun taking in a large log, told to stop,
    says why, exits 0, leaves no control socket behind, and leaves its data
    dir whole: status reads it, and a later sync converges."""
    imported = pixie(setup.mac, "log", "import", str(write_life(setup.tmp / "life.jsonl", 20_000)))
    assert imported.returncode == 0, imported.stderr
    homebase = await setup.homebase()
    log_path = setup.tmp / "device-run.log"
    device = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(setup.phone), "run", "--json-logs"], stderr=log_path.open("ab")
    )
    try:
        with trio.fail_after(60):  # stop once sync has begun to land events
            while json.loads(setup.run("status", "--json").stdout)["events"] == 0:
                assert device.returncode is None
                await trio.sleep(0.05)
        device.send_signal(signum)
        with trio.fail_after(30):
            assert await device.wait() == 0, log_path.read_text()
        lines = [json.loads(line) for line in log_path.read_text().splitlines() if line]
        assert any(f"stopping on {signum.name}" in line["msg"] for line in lines)
        assert not (setup.phone / "control.sock").exists()
        check = pixie(setup.phone, "status", "--json")
        assert check.returncode == 0, check.stderr
        final = setup.run("sync", "--json", "--timeout", "30")
        assert final.returncode == 0, final.stderr
        a = json.loads(setup.run("status", "--json").stdout)
        b = json.loads(pixie(setup.mac, "status", "--json").stdout)
        assert (a["digest"], a["events"]) == (b["digest"], b["events"]) == (b["digest"], 20_000)
    finally:
        await stop(device)
        assert await stop(homebase) == 0, (setup.tmp / "run.log").read_text()
