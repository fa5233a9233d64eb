"""The sync driver survives whatever one sibling's messages make it do: a
service that raises on a request, and a flood of malformed sync messages, are
dropped and counted, logged in summary, and the next honest sync succeeds."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pixie.device.app.daemon import sync_once
from pixie.device.sync.driver import SyncEndpoint, SyncOutcome
from pixie.device.sync.peers import Incoming, PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol.offload import body_hash
from pixie.protocol.peerwire import FetchRequest, PeerMessage, SyncData
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.stale import differ, link_up, ordered_pair

JUNK = 40
NOTE = "0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10"


class Exploding:
    """A service that raises on every fetch request it is handed."""

    def __init__(self) -> None:
        self.calls, self.seen = trio.open_memory_channel[None](JUNK)

    def wants(self, message: PeerMessage) -> bool:
        return isinstance(message, FetchRequest)

    async def handle(
        self,
        incoming: Incoming,
        reply: Callable[[bytes, PeerMessage], Awaitable[int]],
        call: Callable[..., Awaitable[Any]],
    ) -> None:
        self.calls.send_nowait(None)
        raise KeyError("a bug this request found")


async def test_requests_that_raise_and_malformed_sync_messages_are_dropped(
    tmp_path: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    phone, mac = ordered_pair(tmp_path, homebase_lower=True)
    relay = RelayAddress("127.0.0.1", port)
    link_up(phone, mac, relay)
    differ(phone, mac)
    service = Exploding()
    client = await RelayClient.connect(relay, mac.identity())
    endpoint = SyncEndpoint(mac, PeerLink(mac.identity(), mac.siblings, client), services=[service])
    await nursery.start(endpoint.serve)

    sender = await RelayClient.connect(relay, phone.identity())
    link = PeerLink(phone.identity(), phone.siblings, sender)
    caplog.set_level(logging.INFO, logger="pixie.sync")
    for n in range(JUNK):
        # The junk goes first: the read loop routes it before it reads the
        # request after it, so the last request seen means all junk was routed.
        await link.send(mac.public_key(), SyncData(b"\xc1 not a sync message"))
        request = FetchRequest(n.to_bytes(16, "big"), NOTE, body_hash(b"any body"))
        await link.send(mac.public_key(), request)
    with trio.fail_after(30):
        for _ in range(JUNK):
            await service.seen.receive()
        await trio.testing.wait_all_tasks_blocked()
    await sender.aclose()

    assert endpoint.dropped["KeyError"] == JUNK
    assert endpoint.dropped["malformed"] == JUNK
    dropped_lines = [r for r in caplog.records if r.name == "pixie.sync"]
    assert len(dropped_lines) <= 2 * endpoint.notices.first

    with trio.fail_after(30):
        (report,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=15)
    assert report.outcome is SyncOutcome.SYNCED, report
    assert phone.digest() == mac.digest()
    phone.close()
    mac.close()
