"""What relays say to each other on the hot path: each message reads back as
written, anything not whole and well formed reads as None (never an exception),
and the presence table follows the fleet's claims: the newest wins, only its
holder withdraws it, and an unrenewed one lapses."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.protocol import relaywire
from pixie.relay import hotwire
from pixie.relay.hotwire import Presence

A, B = b"relay--A", b"relay--B"
SENDER = b"s" * 32


def names(count: int, tag: bytes = b"n") -> list[bytes]:
    return [tag + n.to_bytes(15, "big") for n in range(count)]


def test_presence_reads_back_as_written() -> None:
    message = hotwire.presence(hotwire.ANNOUNCE, A, names(3), lease=30)
    said = hotwire.read_presence(message)
    assert said is not None
    assert (said.kind, said.relay, said.lease, list(said.names)) == (
        hotwire.ANNOUNCE,
        A,
        30.0,
        names(3),
    )
    query = hotwire.read_presence(hotwire.presence(hotwire.QUERY, B))
    assert query is not None and (query.kind, query.relay, query.names) == (hotwire.QUERY, B, ())


def test_many_names_go_in_as_many_messages_as_they_need() -> None:
    many = names(hotwire.MAX_NAMES * 2 + 5)
    messages = hotwire.announcements(hotwire.WITHDRAW, A, many)
    assert len(messages) == 3
    read = [hotwire.read_presence(m) for m in messages]
    assert [n for said in read if said is not None for n in said.names] == many
    with pytest.raises(ValueError, match="at most"):
        hotwire.presence(hotwire.ANNOUNCE, A, names(hotwire.MAX_NAMES + 1))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"A",
        hotwire.presence(hotwire.ANNOUNCE, A, names(2))[:-1],  # a name cut short
        b"Z" + hotwire.presence(hotwire.ANNOUNCE, A, names(1))[1:],  # no such kind
        hotwire.presence(hotwire.QUERY, A) + names(1)[0],  # a query names no one
        hotwire.presence(hotwire.ANNOUNCE, A) + b"\x00" * 16 * (hotwire.MAX_NAMES + 1),
    ],
)
def test_presence_that_is_not_whole_reads_as_none(data: bytes) -> None:
    assert hotwire.read_presence(data) is None


def test_the_newest_claim_wins_and_only_its_holder_withdraws_it() -> None:
    table = Presence()
    key = names(1)[0]
    table.claim(A, (key,), until=100.0, now=0.0)
    assert table.where(key, 1.0) == A
    table.claim(B, (key,), until=100.0, now=2.0)  # the key moved to B
    table.withdraw(A, (key,))  # A's late word about its old connection
    assert table.where(key, 3.0) == B
    table.withdraw(B, (key,))
    assert table.where(key, 3.0) is None


def test_claims_lapse_and_a_leaving_relay_takes_its_claims_along() -> None:
    table = Presence()
    first, second = names(2)
    table.claim(A, (first,), until=10.0, now=0.0)
    table.claim(B, (second,), until=50.0, now=0.0)
    assert table.where(first, 10.0) is None  # not renewed in time
    assert len(table) == 1
    table.drop_relay(B)
    assert table.where(second, 11.0) is None


def test_a_full_table_takes_no_new_claims_until_old_ones_lapse() -> None:
    table = Presence(max_claims=2)
    a, b, c = names(3)
    table.claim(A, (a, b), until=10.0, now=0.0)
    table.claim(A, (c,), until=20.0, now=1.0)
    assert table.where(c, 2.0) is None  # full: c's mail goes through JetStream
    table.claim(A, (a,), until=30.0, now=2.0)  # a renewal always fits
    assert table.where(a, 25.0) == A
    table.claim(A, (c,), until=40.0, now=15.0)  # b lapsed at 10: room again
    assert table.where(c, 16.0) == A


def frames(count: int, sender: bytes = SENDER, size: int = 300) -> list[bytes]:
    return [relaywire.deliver_frame(sender, bytes([n]) * size) for n in range(count)]


def test_a_batch_reads_back_as_written() -> None:
    first, second = names(2)
    parcels = [
        hotwire.parcel(first, 7, SENDER, frames(3)),
        hotwire.parcel(second, 8, b"t" * 32, frames(1, b"t" * 32, 70_000)),
    ]
    read = hotwire.read_batch(hotwire.batch(A, parcels))
    assert read is not None
    relay, entries = read
    assert relay == A
    assert [(n, num, s, f) for n, num, s, f, _ in entries] == [
        (first, 7, SENDER, frames(3)),
        (second, 8, b"t" * 32, frames(1, b"t" * 32, 70_000)),
    ]
    assert [size for *_, size in entries] == [
        sum(map(len, frames(3))),
        len(frames(1, b"t" * 32, 70_000)[0]),
    ]


def _batch(*parcels: bytes) -> bytes:
    return hotwire.batch(A, list(parcels))


GOOD = hotwire.parcel(names(1)[0], 1, SENDER, frames(2))
# A frame that claims another sender than its parcel's (a relay vouches for the
# sender of what it hands over: every frame must carry that same key).
FORGED = hotwire.parcel(names(1)[0], 2, SENDER, frames(1, b"x" * 32))
HEAD = struct.calcsize("<16sQ32sII")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        _batch(GOOD)[:-1],  # cut short
        _batch(GOOD) + b"\x00",  # something after the last parcel
        _batch(FORGED),
        b"R" + _batch(GOOD)[1:],  # not a batch
        # a parcel whose length says more than its frames hold
        _batch(GOOD[: HEAD - 4] + struct.pack("<I", len(GOOD) - HEAD + 1) + GOOD[HEAD:] + b"\x00"),
        # a frame whose length prefix runs past its parcel
        _batch(GOOD[:HEAD] + b"\xff\xff\xff\xff" + GOOD[HEAD + 4 :]),
        # no envelope length marker after the sender's key
        _batch(
            hotwire.parcel(
                names(1)[0],
                3,
                SENDER,
                [frames(1)[0][:40] + b"\x01" + frames(1)[0][41:]],
            )
        ),
        hotwire.batch(A, [])[:-1],
    ],
)
def test_a_batch_that_is_not_whole_reads_as_none(data: bytes) -> None:
    assert hotwire.read_batch(data) is None


def test_answers_read_back_and_anything_else_reads_as_none() -> None:
    data = hotwire.answer([1, 2], [3], [4, 5, 6])
    assert hotwire.read_answer(data) == ((1, 2), (3,), (4, 5, 6))
    assert hotwire.read_answer(data[:-1]) is None
    assert hotwire.read_answer(b"B" + data[1:]) is None
    too_many = hotwire.MAX_ANSWERS + 1
    assert hotwire.read_answer(hotwire.answer(list(range(too_many)), [], [])) is None


@given(st.binary(max_size=2048))
def test_no_bytes_make_a_reader_raise(data: bytes) -> None:
    hotwire.read_presence(data)
    hotwire.read_batch(data)
    hotwire.read_answer(data)
    hotwire.read_batch(b"B" + A + data)
