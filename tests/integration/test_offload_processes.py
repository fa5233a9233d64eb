"""Offloading across real processes: a relay, a Homebase running `pixie run
--faults SPEC`, and `pixie offload / fetch / recall` on a device, each its own
OS process on loopback. Crashes are real: the holder's crash faults exit the
process on the spot, and the device is killed with SIGKILL between the ack and
the clear. After every fault the note is readable, here or from the holder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.support.daemons import BODY, Setup, stop
from tests.support.processes import PIXIE, pixie


@pytest.mark.slow
async def test_offload_fetch_recall_through_faults(setup: Setup) -> None:
    note_id = setup.note("Recital")
    digest = json.loads(setup.run("status", "--json").stdout)["digest"]
    spec = "refuse=#1,ack-wrong-id=#2,ack-wrong-hash=#3,ack-timeout=#4,corrupt-serve=#1"
    daemon = await setup.homebase("--faults", spec)
    try:
        expected = ["refused", "wrong_id", "wrong_hash", "timeout"]
        for outcome in expected:
            code, report = setup.offload(note_id, timeout=3)
            assert (code, report["outcome"], report["cleared"]) == (1, outcome, False), report
            assert setup.body(note_id) == BODY  # untouched
        code, report = setup.offload(note_id)
        assert (code, report["outcome"], report["cleared"]) == (0, "held", True), report

        listed = setup.run("notebook", "list")
        assert "offloaded: opens from your Homebase" in listed.stdout
        status = json.loads(setup.run("status", "--json").stdout)
        assert status["offloaded_notes"] == 1 and status["digest"] == digest
        edit = setup.run("notebook", "edit", note_id, "--title", "New")
        assert edit.returncode == 2 and "recall" in edit.stderr

        corrupt = setup.run("fetch", note_id)
        assert corrupt.returncode == 2 and "corrupt" in corrupt.stderr
        fetched = setup.run("fetch", note_id, "--json")
        assert fetched.returncode == 0, fetched.stderr
        assert json.loads(fetched.stdout) == {"id": note_id, "body": BODY, "verified": True}
        assert setup.body(note_id) is None  # shown, never written back

        recalled = setup.run("recall", note_id, "--json")
        assert recalled.returncode == 0, recalled.stderr
        assert json.loads(recalled.stdout)["released"] is True
        assert setup.body(note_id) == BODY
    finally:
        assert await stop(daemon) == 0, (setup.tmp / "run.log").read_text()
    log = (setup.tmp / "run.log").read_text()
    assert "refused fetch" not in log and BODY not in log  # no plaintext in the log


@pytest.mark.slow
async def test_crashes_never_leave_a_note_nowhere(setup: Setup) -> None:
    note_id = setup.note("Crash")
    # The holder commits, then dies before the ack: the device keeps its body.
    daemon = await setup.homebase("--faults", "crash-after-commit=#1")
    code, report = setup.offload(note_id, timeout=3)
    assert (code, report["outcome"]) == (1, "timeout")
    assert setup.body(note_id) == BODY
    with trio.fail_after(20):
        assert await daemon.wait() == 70
    # The holder dies before committing: same for the device.
    daemon = await setup.homebase("--faults", "crash-before-commit=#1")
    code, report = setup.offload(note_id, timeout=3)
    assert (code, report["outcome"]) == (1, "timeout")
    with trio.fail_after(20):
        assert await daemon.wait() == 70
    assert setup.body(note_id) == BODY

    daemon = await setup.homebase()
    try:
        # The device is killed between a valid ack and the clear.
        killer = (
            "import os, signal, sys\n"
            "from pixie.device.sync import offload\n"
            "def die(note_id, content_hash):\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "class Dying(offload.NoteOffloadService):\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        super().__init__(*args, before_clear=die, **kwargs)\n"
            "offload.NoteOffloadService = Dying\n"
            "from pixie.entry.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        killed = subprocess.run(
            [sys.executable, "-c", killer, "--data", str(setup.phone), "offload", note_id],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert setup.body(note_id) == BODY  # acked and held, but never cleared here

        code, report = setup.offload(note_id)
        assert (code, report["cleared"]) == (0, True), report
        fetched = setup.run("fetch", note_id)
        assert (fetched.returncode, fetched.stdout.strip()) == (0, BODY)
    finally:
        assert await stop(daemon) == 0


async def test_a_relay_that_is_down_changes_nothing(setup: Setup) -> None:
    note_id = setup.note("Down")
    await stop(setup.relay)
    code, report = setup.offload(note_id)
    assert (code, report["outcome"], report["cleared"]) == (1, "relay_down", False)
    assert setup.body(note_id) == BODY


def test_bad_fault_specs_stop_the_homebase_at_start(tmp_path: Path) -> None:
    mac = tmp_path / "mac"
    assert pixie(mac, "init", "--role", "homebase").returncode == 0
    for spec in ("bogus=1", "refuse=2", "ack-delay=0.5"):
        out = pixie(mac, "run", "--relay", "127.0.0.1:9", "--faults", spec)
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("pixie: error: --faults")
    phone = tmp_path / "phone"
    assert pixie(phone, "init").returncode == 0
    out = pixie(phone, "run", "--relay", "127.0.0.1:9", "--faults", "refuse=1")
    assert out.returncode == 2 and "Homebase" in out.stderr
    assert os.path.isdir(mac)


async def start_faulty_relay(tmp: Path, spec: str) -> tuple[trio.Process, int]:
    port_file = tmp / "faulty.port"
    port_file.unlink(missing_ok=True)
    log = (tmp / "faulty-relay.log").open("ab")
    process = await trio.lowlevel.open_process(
        [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
         "--faults", spec, "--fault-seed", "3"],
        stderr=log,
    )  # fmt: skip
    with trio.fail_after(30):
        while not port_file.exists():
            assert process.returncode is None
            await trio.sleep(0.02)
    return process, int(port_file.read_text())


@pytest.mark.slow
async def test_offload_through_a_misbehaving_relay(setup: Setup) -> None:
    """Duplicated, reordered and delayed envelopes change no outcome; dropped
    ones time out with the body still here."""
    await stop(setup.relay)
    note_id = setup.note("Relay faults")
    relay, port = await start_faulty_relay(setup.tmp, "duplicate=1")
    where = f"127.0.0.1:{port}"
    daemon = await setup.homebase("--relay", where)
    try:
        out = setup.run("offload", note_id, "--json", "--relay", where, "--timeout", "10")
        assert json.loads(out.stdout)["cleared"] is True, out.stdout + out.stderr
        fetched = setup.run("fetch", note_id, "--relay", where, "--timeout", "10")
        assert (fetched.returncode, fetched.stdout.strip()) == (0, BODY)
    finally:
        assert await stop(daemon) == 0
        await stop(relay)
    relay, port = await start_faulty_relay(setup.tmp, "drop=1")
    where = f"127.0.0.1:{port}"
    daemon = await setup.homebase("--relay", where)
    try:
        out = setup.run("recall", note_id, "--relay", where, "--timeout", "2")
        assert out.returncode == 2 and "timeout" in out.stderr
        assert setup.body(note_id) is None  # still parked, still readable from the holder
    finally:
        assert await stop(daemon) == 0
        await stop(relay)
    relay, port = await start_faulty_relay(setup.tmp, "reorder=1,delay=0.5@0.2")
    where = f"127.0.0.1:{port}"
    daemon = await setup.homebase("--relay", where)
    try:
        out = setup.run("recall", note_id, "--relay", where, "--timeout", "10")
        assert out.returncode == 0, out.stderr
        assert setup.body(note_id) == BODY
    finally:
        assert await stop(daemon) == 0
        await stop(relay)


@pytest.mark.slow
async def test_commands_go_through_a_running_device_daemon(setup: Setup) -> None:
    """With `pixie run` on the device, sync and offload commands ask it (over
    the data dir's control socket) instead of taking its relay identity."""
    note_id = setup.note("Daemon")
    homebase = await setup.homebase()
    log = (setup.tmp / "device-run.log").open("ab")
    device = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(setup.phone), "run", "--json-logs"], stderr=log
    )
    socket_path = setup.phone / "control.sock"
    try:
        with trio.fail_after(30):
            while not socket_path.exists():  # the daemon listens once it is up
                assert device.returncode is None
                await trio.sleep(0.02)
        synced = setup.run("sync", "--json")
        assert synced.returncode == 0, synced.stderr
        code, report = setup.offload(note_id, timeout=10)
        assert (code, report["cleared"]) == (0, True), report
        fetched = setup.run("fetch", note_id)
        assert (fetched.returncode, fetched.stdout.strip()) == (0, BODY)
        missing = setup.run("fetch", "01234567-89ab-8def-8123-456789abcdef")
        assert missing.returncode == 2 and "no note" in missing.stderr
        recalled = setup.run("recall", note_id, "--json")
        assert recalled.returncode == 0 and json.loads(recalled.stdout)["released"] is True
        assert setup.body(note_id) == BODY
    finally:
        assert await stop(device) == 0
        assert await stop(homebase) == 0
    assert not socket_path.exists()
    lines = [json.loads(line) for line in (setup.tmp / "device-run.log").read_text().splitlines()]
    assert not [x for x in lines if "lost the relay" in x["msg"]]  # nobody took its identity
    assert BODY not in (setup.tmp / "device-run.log").read_text()
