"""The real `pixie` command and relay as OS processes on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

PIXIE = [sys.executable, "-m", "pixie.entry.main"]


def pixie(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PIXIE, "--data", str(data), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def status(data: Path) -> dict[str, object]:
    out = pixie(data, "status", "--json")
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


async def start_relay(tmp: Path) -> tuple[trio.Process, int]:
    port_file = tmp / "relay.port"
    log = (tmp / "relay.log").open("wb")
    process = await trio.lowlevel.open_process(
        [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--port-file", str(port_file)], stderr=log
    )
    with trio.fail_after(30):
        while not port_file.exists():  # the relay writes it once it listens
            assert process.returncode is None
            await trio.sleep(0.02)
    return process, int(port_file.read_text())
