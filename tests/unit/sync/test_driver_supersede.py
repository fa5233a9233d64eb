"""A session the sibling has moved on from ends at once in the trio endpoint,
and does not hold up the sessions after it.

The sibling opens a session, our endpoint answers it and waits for more; then
the sibling opens another (it gave up on the first: a relay died with its
messages, say). The first must end as superseded right away and leave the
table, or every later `sync_with` of ours waits behind it for ever.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from pixie.device.node.keyed import Node
from pixie.device.store.siblings import Still
from pixie.device.sync.admission import Incoming
from pixie.device.sync.driver import SyncEndpoint, SyncOutcome
from pixie.protocol import syncwire
from pixie.protocol.peerwire import Body, PeerMessage, SyncData
from pixie.protocol.sync import SyncSession
from tests.support.synchelp import paired_siblings, replica, say


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    with paired_siblings(tmp_path) as nodes:
        yield nodes


class Feed:
    """A link whose incoming messages the test hands in, keeping what is sent."""

    def __init__(self, node: Node) -> None:
        self.identity = node.identity()
        self.lane: trio.CapacityLimiter | None = None
        self.sent: list[tuple[bytes, PeerMessage]] = []
        self.sent_more = trio.Event()
        self.counter = 0
        self._in, self._out = trio.open_memory_channel[Incoming](16)

    async def send(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> int:
        self.sent.append((recipient, message))
        self.sent_more.set()
        return 1

    async def receive(self) -> Incoming:
        return await self._out.receive()

    async def deliver(self, sender: bytes, message: syncwire.SyncMessage) -> None:
        self.counter += 1
        body = Body(b"\x00" * 16, self.counter, SyncData(syncwire.encode(message)))
        await self._in.send(Incoming(sender, body))

    async def wait_sent(self, count: int) -> None:
        while len(self.sent) < count:
            self.sent_more = trio.Event()
            await self.sent_more.wait()


def sibling_hello(node: Node) -> syncwire.Hello:
    session = SyncSession(replica(node), opener=True)
    session.start()
    assert session.hello is not None
    return session.hello


async def test_a_superseded_responder_ends_at_once_and_frees_the_sibling(
    pair: tuple[Node, Node],
) -> None:
    phone, mac = pair
    say(mac, "the recital moved to Friday")  # so the first session has work to do
    feed = Feed(phone)
    # A long silence allowance: only being superseded may end the first session.
    endpoint = SyncEndpoint(phone, feed, idle_timeout=600)  # type: ignore[arg-type]
    with trio.fail_after(10):  # a bound on the whole test, not a wait for anything
        async with trio.open_nursery() as nursery:
            await nursery.start(endpoint.serve)
            first = sibling_hello(mac)
            await feed.deliver(mac.public_key(), first)
            await feed.wait_sent(1)  # our answer to it: the session waits for more
            old = endpoint.table.sessions[first.session]

            await feed.deliver(mac.public_key(), sibling_hello(mac))
            await old.done.wait()

            (report,) = endpoint.reports
            assert report.outcome is SyncOutcome.SUPERSEDED
            assert report.role == "responder"
            assert first.session not in endpoint.table.sessions
            # The newer session is the one open now, and it has been answered.
            assert len(endpoint.open_sessions()) == 1
            await feed.wait_sent(2)
            nursery.cancel_scope.cancel()
