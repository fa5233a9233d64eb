"""Two nodes in a fixed key order, linked and made to differ, for the session-collision tests."""

from __future__ import annotations

from pathlib import Path

import trio

from pixie.device.node.keyed import Node
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import SyncEndpoint
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from tests.support.wire import make_node


def ordered_pair(tmp_path: Path, homebase_lower: bool) -> tuple[Node, Node]:
    """A phone and a mac whose keys sort as asked (new pairs until they do:
    an even chance each time)."""
    for attempt in range(64):
        mac = make_node(tmp_path, f"mac{attempt}", "homebase")
        phone = make_node(tmp_path, f"phone{attempt}", "device")
        if (mac.public_key() < phone.public_key()) == homebase_lower:
            return phone, mac
        phone.close()
        mac.close()
    raise AssertionError("no pair of keys sorted as asked")  # pragma: no cover


def link_up(phone: Node, mac: Node, relay: RelayAddress) -> None:
    phone.siblings.add(SiblingInfo(mac.public_key(), "mac", "homebase", str(relay), 0))
    mac.siblings.add(SiblingInfo(phone.public_key(), "phone", "device", str(relay), 0))


def differ(phone: Node, mac: Node) -> None:
    phone.log.append([NewEvent(EventKind.JOURNAL, 1, "written on the phone")], now=1)
    mac.log.append([NewEvent(EventKind.JOURNAL, 2, "written on the mac")], now=2)


async def serve(
    node: Node, relay: RelayAddress, nursery: trio.Nursery, idle_timeout: float = 15
) -> SyncEndpoint:
    client = await RelayClient.connect(relay, node.identity())
    endpoint = SyncEndpoint(node, PeerLink(node.identity(), node.siblings, client))
    endpoint.idle_timeout = idle_timeout
    await nursery.start(endpoint.serve)
    return endpoint
