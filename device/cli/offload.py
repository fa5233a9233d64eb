"""``pixie offload``, ``fetch`` and ``recall``: parking note bodies on the Homebase
and bringing them back.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from pixie.device.cli import display
from pixie.device.cli.common import (
    days_flag,
    emit_json,
    json_flag,
    positive,
    seconds_flag,
)
from pixie.device.cli.nodes import open_node
from pixie.device.cli.reach import siblings_and_relay, via_daemon
from pixie.device.errors import BadInput
from pixie.device.node.keyed import Node
from pixie.device.store.shortids import resolve_note_id
from pixie.device.sync import offload
from pixie.device.sync.relayclient import RelayAddress, RelayUnavailable
from pixie.protocol.offload import Outcome


def _offload_relay(args: argparse.Namespace, node: Node) -> RelayAddress:
    _, relay = siblings_and_relay(args, node)
    return relay


def _report_from(data: dict[str, Any]) -> offload.OffloadReport:
    return offload.OffloadReport(
        note_id=str(data["note_id"]),
        outcome=Outcome(data["outcome"]),
        detail=str(data["detail"]),
        cleared=bool(data["cleared"]),
        bytes=int(data["bytes"]),
        holder=data["holder"],
    )


def cmd_offload(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    if (args.note_id is None) == (args.older_than is None):
        raise BadInput("give a NOTE_ID or --older-than DAYS (one of the two)")
    with open_node(args) as node:
        relay = _offload_relay(args, node)
        if args.note_id is not None:
            ids = [resolve_note_id(node.db, args.note_id)]
        else:
            ids = offload.candidates(node, args.older_than)

        async def run(service: offload.NoteOffloadService) -> list[offload.OffloadReport]:
            reports = []
            for i, note_id in enumerate(ids, 1):
                reports.append(await service.offload(note_id))
                display.progress(i, len(ids), "offloaded")
            # Holdings nothing here points at any more (after a recall, an edit
            # that raced an offload, a deletion) go now, while connected.
            await service.release_pending()
            return reports

        first = (
            via_daemon(args, node, "offload", {"note_id": ids[0], "timeout": timeout}, timeout)
            if ids
            else None
        )
        if not ids:
            reports = []
        elif first is not None:
            reports = [_report_from(first)]
            for i, note_id in enumerate(ids[1:], 2):
                more = {"note_id": note_id, "timeout": timeout}
                got = via_daemon(args, node, "offload", more, timeout)
                reports.append(
                    _report_from(got)
                    if got is not None
                    else offload.relay_down_report(note_id, "the running daemon went away")
                )
                display.progress(i, len(ids), "offloaded")
        else:
            try:
                reports = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
            except RelayUnavailable as exc:
                reports = [offload.relay_down_report(i, str(exc)) for i in ids]
    if args.json:
        emit_json(reports[0].as_json() if args.note_id else [r.as_json() for r in reports])
    else:
        for r in reports:
            if r.cleared:
                print(f"offloaded {r.note_id} ({r.bytes:,} B) to {r.holder}; its index stays here")
            else:
                print(f"kept {r.note_id} here ({r.outcome.value}): {r.detail}")
        if args.note_id is None:
            done = sum(r.cleared for r in reports)
            print(f"{done} of {len(reports)} notes offloaded", file=sys.stderr)
    failed = [r for r in reports if not r.cleared]
    return 1 if failed else 0


def cmd_fetch(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    with open_node(args) as node:
        note_id = resolve_note_id(node.db, args.note_id)
        relay = _offload_relay(args, node)

        async def run(service: offload.NoteOffloadService) -> str:
            return await service.fetch(note_id)

        via = via_daemon(args, node, "fetch", {"note_id": note_id, "timeout": timeout}, timeout)
        if via is not None:
            body = str(via)
        else:
            body = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
    if args.json:
        emit_json({"id": note_id, "body": body, "verified": True})
    else:
        print(body)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    with open_node(args) as node:
        note_id = resolve_note_id(node.db, args.note_id)
        relay = _offload_relay(args, node)

        async def run(service: offload.NoteOffloadService) -> bool:
            return await service.recall(note_id)

        via = via_daemon(args, node, "recall", {"note_id": note_id, "timeout": timeout}, timeout)
        if via is not None:
            released = bool(via)
        else:
            released = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
    if args.json:
        emit_json({"id": note_id, "recalled": True, "released": released})
    else:
        tail = (
            "the Homebase released its copy"
            if released
            else "the Homebase's copy will be released at the next chance"
        )
        print(f"recalled {note_id}: its body is here again; {tail}")
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``offload``, ``fetch`` and ``recall``."""

    def offload_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--relay",
            metavar="HOST:PORT[,...]",
            help="relay address, or several relays of one fleet tried in turn "
            "(default: from pairing)",
        )
        p.add_argument(
            "--timeout",
            type=seconds_flag,
            default=offload.ACK_TIMEOUT,
            metavar="SECONDS",
            help=f"how long to wait for the Homebase (default {offload.ACK_TIMEOUT:g})",
        )
        json_flag(p)

    p = sub.add_parser(
        "offload", parents=[common], help="park a note's body on the Homebase (index stays)"
    )
    p.add_argument("note_id", nargs="?", metavar="NOTE_ID")
    p.add_argument(
        "--older-than", type=days_flag, metavar="DAYS", help="offload every note older than DAYS"
    )
    offload_flags(p)
    p.set_defaults(func=cmd_offload)
    p = sub.add_parser("fetch", parents=[common], help="show an offloaded note's verified body")
    p.add_argument("note_id", metavar="NOTE_ID")
    offload_flags(p)
    p.set_defaults(func=cmd_fetch)
    p = sub.add_parser("recall", parents=[common], help="bring an offloaded note's body home")
    p.add_argument("note_id", metavar="NOTE_ID")
    offload_flags(p)
    p.set_defaults(func=cmd_recall)
