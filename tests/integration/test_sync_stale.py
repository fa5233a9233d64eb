"""Sync sessions that meet leftovers: Hello and Abort messages of sessions long
over, waiting in a peer's relay mailbox, and a sibling whose session is still
open when the peer comes online. An honest sync must succeed whichever key
sorts lower (the collision rule favours the lower one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from pixie.device.app.daemon import sync_once
from pixie.device.node.keyed import Node
from pixie.device.sync.driver import SyncOutcome
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol import syncwire
from pixie.protocol.peerwire import SyncData
from pixie.protocol.sync import SyncSession
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.stale import differ, link_up, ordered_pair, serve
from tests.support.synchelp import replica


async def leave_stale_messages(mac: Node, phone: Node, relay: RelayAddress) -> None:
    """What a Homebase leaves in an offline phone's mailbox: the Hellos of
    sessions that timed out long ago, and an Abort of one."""
    client = await RelayClient.connect(relay, mac.identity())
    link = PeerLink(mac.identity(), mac.siblings, client)
    for _ in range(3):
        old = SyncSession(replica(mac), opener=True)
        old.start()
        hello = old.next_message()
        assert isinstance(hello, syncwire.Hello)
        await link.send(phone.public_key(), SyncData(syncwire.encode(hello)))
    abort = syncwire.Abort(os.urandom(syncwire.SESSION_BYTES), "the sibling was silent")
    await link.send(phone.public_key(), SyncData(syncwire.encode(abort)))
    await client.aclose()


@pytest.mark.parametrize("homebase_lower", [True, False])
async def test_stale_hellos_and_aborts_do_not_fail_the_next_sync(
    tmp_path: Path, nursery: trio.Nursery, homebase_lower: bool
) -> None:
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    phone, mac = ordered_pair(tmp_path, homebase_lower)
    relay = RelayAddress("127.0.0.1", port)
    link_up(phone, mac, relay)
    differ(phone, mac)
    await leave_stale_messages(mac, phone, relay)
    await serve(mac, relay, nursery)
    with trio.fail_after(30):
        (report,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=15)
    assert report.outcome is SyncOutcome.SYNCED, report
    assert phone.digest() == mac.digest()


@pytest.mark.parametrize("homebase_lower", [True, False])
async def test_a_session_the_homebase_opened_meanwhile_is_taken_up(
    tmp_path: Path, nursery: trio.Nursery, homebase_lower: bool
) -> None:
    """The Homebase opened a session while the phone was away, and it is still
    open when the phone syncs: both sessions collide, one goes on."""
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    phone, mac = ordered_pair(tmp_path, homebase_lower)
    relay = RelayAddress("127.0.0.1", port)
    link_up(phone, mac, relay)
    differ(phone, mac)
    await leave_stale_messages(mac, phone, relay)
    endpoint = await serve(mac, relay, nursery)
    theirs: list[SyncOutcome] = []

    async def homebase_session() -> None:
        theirs.append((await endpoint.sync_with(phone.public_key())).outcome)

    nursery.start_soon(homebase_session)
    with trio.fail_after(10):  # its Hello is on its way to the phone's mailbox
        while not endpoint.open_sessions():
            await trio.sleep(0.01)
    with trio.fail_after(30):
        (report,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=15)
    assert report.outcome is SyncOutcome.SYNCED, report
    assert phone.digest() == mac.digest()
    with trio.fail_after(30):
        while not theirs:
            await trio.sleep(0.01)
    assert theirs == [SyncOutcome.SYNCED]
