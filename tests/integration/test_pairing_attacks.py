"""Pairing against an attacker on the relay: wrong codes cost only their
sender, and no envelope taken while pairing is accepted a second time."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import cast

import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.node.keyed import Node
from pixie.device.sync.pairing import InviteCode, _proof, await_joiner, invite, join, pair
from pixie.device.sync.peers import Incoming, PeerLink
from pixie.device.sync.relayclient import Delivered, RelayAddress, RelayClient
from pixie.protocol.envelope import open_envelope, seal
from pixie.protocol.identity import new_identity
from pixie.protocol.peerwire import (
    Body,
    PairAccept,
    PairReject,
    PairRequest,
    PeerMessage,
    decode_body,
    encode_body,
)
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.fakerelay import FakeRelay, drain
from tests.support.wire import make_node


async def _relay(nursery: trio.Nursery) -> RelayAddress:
    port = await nursery.start(serve_relay, RelayConfig(port=0))
    return RelayAddress("127.0.0.1", port)


async def test_wrong_codes_from_any_keys_never_close_the_invite(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    relay = await _relay(nursery)
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    # Wrong requests from two attacker keys wait in the inviter's mailbox
    # before the invite starts, so it reads them all before the real one.
    for key, count in ((new_identity(), 8), (new_identity(), 4)):
        client = await RelayClient.connect(relay, key)
        for counter in range(1, count + 1):
            request = PairRequest("mallory", "device", os.urandom(32))
            await client.send(
                phone.public_key(),
                seal(key, phone.public_key(), encode_body(request, counter), now=time.monotonic()),
            )
        await client.aclose()
    codes_tx, codes_rx = trio.open_memory_channel[str](1)
    with trio.fail_after(20):
        async with trio.open_nursery() as inner:
            inner.start_soon(
                lambda: invite(phone, relay, timeout=15, show_code=codes_tx.send_nowait)
            )
            joined = await pair(mac, await codes_rx.receive(), timeout=15)
    assert joined.key == phone.public_key()
    assert [s.name for s in phone.siblings.all()] == ["mac"]


async def test_a_captured_pair_request_is_refused_after_pairing(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    relay = await _relay(nursery)
    phone = make_node(tmp_path, "phone", "device")
    joiner = new_identity()  # the joiner, played by hand to keep its envelope
    me = bytes(joiner.verify_key)
    codes_tx, codes_rx = trio.open_memory_channel[str](1)
    with trio.fail_after(20):
        async with trio.open_nursery() as inner:
            inner.start_soon(
                lambda: invite(phone, relay, timeout=15, show_code=codes_tx.send_nowait)
            )
            code = InviteCode.parse(await codes_rx.receive())
            proof = _proof(code.secret, b"request", code.inviter, me)
            captured = seal(
                joiner,
                code.inviter,
                encode_body(PairRequest("eve", "device", proof), 1),
                now=time.monotonic(),
            )
            client = await RelayClient.connect(relay, joiner)
            await client.send(code.inviter, captured)
            accept = decode_body(open_envelope(joiner, (await client.receive()).envelope).body)
            assert isinstance(accept.message, PairAccept)
            await client.aclose()
    assert [s.key for s in phone.siblings.all()] == [me]
    link = PeerLink(phone.identity(), phone.siblings, FakeRelay([Delivered(me, captured)]))  # type: ignore[arg-type]
    assert await drain(link) == []
    assert link.rejected == {"replay": 1}


async def test_a_captured_pair_accept_is_refused_after_pairing(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    relay = await _relay(nursery)
    mac = make_node(tmp_path, "mac", "homebase")
    inviter = new_identity()  # the inviter, played by hand to keep its envelope
    key = bytes(inviter.verify_key)
    code = InviteCode(key, relay, b"k" * 16, int(time.time()) + 60)
    client = await RelayClient.connect(relay, inviter)
    captured: list[bytes] = []

    async def answer() -> None:
        opened = open_envelope(inviter, (await client.receive()).envelope)
        assert isinstance(decode_body(opened.body).message, PairRequest)
        proof = _proof(code.secret, b"accept", key, opened.sender)
        captured.append(
            seal(
                inviter,
                opened.sender,
                encode_body(PairAccept("x", "homebase", proof), 1),
                now=time.monotonic(),
            )
        )
        await client.send(opened.sender, captured[0])

    with trio.fail_after(20):
        async with trio.open_nursery() as inner:
            inner.start_soon(answer)
            await pair(mac, code.encode(), timeout=15)
    await client.aclose()
    assert [s.key for s in mac.siblings.all()] == [key]
    relay_says = [Delivered(key, envelope) for envelope in captured]
    link = PeerLink(mac.identity(), mac.siblings, FakeRelay(relay_says))  # type: ignore[arg-type]
    assert await drain(link) == []
    assert link.rejected == {"replay": 1}


async def test_a_stranger_replay_is_refused_while_the_invite_runs(node: Node) -> None:
    stranger = new_identity()
    envelope = seal(
        stranger,
        node.public_key(),
        encode_body(PairRequest("s", "device", bytes(32)), 1),
        now=time.monotonic(),
    )
    delivered = Delivered(bytes(stranger.verify_key), envelope)
    link = PeerLink(node.identity(), node.siblings, FakeRelay([delivered, delivered]))  # type: ignore[arg-type]
    got = []
    try:
        while True:
            got.append((await link.receive(strangers=True)).body.counter)
    except EOFError:
        pass
    assert got == [1]
    assert link.rejected == {"replay": 1}


class Drained(Exception):
    pass


class FakeLine:
    """A pairing line fed from a list: records what the inviter sends."""

    def __init__(self, incoming: list[Incoming]) -> None:
        self.incoming = list(incoming)
        self.sent: list[tuple[bytes, object]] = []

    async def send(self, recipient: bytes, message: object) -> int:
        self.sent.append((recipient, message))
        return 0

    async def receive(self) -> Incoming:
        if not self.incoming:
            raise Drained  # the invite was still waiting after all of them
        return self.incoming.pop(0)

    def seen_from(self, key: bytes) -> None:
        return None


def _wrong(key: bytes, counter: int) -> Incoming:
    return Incoming(key, Body(bytes(16), counter, PairRequest("m", "device", bytes(32))))


async def test_wrong_codes_get_a_bounded_number_of_answers(node: Node) -> None:
    from pixie.device.sync.pairing import MAX_ANSWERED_JOINERS, MAX_BAD_ATTEMPTS

    persistent = bytes(new_identity().verify_key)
    many = [bytes(new_identity().verify_key) for _ in range(MAX_ANSWERED_JOINERS + 6)]
    line = FakeLine(
        [_wrong(persistent, c) for c in range(1, 3 * MAX_BAD_ATTEMPTS)]
        + [_wrong(key, 1) for key in many]
    )
    code = InviteCode(node.public_key(), RelayAddress("127.0.0.1", 1), b"k" * 16, 0)
    with pytest.raises(Drained):  # every request was read: the invite stayed open throughout
        await await_joiner(node, code, line, timeout=60)
    assert [r for r, _ in line.sent].count(persistent) == MAX_BAD_ATTEMPTS
    answered = {r for r, _ in line.sent}
    assert len(answered) == MAX_ANSWERED_JOINERS
    assert all(isinstance(m, PairReject) for _, m in line.sent)
    assert node.siblings.all() == []


class LossyInviter:
    """The line a joiner pairs over, with the inviter at its other end: the
    first request is lost on the way (as one dropped by an inviter busy with a
    flood of wrong codes would be); the inviter answers the next."""

    def __init__(self, joiner: Node, code: InviteCode, inviter_key: SigningKey) -> None:
        self.joiner, self.code, self.inviter_key = joiner, code, inviter_key
        self.requests = 0
        self.answers, self.inbox = trio.open_memory_channel[Incoming](4)

    async def send(self, recipient: bytes, message: PeerMessage) -> int:
        assert recipient == self.code.inviter and isinstance(message, PairRequest)
        self.requests += 1
        if self.requests >= 2:
            proof = _proof(self.code.secret, b"accept", self.code.inviter, self.joiner.public_key())
            accept = PairAccept("mac", "homebase", proof)
            self.answers.send_nowait(Incoming(self.code.inviter, Body(bytes(16), 1, accept)))
        return 0

    async def receive(self) -> Incoming:
        return await self.inbox.receive()

    def seen_from(self, key: bytes) -> None:
        return None


async def test_a_joiner_asks_again_until_answered(node: Node, autojump_clock: object) -> None:
    inviter_key = new_identity()
    code = InviteCode(bytes(inviter_key.verify_key), RelayAddress("127.0.0.1", 1), b"k" * 16, 2**40)
    line = LossyInviter(node, code, inviter_key)
    info = await join(node, code, line, timeout=60)
    assert line.requests == 2
    assert info.key == code.inviter
    assert [s.key for s in node.siblings.all()] == [code.inviter]


async def test_a_full_pairing_desk_lets_the_oldest_go_not_the_newest() -> None:
    from pixie.device.sync.driver import PAIRING_QUEUE, PairingDesk, SyncEndpoint

    desk = PairingDesk(cast(SyncEndpoint, object()))
    flood = [_wrong(bytes(new_identity().verify_key), 1) for _ in range(3 * PAIRING_QUEUE)]
    real = _wrong(bytes(new_identity().verify_key), 1)
    for incoming in [*flood, real]:
        desk.deliver(incoming)
    desk.close()
    queued = [await desk.receive() for _ in range(PAIRING_QUEUE)]
    assert queued[-1] is real
    assert queued[:-1] == flood[-(PAIRING_QUEUE - 1) :]
