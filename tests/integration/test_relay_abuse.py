"""The relay under abuse: one client, or keys minted by the thousand, must not deny
the relay to an honest pair.

Each case is what an attacker did against an earlier relay (fill a mailbox with
junk, fill the shared outbox budget by not reading, fill the connection cap with
minted keys, flood tiny envelopes, nest a frame type a thousand deep, flood
rejections into the log), followed by the honest exchange that must still work.
Clock-driven cases run `Relay.handle` over trio memory streams with the
autojump clock; nothing waits by sleeping (a Ping answered by a Pong is the
barrier, as in test_relay).
"""

from __future__ import annotations

import logging
import os
import tracemalloc

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from pixie.protocol import relaywire as rw
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MAX_FRAME_BYTES, MIN_ENVELOPE_BYTES, encode_frame
from pixie.relay.logs import TextFormatter, Throttle
from pixie.relay.mailbox import (
    CORRESPONDENT_COST,
    ENVELOPE_OVERHEAD,
    Correspondents,
    Mailboxes,
    MailboxLimits,
)
from pixie.relay.outbox import FRAME_OVERHEAD, ByteBudget, Outbox
from pixie.relay.server import Relay, RelayConfig
from tests.support.relayclient import Client, captured_log, conserved, memory_client, refused, send


def sealed(tag: int, size: int = MIN_ENVELOPE_BYTES) -> bytes:
    """A stand-in for a sealed envelope: ``size`` bytes, told apart by ``tag``."""
    return tag.to_bytes(4, "big") + os.urandom(size - 4)


def tag(envelope: bytes) -> int:
    return int.from_bytes(envelope[:4], "big")


# -- mailbox shares -----------------------------------------------------------------


async def test_a_junk_flood_does_not_push_an_honest_envelope_out_of_a_mailbox(
    nursery: trio.Nursery,
) -> None:
    relay = Relay()
    honest, mallory = memory_client(relay, nursery), memory_client(relay, nursery)
    await honest.login()
    await mallory.login()
    b_key = SigningKey.generate()
    b_public = bytes(b_key.verify_key)
    await honest.send(rw.Send(b_public, sealed(1)))
    await honest.sync()
    limit = relay.config.mailbox.max_envelopes
    for start in range(0, limit + 44, 50):
        await mallory.send(*(rw.Send(b_public, sealed(1000 + i)) for i in range(start, start + 50)))
    await mallory.sync()
    b = memory_client(relay, nursery, b_key)
    assert await b.login() == limit
    got = [tag(e) for e in await b.envelopes(limit)]
    assert 1 in got  # the honest sender's only envelope stayed
    assert got[-1] == 1000 + limit + 43  # and the flood kept only its newest
    assert await b.sync() == []
    stats = relay.stats()
    assert stats["drops"]["mailbox_full"] == limit + 44 - (limit - 1)
    assert conserved(stats)


def test_the_biggest_sender_loses_its_oldest_first() -> None:
    boxes = Mailboxes(MailboxLimits(max_envelopes=4))
    to, honest, mallory = b"r" * 32, b"h" * 32, b"m" * 32
    boxes.put(to, b"h1", 0, honest)
    boxes.put(to, b"h2", 1, honest)
    boxes.put(to, b"m1", 2, mallory)
    boxes.put(to, b"m2", 3, mallory)
    boxes.put(to, b"m3", 4, mallory)  # with it mallory would hold the most: its oldest goes
    assert boxes.senders(to) == {honest: 2, mallory: 2}
    boxes.put(to, b"h3", 5, honest)  # and now honest would: its own oldest goes
    assert boxes.senders(to) == {honest: 2, mallory: 2}
    third = b"t" * 32
    boxes.put(to, b"t1", 6, third)  # a newcomer: the first seen of the biggest gives way
    assert boxes.senders(to) == {honest: 1, mallory: 2, third: 1}
    assert boxes.take(to, 7, max_count=10, max_bytes=1 << 20) == [
        (mallory, b"m2"),
        (mallory, b"m3"),
        (honest, b"h3"),
        (third, b"t1"),
    ]
    assert boxes.drops["mailbox_full"] == 3


