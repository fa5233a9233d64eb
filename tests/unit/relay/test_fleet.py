"""The fleet's parts that need no NATS: hashed subjects, the payload, the
secret, the stream's bounds from the mailbox limits, the outbox's count of fleet
mail written, and peers' lists of relays (parsed, and tried in turn)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.errors import DeviceError
from pixie.device.store import config
from pixie.device.sync import relayclient
from pixie.device.sync.relayclient import RelayAddress, RelayClient, RelayUnavailable
from pixie.protocol import relaywire
from pixie.relay.errors import RelayError
from pixie.relay.fleet import (
    MAX_PAYLOAD_BYTES,
    STREAM,
    FleetConfig,
    FleetKeys,
    pack,
    read_secret,
    stream_plan,
    unpack,
)
from pixie.relay.mailbox import MailboxLimits
from pixie.relay.outbox import FLEET_SENDER, HOT_SENDER, ByteBudget, Outbox
from pixie.relay.server import Relay, RelayConfig
from tests.support.cli import run_cli

SECRET = b"sixteen bytes at least, here"
KEY = bytes(range(32))


OTHER = bytes(range(1, 33))


def test_subjects_hide_the_keys_and_need_the_secret() -> None:
    keys = FleetKeys(SECRET)
    subject = keys.subject(KEY, OTHER)
    assert subject == keys.subject(KEY, OTHER)  # every relay holding the secret agrees
    _, _, recipient, sender = subject.split(".")
    assert subject.startswith("pixie.mail.") and len(recipient) == len(sender) == 32
    assert (recipient, sender) == (keys.name(KEY), keys.name(OTHER))
    assert KEY.hex()[:8] not in subject and keys.name(KEY) != KEY.hex()[:32]
    assert FleetKeys(SECRET + b"!").subject(KEY, OTHER) != subject  # another secret
    assert keys.subject(OTHER, KEY) != subject  # the other way round
    # A recipient's mailbox is every sender's subject of it.
    assert keys.mailbox(KEY) == f"pixie.mail.{recipient}.*"
    assert keys.consumer(KEY) == "mail-" + keys.name(KEY)
    with pytest.raises(RelayError, match="at least 16 bytes"):
        FleetKeys(b"short")


def test_payloads_carry_sender_and_envelope_and_refuse_junk() -> None:
    envelope = b"sealed" * 20
    assert unpack(pack(KEY, envelope)) == (KEY, envelope)
    for junk in (
        b"",
        b"\x00" + envelope,  # no sender
        b"\x20" + KEY[:10],  # sender cut short
        b"\x20" + KEY,  # no envelope
        pack(KEY, b"x" * (relaywire.MAX_ENVELOPE_BYTES + 1)),
    ):
        assert unpack(junk) is None
    assert len(pack(b"k" * 255, b"x" * relaywire.MAX_ENVELOPE_BYTES)) == MAX_PAYLOAD_BYTES


def test_the_secret_comes_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PIXIE_FLEET_SECRET", raising=False)
    with pytest.raises(RelayError, match="PIXIE_FLEET_SECRET or pass --fleet-secret-file"):
        read_secret(None)
    monkeypatch.setenv("PIXIE_FLEET_SECRET", " from the environment, long enough \n")
    assert read_secret(None) == b"from the environment, long enough"
    path = tmp_path / "secret"
    path.write_bytes(b"from a file, long enough\n")
    assert read_secret(path) == b"from a file, long enough"  # the file wins
    path.write_bytes(b"short\n")
    with pytest.raises(RelayError, match=r"--fleet-secret-file .* at least 16 bytes"):
        read_secret(path)
    with pytest.raises(RelayError, match="cannot read --fleet-secret-file"):
        read_secret(tmp_path / "missing")


def test_fleet_settings_are_checked() -> None:
    with pytest.raises(RelayError, match="--nats must be nats://HOST:PORT"):
        FleetConfig("http://127.0.0.1:4222", SECRET)
    with pytest.raises(RelayError, match="--nats-replicas must be from 1 to 5"):
        FleetConfig("nats://127.0.0.1:4222", SECRET, replicas=7)
    with pytest.raises(RelayError, match="ack_wait must be a positive number"):
        FleetConfig("nats://127.0.0.1:4222", SECRET, ack_wait=0)
    with pytest.raises(RelayError, match="at least 16 bytes"):
        FleetConfig("nats://127.0.0.1:4222", b"short")


def test_the_stream_is_bounded_by_the_mailbox_limits() -> None:
    from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType

    from pixie.relay.natsbus import consumer_config, stream_config

    limits = MailboxLimits(max_envelopes=17, max_age=42.0, total_bytes=5 << 20)
    plan = stream_plan(FleetConfig("nats://h:1", SECRET, replicas=3, ack_wait=2.5), limits)
    stream = stream_config(plan)
    assert stream.name == STREAM and stream.subjects == ["pixie.mail.*.*"]
    # A sender's share of a recipient's mail: a quarter of a mailbox.
    assert (stream.max_msgs_per_subject, stream.max_age, stream.max_bytes) == (4, 42.0, 5 << 20)
    assert stream.storage is StorageType.FILE and stream.num_replicas == 3
    assert stream.retention is RetentionPolicy.WORK_QUEUE  # gone once acked
    # A full stream refuses what is new; a full subject drops its own oldest.
    assert stream.discard is DiscardPolicy.NEW and not stream.discard_new_per_subject
    assert stream.max_msg_size == MAX_PAYLOAD_BYTES
    assert plan.sender_bytes == relaywire.MAX_ENVELOPE_BYTES  # 5 MiB / 16, at least one envelope
    consumer = consumer_config(plan, "mail-x", "pixie.mail.x.*")
    assert (consumer.durable_name, consumer.filter_subject, consumer.ack_wait) == (
        "mail-x",
        "pixie.mail.x.*",
        2.5,
    )


async def test_an_outbox_counts_the_fleet_mail_it_hands_the_writer() -> None:
    outbox = Outbox(64, 1 << 20, ByteBudget(1 << 24))
    for i in range(3):
        assert outbox.put(b"fleet %d" % i, True, FLEET_SENDER) is None
    frames, envelopes = await outbox.take(1 << 20)  # one sender: all of it at once
    assert (len(frames), envelopes, outbox.taken) == (3, 3, {FLEET_SENDER: 3})
    outbox.taken = {}
    hot = HOT_SENDER + b"h" * 32  # another relay's hand-over from one sender
    for i in range(4):
        # (a key may begin with any byte, the markers of fleet senders too)
        assert outbox.put(b"local %d" % i, True, bytes([i % 2]) * 32) is None
        assert outbox.put(b"fleet %d" % i, True, FLEET_SENDER) is None
        assert outbox.put(b"hot!! %d" % i, True, hot) is None
    # Four senders, taken in turn and only so far: the counts are of fleet and
    # hand-over frames taken, by sender; a local sender's are not counted.
    frames, _ = await outbox.take(6 * (8 + 64))
    assert len(frames) < 12
    assert outbox.taken.get(FLEET_SENDER, 0) == sum(f.startswith(b"fleet") for f in frames) >= 1
    assert outbox.taken.get(hot, 0) == sum(f.startswith(b"hot!!") for f in frames) >= 1
    assert set(outbox.taken) <= {FLEET_SENDER, hot}
    # A connection that closes loses only its local senders' frames: the fleet
    # hands its own back (JetStream's are nakked, another relay's refused).
    left = sum(1 for f in [*frames] if f.startswith(b"local"))
    assert outbox.clear() == 4 - left


def test_a_relay_without_a_fleet_keeps_mail_itself() -> None:
    relay = Relay(RelayConfig())
    assert "fleet" not in relay.stats()


def test_peers_take_several_relays() -> None:
    address = RelayAddress.parse("a.example:1, tls://b.example:2,[::1]:3,a.example:1")
    assert [str(a) for a in address.each()] == ["a.example:1", "tls://b.example:2", "::1:3"]
    assert str(address) == "a.example:1,tls://b.example:2,::1:3"
    assert RelayAddress.parse(str(address)) == address  # as kept with a pairing
    assert RelayAddress.parse("h:9") == RelayAddress("h", 9)
    with pytest.raises(DeviceError, match="relay addresses must be HOST:PORT,HOST:PORT"):
        RelayAddress.parse("a:1,,b:2")
    with pytest.raises(DeviceError, match="relay address must be HOST:PORT"):
        RelayAddress.parse("a")
    with pytest.raises(DeviceError, match="at most 8 relay addresses"):
        RelayAddress.parse(",".join(f"h:{p}" for p in range(1, 10)))


def test_the_config_file_may_list_relays(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[relay]\naddress = ["a:1", "b:2"]\n')
    assert config.effective(path)["relay"] == ["a:1", "b:2"]
    path.write_text('[relay]\naddress = "a:1,b:2"\n')
    assert RelayAddress.parse(config.effective(path)["relay"]).others == (RelayAddress("b", 2),)
    path.write_text("[relay]\naddress = [1, 2]\n")
    with pytest.raises(DeviceError, match="a list of such strings"):
        config.load(path)


async def test_a_peer_tries_the_next_relay_and_starts_there_next_time(
    nursery: trio.Nursery,
) -> None:
    relay = Relay(RelayConfig())
    port = await nursery.start(relay.serve)
    with trio.socket.socket() as closed:  # a port that refuses connections
        await closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    address = RelayAddress.parse(f"127.0.0.1:{dead},127.0.0.1:{port}")
    relayclient._answered.pop(str(address), None)
    key = SigningKey.generate()
    client = await RelayClient.connect(address, key, timeout=5)
    assert client.address == RelayAddress("127.0.0.1", port)
    await client.aclose()
    assert relayclient._answered[str(address)] == 1  # the live one is tried first next
    relay.shutdown()
    with pytest.raises(RelayUnavailable, match="no relay of 2 answered: cannot reach relay"):
        await RelayClient.connect(address, key, timeout=5)


def test_a_fleet_relay_needs_its_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIXIE_FLEET_SECRET", raising=False)
    short = tmp_path / "short"
    short.write_text("too short\n")
    for extra, why in (([], "PIXIE_FLEET_SECRET"), (["--fleet-secret-file", str(short)], "16")):
        out = run_cli("relay", "--listen", "127.0.0.1:0", "--nats", "nats://127.0.0.1:9", *extra)
        assert out.code == 2 and out.err.count("\n") == 1 and why in out.err, out.err
    out = run_cli("relay", "--listen", "127.0.0.1:0", "--fleet-secret-file", str(short))
    assert out.code == 2 and "--fleet-secret-file goes with --nats" in out.err


async def test_a_fleet_relay_does_not_start_without_its_nats() -> None:
    import trio_asyncio  # type: ignore[import-untyped]

    from pixie.relay.member import FleetMember

    with trio.socket.socket() as closed:  # a port that refuses connections
        await closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    fleet = FleetConfig(f"nats://127.0.0.1:{port}", SECRET, call_timeout=0.5)
    async with trio_asyncio.open_loop():
        with pytest.raises(RelayError, match=f"NATS at nats://127.0.0.1:{port} did not answer"):
            await FleetMember.open(fleet, MailboxLimits())
