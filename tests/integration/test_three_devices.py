"""An account of three peers as real processes on loopback: a phone, a laptop
and a Homebase, with a relay. The laptop pairs with the phone; the Homebase
learns of it from the phone's membership record at its next sync, and the
laptop syncs with the Homebase directly. Each writes, all three converge.
Then the phone removes the laptop: the Homebase refuses it from the sync at
which it learns so, and the laptop's next sync says so in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio

from tests.support.daemons import Setup, invite_and_pair, stop
from tests.support.processes import PIXIE, pixie, status


def _say(data: Path, text: str) -> None:
    line = json.dumps({"kind": "message", "at": "2026-03-01T10:00:00Z", "text": text})
    out = subprocess.run(
        [*PIXIE, "--data", str(data), "log", "import", "-"],
        input=line + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def _sessions(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each session's outcome by the sibling's fingerprint."""
    assert out.stdout, out.stderr
    return {s["sibling"]: s["outcome"] for s in json.loads(out.stdout)["sessions"]}


def _devices(data: Path) -> list[dict[str, object]]:
    out = pixie(data, "devices", "--json")
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, object]] = json.loads(out.stdout)["devices"]
    return rows


@pytest.mark.slow
async def test_phone_laptop_and_homebase_converge_and_a_removed_laptop_is_refused(
    setup: Setup,
) -> None:
    phone, mac, tmp = setup.phone, setup.mac, setup.tmp
    laptop = tmp / "laptop"
    assert pixie(laptop, "init", "--name", "laptop").returncode == 0
    invite_and_pair(phone, laptop, setup.port)
    for data, text in ((phone, "from the phone"), (mac, "from the mac"), (laptop, "from the lap")):
        _say(data, text)

    fingerprints = {
        name: _devices(d)[0]["fingerprint"]
        for name, d in (("phone", phone), ("mac", mac), ("laptop", laptop))
    }
    homebase = await setup.homebase()
    phone_run = None
    try:
        # The phone meets the Homebase, which learns of the laptop from the
        # phone's record; the laptop, not connected, does not answer.
        first = _sessions(pixie(phone, "sync", "--json", "--timeout", "5"))
        assert first[fingerprints["mac"]] == "synced"
        assert "laptop" in {d["name"] for d in _devices(mac)}
        # With the phone online, one `pixie sync` on the laptop meets the
        # phone, learns of the Homebase from it, and meets the Homebase too.
        with (tmp / "phone-run.log").open("ab") as log:
            phone_run = await trio.lowlevel.open_process(
                [*PIXIE, "--data", str(phone), "run"], stderr=log
            )
        second = _sessions(pixie(laptop, "sync", "--json", "--timeout", "10"))
        assert second == {fingerprints["phone"]: "synced", fingerprints["mac"]: "synced"}
        assert {d["name"] for d in _devices(laptop)} == {"laptop", "phone", "mac"}
        digests = {status(d)["digest"] for d in (phone, mac, laptop)}
        assert len(digests) == 1
        # 3 messages and the phone's 3 records from pairing the laptop, the
        # third peer (itself, the Homebase and the laptop; two peers that know
        # each other write none)
        assert {status(d)["events"] for d in (phone, mac, laptop)} == {3 + 3}

        removed = pixie(phone, "devices", "remove", "laptop")
        assert removed.returncode == 0, removed.stderr
        told = _sessions(pixie(phone, "sync", "--json", "--timeout", "5"))
        assert told == {fingerprints["mac"]: "synced"}  # the Homebase takes the record in
        mac_view = {d["name"]: d["state"] for d in _devices(mac)}
        assert str(mac_view["laptop"]).startswith("removed")

        refused = pixie(laptop, "sync", "--timeout", "10")
        assert refused.returncode == 1
        errors = [line for line in refused.stderr.splitlines() if line.startswith("pixie:")]
        assert len(errors) == 1 and "removed from the account" in errors[0], refused.stderr
        again = pixie(laptop, "sync", "--timeout", "10")
        assert again.returncode == 1
        assert again.stderr.count("\n") == 1 and "removed from the account" in again.stderr
        assert "removed from the account" in str(_devices(laptop)[0]["state"])
    finally:
        if phone_run is not None:
            assert await stop(phone_run) == 0, (tmp / "phone-run.log").read_text()
        assert await stop(homebase) == 0, (tmp / "run.log").read_text()
