"""The columnar codec of log events: round trips, and the same verdict as the
rules for one event at a time.

A batch carries its events as columns (`syncwire.EventColumns`): the ids as one
binary string, origin, kind, contact and thread as a table of distinct values
plus one index per event, the other fields as plain arrays. The decoder checks
whole columns with builtins; `_event_verdict` below states the rules for a
single event (every bound and type the codec has always held an event to), and
the decoder must accept a batch exactly when every event in it passes them and
no id appears twice.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import msgpack
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pixie.protocol.errors import ProtocolError
from pixie.protocol.hlc import Stamp
from pixie.protocol.ids import id_text
from pixie.protocol.syncmessages import (
    MAX_KIND_CHARS,
    MAX_SEQ,
    MAX_SHORT_CHARS,
    MAX_TEXT_CHARS,
    NO_EVENTS,
    Batch,
    EventColumns,
    LogEvent,
    Records,
)
from pixie.protocol.syncwire import decode, encode

SESSION = b"\x02" * 8
LOW, HIGH = -(1 << 62), 1 << 62

ORIGINS = st.sampled_from(["a1b2", "c3d4", "0" * 64]) | st.from_regex(
    r"[0-9a-z]{1,64}", fullmatch=True
)
SHORT = st.sampled_from(["t1", "thread two", "ť" * MAX_SHORT_CHARS]) | st.text(
    max_size=MAX_SHORT_CHARS
)
EVENTS = st.builds(
    LogEvent,
    id=st.binary(min_size=16, max_size=16).map(id_text),
    origin=ORIGINS,
    seq=st.integers(1, MAX_SEQ),
    kind=st.sampled_from(["message", "journal", "call"]) | st.text(max_size=MAX_KIND_CHARS),
    at=st.integers(LOW, HIGH),
    contact_id=st.none()
    | st.sampled_from(["ab" * 16, "cd" * 16])
    | st.binary(min_size=16, max_size=16).map(bytes.hex),
    thread=st.none() | SHORT,
    source=st.none() | SHORT,
    from_me=st.none() | st.booleans(),
    text=st.text(max_size=300),
)
EVENT_LISTS = st.lists(EVENTS, max_size=30, unique_by=lambda e: e.id)


def _round_trip(events: EventColumns) -> EventColumns:
    batch = decode(encode(Batch(SESSION, 0, False, Records(events=events))))
    assert isinstance(batch, Batch)
    return batch.records.event_columns


@pytest.mark.slow
@settings(max_examples=200)
@given(EVENT_LISTS)
def test_events_survive_the_columns(events: list[LogEvent]) -> None:
    columns = EventColumns.of(events)
    back = _round_trip(columns)
    assert back == columns
    assert list(back) == events
    assert Records(events=events) == Records(events=back)


@settings(max_examples=100)
@given(EVENT_LISTS, st.data())
def test_columns_behave_as_a_sequence_of_events(
    events: list[LogEvent], data: st.DataObject
) -> None:
    columns = EventColumns.of(events)
    assert len(columns) == len(events)
    assert list(columns) == events
    if events:
        i = data.draw(st.integers(-len(events), len(events) - 1))
        assert columns[i] == events[i]
    start = data.draw(st.integers(0, len(events)))
    stop = data.draw(st.integers(start, len(events)))
    assert list(columns[start:stop]) == events[start:stop]
    assert columns[start:stop] == EventColumns.of(events[start:stop])
    assert EventColumns(*columns.columns()) == columns


def test_every_field_at_its_bound_round_trips() -> None:
    widest = LogEvent(
        str(uuid.uuid4()),
        "z" * 64,
        MAX_SEQ,
        "ķ" * MAX_KIND_CHARS,
        HIGH,
        "ff" * 16,
        "𝕥" * MAX_SHORT_CHARS,
        "𝕤" * MAX_SHORT_CHARS,
        False,
        "𝕩" * MAX_TEXT_CHARS,
    )
    lowest = dataclasses.replace(widest, id=str(uuid.uuid4()), seq=1, at=LOW, text="")
    events = EventColumns.of([widest, lowest])
    assert _round_trip(events) == events


def test_no_events_is_the_empty_columns() -> None:
    assert Records().events == NO_EVENTS == EventColumns.of([]) == EventColumns()
    assert _round_trip(NO_EVENTS) == NO_EVENTS
    with pytest.raises(ValueError, match="lengths"):
        EventColumns(ids=("x",))


def test_decoded_ids_keep_their_bytes_only_while_they_are_the_same_ids() -> None:
    good = LogEvent(str(uuid.uuid4()), "a1b2", 1, "message", 0, None, None, None, None, "hi")
    decoded = _round_trip(EventColumns.of([good]))
    assert decoded.id_bytes() == uuid.UUID(good.id).bytes
    other = uuid.uuid4()
    assert dataclasses.replace(decoded, ids=(str(other),)).id_bytes() == other.bytes


def test_ids_in_any_form_the_codec_took_before_are_sent_canonical() -> None:
    raw = uuid.uuid4()
    plain = LogEvent(raw.hex.upper(), "a1b2", 1, "message", 0, None, None, None, None, "hi")
    (back,) = _round_trip(EventColumns.of([plain]))
    assert back.id == str(raw)


@pytest.mark.parametrize(
    "bad", ["not-an-id", "0" * 30, "0" * 8 + "-0000-0000-0000-" + "0" * 11 + "g", ""]
)
def test_an_id_that_is_no_128_bit_id_cannot_be_sent(bad: str) -> None:
    good = LogEvent(str(uuid.uuid4()), "a1b2", 1, "message", 0, None, None, None, None, "hi")
    events = (good, dataclasses.replace(good, id=bad, seq=2))
    with pytest.raises(ProtocolError, match="128-bit"):
        encode(Batch(SESSION, 0, False, Records(events=events)))


# -- the same verdict as one event at a time -------------------------------------------------


def _event_verdict(f: list[Any]) -> bool:
    """Whether one event's fields (as they travel, in `LogEvent` order) pass
    the rules of a single event: each field's type and bound."""
    id_, origin, seq, kind, at, contact, thread, source, from_me, text = f

    def integer(v: Any, low: int, high: int) -> bool:
        return type(v) is int and low <= v <= high

    def short(v: Any) -> bool:
        return v is None or (type(v) is str and len(v) <= MAX_SHORT_CHARS)

    try:
        Stamp(0, 0, origin)
        origin_ok = type(origin) is str
    except (ProtocolError, TypeError):
        origin_ok = False
    return (
        type(id_) is bytes
        and len(id_) == 16
        and origin_ok
        and integer(seq, 1, MAX_SEQ)
        and type(kind) is str
        and len(kind) <= MAX_KIND_CHARS
        and integer(at, LOW, HIGH)
        and (contact is None or (type(contact) is bytes and len(contact) == 16))
        and short(thread)
        and short(source)
        and (from_me is None or type(from_me) is bool)
        and type(text) is str
        and len(text) <= MAX_TEXT_CHARS
    )


