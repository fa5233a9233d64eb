"""A fleet member's bookkeeping, driven without NATS: mail pulled from JetStream
goes into the recipient's outbox and is acked only once the writer reports it
written; mail the outbox refuses, or a closed connection never wrote, is
handed back (nakked); the stream's answers to publishes settle the oldest
message first, and mail without an answer in time stays in the relay."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from nats.aio.msg import Msg

from pixie.protocol import relaywire
from pixie.relay.fleet import FleetConfig, pack
from pixie.relay.mailbox import MailboxLimits
from pixie.relay.member import FleetMember, _Delivery
from pixie.relay.natsbus import ACK, NatsBus, nak
from pixie.relay.outbox import FLEET_SENDER, ByteBudget, Outbox

SECRET = b"sixteen bytes at least, here"
SENDER, RECIPIENT = b"s" * 32, b"r" * 32
ENVELOPE = b"sealed envelope " * 8


class Bus:
    """Stands in for `NatsBus` where the member only asks how big a message may be."""

    max_payload = 1 << 20


class Conn:
    def __init__(self, frames: int = 64) -> None:
        self.key = RECIPIENT
        self.outbox = Outbox(frames, 1 << 20, ByteBudget(1 << 24))


def member(**settings: Any) -> tuple[FleetMember, list[tuple[bytes, bytes, bytes]]]:
    config = FleetConfig("nats://127.0.0.1:4222", SECRET, **settings)
    fleet = FleetMember(config, MailboxLimits(), cast(NatsBus, Bus()))
    kept: list[tuple[bytes, bytes, bytes]] = []
    fleet.bind(lambda r, s, e: kept.append((r, s, e)), lambda: None)
    return fleet, kept


def mail(reply: str, data: bytes | None = None) -> Msg:
    return Msg(
        _client=cast(Any, None), reply=reply, data=pack(SENDER, ENVELOPE) if data is None else data
    )


def replies(fleet: FleetMember) -> list[tuple[str, bytes]]:
    return list(fleet._replies)


async def test_pulled_mail_is_acked_only_once_written() -> None:
    fleet, _ = member()
    conn = Conn()
    delivery = _Delivery(conn)
    fleet._deliveries[conn] = delivery
    delivery.requested = 3
    for n in range(3):
        fleet._arrived(delivery, mail(f"r{n}"))
    assert delivery.done.is_set()  # the pull request got all it asked for
    assert replies(fleet) == []  # nothing acked while it sits in the outbox
    frames, envelopes = await conn.outbox.take(1 << 20)
    assert frames == [relaywire.deliver_frame(SENDER, ENVELOPE)] * 3 and envelopes == 3
    assert conn.outbox.taken == {FLEET_SENDER: 3}
    fleet.written(conn, {FLEET_SENDER: 2})  # the writer reports what reached the peer
    assert replies(fleet) == [("r0", ACK), ("r1", ACK)]
    fleet.written(conn, {FLEET_SENDER: 1})
    assert replies(fleet)[-1] == ("r2", ACK) and not delivery.pending


async def test_refused_junk_and_status_messages() -> None:
    fleet, _ = member(nak_delay=2.0)
    conn = Conn(frames=1)
    delivery = _Delivery(conn)
    delivery.requested = 10
    fleet._arrived(delivery, mail("a"))
    fleet._arrived(delivery, mail("b"))  # the outbox holds one frame: refused
    fleet._arrived(delivery, mail("c", b"\x00junk"))  # no relay could deliver this
    assert replies(fleet) == [("b", nak(2.0)), ("c", ACK)]
    assert list(delivery.pending) == ["a"]
    assert (fleet.counters["outbox_refused"], fleet.counters["malformed"]) == (1, 1)
    assert not delivery.done.is_set()
    heartbeat = Msg(_client=cast(Any, None), headers={"Status": "100"})
    fleet._arrived(delivery, heartbeat)
    assert not delivery.done.is_set()
    fleet._arrived(delivery, Msg(_client=cast(Any, None), headers={"Status": "408"}))
    assert delivery.done.is_set()  # the request expired: the member asks again


async def test_a_closed_connection_hands_its_unwritten_mail_back() -> None:
    fleet, _ = member()
    conn = Conn()

    # The delivery loop waits for NATS, which is down: the connection closes.
    fleet.up = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fleet.deliver, conn)
        await trio.testing.wait_all_tasks_blocked()
        delivery = fleet._deliveries[cast(Any, conn)]
        delivery.requested = 5
        fleet._arrived(delivery, mail("x"))
        fleet._arrived(delivery, mail("y"))
        nursery.cancel_scope.cancel()
    assert replies(fleet) == [("x", nak(0)), ("y", nak(0))]  # redelivered at once elsewhere
    assert conn not in fleet._deliveries


async def test_publishing_is_settled_oldest_first() -> None:
    fleet, kept = member(call_timeout=1.0)
    now = trio.current_time()
    fleet._unconfirmed.extend([(RECIPIENT, SENDER, b"one", now), (RECIPIENT, SENDER, b"two", now)])
    fleet._answered(True)
    fleet._answered(False)  # the stream refused the second: it waits here
    assert fleet.counters["published"] == 1 and kept == [(RECIPIENT, SENDER, b"two")]
    fleet._answered(True)  # an answer for nothing waiting (it went overdue) is ignored
    assert fleet.counters["published"] == 1

    fleet._acks_lost = False
    fleet._unconfirmed.append((RECIPIENT, SENDER, b"late", now - 5))
    fleet._overdue()
    assert kept[-1] == (RECIPIENT, SENDER, b"late") and not fleet._unconfirmed
    assert fleet._acks_lost  # a fresh inbox: answers still on their way are not counted
    assert not fleet.up  # and the outage is said once


async def test_forwarding_stops_while_nats_is_down_or_behind() -> None:
    fleet, _ = member(publish_queue_bytes=300)
    assert fleet.forward(RECIPIENT, SENDER, b"x" * 200)
    assert not fleet.forward(RECIPIENT, SENDER, b"x" * 200)  # the queue is full
    fleet.up = False
    assert not fleet.forward(RECIPIENT, SENDER, b"x")
    assert fleet.counters["kept_here"] == 2
    small, _ = member()
    cast(Bus, small._bus).max_payload = 100  # a server that takes less than an envelope
    assert not small.forward(RECIPIENT, SENDER, b"x" * 80)
    assert small.forward(RECIPIENT, SENDER, b"x" * 60)
