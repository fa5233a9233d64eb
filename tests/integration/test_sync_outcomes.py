"""How `pixie sync` reports each way a session can end: a typed outcome, one
line each for people, and one clear line (exit 2) when the sibling is away."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio

from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import SyncOutcome, SyncReport
from pixie.protocol.identity import new_identity
from tests.support.processes import PIXIE, start_relay
from tests.support.wire import make_node


@pytest.mark.parametrize("outcome", list(SyncOutcome))
def test_every_outcome_has_a_line_and_survives_json(outcome: SyncOutcome) -> None:
    report = SyncReport("abcd-ef01-2345-6789", "opener", outcome, error="why")
    line = report.describe(30)
    assert line and "\n" not in line and report.sibling in line
    data = json.loads(json.dumps(report.as_json()))
    assert data["outcome"] == outcome.value
    assert SyncReport.from_json(data) == report


def test_the_outcome_is_typed() -> None:
    assert (
        SyncReport.from_json(SyncReport("s", "opener", SyncOutcome.SYNCED).as_json()).outcome
        is SyncOutcome.SYNCED
    )


@pytest.mark.slow
@pytest.mark.parametrize("timeout", ["1", "6"])
async def test_sync_with_the_homebase_away_says_so_and_exits_2(
    tmp_path: Path, timeout: str
) -> None:
    """Named as the book names it; with more than the 5 s presence check
    allowed, it says so after 5 s and waits out the rest."""
    relay, port = await start_relay(tmp_path)
    try:
        phone: Node = make_node(tmp_path, "phone", "device")
        away = new_identity()  # a Homebase that is not running
        key = bytes(away.verify_key)
        phone.siblings.add(SiblingInfo(key, "mac", "homebase", f"127.0.0.1:{port}", 0))
        phone.close()
        done = await trio.to_thread.run_sync(
            lambda: subprocess.run(
                [*PIXIE, "--data", str(tmp_path / "phone"), "sync", "--timeout", timeout],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
        )
        assert done.returncode == 2, done
        assert done.stdout == ""
        said = [
            "pixie: mac has not answered within 5 s (is `pixie run` going on it?); "
            "waiting up to 6 s"
        ]
        assert done.stderr.splitlines() == [
            *(said if timeout == "6" else []),
            f"pixie: error: no answer from mac within {timeout} s: is `pixie run` going on it?",
        ]
    finally:
        relay.terminate()
        with trio.fail_after(20):
            await relay.wait()
