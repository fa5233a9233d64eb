"""The hot path's bookkeeping, two relays wired together in memory (no NATS):
mail handed over is kept by the sending relay until the owning relay says it
was written; refused, gone, unanswered and unwritten mail goes to JetStream
(the fallback) and nothing is dropped; presence decides where mail goes."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from pixie.protocol import relaywire
from pixie.relay import hotwire
from pixie.relay.fleet import FleetConfig, FleetKeys
from pixie.relay.hotpath import HotPath
from pixie.relay.natscore import CoreLink
from pixie.relay.outbox import HOT_SENDER, ByteBudget, Outbox

SECRET = b"sixteen bytes at least, here"
SENDER, RECIPIENT = b"s" * 32, b"r" * 32


class Link:
    """Stands in for `CoreLink`: records what is published."""

    def __init__(self) -> None:
        self.up = True
        self.busy = False
        self.max_payload = 1 << 20
        self.sent = self.received = 0  # what CoreLink counts
        self.published: list[tuple[str, bytes]] = []

    async def send(self, messages: list[tuple[str, bytes | list[bytes]]], timeout: float) -> None:
        for subject, payload in messages:  # (joined as CoreLink joins a payload's parts)
            self.published.append(
                (subject, payload if isinstance(payload, bytes) else b"".join(payload))
            )


class Conn:
    def __init__(self, key: bytes = RECIPIENT, frames: int = 64) -> None:
        self.key = key
        self.outbox = Outbox(frames, 1 << 20, ByteBudget(1 << 24))


class Relay:
    def __init__(self, name: bytes, **settings: Any) -> None:
        config = FleetConfig("nats://127.0.0.1:4222", SECRET, **settings)
        self.link = Link()
        self.fallen: list[tuple[bytes, bytes, bytes]] = []
        self.hot = HotPath(
            config,
            FleetKeys(SECRET),
            cast(CoreLink, self.link),
            lambda r, s, e: self.fallen.append((r, s, e)),
            1 << 24,
            relay_id=name,
        )

    def take(self, subject: str) -> list[bytes]:
        """What this relay published on ``subject``, taken off the record."""
        out = [data for s, data in self.link.published if s == subject]
        self.link.published = [(s, d) for s, d in self.link.published if s != subject]
        return out


def pair(**settings: Any) -> tuple[Relay, Relay, Conn]:
    """Relay A, relay B, and B's connection of RECIPIENT, which A knows of."""
    a, b = Relay(b"relay--A", **settings), Relay(b"relay--B", **settings)
    conn = Conn()
    b.hot.join(cast(Any, conn))
    announce = hotwire.presence(hotwire.ANNOUNCE, b.hot.id, [b.hot.name(RECIPIENT)], 30)
    a.hot.on_presence(announce)
    return a, b, conn


def frames(count: int) -> list[bytes]:
    return [relaywire.deliver_frame(SENDER, b"envelope %d" % n + b"." * 90) for n in range(count)]


async def hand_over(a: Relay, b: Relay) -> None:
    await a.hot.flush()
    for batch in a.take(hotwire.batch_subject(b.hot.id)):
        b.hot.on_batch(batch)


async def answer(a: Relay, b: Relay) -> None:
    await b.hot.answer()
    for message in b.take(hotwire.answer_subject(a.hot.id)):
        a.hot.on_answer(message)


async def test_mail_handed_over_is_settled_once_written() -> None:
    a, b, conn = pair()
    assert a.hot.send(RECIPIENT, SENDER, frames(3))
    await hand_over(a, b)
    taken, envelopes = await conn.outbox.take(1 << 20)
    assert (taken, envelopes) == (frames(3), 3)
    await answer(a, b)  # nothing written yet: nothing to say
    assert a.hot.stats()["hot_waiting"] == 1
    b.hot.written(cast(Any, conn), conn.outbox.taken)  # the writer handed them over
    await answer(a, b)
    assert a.hot.stats()["hot_waiting"] == 0 and a.hot.counters["hot_written"] == 3
    assert a.fallen == []


async def test_a_parcel_written_in_part_is_answered_only_when_whole() -> None:
    a, b, conn = pair()
    assert a.hot.send(RECIPIENT, SENDER, frames(3))
    await hand_over(a, b)
    share = HOT_SENDER + SENDER
    b.hot.written(cast(Any, conn), {share: 2})
    await answer(a, b)
    assert a.hot.stats()["hot_waiting"] == 1
    b.hot.written(cast(Any, conn), {share: 1})
    await answer(a, b)
    assert a.hot.stats()["hot_waiting"] == 0


