"""The ``pixie`` command: one entry point for every role.

It lives at the top of the import graph (the Homebase builds on the device, so
this is the one place that may see every package) and only assembles the
subcommands each package defines.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from pixie.device import agentcli
from pixie.device import cli as device_cli
from pixie.device.errors import BadInput, DeviceError
from pixie.device.node import Node
from pixie.device.syncdriver import PeerService
from pixie.homebase.holder import Holder
from pixie.protocol.errors import ProtocolError
from pixie.protocol.faults import HOLDER_FAULTS, FaultSpecError, parse_faults
from pixie.relay import cli as relay_cli
from pixie.relay.errors import RelayError


class UsageError(Exception):
    """A command line argparse refused."""


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus a message and exits; we want one clear line.
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def holder_services(node: Node, args: argparse.Namespace) -> list[PeerService]:
    """What `pixie run` on a Homebase answers besides sync: the holder, with
    the faults ``--faults`` asks for (refused at start if malformed)."""
    if node.role != "homebase":
        return []
    try:
        plan = parse_faults(args.faults or "", HOLDER_FAULTS, seed=args.fault_seed)
    except FaultSpecError as exc:
        raise BadInput(f"--faults: {exc}") from None
    if plan:
        print(f"pixie run: injecting holder faults {plan.describe()}", file=sys.stderr, flush=True)
    return [Holder(node, plan)]


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--data",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="data directory (default: $PIXIE_DATA or the per-user data dir)",
    )
    parser = _Parser(
        prog="pixie",
        description="Pixie Memory: local-first memory for a personal agent.",
        parents=[common],
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    device_cli.add_commands(sub, common, services=holder_services)
    agentcli.add_commands(sub, common)
    relay_cli.add_commands(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code: int = args.func(args)
        sys.stdout.flush()
    except (UsageError, DeviceError, ProtocolError, RelayError) as exc:
        print(f"pixie: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pixie: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``pixie grep x | head``); that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
