"""``pixie log``: append to, import into and print the memory log."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.cli import ingest
from pixie.device.cli.common import count_flag, emit_json, json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.errors import BadInput
from pixie.device.ingest import registry as importers
from pixie.device.store import identities
from pixie.device.store.contacts import clean_name
from pixie.device.store.memlog import NewEvent, check_ref, check_text, parse_kind
from pixie.protocol.errors import ProtocolError
from pixie.protocol.timestamps import format_time, now_us, parse_time


def cmd_log_add(args: argparse.Namespace) -> int:
    try:
        at = parse_time(args.at) if args.at is not None else now_us()
    except ProtocolError as exc:
        raise BadInput(f"--at: {exc}") from None
    event = NewEvent(
        kind=parse_kind(args.kind),
        at=at,
        text=check_text(args.text),
        contact=clean_name(args.contact) if args.contact is not None else None,
        thread=check_ref(args.thread, "--thread"),
        source=check_ref(args.source, "--source"),
        from_me=True if args.from_me else None,
    )
    with open_node(args) as node:
        result = node.log.append([event], now=now_us())
    if args.json:
        emit_json({"id": result.ids[0]})
    else:
        print(result.ids[0])
    return 0


def cmd_log_import(args: argparse.Namespace) -> int:
    # `pixie import` under its older name; a file no importer recognises is
    # read as JSON Lines, the format this command has always read.
    return ingest.run_import(args, fallback=importers.get(importers.DEFAULT))


def cmd_log_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        records = node.log.last_records(args.last) if args.last else node.log.all_records()
        names = node.contacts.names()
        with node.db.reading(plain=True) as conn:
            mine = identities.me_contacts(conn)  # from_me as corrected by `contacts me`
    for r in records:
        item = {
            "id": r.id,
            "kind": r.kind.value,
            "at": format_time(r.at),
            "contact": names.get(r.contact_id) if r.contact_id else None,
            "from_me": True if r.contact_id in mine else r.from_me,
            "thread": r.thread,
            "source": r.source,
            "text": r.text,
        }
        emit_json({k: v for k, v in item.items() if v is not None})
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``log add``, ``log import`` and ``log show``."""
    log = sub.add_parser("log", parents=[common], help="the append-only memory log")
    lsub = log.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = lsub.add_parser("add", parents=[common], help="append one event")
    p.add_argument("--kind", required=True, help="journal, message, call, voicemail, post, ...")
    p.add_argument("--text", required=True)
    p.add_argument("--contact", metavar="NAME")
    p.add_argument("--thread", metavar="ID")
    p.add_argument("--source", metavar="REF")
    p.add_argument("--at", metavar="ISO8601", help="when it happened (default: now)")
    p.add_argument("--from-me", action="store_true", help="the user wrote it")
    json_flag(p)
    p.set_defaults(func=cmd_log_add)
    p = lsub.add_parser("import", parents=[common], help="the same as pixie import")
    p.add_argument("path", metavar="PATH", help="a file or folder, or - for JSON Lines on stdin")
    ingest.add_import_flags(p)
    p.set_defaults(func=cmd_log_import)
    p = lsub.add_parser("show", parents=[common], help="print events as JSON Lines")
    p.add_argument("--last", type=count_flag, metavar="N", help="only the N most recently written")
    p.set_defaults(func=cmd_log_show)
