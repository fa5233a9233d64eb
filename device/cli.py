"""The device-side commands of ``pixie``: init, status, contacts, log, grep.

Handlers print exactly what a user (or, for grep, the model) should see and
raise a `DeviceError` for anything refused; the entry point turns that into
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pixie.protocol.errors import ProtocolError
from pixie.protocol.timestamps import format_time, now_us, parse_time

from .contacts import clean_name
from .datadir import ROLES, DataDir, resolve_data_dir
from .errors import BadInput
from .eventfile import read_events
from .memlog import NewEvent, check_ref, check_text, parse_kind
from .node import Node

Handler = Any  # argparse namespaces carry the handler as an attribute


def emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def data_path(args: argparse.Namespace) -> Path:
    return resolve_data_dir(getattr(args, "data", None))


def open_node(args: argparse.Namespace) -> Node:
    return Node.open(data_path(args))


# -- init and status -------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    path = data_path(args)
    name = clean_name(args.name, "name") if args.name is not None else None
    DataDir.init(path, name=name, role=args.role)
    with Node.open(path) as node:
        if args.json:
            emit_json({"data": str(path), "role": node.role, "origin": node.origin})
        else:
            print(f"initialised a {node.role} data dir at {path}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        info = {
            "data": str(node.data.path),
            "role": node.role,
            "name": node.name,
            "origin": node.origin,
            "events": node.log.count(),
            "contacts": len(node.contacts.all()),
        }
    if args.json:
        emit_json(info)
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
    return 0


# -- contacts --------------------------------------------------------------


def cmd_contacts_add(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        cid, created = node.contacts.add(args.name, args.alias or [], now_us())
    if args.json:
        emit_json({"id": cid, "created": created})
    else:
        print(cid)
    return 0


def cmd_contacts_list(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        contacts = node.contacts.all()
    if args.json:
        emit_json([{"id": c.id, "name": c.name, "aliases": list(c.aliases)} for c in contacts])
        return 0
    for c in contacts:
        aka = f" (also: {', '.join(c.aliases)})" if c.aliases else ""
        print(f"{c.id}  {c.name}{aka}")
    return 0


# -- the memory log --------------------------------------------------------


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
    # Open (and so validate) the data dir before reading a possibly long file.
    with open_node(args) as node:
        if args.file == "-":
            events = read_events(sys.stdin.buffer)
        else:
            try:
                with Path(args.file).open("rb") as stream:
                    events = read_events(stream)
            except OSError as exc:
                raise BadInput(f"cannot read {args.file}: {exc.strerror}") from None
        result = node.log.append(events, now=now_us())
    summary = {
        "imported": len(result.ids),
        "already_present": result.skipped,
        "new_contacts": result.new_contacts,
    }
    if args.json:
        emit_json(summary)
    else:
        print(
            f"imported {summary['imported']} events ({summary['already_present']} already "
            f"present), {summary['new_contacts']} new contacts"
        )
    return 0


def cmd_grep(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        result = node.grep.run(args.pattern)
    if args.json:
        emit_json(result.as_json())
    else:
        print(result.render())
    return 0


def cmd_log_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        records = node.log.all_records()
        names = node.contacts.names()
    for r in records[-args.last :] if args.last else records:
        item = {
            "id": r.id,
            "kind": r.kind.value,
            "at": format_time(r.at),
            "contact": names.get(r.contact_id) if r.contact_id else None,
            "thread": r.thread,
            "source": r.source,
            "text": r.text,
        }
        emit_json({k: v for k, v in item.items() if v is not None})
    return 0


# -- the parser ------------------------------------------------------------


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register the device commands on the top-level subparsers."""

    def json_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("init", parents=[common], help="create a data dir for this peer")
    p.add_argument("--name", help="a name for this peer (shown to its siblings)")
    p.add_argument("--role", choices=ROLES, default="device", help="device (default) or homebase")
    json_flag(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("status", parents=[common], help="what this peer holds")
    json_flag(p)
    p.set_defaults(func=cmd_status)

    contacts = sub.add_parser("contacts", parents=[common], help="people in your life")
    csub = contacts.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = csub.add_parser("add", parents=[common], help="add a contact (or aliases to one)")
    p.add_argument("name")
    p.add_argument("--alias", action="append", metavar="A", help="another name (repeatable)")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_add)
    p = csub.add_parser("list", parents=[common], help="list contacts")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_list)

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
    p = lsub.add_parser("import", parents=[common], help="import events from JSON Lines")
    p.add_argument("file", metavar="FILE.jsonl", help="a JSON Lines file, or - for stdin")
    json_flag(p)
    p.set_defaults(func=cmd_log_import)
    p = lsub.add_parser("show", parents=[common], help="print events as JSON Lines")
    p.add_argument("--last", type=int, metavar="N", help="only the N most recently written")
    p.set_defaults(func=cmd_log_show)

    p = sub.add_parser(
        "grep", parents=[common], help="search the memory log as the model's grep_memory does"
    )
    p.add_argument("pattern", help="keyword, name, phrase or RE2 pattern (case-insensitive)")
    json_flag(p)
    p.set_defaults(func=cmd_grep)
