"""Pairing beside a running `pixie run`: `pixie invite` and `pixie pair` go
through the daemon's control socket and its relay connection, so neither
knocks the daemon off the relay (the relay keeps one connection per key)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import trio

from tests.support.daemons import Setup, stop
from tests.support.processes import PIXIE, pixie


async def _serving(process: trio.Process, data: Path) -> None:
    with trio.fail_after(30):
        while not (data / "control.sock").exists():  # the daemon listens once it is up
            assert process.returncode is None
            await trio.sleep(0.02)


def _invite(data: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    inviter = subprocess.Popen(
        [*PIXIE, "--data", str(data), "invite", "--json", "--timeout", "60", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert inviter.stdout is not None
    return inviter, inviter.stdout.readline().strip()


async def _invite_and_pair(inviter_data: Path, joiner: Path, *args: str) -> None:
    """A new peer at ``joiner`` pairs with ``inviter_data``'s invite."""
    assert pixie(joiner, "init", "--name", joiner.name).returncode == 0
    inviter, code = _invite(inviter_data, *args)
    assert code.startswith("pixie-invite-"), inviter.stderr
    joined = await trio.to_thread.run_sync(lambda: pixie(joiner, "pair", code))
    assert joined.returncode == 0, joined.stderr
    out, err = await trio.to_thread.run_sync(lambda: inviter.communicate(timeout=60))
    assert inviter.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["name"] == joiner.name


@pytest.mark.slow
async def test_invite_and_pair_run_beside_the_daemons(setup: Setup) -> None:
    tmp = setup.tmp
    homebase = await setup.homebase()
    device = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(setup.phone), "run"],
        stderr=(tmp / "device-run.log").open("ab"),
    )
    try:
        await _serving(homebase, setup.mac)
        await _serving(device, setup.phone)

        # An invite interrupted with Ctrl-C is withdrawn: the next one may run.
        interrupted, first = _invite(setup.mac)
        assert first.startswith("pixie-invite-"), interrupted.stderr
        interrupted.send_signal(signal.SIGINT)
        await trio.to_thread.run_sync(lambda: interrupted.communicate(timeout=30))

        # The Homebase invites a second phone while its daemon runs; then, with
        # --relay naming the daemon's own relay, a laptop: still through the
        # daemon (a connection of its own knocked both off the relay).
        tablet = tmp / "tablet"
        await _invite_and_pair(setup.mac, tablet)
        await _invite_and_pair(setup.mac, tmp / "laptop", "--relay", f"127.0.0.1:{setup.port}")

        # The running phone pairs with a second Homebase (no daemon there).
        mac2 = tmp / "mac2"
        assert pixie(mac2, "init", "--role", "homebase", "--name", "mac2").returncode == 0
        relay = f"127.0.0.1:{setup.port}"
        inviter, code = _invite(mac2, "--relay", relay)
        joined = await trio.to_thread.run_sync(lambda: pixie(setup.phone, "pair", code))
        assert joined.returncode == 0, joined.stderr
        _, err = await trio.to_thread.run_sync(lambda: inviter.communicate(timeout=60))
        assert inviter.returncode == 0, err

        phone_siblings = json.loads(setup.run("status", "--json").stdout)["siblings"]
        # The tablet and the laptop joined an account of more than two: the
        # phone learns of them from the Homebase's membership records as soon
        # as its daemon syncs with it (when that is, is the daemons' business).
        names = {s["name"] for s in phone_siblings}
        assert {"mac", "mac2"} <= names <= {"mac", "mac2", "tablet", "laptop"}
        # Both daemons kept their connections: a sync through each still works.
        synced = await trio.to_thread.run_sync(
            lambda: pixie(tablet, "sync", "--json", "--timeout", "20")
        )
        assert synced.returncode == 0, synced.stderr
        assert json.loads(synced.stdout)["sessions"][0]["outcome"] in ("synced", "in_sync")
    finally:
        assert await stop(device) == 0, (tmp / "device-run.log").read_text()
        assert await stop(homebase) == 0, (tmp / "run.log").read_text()
    for log in ("run.log", "device-run.log"):
        assert "lost the relay" not in (tmp / log).read_text(), log
