"""``pixie distill``: one distillation pass over new material."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from pixie.device.cli import display
from pixie.device.cli.common import emit_json, json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import BadInput


def cmd_distill(args: argparse.Namespace) -> int:
    if args.offline and args.url is not None:
        raise BadInput("--offline and --url contradict each other: give one of them")
    flags = {"llm_url": args.url, "llm_model": args.model, "llm_timeout": args.timeout}
    with open_node(args) as node:
        service = NotetakingService.for_node(node, flags, offline_only=args.offline)

        def show(done: int, total: int) -> None:
            display.progress(done, total, "sources looked at:")

        report = trio.run(lambda: service.run_pass(everything=args.all, progress=show))
    if args.json:
        emit_json(report.as_json())
    else:
        print(report.render())
    if report.failed:
        print(
            f"pixie: error: {report.failed} source{'s' if report.failed != 1 else ''} could not "
            "be distilled; the next pass tries again",
            file=sys.stderr,
        )
        return 1
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``distill``."""
    p = sub.add_parser(
        "distill", parents=[common], help="distil new conversations, posts and calls into notes"
    )
    p.add_argument(
        "--url", metavar="URL", help="an OpenAI-compatible API base (overrides [llm] url)"
    )
    p.add_argument("--model", metavar="NAME", help="the model to ask (overrides [llm] model)")
    p.add_argument(
        "--timeout",
        type=float,  # the model client refuses a nonsense value (settings.check_timeout)
        metavar="SECONDS",
        help="deadline per model answer (default 60)",
    )
    p.add_argument(
        "--offline", action="store_true", help="use the built-in distiller only, whatever is set"
    )
    p.add_argument(
        "--all", action="store_true", help="redo every source, not only those with new material"
    )
    json_flag(p)
    p.set_defaults(func=cmd_distill)
