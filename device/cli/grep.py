"""``pixie grep``: the memory log searched as the model's grep_memory searches it."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.cli.common import json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.cli.quickgrep import show


def cmd_grep(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        result = GrepMemoryTool(node.mirror).run(args.pattern)
    show(result, args.json)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``grep``."""
    p = sub.add_parser(
        "grep", parents=[common], help="search the memory log as the model's grep_memory does"
    )
    p.add_argument("pattern", help="keyword, name, phrase or RE2 pattern (case-insensitive)")
    json_flag(p)
    p.set_defaults(func=cmd_grep)