def test_minted_senders_push_out_only_each_other() -> None:
    boxes = Mailboxes(MailboxLimits(max_envelopes=4))
    to, honest, mallory = b"r" * 32, b"h" * 32, b"m" * 32
    minted = [bytes([i]) * 32 for i in range(10)]
    boxes.correspondents.note(to, honest, 0)  # the recipient once wrote to honest
    boxes.put(to, b"h1", 1, honest)
    for i, sender in enumerate(minted):
        boxes.put(to, b"from %d" % i, 2 + i, sender)
    # Each newcomer pushed out the oldest single envelope of a key not written to.
    assert boxes.senders(to) == {honest: 1, minted[7]: 1, minted[8]: 1, minted[9]: 1}
    assert boxes.drops["mailbox_full"] == 7
    for i in range(5):  # a flood from one key: after its first, it pushes out its own
        boxes.put(to, b"m%d" % i, 12 + i, mallory)
    assert boxes.senders(to) == {honest: 1, minted[8]: 1, minted[9]: 1, mallory: 1}
    for i in range(2, 6):  # the correspondent's mail pushes out the others', then its own
        boxes.put(to, b"h%d" % i, 20 + i, honest)
    assert boxes.senders(to) == {honest: 4}
    boxes.put(to, b"late", 30, minted[0])  # into a box of a correspondent's mail: refused
    assert boxes.drops["mailbox_correspondents"] == 1
    assert boxes.take(to, 31, max_count=10, max_bytes=1 << 20) == [
        (honest, b"h%d" % i) for i in range(2, 6)
    ]
    assert boxes.drops == {
        **dict.fromkeys(boxes.drops, 0),
        "mailbox_full": 7 + 5 + 4,
        "mailbox_correspondents": 1,
    }


def test_correspondents_holding_one_envelope_each_keep_it() -> None:
    boxes = Mailboxes(MailboxLimits(max_envelopes=3))
    to = b"r" * 32
    friends = [bytes([i]) * 32 for i in range(5)]
    for friend in friends:
        boxes.correspondents.note(to, friend, 0)
    for i, friend in enumerate(friends):
        boxes.put(to, b"from %d" % i, i, friend)
    # As many correspondents as the box holds, one envelope each: the next are refused.
    assert boxes.senders(to) == {f: 1 for f in friends[:3]}
    assert boxes.drops["mailbox_shared"] == 2
    boxes.put(to, b"stranger", 6, b"s" * 32)
    assert boxes.drops["mailbox_correspondents"] == 1
    boxes.put(to, b"newer from 0", 7, friends[0])  # one there replaces its own
    assert boxes.take(to, 8, max_count=10, max_bytes=1 << 20) == [
        (friends[1], b"from 1"),
        (friends[2], b"from 2"),
        (friends[0], b"newer from 0"),
    ]


def test_a_stranger_is_refused_without_dropping_anything() -> None:
    each = 1000 + ENVELOPE_OVERHEAD
    boxes = Mailboxes(MailboxLimits(max_bytes=5 * each))
    to, friend, stranger = b"r" * 32, b"f" * 32, b"s" * 32
    boxes.correspondents.note(to, friend, 0)
    boxes.put(to, b"s" * 1000, 1, stranger)
    for i in range(4):
        boxes.put(to, bytes([i]) * 1000, 2 + i, friend)
    # Room for a second stranger's envelope could only come from the friend's mail.
    boxes.put(to, b"x" * 2000, 6, b"x" * 32)
    assert boxes.senders(to) == {stranger: 1, friend: 4}
    assert boxes.drops["mailbox_correspondents"] == 1
    assert boxes.drops["mailbox_bytes"] == 0


