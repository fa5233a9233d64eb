"""PeerLink: what a peer accepts from its relay connection, and what it refuses."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import msgpack
import pytest

from pixie.device.node import Node
from pixie.device.peers import PeerLink
from pixie.device.siblings import SiblingInfo
from pixie.protocol.envelope import seal
from pixie.protocol.identity import new_identity
from pixie.protocol.peerwire import Ping, encode_body
from pixie.protocol.replay import WINDOW


class FakeRelay:
    """Stands in for RelayClient: hands over queued envelopes, records sends."""

    def __init__(self, inbox: list[bytes]) -> None:
        self.inbox = list(inbox)
        self.sent: list[tuple[bytes, bytes]] = []

    async def receive(self) -> bytes:
        if not self.inbox:
            raise EOFError
        return self.inbox.pop(0)

    async def send(self, recipient: bytes, envelope: bytes) -> None:
        self.sent.append((recipient, envelope))


SIBLING = new_identity()
STRANGER = new_identity()


def paired(node: Node) -> bytes:
    key = bytes(SIBLING.verify_key)
    node.siblings.add(SiblingInfo(key, "mac", "homebase", "127.0.0.1:1", 0))
    return key


def ping(node: Node, counter: int, sender=SIBLING) -> bytes:  # type: ignore[no-untyped-def]
    return seal(sender, node.public_key(), encode_body(Ping(counter), counter))


def counters(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute("SELECT * FROM peer_counter").fetchall()
    finally:
        con.close()


async def drain(link: PeerLink) -> list[int]:
    got: list[int] = []
    try:
        while True:
            incoming = await link.receive()
            got.append(incoming.body.counter)
    except EOFError:
        return got


async def test_accepts_in_order_and_within_window_refuses_replays(node: Node) -> None:
    paired(node)
    envs = [ping(node, c) for c in (1, 2, 5, 3, 3, 2)]
    link = PeerLink(node.identity(), node.siblings, FakeRelay(envs))  # type: ignore[arg-type]
    assert await drain(link) == [1, 2, 5, 3]
    assert link.rejected == {"replay": 2}


async def test_replay_state_survives_a_restart(node: Node) -> None:
    paired(node)
    first = ping(node, 1)
    link = PeerLink(node.identity(), node.siblings, FakeRelay([first]))  # type: ignore[arg-type]
    assert await drain(link) == [1]
    with Node.open(node.data.path) as again:
        link2 = PeerLink(again.identity(), again.siblings, FakeRelay([first]))  # type: ignore[arg-type]
        assert await drain(link2) == []
        assert link2.rejected == {"replay": 1}


async def test_too_old_beyond_the_window(node: Node) -> None:
    paired(node)
    envs = [ping(node, WINDOW + 10), ping(node, 5)]
    link = PeerLink(node.identity(), node.siblings, FakeRelay(envs))  # type: ignore[arg-type]
    assert await drain(link) == [WINDOW + 10]
    assert link.rejected == {"too_old": 1}


@pytest.mark.parametrize("case", ["flipped", "unpaired", "foreign", "garbage_body", "unknown"])
async def test_bad_envelopes_change_nothing(node: Node, case: str) -> None:
    paired(node)
    good = ping(node, 1)
    before = counters(node)
    if case == "flipped":
        env = bytearray(ping(node, 2))
        env[len(env) // 2] ^= 0x10
        bad = bytes(env)
    elif case == "unpaired":
        bad = ping(node, 2, sender=STRANGER)
    elif case == "foreign":
        bad = seal(SIBLING, bytes(STRANGER.verify_key), encode_body(Ping(2), 2))
    elif case == "garbage_body":
        bad = seal(SIBLING, node.public_key(), b"\xc1not msgpack")
    else:
        bad = seal(SIBLING, node.public_key(), msgpack.packb([1, 77, bytes(16), 2, "x"]))
    link = PeerLink(node.identity(), node.siblings, FakeRelay([bad]))  # type: ignore[arg-type]
    assert await drain(link) == []
    assert sum(link.rejected.values()) == 1
    assert counters(node) == before
    # and the link still works afterwards
    link = PeerLink(node.identity(), node.siblings, FakeRelay([good]))  # type: ignore[arg-type]
    assert await drain(link) == [1]


async def test_send_reserves_counters_durably(node: Node) -> None:
    key = paired(node)
    relay = FakeRelay([])
    link = PeerLink(node.identity(), node.siblings, relay)  # type: ignore[arg-type]
    await link.send(key, Ping(1))
    await link.send(key, Ping(2))
    with Node.open(node.data.path) as again:
        assert again.siblings.next_send_counter(key) == 3
    assert [r for r, _ in relay.sent] == [key, key]


def test_invite_codes_parse_and_expire(node: Node) -> None:
    from pixie.device.errors import BadInput
    from pixie.device.pairing import InviteCode
    from pixie.device.relayclient import RelayAddress

    code = InviteCode(
        node.public_key(), RelayAddress("127.0.0.1", 9000), b"s" * 16, int(time.time()) + 60
    )
    assert InviteCode.parse(code.encode()) == code
    with pytest.raises(BadInput, match="expired"):
        InviteCode.parse(code.encode(), now=time.time() + 120)
    for bad in ["", "hello", code.encode()[:-5], code.encode() + "AAAA", "pixie-invite-!!!"]:
        with pytest.raises(BadInput):
            InviteCode.parse(bad)


def test_identity_is_in_the_key_store_not_the_data_dir(node: Node, data_dir: Path) -> None:
    seed = bytes(node.identity())
    for f in data_dir.rglob("*"):
        if f.is_file():
            assert seed not in f.read_bytes()
