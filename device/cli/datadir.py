"""The data dir's own commands: ``init``, ``status`` and ``config show``."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.cli.common import data_path, emit_json, json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.node.keyed import Node
from pixie.device.store import config
from pixie.device.store.contacts import clean_name
from pixie.device.store.datadir import ROLES
from pixie.device.store.keystore import describe_key_store, open_key_store
from pixie.device.store.provision import create_data_dir
from pixie.device.sync.lastsync import last_syncs_in
from pixie.protocol.identity import fingerprint
from pixie.protocol.timestamps import format_time


def cmd_init(args: argparse.Namespace) -> int:
    path = data_path(args)
    name = clean_name(args.name, "name") if args.name is not None else None
    store = open_key_store()
    create_data_dir(path, name=name, role=args.role, key_store=store)
    where = describe_key_store(store)
    with Node.open(path) as node:
        if args.json:
            emit_json({"data": str(path), "role": node.role, "origin": node.origin, "keys": where})
        else:
            print(f"initialised a {node.role} data dir at {path}")
            print(f"keys: {where} (back them up with `pixie keys export FILE`)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        siblings = node.siblings.all()
        info = {
            "data": str(node.data.path),
            "role": node.role,
            "name": node.name,
            "fingerprint": fingerprint(node.public_key()),
            "origin": node.origin,
            "digest": node.digest().digest().hex(),
            "events": node.log.count(),
            "contacts": len(node.contacts.all()),
            **{f"{zone}_notes": count for zone, count in node.notebook.counts().items()},
            "keys": describe_key_store(open_key_store()),
        }
        last = last_syncs_in(node.db)
    if args.json:
        emit_json(
            {
                **info,
                "siblings": [
                    {**s.as_json(), "last_sync": last.get(s.fingerprint)} for s in siblings
                ],
            }
        )
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
        for s in siblings:
            print(f"sibling: {s.name} ({s.role}) {s.fingerprint} via {s.relay}")
            print(f"  last sync: {_last_sync_line(last.get(s.fingerprint))}")
    return 0


def _last_sync_line(report: object) -> str:
    """One line for a sibling's last sync report (as `record_last_sync` keeps it)."""
    if not isinstance(report, dict):
        return "never"
    at = report.get("at")
    when = format_time(int(at * 1_000_000)) if isinstance(at, int | float) else "at an unknown time"
    parts = [f"{when}, {report.get('outcome', 'unknown')}"]
    trips = report.get("round_trips")
    if isinstance(trips, int):
        parts.append(f"{trips} round trip{'' if trips == 1 else 's'}")
    applied = report.get("applied")
    if isinstance(applied, int):
        parts.append(f"{applied} item{'' if applied == 1 else 's'} taken in")
    return ", ".join(parts)


def cmd_config_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        settings = config.describe(node.data.config_path)
        siblings = node.siblings.all()
    relay = settings[0]
    if relay["value"] is None and siblings:
        relay["value"], relay["source"] = siblings[0].relay, "pairing"
    if args.json:
        emit_json({s["name"]: {"value": s["value"], "source": s["source"]} for s in settings})
    else:
        for s in settings:
            value = "-" if s["value"] is None else s["value"]
            print(f"{s['name']} = {value}  ({s['source']})")
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``config``, ``init`` and ``status``."""
    cfg = sub.add_parser("config", parents=[common], help="the settings in force")
    cfgsub = cfg.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = cfgsub.add_parser(
        "show", parents=[common], help="each setting, its value and where it came from"
    )
    json_flag(p)
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser("init", parents=[common], help="create a data dir for this peer")
    p.add_argument("--name", help="a name for this peer (shown to its siblings)")
    p.add_argument("--role", choices=ROLES, default="device", help="device (default) or homebase")
    json_flag(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("status", parents=[common], help="what this peer holds")
    json_flag(p)
    p.set_defaults(func=cmd_status)
