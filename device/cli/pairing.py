"""``pixie invite`` and ``pixie pair``: pairing two peers through a relay;
``pixie devices``: the account's peers, and removing one."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from pixie.device.app import control
from pixie.device.cli.common import emit_json, json_flag, positive, seconds_flag
from pixie.device.cli.nodes import open_node
from pixie.device.cli.reach import relay_address
from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync import membership, pairing
from pixie.device.sync.lastsync import last_syncs_in
from pixie.device.sync.relayclient import RelayAddress
from pixie.protocol.keyprint import fingerprint
from pixie.protocol.timestamps import format_time


def cmd_invite(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    with open_node(args) as node:

        def show(code: str) -> None:
            print(code, flush=True)
            print(
                f"Waiting up to {timeout:g} s for `pixie pair CODE` on your other peer...",
                file=sys.stderr,
                flush=True,
            )

        # With `pixie run` serving this data dir, the invite goes over its
        # connection: one of our own would knock it off the relay (and it us).
        # With --relay, too, when the daemon is connected to one of those
        # relays (it says so: a result of None means go on alone).
        request: dict[str, object] = {"timeout": timeout}
        if args.relay:
            request["relay"] = str(RelayAddress.parse(args.relay))
        via = control.call(
            node.data.path,
            "invite",
            request,
            timeout + 15,
            on_note=lambda note: show(str(note.get("code"))),
        )
        if via is not None:
            sibling = SiblingInfo.from_json(via)
        else:
            relay = relay_address(args, node)
            sibling = trio.run(lambda: pairing.invite(node, relay, timeout=timeout, show_code=show))
    _paired(args, sibling)
    return 0


def cmd_pair(args: argparse.Namespace) -> int:
    timeout = positive(args.timeout, "--timeout")
    pairing.InviteCode.parse(args.code)  # a bad code: one line, before anything else
    relay = RelayAddress.parse(args.relay) if args.relay else None
    with open_node(args) as node:
        # As for invite: through a running daemon if it holds the code's relay
        # (unless --relay names others to go through).
        via = (
            control.call(
                node.data.path, "pair", {"code": args.code, "timeout": timeout}, timeout + 15
            )
            if relay is None
            else None
        )
        if via is not None:
            sibling = SiblingInfo.from_json(via)
        else:
            sibling = trio.run(lambda: pairing.pair(node, args.code, timeout=timeout, relay=relay))
    _paired(args, sibling)
    return 0


def _paired(args: argparse.Namespace, sibling: SiblingInfo) -> None:
    if args.json:
        emit_json(sibling.as_json())
    else:
        print(f"paired with {sibling.name} ({sibling.role}), fingerprint {sibling.fingerprint}")


def cmd_devices(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        if args.action == "remove":
            gone = membership.remove(node, args.name)
            if args.json:
                emit_json({"removed": gone.as_json()})
            else:
                print(
                    f"removed {gone.name} ({gone.role}), fingerprint {gone.fingerprint}: each "
                    "sibling refuses it from its next sync with this peer on; what it holds "
                    "stays with it"
                )
            return 0
        rows = _devices(node)
    if args.json:
        emit_json({"devices": rows})
        return 0
    for row in rows:
        state = row["state"]
        seen = f", last sync {row['last_sync']}" if row.get("last_sync") else ""
        print(f"{row['name']} ({row['role']}) {row['fingerprint']}: {state}{seen}")
    return 0


def _devices(node: Node) -> list[dict[str, object]]:
    """This peer, its siblings and the peers removed from the account."""
    out: list[dict[str, object]] = []
    removed_from = membership.removed_from(node)
    out.append(
        {
            "name": node.name,
            "role": node.role,
            "fingerprint": fingerprint(node.public_key()),
            "state": "this device"
            if removed_from is None
            else f"this device, removed from the account by {removed_from[0]} "
            f"at {format_time(removed_from[1])}",
        }
    )
    syncs = last_syncs_in(node.db)
    for sibling in node.siblings.all():
        row: dict[str, object] = {
            "name": sibling.name,
            "role": sibling.role,
            "fingerprint": sibling.fingerprint,
            "state": "paired"
            if sibling.paired_at <= 0
            else f"paired {format_time(sibling.paired_at)}",
        }
        last = syncs.get(sibling.fingerprint)
        if isinstance(last, dict) and isinstance(last.get("at"), int | float):
            row["last_sync"] = format_time(int(float(last["at"]) * 1_000_000))
            row["last_outcome"] = last.get("outcome")
        out.append(row)
    for key, (name, at, by) in sorted(node.siblings.removed().items(), key=lambda kv: kv[1][1]):
        out.append(
            {
                "name": name,
                "role": "",
                "fingerprint": fingerprint(key),
                "state": f"removed {format_time(at)} by {fingerprint(by)}",
            }
        )
    return out


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``invite``, ``pair`` and ``devices``."""
    p = sub.add_parser("invite", parents=[common], help="print a one-time pairing code and wait")
    p.add_argument(
        "--relay",
        metavar="HOST:PORT[,...]",
        help="relay address (tls://HOST:PORT for TLS), or several relays of one fleet "
        "separated by commas, tried in turn",
    )
    p.add_argument(
        "--timeout", type=seconds_flag, default=pairing.DEFAULT_TIMEOUT, metavar="SECONDS"
    )
    json_flag(p)
    p.set_defaults(func=cmd_invite)
    p = sub.add_parser("pair", parents=[common], help="pair with the peer that printed CODE")
    p.add_argument("code", metavar="CODE")
    p.add_argument(
        "--relay",
        metavar="HOST:PORT[,...]",
        help="reach the inviter through these relays (of the same fleet) instead of the code's",
    )
    p.add_argument("--timeout", type=seconds_flag, default=60.0, metavar="SECONDS")
    json_flag(p)
    p.set_defaults(func=cmd_pair)
    p = sub.add_parser(
        "devices",
        parents=[common],
        help="list the account's devices; `devices remove NAME` removes a lost one",
    )
    json_flag(p)
    p.set_defaults(func=cmd_devices, action="list")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    r = actions.add_parser(
        "remove",
        parents=[common],
        help="remove a device from the account: every sibling refuses it from its next sync on",
    )
    r.add_argument("name", metavar="NAME", help="its name, or the start of its fingerprint")
    json_flag(r)
