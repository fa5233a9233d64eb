"""The data dir's own commands: ``init``, ``status``, ``config show`` and ``config set``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pixie.device.cli.common import data_path, emit_json, json_flag
from pixie.device.cli.nodes import open_node
from pixie.device.cli.statusview import show, status_of
from pixie.device.node.keyed import Node
from pixie.device.store import config
from pixie.device.store.contacts import clean_name
from pixie.device.store.datadir import ROLES
from pixie.device.store.keystore import (
    DATA_KEYS_DIR,
    FileKeyStore,
    describe_key_store,
    open_key_store,
)
from pixie.device.store.provision import create_data_dir


def cmd_init(args: argparse.Namespace) -> int:
    path = data_path(args)
    name = clean_name(args.name, "name") if args.name is not None else None
    me = config.check_me(args.me or [], "--me")
    store = FileKeyStore(path / DATA_KEYS_DIR) if args.keys_in_data else open_key_store()
    create_data_dir(path, name=name, role=args.role, key_store=store)
    if me:
        config.save_me(path, me)
    where = describe_key_store(store)
    with Node.open(path) as node:
        if args.json:
            emit_json(
                {
                    "data": str(path),
                    "role": node.role,
                    "origin": node.origin,
                    "keys": where,
                    "keys_in_data": bool(args.keys_in_data),
                }
            )
        else:
            print(f"initialised a {node.role} data dir at {path}")
            print(f"keys: {where} (back them up with `pixie keys export FILE`)")
    if args.keys_in_data:
        print(
            f"pixie: warning: this data dir holds its own secret keys ({path / DATA_KEYS_DIR}): "
            "whoever copies the folder can open its sealed notes and speak for this peer; "
            "for test vaults and portable setups only",
            file=sys.stderr,
        )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    # A plain `pixie status` is answered before this runs (`statusview.quick`)
    # when the data dir needs nothing the node's opening does.
    with open_node(args) as node:
        status = status_of(
            node.data.path,
            node.db.meta(),
            node.digest().digest().hex(),
            node.log.count(),
            len(node.contacts.all()),
            node.notebook.counts(),
            node.siblings.all(),
        )
    show(status, args.json)
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        settings = config.describe(node.data.config_path)
        siblings = node.siblings.all()
    relay = settings[0]
    if relay["value"] is None and siblings:
        relay["value"], relay["source"] = siblings[0].relay, "pairing"
    me = config.load_me(node.data.path)
    settings.append(
        {
            "name": "me",
            "value": ", ".join(me) if me else None,
            "source": config.ME_FILE if me is not None else "unset",
        }
    )
    if args.json:
        emit_json({s["name"]: {"value": s["value"], "source": s["source"]} for s in settings})
    else:
        for s in settings:
            value = "-" if s["value"] is None else s["value"]
            print(f"{s['name']} = {value}  ({s['source']})")
    return 0


def cmd_config_set(args: argparse.Namespace) -> int:
    """``config set me VALUE...``: who the user is, for every import here."""
    values = config.check_me(args.values, "me")
    with open_node(args) as node:
        config.save_me(node.data.path, values)
    if args.json:
        emit_json({"me": values})
    elif values:
        print(f"me = {', '.join(values)}")
    else:
        print("me = - (imports will not know which messages are yours)")
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
    p = cfgsub.add_parser(
        "set",
        parents=[common],
        help="change a setting of this data dir: me (who you are, for imports)",
        description="pixie config set me NAME ADDRESS NUMBER ... (or one comma-separated "
        "list): your names, addresses and phone numbers, which every import here "
        "uses to tell your own messages. Replaces what was set; none clears it.",
    )
    p.add_argument("setting", choices=("me",), help="the setting")
    p.add_argument("values", nargs="*", metavar="VALUE", help="its values")
    json_flag(p)
    p.set_defaults(func=cmd_config_set)

    p = sub.add_parser("init", parents=[common], help="create a data dir for this peer")
    p.add_argument("--name", help="a name for this peer (shown to its siblings)")
    p.add_argument("--role", choices=ROLES, default="device", help="device (default) or homebase")
    p.add_argument(
        "--keys-in-data",
        action="store_true",
        help="keep this peer's secret keys inside the data dir (0600 files in its keys "
        "folder) rather than the system keyring: for test vaults and portable setups",
    )
    p.add_argument(
        "--me",
        action="append",
        metavar="ADDRESS|NAME",
        help="your address, number or name, so imports tell your messages (repeatable)",
    )
    json_flag(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("status", parents=[common], help="what this peer holds")
    json_flag(p)
    p.set_defaults(func=cmd_status)
