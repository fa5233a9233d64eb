"""`pixie sync` with a sibling that is away says so after a presence check,
not only at the end of the whole silence allowance: an opener's Hello goes
with a Ping, and a sibling that answers neither within `PRESENCE_TIMEOUT` is
said to be away, by its name, while the session waits on for the rest of the
allowance (a daemon just starting may answer yet). One that answers the Ping
is there (busy, say), and nothing is said."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.store.siblings import Still
from pixie.device.sync.driver import PRESENCE_TIMEOUT, SyncEndpoint, SyncOutcome, SyncReport
from pixie.device.sync.peers import Incoming
from pixie.protocol.peerwire import MESSAGE_ID_BYTES, Body, PeerMessage, Ping, Pong, SyncData

SIBLING = b"\x02" * 32


@pytest.fixture
def node(data_dir: Path) -> Iterator[Node]:
    with Node.open(data_dir) as n:
        n.siblings.add(SiblingInfo(SIBLING, "mac", "homebase", "127.0.0.1:1", 0))
        yield n


class Away:
    """A link to a sibling that never says a sync word; with ``pongs`` it
    answers each Ping (a daemon that is there, its sessions busy)."""

    def __init__(self, *, pongs: bool) -> None:
        self.identity = SigningKey(b"\x01" * 32)
        self.lane: trio.CapacityLimiter | None = None
        self.pongs = pongs
        self.sent: list[PeerMessage] = []
        self._in, self._out = trio.open_memory_channel[Incoming](8)

    async def send(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> int:
        self.sent.append(message)
        if self.pongs and isinstance(message, Ping):
            body = Body(b"\x00" * MESSAGE_ID_BYTES, len(self.sent), Pong(message.token))
            await self._in.send(Incoming(recipient, body))
        return 1

    async def receive(self) -> Incoming:
        return await self._out.receive()


async def _sync(
    node: Node, link: Away, *, presence: float, idle: float
) -> tuple[SyncReport, list[tuple[str, float]]]:
    endpoint = SyncEndpoint(
        node,
        link,  # type: ignore[arg-type]
        idle_timeout=idle,
        presence_timeout=presence,
    )
    said: list[tuple[str, float]] = []
    endpoint.on_absent = lambda who, seconds: said.append((who, seconds))
    async with trio.open_nursery() as nursery:
        await nursery.start(endpoint.serve)
        report = await endpoint.sync_with(SIBLING)
        nursery.cancel_scope.cancel()
    return report, said


def test_the_presence_check_is_five_seconds() -> None:
    assert PRESENCE_TIMEOUT == 5.0


async def test_a_sibling_that_answers_nothing_is_said_to_be_away_after_the_presence_check(
    node: Node,
) -> None:
    link = Away(pongs=False)
    report, said = await _sync(node, link, presence=0.05, idle=0.3)
    assert said == [("mac", 0.05)]  # by its name, once
    assert report.outcome is SyncOutcome.NO_ANSWER  # at the end of the allowance
    assert report.error == "the sibling was silent for 0.3 s"
    assert [type(m) for m in link.sent[:2]] == [SyncData, Ping]  # the Hello, then the Ping
    assert report.name == "mac"
    assert report.describe(0.3) == "no answer from mac within 0.3 s: is `pixie run` going on it?"


async def test_a_sibling_that_answers_the_ping_is_not_said_to_be_away(node: Node) -> None:
    report, said = await _sync(node, Away(pongs=True), presence=0.05, idle=0.3)
    assert said == []
    assert report.outcome is SyncOutcome.NO_ANSWER


async def test_a_timeout_below_the_presence_check_is_the_only_wait(node: Node) -> None:
    report, said = await _sync(node, Away(pongs=False), presence=5.0, idle=0.05)
    assert said == [] and report.outcome is SyncOutcome.NO_ANSWER