def test_correspondents_are_few_per_key_and_bounded_in_all() -> None:
    known = Correspondents(per_key=3, total=5, max_age=100)
    r, s = b"r" * 32, b"s" * 32
    for i in range(4):
        known.note(r, bytes([i]) * 32, i)
    assert known.of(r, 4) == {bytes([i]) * 32 for i in (1, 2, 3)}  # the least recent went
    known.note(r, bytes([1]) * 32, 5)  # written to again: now the most recent
    known.note(r, bytes([9]) * 32, 6)
    assert known.of(r, 6) == {bytes([i]) * 32 for i in (1, 3, 9)}
    for i in range(3):
        known.note(s, bytes([i]) * 32, 7 + i)
    assert len(known) == 5  # at the total the least recent of any key went
    assert known.of(r, 9) == {bytes([1]) * 32, bytes([9]) * 32}
    assert known.of(r, 105.5) == {bytes([9]) * 32}  # unwritten for max_age: forgotten
    known.note(s, bytes([5]) * 32, 200)
    assert (len(known), known.of(r, 200)) == (1, set())


def test_correspondents_are_charged_what_remembering_them_costs() -> None:
    count = 5000
    known = Correspondents(per_key=64, total=count, max_age=1e9)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2 * count):  # each key writes to one other: the costliest shape
            known.note(os.urandom(32), os.urandom(32), i)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(known) == count
    assert used <= count * CORRESPONDENT_COST
    assert MailboxLimits().all_correspondents * CORRESPONDENT_COST <= 24 << 20


async def offline_recipient(relay: Relay, nursery: trio.Nursery, honest: Client) -> SigningKey:
    """A recipient that wrote to ``honest`` (so ``honest`` is its correspondent),
    then went offline."""
    key = SigningKey.generate()
    recipient = memory_client(relay, nursery, key)
    await recipient.login()
    await recipient.send(send(honest, sealed(0)))
    assert tag(await honest.envelope()) == 0
    await recipient.close()
    await trio.testing.wait_all_tasks_blocked()
    assert relay.stats()["connections_authenticated"] == 1  # honest alone
    return key


