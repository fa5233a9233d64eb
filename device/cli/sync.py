"""``pixie sync``: one sync session with each sibling."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from pixie.device.app import daemon
from pixie.device.cli import display
from pixie.device.cli.common import emit_json, json_flag, positive, seconds_flag
from pixie.device.cli.nodes import open_node
from pixie.device.cli.reach import siblings_and_relay, via_daemon
from pixie.device.sync import membership
from pixie.device.sync.driver import SyncOutcome, SyncReport
from pixie.protocol.sync import SyncStats
from pixie.protocol.timestamps import format_time

# A sync draws a progress line only when the sibling holds this many more items
# than we do (an initial sync of a large log, not the usual handful).
SYNC_PROGRESS_FROM = 1000


def cmd_sync(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    with open_node(args) as node:
        gone = membership.removed_from(node)
        if gone is not None:
            who, when = gone
            print(
                f"pixie: error: this device was removed from the account by {who} at "
                f"{format_time(when)}; its siblings refuse it (what it holds stays here)",
                file=sys.stderr,
            )
            return 1
        siblings, relay = siblings_and_relay(args, node)
        via = via_daemon(args, node, "sync", {}, timeout * 4)
        if via is not None:
            reports = [SyncReport.from_json(r) for r in via]
        else:

            def show(sibling: str, stats: SyncStats) -> None:
                if stats.expected >= SYNC_PROGRESS_FROM:
                    display.progress(stats.applied, stats.expected, f"{sibling}: records applied:")

            def absent(who: str, seconds: float) -> None:
                display.end_progress()
                print(
                    f"pixie: {who} has not answered within {seconds:g} s "
                    f"(is `pixie run` going on it?); waiting up to {timeout:g} s",
                    file=sys.stderr,
                    flush=True,
                )

            try:
                reports = trio.run(
                    lambda: daemon.sync_once(
                        node, relay, siblings, idle_timeout=timeout, progress=show, absent=absent
                    )
                )
            finally:
                display.end_progress()
        digest = node.digest().digest().hex()
    failed = [r for r in reports if r.outcome is SyncOutcome.FAILED]
    silent = [r for r in reports if r.outcome is SyncOutcome.NO_ANSWER]
    if args.json:
        emit_json({"digest": digest, "sessions": [r.as_json() for r in reports]})
    else:
        for r in reports:
            if r.outcome is not SyncOutcome.NO_ANSWER:  # said once, below
                print(r.describe(timeout))
    if failed:
        print(f"pixie: error: sync failed: {failed[0].error}", file=sys.stderr)
        return 1
    if silent and len(silent) == len(reports):
        # Nothing was tried and nothing changed: the sibling is just not there.
        print(f"pixie: error: {silent[0].describe(timeout)}", file=sys.stderr)
        return 2
    if not args.json:
        # Some siblings met, others away (a laptop that is off): said, not an error.
        for r in silent:
            print(r.describe(timeout))
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``sync``."""
    p = sub.add_parser("sync", parents=[common], help="run one sync session with each sibling")
    p.add_argument(
        "--relay",
        metavar="HOST:PORT[,...]",
        help="relay address, or several relays of one fleet tried in turn (default: from pairing)",
    )
    p.add_argument(
        "--timeout",
        type=seconds_flag,
        default=30.0,
        metavar="SECONDS",
        help="give up when the sibling is silent this long (default 30)",
    )
    json_flag(p)
    p.set_defaults(func=cmd_sync)
