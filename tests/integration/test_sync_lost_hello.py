"""A Hello the sibling never read: the Homebase opened a session as the
phone's previous connection was closing, the relay handed the Hello to that
connection, and it went down unread. The Homebase's session is still opening
when the phone next syncs; the two collide, and an honest sync must still
succeed, whichever key sorts lower."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pixie.device.app.daemon import sync_once
from pixie.device.sync.driver import SyncOutcome
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol import syncwire
from pixie.protocol.peerwire import Ping, Pong, SyncData
from pixie.protocol.sync import SyncSession
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.stale import differ, link_up, ordered_pair, serve
from tests.support.synchelp import replica

PHONE_IDLE = 3.0  # the phone's patience: short, the test waits on it only when broken


@pytest.mark.parametrize("homebase_lower", [True, False])
async def test_a_session_whose_hello_was_lost_does_not_fail_the_next_sync(
    tmp_path: Path, nursery: trio.Nursery, homebase_lower: bool
) -> None:
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    phone, mac = ordered_pair(tmp_path, homebase_lower)
    relay = RelayAddress("127.0.0.1", port)
    link_up(phone, mac, relay)
    endpoint = await serve(mac, relay, nursery)
    # The phone's previous connection, about to close: it takes the Homebase's
    # Hello off the relay and goes away without reading it.
    closing = await RelayClient.connect(relay, phone.identity())
    theirs: list[SyncOutcome] = []
    ended = trio.Event()

    async def homebase_session() -> None:
        theirs.append((await endpoint.sync_with(phone.public_key())).outcome)
        ended.set()

    nursery.start_soon(homebase_session)
    with trio.fail_after(10):
        await closing.receive()
    await closing.aclose()
    differ(phone, mac)
    with trio.fail_after(30):
        (report,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=PHONE_IDLE)
    assert report.outcome is SyncOutcome.SYNCED, report
    assert phone.digest() == mac.digest()
    with trio.fail_after(30):
        await ended.wait()
    assert theirs == [SyncOutcome.SYNCED]


@pytest.mark.parametrize("homebase_lower", [True, False])
async def test_a_hello_repeated_after_its_session_ended_opens_nothing(
    tmp_path: Path, nursery: trio.Nursery, homebase_lower: bool
) -> None:
    """A copy of a Hello arriving after the session it opened has ended (a
    sibling repeats its Hello to show its session alive) is not a new session."""
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    phone, mac = ordered_pair(tmp_path, homebase_lower)
    relay = RelayAddress("127.0.0.1", port)
    link_up(phone, mac, relay)
    endpoint = await serve(mac, relay, nursery)
    client = await RelayClient.connect(relay, phone.identity())
    link = PeerLink(phone.identity(), phone.siblings, client)
    session = SyncSession(replica(phone), opener=True)
    session.start()
    hello = session.next_message()
    assert isinstance(hello, syncwire.Hello)
    await link.send(mac.public_key(), SyncData(syncwire.encode(hello)))
    answer = syncwire.decode((await link.receive()).body.message.payload)  # type: ignore[union-attr]
    assert isinstance(answer, syncwire.Hello) and answer.reply
    session.receive(answer)
    assert session.finished  # equal at the Hello: the Homebase's side has ended too
    with trio.fail_after(10):
        await endpoint.sessions_ended()
    assert not endpoint.open_sessions()
    answered = len(endpoint.reports)
    await link.send(mac.public_key(), SyncData(syncwire.encode(hello)))
    # A Ping behind it: once its Pong is back, the repeated Hello has been read.
    await link.send(mac.public_key(), Ping(7))
    with trio.fail_after(10):
        while not isinstance((await link.receive()).body.message, Pong):
            pass
    assert not endpoint.open_sessions()
    assert len(endpoint.reports) == answered
    await client.aclose()
