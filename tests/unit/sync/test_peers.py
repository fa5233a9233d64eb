"""PeerLink: what a peer accepts from its relay connection, and what it refuses."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import msgpack
import pytest

from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import Delivered
from pixie.protocol.envelope import seal
from pixie.protocol.identity import new_identity
from pixie.protocol.peerwire import (
    FetchRequest,
    PairRequest,
    PeerMessage,
    Ping,
    SyncData,
    encode_body,
)
from pixie.protocol.replay import WINDOW
from tests.support.fakerelay import SIBLING, FakeRelay, drain

STRANGER = new_identity()


def paired(node: Node) -> bytes:
    key = bytes(SIBLING.verify_key)
    node.siblings.add(SiblingInfo(key, "mac", "homebase", "127.0.0.1:1", 0))
    return key


def ping(node: Node, counter: int, sender=SIBLING) -> bytes:  # type: ignore[no-untyped-def]
    return seal(
        sender, node.public_key(), encode_body(Ping(counter), counter), now=time.monotonic()
    )


def counters(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute("SELECT * FROM peer_counter").fetchall()
    finally:
        con.close()


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
        bad = Delivered(bytes(STRANGER.verify_key), ping(node, 2, sender=STRANGER))
    elif case == "foreign":
        bad = seal(
            SIBLING, bytes(STRANGER.verify_key), encode_body(Ping(2), 2), now=time.monotonic()
        )
    elif case == "garbage_body":
        bad = seal(SIBLING, node.public_key(), b"\xc1not msgpack", now=time.monotonic())
    else:
        bad = seal(
            SIBLING,
            node.public_key(),
            msgpack.packb([1, 77, bytes(16), 2, "x"]),
            now=time.monotonic(),
        )
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
    from pixie.device.sync.pairing import InviteCode
    from pixie.device.sync.relayclient import RelayAddress

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


async def test_an_envelope_that_breaks_a_decoder_is_dropped_and_the_link_goes_on(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pixie.device.sync.admission as peers  # where envelopes are opened and decoded

    paired(node)
    real = peers.decode_body

    def fragile(data: bytes):  # type: ignore[no-untyped-def]
        if data.endswith(b"\xa4boom"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(data)

    monkeypatch.setattr(peers, "decode_body", fragile)
    bad = seal(
        SIBLING,
        node.public_key(),
        msgpack.packb([1, 4, bytes(16), 2, "boom"]),
        now=time.monotonic(),
    )
    deep = b"\x94" + b"\x91" * 1000 + b"\x01"  # the unpaired attacker's envelope
    hostile = Delivered(
        bytes(STRANGER.verify_key), seal(STRANGER, node.public_key(), deep, now=time.monotonic())
    )
    link = PeerLink(node.identity(), node.siblings, FakeRelay([bad, hostile, ping(node, 1)]))  # type: ignore[arg-type]
    assert await drain(link) == [1]
    assert sum(link.rejected.values()) == 2
    assert link.rejected["undecodable"] == 1


class TickingRelay(FakeRelay):
    """A FakeRelay whose clock moves 10 ms with each envelope it hands over."""

    def __init__(self, inbox: list[bytes | Delivered]) -> None:
        super().__init__(inbox)
        self.now = 0.0

    async def receive(self) -> Delivered:
        self.now += 0.01
        return await super().receive()


async def test_a_flood_of_rejections_writes_a_bounded_log(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    paired(node)
    junk = [bytes(40)] * 10_000  # 100 s of junk, at 10 ms an envelope
    relay = TickingRelay([*junk, ping(node, 1)])
    link = PeerLink(node.identity(), node.siblings, relay)  # type: ignore[arg-type]
    link.rejections.clock = lambda: relay.now
    with caplog.at_level("WARNING", logger="pixie.peers"):
        assert await drain(link) == [1]
    lines = [r.getMessage() for r in caplog.records if r.name == "pixie.peers"]
    assert link.rejected == {"tampered": 10_000}
    # The first five in full, then one line for the first minute; the 40 s
    # since are summarised at the next rejection or flush after the minute.
    assert len(lines) == 6, lines
    assert all("envelope too short" in line for line in lines[:5])
    assert re.fullmatch(r"\d+ more envelopes rejected as tampered in the last 60 s", lines[5])
    held = link.rejections._windows["tampered"].held
    assert 5 + int(lines[5].split()[0]) + held == 10_000


def test_summaries_start_afresh_after_a_quiet_interval(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from pixie.device.logs import Summarised

    now = [0.0]
    summary = Summarised(
        logging.getLogger("pixie.test"), "things", first=2, interval=10, clock=lambda: now[0]
    )
    with caplog.at_level("WARNING", logger="pixie.test"):
        for _ in range(5):
            summary.log("odd", "odd thing")
        now[0] = 10.0
        summary.flush()  # the interval is over: its summary is due
        now[0] = 25.0
        summary.log("odd", "odd thing")  # a quiet interval went by: in full again
        summary.log("other", "other thing")
    assert [r.getMessage() for r in caplog.records] == [
        "odd thing",
        "odd thing",
        "3 more things as odd in the last 10 s",
        "odd thing",
        "other thing",
    ]


async def test_envelopes_from_unpaired_keys_are_dropped_before_any_crypto(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pixie.device.sync.admission as peers  # where envelopes are opened and decoded

    paired(node)
    opened: list[int] = []
    real = peers.open_envelope

    def counting(identity, envelope, **kw):  # type: ignore[no-untyped-def]
        opened.append(len(envelope))
        return real(identity, envelope, **kw)

    monkeypatch.setattr(peers, "open_envelope", counting)
    stranger = bytes(STRANGER.verify_key)
    junk = [Delivered(stranger, bytes(400)) for _ in range(1_000)]
    link = PeerLink(node.identity(), node.siblings, FakeRelay([*junk, ping(node, 1)]))  # type: ignore[arg-type]
    assert await drain(link) == [1]
    assert link.rejected == {"unpaired": 1_000}
    assert len(opened) == 1  # the sibling's envelope alone was opened


async def test_an_envelope_whose_signer_is_not_its_attested_sender_is_refused(
    node: Node,
) -> None:
    paired(node)
    other = new_identity()
    node.siblings.add(SiblingInfo(bytes(other.verify_key), "pad", "device", "127.0.0.1:1", 0))
    before = counters(node)
    # The sibling's own envelope, replayed to the relay by another sibling's key...
    replayed = Delivered(bytes(other.verify_key), ping(node, 1))
    # ... and by a stranger's, while strangers are admitted.
    link = PeerLink(node.identity(), node.siblings, FakeRelay([replayed]))  # type: ignore[arg-type]
    assert await drain(link) == []
    link = PeerLink(
        node.identity(),
        node.siblings,
        FakeRelay([Delivered(bytes(STRANGER.verify_key), ping(node, 1))]),  # type: ignore[arg-type]
    )
    link.admit_strangers = True
    assert await drain(link) == []
    assert link.rejected == {"misattributed": 1}
    assert counters(node) == before
    # The envelope itself, from its own sender, is still taken.
    link = PeerLink(node.identity(), node.siblings, FakeRelay([ping(node, 1)]))  # type: ignore[arg-type]
    assert await drain(link) == [1]


async def test_a_sibling_paired_after_the_link_started_is_heard(node: Node) -> None:
    relay = FakeRelay([])
    link = PeerLink(node.identity(), node.siblings, relay)  # type: ignore[arg-type]
    relay.inbox = [ping(node, 1)]
    assert await drain(link) == []  # not a sibling yet
    assert link.rejected == {"unpaired": 1}
    paired(node)
    link.admit_strangers = True  # as a daemon does around a pairing...
    link.admit_strangers = False  # ... and after it
    relay.inbox = [ping(node, 2)]
    assert await drain(link) == [2]


@pytest.mark.parametrize("admitted", ["argument", "flag"])
async def test_a_stranger_may_only_ever_send_pairing_messages(node: Node, admitted: str) -> None:
    """While strangers are admitted (an invite or pairing open), an unpaired key's
    Ping, sync message or holder request is refused where the envelope is
    admitted, so no pairing that ends meanwhile can let it pass as a sibling's;
    only its pairing messages get through."""
    stranger = bytes(STRANGER.verify_key)
    me = node.public_key()

    def from_stranger(message: PeerMessage, counter: int) -> Delivered:
        return Delivered(
            stranger, seal(STRANGER, me, encode_body(message, counter), now=time.monotonic())
        )

    relay = FakeRelay(
        [
            from_stranger(Ping(1), 1),
            from_stranger(SyncData(b"a hello, or anything"), 2),
            from_stranger(
                FetchRequest(bytes(16), "0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10", bytes(32)), 3
            ),
            from_stranger(PairRequest("pad", "device", bytes(32)), 4),
        ]
    )
    link = PeerLink(node.identity(), node.siblings, relay)  # type: ignore[arg-type]
    got: list[PeerMessage] = []
    if admitted == "flag":
        link.admit_strangers = True
    try:
        while True:
            incoming = await link.receive(strangers=admitted == "argument")
            got.append(incoming.body.message)
    except EOFError:
        pass
    assert [type(m) for m in got] == [PairRequest]
    assert link.rejected == {"unpaired": 3}
