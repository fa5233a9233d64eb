"""Reaching siblings from a command: the relay to use, the siblings to sync
with, and the `pixie run` daemon already serving this data dir."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.app import control
from pixie.device.errors import BadInput
from pixie.device.node.clear import ClearNode
from pixie.device.store import config
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.relayclient import RelayAddress


def relay_address(
    args: argparse.Namespace, node: ClearNode, fallback: str | None = None
) -> RelayAddress:
    """--relay, then PIXIE_RELAY, then the config file, then ``fallback``. Each
    may name several relays of one fleet: ``A,B,C`` (in the config file also a
    list of strings)."""
    settings = config.effective(node.data.config_path, {"relay": args.relay})
    address = settings.get("relay") or fallback
    if isinstance(address, list):
        address = ",".join(address)
    if not address:
        raise BadInput("no relay address: pass --relay HOST:PORT or set [relay] address")
    return RelayAddress.parse(str(address))


def siblings_and_relay(
    args: argparse.Namespace, node: ClearNode
) -> tuple[list[SiblingInfo], RelayAddress]:
    """The siblings to sync with and the relay to reach them (by default, the
    one they were paired through)."""
    siblings = node.siblings.all()
    if not siblings:
        raise BadInput("no sibling to sync with: pair first (`pixie invite` / `pixie pair`)")
    return siblings, relay_address(args, node, siblings[0].relay)


def via_daemon(
    args: argparse.Namespace, node: ClearNode, op: str, op_args: dict[str, Any], timeout: float
) -> Any | None:
    """The result of ``op`` run by the `pixie run` serving this data dir over its
    own relay connection, or None when no daemon runs here (or `--relay` asks
    for another relay than the daemon's)."""
    if getattr(args, "relay", None):
        return None
    return control.call(node.data.path, op, op_args, timeout + 5)