async def test_refused_and_gone_mail_goes_to_jetstream() -> None:
    a, b, conn = pair()
    conn.outbox.max_frames = 2  # room for two frames: a parcel of three is refused
    assert a.hot.send(RECIPIENT, SENDER, frames(3))
    await hand_over(a, b)
    await answer(a, b)
    envelopes = [relaywire.deliver_envelope(f) for f in frames(3)]
    assert a.fallen == [(RECIPIENT, SENDER, e) for e in envelopes]
    assert a.hot.counters["hot_refused"] == 3

    # The key left B without A hearing of it: B says gone, and A stops sending there.
    b.hot.leave(cast(Any, conn))
    a.fallen.clear()
    assert a.hot.send(RECIPIENT, SENDER, frames(1))
    await hand_over(a, b)
    await answer(a, b)
    assert a.fallen == [(RECIPIENT, SENDER, envelopes[0])]
    assert not a.hot.elsewhere(RECIPIENT)
    assert not a.hot.send(RECIPIENT, SENDER, frames(1))  # JetStream's turn from now on


async def test_mail_never_answered_for_goes_to_jetstream_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b, _ = pair(hot_deadline=10.0)
    assert a.hot.send(RECIPIENT, SENDER, frames(2))
    await hand_over(a, b)  # ... and B freezes, or dies
    await trio.sleep(9)
    a.hot.sweep()
    assert a.fallen == []
    await trio.sleep(2)
    a.hot.sweep()
    assert [e for _, _, e in a.fallen] == [relaywire.deliver_envelope(f) for f in frames(2)]
    assert a.hot.counters["hot_overdue"] == 2
    await answer(a, b)  # a late answer for it changes nothing
    assert len(a.fallen) == 2


async def test_a_closed_connection_hands_back_what_it_did_not_write() -> None:
    a, b, conn = pair()
    assert a.hot.send(RECIPIENT, SENDER, frames(2))
    await hand_over(a, b)
    b.hot.leave(cast(Any, conn))
    await answer(a, b)
    assert len(a.fallen) == 2 and a.hot.stats()["hot_waiting"] == 0
    assert b.hot.stats()["claims_here"] == 0


async def test_a_relay_says_who_joined_and_left_and_answers_a_query() -> None:
    _, b, conn = pair()
    subject = hotwire.PRESENCE_SUBJECT
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.hot._presence_loop)
        await trio.testing.wait_all_tasks_blocked()
        said = [hotwire.read_presence(m) for m in b.take(subject)]
        kinds = [(s.kind, s.names) for s in said if s is not None]
        # On start: a query, and everyone connected here.
        assert kinds == [(hotwire.QUERY, ()), (hotwire.ANNOUNCE, (b.hot.name(RECIPIENT),))]
        b.hot.leave(cast(Any, conn))
        await trio.testing.wait_all_tasks_blocked()
        said = [hotwire.read_presence(m) for m in b.take(subject)]
        assert [(s.kind, s.names) for s in said if s is not None] == [
            (hotwire.WITHDRAW, (b.hot.name(RECIPIENT),))
        ]
        other = Conn(b"o" * 32)
        b.hot.join(cast(Any, other))
        b.hot.on_presence(hotwire.presence(hotwire.QUERY, b"relay--C"))
        await trio.testing.wait_all_tasks_blocked()
        said = [hotwire.read_presence(m) for m in b.take(subject)]
        assert [(s.kind, s.names) for s in said if s is not None] == [
            (hotwire.ANNOUNCE, (b.hot.name(b"o" * 32),))
        ]
        nursery.cancel_scope.cancel()


async def test_presence_decides_where_mail_goes() -> None:
    a, b, _ = pair()
    assert a.hot.elsewhere(RECIPIENT)
    a.link.up = False  # no link: JetStream carries everything
    assert not a.hot.send(RECIPIENT, SENDER, frames(1))
    a.link.up = True
    a.hot.on_presence(hotwire.presence(hotwire.LEAVING, b.hot.id))
    assert not a.hot.send(RECIPIENT, SENDER, frames(1))
    # A claim by this relay itself is never handed over (it would deliver locally).
    a.hot.on_presence(hotwire.presence(hotwire.ANNOUNCE, b"relay--C", [a.hot.name(RECIPIENT)], 30))
    assert a.hot.elsewhere(RECIPIENT)
    mine = hotwire.presence(hotwire.ANNOUNCE, a.hot.id, [a.hot.name(SENDER)], 30)
    a.hot.on_presence(mine)  # our own word, back from NATS: ignored
    assert not a.hot.elsewhere(SENDER)
    a.hot.on_presence(b"junk")
    a.hot.on_batch(b"junk")
    a.hot.on_answer(b"junk")
    assert a.hot.counters["hot_malformed"] == 3
