"""Three machines, as near as one host gets: the relay, the Homebase and the
device each in a network namespace of its own, joined by veth links to a
bridge in the relay's namespace. Pair, sync, offload and fetch across them;
then cut the Homebase's link while an offload waits for its ack, and check the
body stayed on the device.

Needs root and `ip netns`; skipped with the reason otherwise."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PIXIE = [sys.executable, "-m", "pixie.entry.main"]
RELAY_IP, HOME_IP, DEVICE_IP = "10.77.0.1", "10.77.0.2", "10.77.0.3"
BODY = "Notes from the planning call: the trip moves to May; Ada books the train."


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def _why_unavailable() -> str | None:
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"pxprobe{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()[:120]}"
    _ip("netns", "del", probe)
    return None


@dataclass
class Net:
    relay: str
    home: str
    device: str
    home_link: str  # the Homebase's veth end (inside its namespace)

    def run(self, ns: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", ns, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=90,
            **kw,  # type: ignore[arg-type]
        )

    def popen(self, ns: str, *args: str, **kw: object) -> subprocess.Popen[str]:
        return subprocess.Popen(["ip", "netns", "exec", ns, *args], text=True, **kw)  # type: ignore[call-overload, no-any-return]


def _must(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


@pytest.fixture
def net() -> Iterator[Net]:
    why = _why_unavailable()
    if why is not None:
        pytest.skip(why)
    tag = secrets.token_hex(3)
    n = Net(f"pxr{tag}", f"pxh{tag}", f"pxd{tag}", "eth0")
    try:
        for ns in (n.relay, n.home, n.device):
            _must(_ip("netns", "add", ns))
            _must(_ip("-n", ns, "link", "set", "lo", "up"))
        _must(_ip("-n", n.relay, "link", "add", "br0", "type", "bridge"))
        _must(_ip("-n", n.relay, "addr", "add", f"{RELAY_IP}/24", "dev", "br0"))
        _must(_ip("-n", n.relay, "link", "set", "br0", "up"))
        for ns, addr, port in ((n.home, HOME_IP, "ph"), (n.device, DEVICE_IP, "pd")):
            side = f"{port}{tag}"
            _must(_ip("link", "add", side, "type", "veth", "peer", "name", f"{side}x"))
            _must(_ip("link", "set", side, "netns", n.relay))
            _must(_ip("link", "set", f"{side}x", "netns", ns))
            _must(_ip("-n", n.relay, "link", "set", side, "master", "br0"))
            _must(_ip("-n", n.relay, "link", "set", side, "up"))
            _must(_ip("-n", ns, "link", "set", f"{side}x", "name", "eth0"))
            _must(_ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"))
            _must(_ip("-n", ns, "link", "set", "eth0", "up"))
        yield n
    finally:
        for ns in (n.relay, n.home, n.device):
            _ip("netns", "del", ns)


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PIXIE_KEYSTORE": "file", "PIXIE_KEYS": str(tmp / "keys")}


def _wait_for(check: object, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_pair_sync_offload_fetch_across_namespaces(net: Net, tmp_path: Path) -> None:
    env = _env(tmp_path)
    phone, mac = tmp_path / "phone", tmp_path / "mac"

    def pixie(ns: str, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return net.run(ns, *PIXIE, "--data", str(data), *args, env=env)

    port_file = tmp_path / "relay.port"
    relay = net.popen(
        net.relay,
        *PIXIE,
        "relay",
        "--listen",
        f"{RELAY_IP}:0",
        "--port-file",
        str(port_file),
        env=env,
        stderr=subprocess.DEVNULL,
    )
    daemon: subprocess.Popen[str] | None = None
    try:
        _wait_for(port_file.exists, "the relay to listen")
        address = f"{RELAY_IP}:{port_file.read_text().strip()}"
        _must(pixie(net.device, phone, "init", "--name", "phone"))
        _must(pixie(net.home, mac, "init", "--role", "homebase", "--name", "mac"))
        inviter = net.popen(
            net.home,
            *PIXIE,
            "--data",
            str(mac),
            "invite",
            "--relay",
            address,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert inviter.stdout is not None
        code = inviter.stdout.readline().strip()
        _must(pixie(net.device, phone, "pair", code))
        assert inviter.wait(timeout=60) == 0

        added = pixie(
            net.device, phone, "notebook", "add", "--kind", "guidance", "--title", "Trip",
            "--body", BODY,
        )  # fmt: skip
        _must(added)
        note_id = added.stdout.strip()

        log = (tmp_path / "run.log").open("w")
        daemon = net.popen(
            net.home,
            *PIXIE,
            "--data",
            str(mac),
            "run",
            "--faults",
            "ack-delay=#2@4",
            env=env,
            stderr=log,
        )
        synced = pixie(net.device, phone, "sync", "--json", "--timeout", "30")
        _must(synced)
        digests = [json.loads(pixie(ns, d, "status", "--json").stdout)["digest"]
                   for ns, d in ((net.device, phone), (net.home, mac))]  # fmt: skip
        assert digests[0] == digests[1]

        offloaded = pixie(net.device, phone, "offload", note_id, "--json")
        assert json.loads(offloaded.stdout)["cleared"] is True, offloaded.stdout
        fetched = pixie(net.device, phone, "fetch", note_id)
        assert (fetched.returncode, fetched.stdout.strip()) == (0, BODY)
        recalled = pixie(net.device, phone, "recall", note_id)
        _must(recalled)

        # The second offload's ack is held back 4 s (after the holding commits);
        # the Homebase's link goes down in that window, so the ack never comes.
        offload = net.popen(
            net.device,
            *PIXIE,
            "--data",
            str(phone),
            "offload",
            note_id,
            "--json",
            "--timeout",
            "8",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def held() -> bool:
            con = sqlite3.connect(mac / "pixie.db")
            try:
                return con.execute("SELECT count(*) FROM holding").fetchone()[0] == 1
            finally:
                con.close()

        _wait_for(held, "the Homebase to commit the holding")
        _must(_ip("-n", net.home, "link", "set", "eth0", "down"))
        out, _ = offload.communicate(timeout=60)
        report = json.loads(out)
        assert (offload.returncode, report["outcome"], report["cleared"]) == (1, "timeout", False)
        shown = pixie(net.device, phone, "notebook", "show", note_id, "--json")
        assert json.loads(shown.stdout)["body"] == BODY  # the body stayed here
        _must(_ip("-n", net.home, "link", "set", "eth0", "up"))
    finally:
        for process in (daemon, relay):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
