"""Small things a person reads every day: `log show` says who wrote an
event and reads only the rows it shows; text `status` gives each sibling's
last sync."""

from __future__ import annotations

import json
from pathlib import Path

from nacl.signing import SigningKey

from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import SyncOutcome, SyncReport, record_last_sync
from pixie.protocol.identity import fingerprint
from tests.support.cli import run_cli


def test_log_show_marks_what_i_wrote_and_shows_only_the_newest(data_dir: Path) -> None:
    for text, mine in (("one", False), ("two", True), ("three", False)):
        flags = ["--from-me"] if mine else []
        added = run_cli(
            "--data", str(data_dir), "log", "add", "--kind", "message", "--text", text,
            "--contact", "Priya", *flags,
        )  # fmt: skip
        assert added.code == 0, added.err
    out = run_cli("--data", str(data_dir), "log", "show", "--last", "2")
    shown = [json.loads(line) for line in out.out.splitlines()]
    assert [(e["text"], e.get("from_me")) for e in shown] == [("two", True), ("three", None)]
    every = run_cli("--data", str(data_dir), "log", "show")
    assert len(every.out.splitlines()) == 3


def test_status_gives_each_siblings_last_sync(node: Node, data_dir: Path) -> None:
    mac = SigningKey.generate().verify_key
    pad = SigningKey.generate().verify_key
    node.siblings.add(SiblingInfo(bytes(mac), "mac", "homebase", "127.0.0.1:7700", 0))
    node.siblings.add(SiblingInfo(bytes(pad), "pad", "device", "127.0.0.1:7700", 0))
    report = SyncReport(
        sibling=fingerprint(bytes(mac)),
        role="opener",
        outcome=SyncOutcome.SYNCED,
        round_trips=3,
        applied=1,
        finished_at=1_764_921_600.0,  # 2025-12-05 08:00 UTC
    )
    record_last_sync(node, report)
    out = run_cli("--data", str(data_dir), "status")
    assert out.code == 0, out.err
    lines = out.out.splitlines()
    at_mac = lines.index(next(line for line in lines if line.startswith("sibling: mac")))
    assert lines[at_mac + 1] == (
        "  last sync: 2025-12-05T08:00:00Z, synced, 3 round trips, 1 item taken in"
    )
    at_pad = lines.index(next(line for line in lines if line.startswith("sibling: pad")))
    assert lines[at_pad + 1] == "  last sync: never"
