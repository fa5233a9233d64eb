"""A device and a Homebase data dir paired through a real relay process,
driven by the real `pixie` command."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from tests.support.processes import PIXIE, pixie, start_relay

BODY = "Ada's cello recital is on the 14th; she wants an honest opinion afterwards."


@dataclass
class Setup:
    tmp: Path
    relay: trio.Process
    port: int
    phone: Path
    mac: Path

    def note(self, title: str, body: str = BODY) -> str:
        out = pixie(
            self.phone, "notebook", "add", "--kind", "guidance", "--title", title, "--body", body
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return pixie(self.phone, *args)

    def offload(self, note_id: str, timeout: float = 3.0) -> tuple[int, dict[str, object]]:
        out = self.run("offload", note_id, "--json", "--timeout", str(timeout))
        assert out.stdout, out.stderr
        return out.returncode, json.loads(out.stdout)

    def body(self, note_id: str) -> object:
        out = self.run("notebook", "show", note_id, "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["body"]

    async def homebase(self, *args: str) -> trio.Process:
        log = (self.tmp / "run.log").open("ab")
        return await trio.lowlevel.open_process(
            [*PIXIE, "--data", str(self.mac), "run", *args], stderr=log
        )


async def stop(process: trio.Process) -> int:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with trio.fail_after(20):
        return await process.wait()


def invite_and_pair(inviter: Path, joiner: Path, port: int) -> None:
    """``inviter`` prints a code through the relay on ``port``; ``joiner`` pairs with it."""
    invite = subprocess.Popen(
        [*PIXIE, "--data", str(inviter), "invite", "--relay", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert invite.stdout is not None
    code = invite.stdout.readline().strip()
    joined = pixie(joiner, "pair", code)
    assert joined.returncode == 0, joined.stderr
    assert invite.wait(timeout=30) == 0


@asynccontextmanager
async def paired_processes(tmp_path: Path) -> AsyncIterator[Setup]:
    """A relay process and two data dirs paired through it; the relay stops after."""
    relay, port = await start_relay(tmp_path)
    phone, mac = tmp_path / "phone", tmp_path / "mac"
    try:
        assert pixie(phone, "init", "--name", "phone").returncode == 0
        assert pixie(mac, "init", "--role", "homebase", "--name", "mac").returncode == 0
        invite_and_pair(mac, phone, port)
        yield Setup(tmp_path, relay, port, phone, mac)
    finally:
        await stop(relay)
