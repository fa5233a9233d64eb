"""``pixie run``: the daemon that stays connected and in sync until stopped."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

import trio

from pixie.device.app import daemon
from pixie.device.cli.common import positive, seconds_flag
from pixie.device.cli.nodes import open_node
from pixie.device.cli.reach import siblings_and_relay
from pixie.device.errors import BadInput
from pixie.device.logs import configure_logging
from pixie.device.node.keyed import Node
from pixie.device.sync.driver import PeerService
from pixie.protocol.identity import fingerprint


def cmd_run(args: argparse.Namespace) -> int:
    interval = positive(args.interval, "--interval")
    with open_node(args) as node:
        services = args.services(node, args) if args.services is not None else []
        if args.faults and not services:
            raise BadInput("--faults applies to a Homebase's `pixie run`; this peer is a device")
        _, relay = siblings_and_relay(args, node)
        configure_logging(json_lines=args.json_logs)
        logging.getLogger("pixie.run").info(
            "pixie run: %s %s via %s", node.role, fingerprint(node.public_key()), relay
        )
        trio.run(lambda: daemon.run_until_signal(node, relay, interval=interval, services=services))
    return 0


def add_commands(
    sub: Any,
    common: argparse.ArgumentParser,
    services: Callable[[Node, argparse.Namespace], list[PeerService]] | None = None,
) -> None:
    """Register ``run``. ``services`` gives it what else a peer of its role
    answers (the holder, on a Homebase), built from the node and the command
    line."""
    p = sub.add_parser("run", parents=[common], help="stay connected and in sync (until Ctrl-C)")
    p.add_argument(
        "--relay",
        metavar="HOST:PORT[,...]",
        help="relay address, or several relays of one fleet tried in turn (default: from pairing)",
    )
    p.add_argument(
        "--interval",
        type=seconds_flag,
        default=daemon.SYNC_INTERVAL,
        metavar="SECONDS",
        help="seconds between syncs when nothing changes",
    )
    p.add_argument(
        "--faults",
        metavar="SPEC",
        default="",
        help="Homebase only: inject holder faults, e.g. 'refuse=0.5,ack-delay=1@2' (see README)",
    )
    p.add_argument("--fault-seed", type=int, metavar="N", help="seed the fault dice")
    p.add_argument("--json-logs", action="store_true", help="log JSON Lines instead of text")
    p.set_defaults(func=cmd_run, services=services)