def _keyed(value: Any) -> tuple[type, Any]:
    return type(value), value  # 1 and True are two table entries, not one


def _table(values: list[Any]) -> tuple[list[Any], list[int]]:
    """A column as the sender codes it: distinct values in order of first use."""
    index: dict[tuple[type, Any], int] = {}
    codes = [index.setdefault(_keyed(v), len(index)) for v in values]
    return [v for _, v in index], codes


def _batch_tree(events: list[list[Any]]) -> list[Any]:
    columns = list(zip(*events, strict=True)) if events else [()] * 10
    ids, origins, seqs, kinds, ats, contacts, threads, sources, from_me, texts = map(list, columns)
    return [
        2,
        SESSION,
        0,
        False,
        [
            [],
            [
                b"".join(ids),
                *_table(origins),
                seqs,
                *_table(kinds),
                ats,
                *_table(contacts),
                *_table(threads),
                sources,
                from_me,
                texts,
            ],
            [],
        ],
    ]


# Good values of each field, and values that may break its rule.
GOOD = [
    st.sampled_from([bytes(range(16)), bytes(16), b"\xff" * 16])
    | st.binary(min_size=16, max_size=16),
    ORIGINS,
    st.integers(1, MAX_SEQ),
    st.sampled_from(["message", "journal"]) | st.text(max_size=MAX_KIND_CHARS),
    st.integers(LOW, HIGH),
    st.none() | st.sampled_from([b"\xab" * 16, b"\xcd" * 16]),
    st.none() | SHORT,
    st.none() | SHORT,
    st.none() | st.booleans(),
    st.text(max_size=20),
]
ODD = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False)
    | st.binary(max_size=20)
    | st.text(max_size=8)
)
BAD = [
    st.nothing(),  # ids: see the blob cases in test_sync_bad
    st.sampled_from(["a" * 65, "A1B2", "", "a-b"]) | ODD,
    st.sampled_from([0, -1, MAX_SEQ + 1, (1 << 63) - 1]) | ODD,
    st.just("k" * (MAX_KIND_CHARS + 1)) | ODD,
    st.sampled_from([LOW - 1, HIGH + 1]) | ODD,
    st.sampled_from([b"\xab" * 15, b"\xab" * 17, "ab" * 16]) | ODD,
    st.just("t" * (MAX_SHORT_CHARS + 1)) | ODD,
    st.just("s" * (MAX_SHORT_CHARS + 1)) | ODD,
    ODD,
    st.just("x" * (MAX_TEXT_CHARS + 1)) | ODD,
]


@pytest.mark.slow
@settings(max_examples=500)
@given(st.lists(st.tuples(*GOOD).map(list), max_size=6), st.data())
def test_a_batch_decodes_exactly_when_each_event_would(
    events: list[list[Any]], data: st.DataObject
) -> None:
    """Good events with none, one or a few fields replaced by anything."""
    for _ in range(data.draw(st.integers(0, 2)) if events else 0):
        event = data.draw(st.sampled_from(events))
        field = data.draw(st.integers(1, 9))
        event[field] = data.draw(BAD[field] | GOOD[field])
    if events and data.draw(st.booleans()):
        events.append(list(data.draw(st.sampled_from(events))))  # an id twice
    data = msgpack.packb(_batch_tree(events), use_bin_type=True)
    assume(len(data) < 700 * 1024)
    expected = all(_event_verdict(e) for e in events) and len({e[0] for e in events}) == len(events)
    try:
        batch = decode(data)
    except ProtocolError:
        assert not expected
        return
    assert expected
    assert isinstance(batch, Batch)
    got = list(batch.records.events)
    assert [e.id for e in got] == [id_text(e[0]) for e in events]
    assert [(e.origin, e.seq, e.kind, e.at) for e in got] == [tuple(e[1:5]) for e in events]
    assert [e.contact_id for e in got] == [None if e[5] is None else e[5].hex() for e in events]
    assert [(e.thread, e.source, e.from_me, e.text) for e in got] == [
        tuple(e[6:10]) for e in events
    ]
    assert decode(encode(batch)) == batch