@pytest.mark.parametrize(
    ("minted", "size", "reason"),
    [
        (8, (8 << 20) // 8 - ENVELOPE_OVERHEAD, "mailbox_bytes"),  # one big envelope each
        (256, MIN_ENVELOPE_BYTES, "mailbox_full"),  # one small envelope each
    ],
)
async def test_minted_keys_cannot_lock_a_sibling_out_of_a_mailbox(
    nursery: trio.Nursery, minted: int, size: int, reason: str
) -> None:
    relay = Relay()
    limits = relay.config.mailbox
    honest = memory_client(relay, nursery)
    await honest.login()
    key = await offline_recipient(relay, nursery, honest)
    to = bytes(key.verify_key)
    for i in range(minted):  # each key minted for one envelope, filling the mailbox
        client = memory_client(relay, nursery)
        await client.login()
        await client.send(rw.Send(to, sealed(100 + i, size)))
        assert await client.sync() == []
    stats = relay.stats()
    assert (
        stats["mailbox_envelopes"] == limits.max_envelopes
        or stats["mailbox_bytes"] + (MIN_ENVELOPE_BYTES + ENVELOPE_OVERHEAD) > limits.max_bytes
    )
    await honest.send(*(rw.Send(to, sealed(1 + i)) for i in range(3)))
    assert await honest.sync() == []
    recipient = memory_client(relay, nursery, key)
    queued = await recipient.login()
    got = [tag(e) for e in await recipient.envelopes(queued)]
    assert got[-3:] == [1, 2, 3]  # the sibling's mail got in, the oldest minted went
    assert 100 not in got
    stats = relay.stats()
    assert stats["drops"][reason] == minted + 3 - queued
    assert stats["drops"]["mailbox_shared"] == stats["drops"]["mailbox_correspondents"] == 0
    assert conserved(stats)


def test_the_byte_bound_also_takes_from_the_biggest_sender() -> None:
    each = 1000 + ENVELOPE_OVERHEAD
    boxes = Mailboxes(MailboxLimits(max_bytes=5 * each))
    to, honest, mallory = b"r" * 32, b"h" * 32, b"m" * 32
    boxes.put(to, b"H" * 1000, 0, honest)
    for i in range(10):
        boxes.put(to, bytes([i]) * 1000, 1 + i, mallory)
    assert boxes.senders(to) == {honest: 1, mallory: 4}
    assert boxes.bytes == 5 * each
    assert boxes.drops["mailbox_bytes"] == 6


# -- per-envelope overhead ------------------------------------------------------------


def test_tiny_envelopes_are_charged_what_holding_them_costs() -> None:
    count, size = 5000, 16
    limits = MailboxLimits(max_envelopes=10 * count, max_bytes=1 << 30, total_bytes=1 << 30)
    boxes = Mailboxes(limits)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            boxes.put(bytes([i % 7]) * 32, os.urandom(size), 0, bytes([i % 5]) * 32)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert boxes.bytes == count * (size + ENVELOPE_OVERHEAD)
    assert used <= boxes.bytes  # the charge covers what is really held
    # So a byte bound admits only as many tiny envelopes as it can really afford.
    small = Mailboxes(MailboxLimits(max_envelopes=10_000, total_bytes=100 * (size + 192)))
    for i in range(1000):
        small.put(b"r" * 32, os.urandom(size), 0, bytes([i % 50]) * 32)
    assert small.envelopes == 100


async def test_outbox_frames_are_charged_what_holding_them_costs() -> None:
    count = 5000
    budget = ByteBudget(1 << 30)
    outbox = Outbox(10 * count, 1 << 30, budget)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            assert outbox.put(os.urandom(8), True) is None
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert outbox.bytes == budget.used == count * (8 + FRAME_OVERHEAD)
    assert used <= outbox.bytes
    frames, envelopes = await outbox.take(max_bytes=1 << 30)
    assert (len(frames), envelopes, budget.used, budget.holders) == (count, count, 0, 0)


# -- the smallest envelope ---------------------------------------------------------------


async def test_envelopes_shorter_than_the_smallest_sealed_one_are_refused(
    nursery: trio.Nursery,
) -> None:
    relay = Relay()
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    short, smallest = sealed(1, MIN_ENVELOPE_BYTES)[:-1], sealed(2)
    # Runs of equal sizes take the relay's fast path; the short ones must not.
    await a.send(*[send(b, smallest)] * 3, *[send(b, short)] * 3, send(b, b""))
    await a.send(*[send(b, short)] * 3, *[send(b, smallest)] * 2)
    await a.sync()
    assert await b.envelopes(5) == [smallest] * 5
    assert await b.sync() == []
    stats = relay.stats()
    assert stats["drops"]["too_short"] == 7
    assert conserved(stats)
    assert RelayConfig(min_envelope_bytes=0).min_envelope_bytes == 0


# -- a reader that never reads --------------------------------------------------------------


async def test_a_reader_that_never_reads_only_hurts_itself(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    budget = 2 * MAX_FRAME_BYTES
    relay = Relay(
        RelayConfig(
            outbox_frames=1000, outbox_bytes=budget, outbox_total_bytes=budget, idle_timeout=1e6
        )
    )
    mallory = memory_client(relay, nursery)
    await mallory.login()
    ours, theirs = trio.testing.lockstep_stream_pair()  # the relay's writes wait for our reads
    nursery.start_soon(relay.handle, theirs)
    sleeper = Client(ours)
    await sleeper.login()
    await sleeper.sync()  # its writer now serves its outbox; from here on it reads nothing
    big = 100_000
    for i in range(40):  # 4 MB for the sleeper: twice the shared budget
        await mallory.send(send(sleeper, sealed(i, big)))
    await mallory.sync()
    stats = relay.stats()
    # Its own outbox filled to its share of the budget, no further.
    assert stats["outbox_bytes"] <= budget // 2
    assert stats["drops"]["outbox_sender"] + stats["drops"]["outbox_share"] > 0
    assert stats["drops"]["outboxes_full"] == 0
    # An honest pair still exchanges envelopes of the same size at once.
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    envelopes = [sealed(100 + i, big) for i in range(5)]
    await a.send(*(send(b, e) for e in envelopes))
    assert await b.envelopes(5) == envelopes
    # The sleeper's stalled write ends its connection; later mail waits in its mailbox.
    await trio.sleep(relay.config.write_timeout)  # the autojump clock: no wall time
    await trio.testing.wait_all_tasks_blocked()
    assert relay.stats()["closes"].get("stalled") == 1
    await a.send(send(sleeper, sealed(999)))
    await a.sync()
    assert relay.stats()["mailbox_envelopes"] == 1
    assert conserved(relay.stats())


async def test_junk_for_a_busy_recipient_does_not_crowd_out_an_honest_sender(
    nursery: trio.Nursery,
) -> None:
    relay = Relay(RelayConfig(outbox_frames=16, idle_timeout=1e6))
    honest, mallory = memory_client(relay, nursery), memory_client(relay, nursery)
    await honest.login()
    await mallory.login()
    ours, theirs = trio.testing.lockstep_stream_pair()  # the relay's writes wait for our reads
    nursery.start_soon(relay.handle, theirs)
    busy = Client(ours)
    await busy.login()
    await busy.sync()
    for batch in range(2):  # the first goes into a write that waits; the second queues
        await mallory.send(*(send(busy, sealed(1000 + 100 * batch + i)) for i in range(40)))
        await mallory.sync()
        await trio.testing.wait_all_tasks_blocked()
    await honest.send(send(busy, sealed(1)))
    await honest.sync()
    stats = relay.stats()
    dropped = sum(n for reason, n in stats["drops"].items() if reason != "pong")
    waiting = stats["envelopes_in"] - stats["envelopes_delivered"] - dropped
    got = [tag(e) for e in await busy.envelopes(waiting)]
    assert 1 in got  # the honest envelope was queued, not dropped
    assert stats["drops"]["outbox_sender"] > 0
    assert await busy.sync() == []


async def test_an_outbox_keeps_room_for_one_more_sender() -> None:
    outbox = Outbox(12, 1 << 20, ByteBudget(1 << 30))
    first, second, third = b"1" * 32, b"2" * 32, b"3" * 32
    # Alone, a sender may fill 12 / 2 frames: room stays for one more sender.
    assert [outbox.put(b"1", True, first) for _ in range(7)].count(None) == 6
    # A second may hold 12 / 3 (the first, over that now, may add nothing).
    assert [outbox.put(b"2", True, second) for _ in range(6)].count(None) == 4
    assert outbox.put(b"1", True, first) == "outbox_sender"
    assert outbox.put(b"3", True, third) is None  # a newcomer always gets one in
    assert outbox.put(b"ping", False) is None  # the relay's own frames are not shared out
    assert outbox.put(b"3", True, third) == "outbox_full"
    frames, envelopes = await outbox.take(max_bytes=(1 + FRAME_OVERHEAD) * 8)
    # The relay's own first, then the senders in turn, as many as fit.
    assert (frames, envelopes) == ([b"ping", b"1", b"2", b"3", b"1", b"2", b"1"], 6)
    assert outbox.put(b"1", True, first) is None  # shares follow: 3 of 12 held now


def test_the_shared_outbox_budget_keeps_half_for_the_many() -> None:
    budget = ByteBudget(10_000 + 4 * FRAME_OVERHEAD)
    slow, other = Outbox(100, 10_000, budget), Outbox(100, 10_000, budget)
    assert slow.put(b"s" * 5000, True) is None  # up to half: first come, first served
    assert slow.put(b"s" * 2000, True) == "outbox_share"  # past half: its share is full
    assert other.put(b"o" * 2000, True) is None  # another, holding little, still fits
    assert budget.holders == 2


# -- the connection cap ---------------------------------------------------------------------


async def test_minted_keys_filling_the_connection_cap_do_not_lock_out_a_pair(
    nursery: trio.Nursery,
) -> None:
    relay = Relay(RelayConfig(max_connections=20, idle_timeout=1e6))
    junk = [memory_client(relay, nursery) for _ in range(20)]
    for client in junk:
        await client.login()
    assert relay.stats()["connections_open"] == 20
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()  # each newcomer evicts the longest-open quiet connection
    await b.login()
    envelope = sealed(7)
    await a.send(send(b, envelope))
    assert await b.envelope() == envelope
    refused(await junk[0].drain(), "relay full")
    refused(await junk[1].drain(), "relay full")
    assert await junk[2].sync() == []  # the rest are untouched
    stats = relay.stats()
    assert stats["evicted"] == 2
    assert stats["refused_busy"] == 0
    assert stats["closes"] == {"evicted": 2}


async def test_at_the_cap_connections_that_carried_envelopes_are_kept(
    nursery: trio.Nursery,
) -> None:
    relay = Relay(RelayConfig(max_connections=2, idle_timeout=1e6))
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    await a.send(send(b, sealed(1)))
    await b.envelope()  # both have now carried an envelope
    newcomer = memory_client(relay, nursery)
    assert await newcomer.drain() == [rw.Refuse("busy")]
    assert await a.sync() == []
    assert relay.stats()["evicted"] == 0


# -- decoding and the per-connection driver ----------------------------------------------------


def test_a_frame_type_nested_a_thousand_deep_is_a_protocol_error() -> None:
    # [[[...[1]...]], key]: msgpack arrays of one, a thousand deep, then a second field.
    frame = b"\x92" + b"\x91" * 1000 + b"\x01" + b"\xc4\x20" + bytes(32)
    with pytest.raises(ProtocolError):
        rw.decode(frame)
    for code in (b"\xa3abc", b"\xc3", b"\xcb" + bytes(8), b"\xcf" + b"\xff" * 8):
        with pytest.raises(ProtocolError):
            rw.decode(b"\x92" + code + b"\x01")


async def test_a_failure_setting_up_or_tearing_down_a_connection_never_escapes(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay = Relay()

    async def explode(*args: object) -> None:
        raise RecursionError("from a hostile frame")

    monkeypatch.setattr(relay, "_hang_up", explode)
    ours, theirs = trio.testing.memory_stream_pair()
    await ours.aclose()
    await relay.handle(theirs)  # ends at once (EOF) and its hang-up fails: nothing escapes
    monkeypatch.undo()
    assert relay.stats()["errors"] == 1
    assert relay.stats()["connections_open"] == 0
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    await a.send(send(b, sealed(3)))
    assert tag(await b.envelope()) == 3


async def test_any_exception_from_decoding_one_connections_bytes_ends_it_alone(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay = Relay()
    real_decode = rw.decode

    def fragile(frame: bytes) -> rw.RelayMessage:
        if b"poison" in frame:
            raise RecursionError("maximum recursion depth exceeded")
        return real_decode(frame)

    monkeypatch.setattr(rw, "decode", fragile)  # the relay calls it as relaywire.decode
    mallory = memory_client(relay, nursery)
    await mallory.login()
    await mallory.send_raw(encode_frame(b"\x92\x07\xa6poison"))
    refused(await mallory.drain(), "internal error")
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    await a.send(send(b, sealed(4)))
    assert tag(await b.envelope()) == 4
    assert relay.stats()["errors"] == 1


# -- the log under a flood -------------------------------------------------------------------


def test_ten_thousand_rejections_log_a_bounded_number_of_lines() -> None:
    now = [0.0]
    with captured_log(TextFormatter()) as log:
        throttle = Throttle(lambda: now[0])
        for i in range(10_000):
            now[0] = i * 0.01  # 100 s in all
            throttle.event(logging.INFO, "auth_failed", "malformed", conn=i, reason="malformed")
            throttle.event(logging.INFO, "closed", "malformed", conn=i, reason="malformed")
        throttle.flush()
    lines = log.getvalue().splitlines()
    # Two intervals of 60 s: per kind and interval, the first few and one summary.
    assert len(lines) <= 2 * 2 * (Throttle.FIRST + 1)
    summaries = [line for line in lines if " suppressed " in line]
    counted = sum(int(line.split("count=")[1].split()[0]) for line in summaries)
    assert counted + len(lines) - len(summaries) == 20_000


async def test_a_flood_of_bad_handshakes_grows_the_relay_log_boundedly(
    nursery: trio.Nursery,
) -> None:
    relay = Relay()
    flood = 300
    with captured_log(TextFormatter()) as log:
        for _ in range(flood):
            mallory = memory_client(relay, nursery)
            await mallory.send_raw(encode_frame(b"\x92\x63\x01"))  # type 99
            refused(await mallory.drain(), "malformed")
        relay.log_stats()
    lines = log.getvalue().splitlines()
    assert relay.stats()["auth_failures"] == flood
    assert len(lines) <= 2 * (Throttle.FIRST + 1) + 1  # auth_failed and closed, and stats
    assert any("suppressed" in line and "count=295" in line for line in lines)


# -- a flooder costs itself ---------------------------------------------------------------


async def test_short_sends_count_against_the_rate_limit(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    relay = Relay(RelayConfig(envelopes_per_second=1, envelope_burst=5, abuse_factor=100))
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    short = sealed(1)[:-1]
    await a.send(*[send(b, short)] * 5, send(b, sealed(2)))
    assert await a.sync() == []  # still connected
    assert await b.sync() == []  # the short ones spent its tokens: nothing came
    drops = relay.stats()["drops"]
    assert (drops["too_short"], drops["rate_limited"]) == (5, 1)


@pytest.mark.parametrize("junk", ["too_short", "rate_limited"])
async def test_a_client_dropped_far_past_its_allowance_is_disconnected(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock, junk: str
) -> None:
    # An allowance of 5 (the burst) and a multiple of 4: 20 drops within a second.
    config = RelayConfig(envelopes_per_second=1, envelope_burst=5, abuse_factor=4)
    relay = Relay(config)
    flooder_key = SigningKey.generate()
    flooder = memory_client(relay, nursery, flooder_key)
    honest, b = memory_client(relay, nursery), memory_client(relay, nursery)
    for client in (flooder, honest, b):
        await client.login()
    envelope = sealed(1)[:-1] if junk == "too_short" else sealed(1)
    await flooder.send(*[send(b, envelope)] * 19)
    assert await flooder.sync() == []  # 19 drops at most (and 5 delivered): still there
    await flooder.send(*[send(b, envelope)] * 10)
    refused(await flooder.drain(), "too many")
    stats = relay.stats()
    assert stats["abusive"] == 1 and stats["closes"]["abusive"] == 1
    # The honest sender is served, and the flooder may come back only by proving its key.
    await honest.send(send(b, sealed(7)))
    assert await honest.sync() == []
    got = [m for m in await b.sync() if isinstance(m, rw.Deliver)]
    assert [tag(m.envelope) for m in got][-1] == 7
    again = memory_client(relay, nursery, flooder_key)
    await again.send(send(b, sealed(8)))  # before the handshake: refused, not routed
    refused(await again.drain(), "expected Hello")
    again = memory_client(relay, nursery, flooder_key)
    assert await again.login() == 0


class _Hasty(trio.abc.Stream):
    """A stream whose reads of queued ``burst`` chunks return at once, without a
    checkpoint (as a socket with data waiting may); otherwise it is ``inner``."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.burst: list[bytes] = []
        self.taken = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self.burst:
            self.taken += 1
            return self.burst.pop(0)
        return bytes(await self.inner.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_one_connections_burst_of_tiny_frames_yields_to_the_others(
    nursery: trio.Nursery,
) -> None:
    relay = Relay(RelayConfig(abuse_factor=1e9))  # this flood is not cut off
    ours, theirs = trio.testing.memory_stream_pair()
    hasty = _Hasty(theirs)
    nursery.start_soon(relay.handle, hasty)
    flooder = Client(ours)
    await flooder.login()
    tiny = encode_frame(rw.encode(rw.Send(bytes(32), b"x" * 16)))
    chunks = 20
    ping = encode_frame(rw.encode(rw.Ping(99)))
    hasty.burst = [tiny * (65_536 // len(tiny))] * chunks + [ping]
    seen: list[int] = []
    done = False

    async def witness() -> None:  # another task that wants the event loop meanwhile
        while not done:
            seen.append(hasty.taken)
            await trio.lowlevel.checkpoint()

    nursery.start_soon(witness)
    await flooder.send(rw.Pong(1))  # wakes the relay's reader, which then takes the burst
    assert await flooder.recv() == rw.Pong(99)  # the Ping at the burst's end: all read
    done = True
    assert relay.stats()["drops"]["too_short"] == chunks * (65_536 // len(tiny))
    # The witness ran between the chunks, not only before and after them all.
    assert any(0 < n < chunks for n in seen), seen


# -- fair delivery --------------------------------------------------------------------------


async def test_an_honest_envelope_does_not_wait_behind_a_flooders() -> None:
    outbox = Outbox(1000, 1 << 30, ByteBudget(1 << 30))
    mallory, honest = b"m" * 32, b"h" * 32
    assert outbox.put_all([b"junk"] * 400, 4 * 400, mallory)
    assert outbox.put(b"mail", True, honest) is None
    assert outbox.put(b"pong", False) is None
    frames, envelopes = await outbox.take(max_bytes=4 * (4 + FRAME_OVERHEAD))
    assert (frames, envelopes) == ([b"pong", b"junk", b"mail", b"junk"], 3)
    # The rest is mallory's, all of it at once.
    frames, envelopes = await outbox.take(max_bytes=1 << 20)
    assert (frames, envelopes, len(outbox), outbox.bytes) == ([b"junk"] * 398, 398, 0, 0)


async def test_a_sender_served_last_round_waits_for_the_others_next_time() -> None:
    outbox = Outbox(1000, 1 << 30, ByteBudget(1 << 30))
    keys = [bytes([k]) * 32 for k in b"abc"]
    for key in keys:
        assert outbox.put_all([key[:1] + b"%d" % i for i in range(3)], 6, key)
    unit = 2 + FRAME_OVERHEAD
    assert (await outbox.take(max_bytes=2 * unit))[0] == [b"a0", b"b0"]
    assert (await outbox.take(max_bytes=2 * unit))[0] == [b"c0", b"a1"]
    assert (await outbox.take(max_bytes=9 * unit))[0] == [b"b1", b"c1", b"a2", b"b2", b"c2"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "put_all", "control", "take", "clear"]),
            st.integers(0, 3),  # which sender (0: the relay's own envelopes), or batch bytes
            st.integers(1, 6),  # how many
        ),
        max_size=60,
    )
)
def test_outboxes_serve_senders_in_turn_and_account_for_everything(
    ops: list[tuple[str, int, int]],
) -> None:
    trio.run(_outbox_ops, ops)


async def _outbox_ops(ops: list[tuple[str, int, int]]) -> None:
    budget = ByteBudget(1 << 30)
    outbox = Outbox(40, 4000, budget)
    model: dict[bytes, list[bytes]] = {}  # per sender, in order
    controls: list[bytes] = []
    serial = 0
    for op, who, n in ops:
        sender = bytes([who]) * 32 if who else b""
        if op in ("put", "put_all", "control"):
            frames = []
            for _ in range(n if op == "put_all" else 1):
                serial += 1
                frames.append(b"%d:%d" % (who, serial) + b"." * (serial % 50))
            if op == "control":
                if outbox.put(frames[0], False) is None:
                    controls.append(frames[0])
            elif op == "put":
                if outbox.put(frames[0], True, sender) is None:
                    model.setdefault(sender, []).append(frames[0])
            elif outbox.put_all(frames, sum(map(len, frames)), sender):
                model.setdefault(sender, []).extend(frames)
        elif op == "clear":
            assert outbox.clear() == sum(map(len, model.values()))
            model.clear()
            controls.clear()
        elif len(outbox):
            queued = {s: len(q) for s, q in model.items() if q}
            got, envelopes = await outbox.take(max_bytes=n * 30)
            assert got[: len(controls)] == controls  # the relay's own first
            rest = got[len(controls) :]
            assert envelopes == len(rest)
            controls.clear()
            counts = dict.fromkeys(queued, 0)
            for frame in rest:
                number = int(frame.split(b":")[0])
                key = bytes([number]) * 32 if number else b""
                assert model[key].pop(0) == frame  # each sender's order is kept
                counts[key] += 1
            left = [c for s, c in counts.items() if c < queued[s]]
            if rest and left:  # in turn: none served twice more than one left waiting
                assert max(counts.values()) - min(left) <= 1
        held = sum(map(len, model.values())) + len(controls)
        assert len(outbox) == held
        charged = sum(len(f) + FRAME_OVERHEAD for q in [*model.values(), controls] for f in q)
        assert outbox.bytes == budget.used == charged
        assert budget.holders == (1 if charged else 0)
