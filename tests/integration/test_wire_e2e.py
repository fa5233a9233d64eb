"""Pairing and peer messages through a real relay, seen from the wire.

A recording TCP proxy sits in front of the relay and keeps every byte in both
directions; afterwards the bytes are scanned for planted canaries. The relay
must only ever have carried ciphertext.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pixie.device.errors import BadInput
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.sync.pairing import InviteCode, PairingFailed, invite, pair
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol.peerwire import Ping, Pong
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.wire import Recorder, make_node, pair_up


async def test_pairing_and_messages_carry_only_ciphertext(
    tmp_path: Path, wire: tuple[RelayAddress, Recorder]
) -> None:
    relay, rec = wire
    phone = make_node(tmp_path, "CANARYphone", "device")
    mac = make_node(tmp_path, "CANARYmac", "homebase")
    ev = phone.log.append(
        [NewEvent(EventKind.MESSAGE, 0, "CANARYtext Lyon marathon", contact="CANARYada")], now=0
    )
    phone.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "ada", "CANARYtitle", "CANARYbody", None)
    )
    phone.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="CANARYsealed", body="CANARYsb")
    codes: list[str] = []
    await pair_up(phone, mac, relay, codes)

    assert [s.name for s in phone.siblings.all()] == ["CANARYmac"]
    assert [s.name for s in mac.siblings.all()] == ["CANARYphone"]

    # peer messages both ways
    a = PeerLink(
        phone.identity(), phone.siblings, await RelayClient.connect(relay, phone.identity())
    )
    b = PeerLink(mac.identity(), mac.siblings, await RelayClient.connect(relay, mac.identity()))
    with trio.fail_after(10):
        await a.send(mac.public_key(), Ping(4242))
        got = await b.receive()
        assert got.body.message == Ping(4242) and got.sender == phone.public_key()
        await b.send(phone.public_key(), Pong(4242))
        assert (await a.receive()).body.message == Pong(4242)
    await a.client.aclose()
    await b.client.aclose()

    wire_bytes = bytes(rec.seen)
    assert len(wire_bytes) > 1000  # the recorder really saw the traffic
    secret = InviteCode.parse(codes[0]).secret
    canaries = [
        b"CANARY",
        b"PairRequest",
        b"PairAccept",
        b"Ping",
        b"Pong",
        b"Lyon",
        b"device",
        b"homebase",
        secret,
        phone.origin.encode(),
        mac.origin.encode(),
        ev.ids[0].encode(),
        bytes.fromhex(ev.ids[0].replace("-", "")),
    ]
    for canary in canaries:
        assert canary not in wire_bytes, canary
    # What the relay may see: the keys it routes by.
    assert mac.public_key() in wire_bytes


async def test_wrong_code_is_refused_and_pairs_nothing(
    tmp_path: Path, wire: tuple[RelayAddress, Recorder]
) -> None:
    relay, _ = wire
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    codes_tx, codes_rx = trio.open_memory_channel[str](1)
    with trio.move_on_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: invite(phone, relay, timeout=3, show_code=codes_tx.send_nowait)
            )
            real = InviteCode.parse(await codes_rx.receive())
            forged = InviteCode(real.inviter, real.relay, b"x" * 16, real.expires_at)
            with pytest.raises(PairingFailed, match="refused"):
                await pair(mac, forged.encode(), timeout=5)
            nursery.cancel_scope.cancel()
    assert phone.siblings.all() == [] and mac.siblings.all() == []


async def test_reused_code_gets_no_answer(
    tmp_path: Path, wire: tuple[RelayAddress, Recorder]
) -> None:
    relay, _ = wire
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    other = make_node(tmp_path, "other", "device")
    codes: list[str] = []
    await pair_up(phone, mac, relay, codes)
    with pytest.raises(PairingFailed, match="expired or been used"):
        await pair(other, codes[0], timeout=1)
    assert other.siblings.all() == []
    assert [s.name for s in phone.siblings.all()] == ["mac"]


async def test_expired_invite_times_out_clearly(
    tmp_path: Path, wire: tuple[RelayAddress, Recorder]
) -> None:
    relay, _ = wire
    phone = make_node(tmp_path, "phone", "device")
    with pytest.raises(PairingFailed, match="expired"):
        await invite(phone, relay, timeout=0.5, show_code=lambda code: None)
    with pytest.raises(BadInput, match="expired"):
        code = InviteCode(phone.public_key(), relay, b"s" * 16, 1)
        InviteCode.parse(code.encode())


async def test_pairing_over_tls(
    tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    from tests.support.relayclient import self_signed

    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    port = await nursery.start(serve_relay, RelayConfig(port=0, ssl_context=context))
    monkeypatch.setenv("PIXIE_RELAY_CA", str(cert))
    relay = RelayAddress.parse(f"tls://localhost:{port}")
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    await pair_up(phone, mac, relay)
    assert [s.relay for s in mac.siblings.all()] == [f"tls://localhost:{port}"]
    # without the CA the certificate is not trusted, and nothing is paired
    monkeypatch.delenv("PIXIE_RELAY_CA")
    other = make_node(tmp_path, "other", "device")
    with pytest.raises(Exception, match="certificate"):
        await RelayClient.connect(relay, other.identity())
