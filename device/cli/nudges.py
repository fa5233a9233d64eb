"""``pixie nudges``: the finished nudges from both zones."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.cli.common import emit_json, json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.notebook.huddle import nudges
from pixie.protocol.timestamps import now_us


def cmd_nudges(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        found = nudges(node.notebook, now_us())
    if args.json:
        emit_json([n.as_json() for n in found])
    elif not found:
        print("No nudges right now.")
    else:
        for n in found:
            print(f"- {n.action}")
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``nudges``."""
    p = sub.add_parser("nudges", parents=[common], help="finished nudges from both zones")
    json_flag(p)
    p.set_defaults(func=cmd_nudges)
