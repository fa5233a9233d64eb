"""The JSON Lines reader's fast way must read every line exactly as the slow
way does: the same event for a good line, and for any other line nothing of
its own (it hands the line to the slow way, which skips it or names what is
wrong). Random and mutated lines hold the two together, and a whole-stream
check holds `read_events` to the reader as it was (readline, `loads_strict`,
`event_from_object`, line by line)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.device.errors import BadInput
from pixie.device.ingest import jsonl
from pixie.device.ingest.jsonl import (
    MAX_LINE_BYTES,
    event_from_object,
    fast_event,
    read_events,
    slow_event,
)
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.strictjson import loads_strict

GOOD: dict[str, Any] = {
    "id": "018f5f87-6d3a-7180-afa9-1425cb008853",
    "kind": "message",
    "at": "2024-05-09T22:44:21Z",
    "text": "I have a Portuguese exam next month, help",
    "contact": "Ada Lovelace",
    "thread": "t-ada",
    "source": "sms:1",
    "from_me": False,
}


def _outcome(raw: bytes, number: int = 1) -> NewEvent | str | None:
    """What the slow way makes of one line: an event, None (blank) or its error."""
    try:
        return slow_event(raw, number)
    except BadInput as exc:
        return f"BadInput: {exc}"


def _same_as_slow(line: str) -> None:
    """The fast way gives the slow way's event, or leaves the line to it. A
    line that is not UTF-8 (a lone surrogate written raw) is the slow way's
    alone: it names it."""
    raw = line.encode("utf-8", "surrogatepass")
    fast = fast_event(raw)
    slow = _outcome(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert fast is None
        assert isinstance(slow, str)
        return
    if fast is not None:
        assert isinstance(slow, NewEvent), (line, slow)
        assert fast == slow
        assert [getattr(fast, f) for f in fast.__slots__] == [
            getattr(slow, f) for f in slow.__slots__
        ]
        assert [type(getattr(fast, f)) for f in fast.__slots__] == [
            type(getattr(slow, f)) for f in slow.__slots__
        ]


# Values each field may take: the usual ones and many that are refused.
TEXTS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\u3000", "\x00", "a\x00b", "\ud800", "ok\udfff", "line\nbreak"]),
    st.just("x" * 65_536),
    st.just("x" * 65_537),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
)
REFS = st.one_of(
    TEXTS,
    st.just("r" * 200),
    st.just("r" * 201),
    st.sampled_from(["a\rb", " t ", "\u2028", "\x85"]),
)
TIMES = st.one_of(
    st.sampled_from(
        [
            "2024-05-09T22:44:21Z",
            "2024-05-09T22:44:21.5Z",
            "2024-05-09T22:44:21.123456Z",
            "2024-05-09t22:44:21Z",
            "2024-05-09 22:44:21Z",
            "2024-05-09T22:44:21+05:30",
            "2024-05-09T22:44:21-11:59",
            "2024-05-09T22:44:21",
            "2024-05-09",
            "2024-05-09TZ",
            "20240509T224421Z",
            "1900-01-01T00:00:00Z",
            "1899-12-31T23:59:59.999999Z",
            "1900-01-01T00:30:00+01:00",
            "2199-12-31T23:59:59.999999Z",
            "2200-01-01T00:00:00Z",
            "2199-12-31T23:30:00-01:00",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2024-02-30T00:00:00Z",
            "2024-05-09T24:00:00Z",
            "2024-05-09T22:44:21Z" + " " * 20,
            "2024-05-09T22:44:21.123456+05:30:15.123456",
        ]
    ),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.text(max_size=30),
    st.integers(),
)
IDS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.sampled_from(
        ["nope", "018f5f87-6d3a-7180-afa9-1425cb00885", "018f5f876d3a7180afa91425cb008853"]
    ),
    st.sampled_from(
        ["018f5f87-6d3a-7180-afa9-1425cb00885g", "018f5f87-6d3a-7180-afa9-1425cb008853\n"]
    ),
    st.integers(),
    st.none(),
)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.one_of(st.sampled_from([k.value for k in EventKind]), TEXTS),
    "at": TIMES,
    "text": TEXTS,
    "contact": st.one_of(TEXTS, st.sampled_from(["Zoë  Martin ", "\tAda", "A\x07", "A" * 201])),
    "thread": REFS,
    "source": REFS,
    "id": IDS,
    "from_me": st.one_of(st.booleans(), st.none(), st.integers(0, 1), st.text(max_size=2)),
}


@st.composite
def event_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A mostly good event with some fields left out, changed or added."""
    obj = {k: v for k, v in GOOD.items() if draw(st.booleans()) or k in ("kind", "at", "text")}
    for key in draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=3, unique=True)):
        obj[key] = draw(VALUES[key])
    if draw(st.integers(0, 9)) == 0:
        del obj[draw(st.sampled_from(sorted(obj)))]
    if draw(st.integers(0, 9)) == 0:
        obj[draw(st.sampled_from(["mood", "Kind", "", "text "]))] = 1
    return obj


def _serialise(obj: object, ascii_only: bool) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


PIECES = ["", "{", "}", '"', ",", "\\", "\x00", "NaN", "]", " ", "\t"]
AROUND = [("", " "), (" ", ""), ("\ufeff", ""), ("", "\r")]


@st.composite
def lines(draw: st.DrawFn) -> str:
    """One line: an event written in one of several ways, often mutated."""
    line = _serialise(draw(event_objects()), draw(st.booleans()))
    match draw(st.integers(0, 9)):
        case 0:  # a character changed, dropped or added somewhere
            at = draw(st.integers(0, len(line)))
            piece = draw(
                st.sampled_from(["", "{", "}", '"', ",", "\\", "\x00", "NaN", "]", " ", "\t"])
            )
            line = line[:at] + piece + line[at + draw(st.integers(0, 1)) :]
        case 1:  # something before or after the object
            before, after = draw(
                st.sampled_from([("", " "), (" ", ""), ("\ufeff", ""), ("", "\r")])
            )
            line = before + line + after
        case 2:  # a second value after the first
            line += draw(st.sampled_from(["{}", " 1", ",{}", "\n{}", "x"]))
        case 3:  # not JSON, or not an object
            line = draw(
                st.one_of(
                    st.text(max_size=20),
                    st.sampled_from(["[]", "null", "1", '"text"', "{", "NaN", "-Infinity"]),
                    st.sampled_from(['{"kind":NaN}', '{"text":Infinity}', "[" * 5000]),
                )
            )
        case 4:  # a key twice: the last one counts, as for the slow way
            key = draw(st.sampled_from(["kind", "at", "text", "contact", "id"]))
            value = draw(VALUES[key])
            line = line[:-1] + "," + json.dumps(key) + ":" + _serialise(value, False) + "}"
        case _:
            pass
    return line + draw(st.sampled_from(["\n", "\n", ""]))


@given(lines())
def test_the_fast_way_gives_the_slow_ways_event_or_leaves_the_line(line: str) -> None:
    _same_as_slow(line)


@given(event_objects(), st.booleans())
def test_the_fast_way_takes_the_ordinary_lines(obj: dict[str, Any], ascii_only: bool) -> None:
    line = _serialise(obj, ascii_only) + "\n"
    _same_as_slow(line)
    ordinary = all(k in GOOD and v == GOOD[k] and type(v) is type(GOOD[k]) for k, v in obj.items())
    if ordinary and {"kind", "at", "text"} <= obj.keys():
        # an ordinary line is not left to the slow way
        assert fast_event(line.encode()) is not None


@pytest.mark.parametrize(
    "line",
    [
        _serialise(GOOD, False) + "\n",
        _serialise(GOOD, True) + "\n",
        _serialise({**GOOD, "text": "two\nlines", "thread": "a\u2028b"}, False) + "\n",
        _serialise({**GOOD, "at": "2024-05-09T22:44:21.250+02:00"}, False),
        _serialise({**GOOD, "id": GOOD["id"].upper(), "from_me": None}, False) + "\n",
        _serialise({"kind": "journal", "at": "2025-01-01 00:00:00Z", "text": "x"}, False) + "\n",
    ],
)
def test_lines_the_fast_way_takes(line: str) -> None:
    assert fast_event(line.encode()) is not None
    _same_as_slow(line)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":NaN}', "NaN is not a JSON value"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","n":-Infinity}', "-Infinity"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"a\\u0000b"}', "NUL"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"\\ud800"}', "lone surrogate"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","thread":"a\\nb"}', "one line"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","source":"a\\rb"}', "one line"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"\\u3000"}', "text is empty"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00","text":"x"}', "no UTC offset"),
        ('{"kind":"journal","at":"2200-01-01T00:00:00Z","text":"x"}', "outside"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","id":"nope"}', "not a UUID"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","from_me":1}', "from_me"),
        ('{"kind":["x"],"at":"2025-01-01T00:00:00Z","text":"x"}', "unknown kind"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x"} {}', "Extra data"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z"}', "missing field 'text'"),
        ('\ufeff{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x"}', "BOM"),
        (
            '{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","n":1' + "0" * 5000 + "}",
            "long",
        ),
        ("[" * 100_000, "nested too deeply"),
        # orjson reads an integer beyond 64 bits as a float: no field takes either
        ('{"kind":"journal","at":123456789012345678901234567,"text":"x"}', "ISO 8601"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":-9223372036854775809}', "text"),
        ('{"kind":"journal","at":"2025-01-01T00:00:00Z","text":"x","from_me":1e400}', "from_me"),
    ],
)
def test_lines_the_fast_way_leaves_to_the_slow_way(line: str, needle: str) -> None:
    raw = line.encode("utf-8", "surrogatepass")
    assert fast_event(raw) is None
    outcome = _outcome(raw + b"\n", 7)
    assert isinstance(outcome, str)
    assert outcome.startswith("BadInput: line 7: ")
    assert needle in outcome


def _reader_as_it_was(stream: io.BytesIO, progress: Callable[[int], None] | None) -> list[NewEvent]:
    """The reader before the fast way: every line through loads_strict and
    event_from_object."""
    events = []
    number = read = 0
    while raw := stream.readline(MAX_LINE_BYTES + 1):
        number += 1
        read += len(raw)
        if progress is not None and number % jsonl.PROGRESS_LINES == 0:
            progress(read)
        if len(raw) > MAX_LINE_BYTES:
            raise BadInput(f"line {number}: longer than {MAX_LINE_BYTES // 1024} KiB")
        if not raw.strip():
            continue
        try:
            obj = loads_strict(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadInput(f"line {number}: not valid UTF-8") from None
        except BadInput as exc:
            raise BadInput(f"line {number}: {exc}") from None
        try:
            events.append(event_from_object(obj))
        except BadInput as exc:
            raise BadInput(f"line {number}: {exc}") from None
    if progress is not None:
        progress(read)
    return events


def _read(
    reader: Callable[[io.BytesIO, Callable[[int], None] | None], list[NewEvent]], raw: bytes
) -> tuple[list[NewEvent] | str, list[int]]:
    heard: list[int] = []
    try:
        return reader(io.BytesIO(raw), heard.append), heard
    except BadInput as exc:
        return str(exc), heard


def _check_stream(raw: bytes) -> None:
    assert _read(read_events, raw) == _read(_reader_as_it_was, raw)


@given(
    st.lists(
        st.one_of(
            lines().map(lambda line: line.encode("utf-8", "surrogatepass")),
            st.sampled_from([b"", b"  ", b"\r", b"\xff", b"\xc3", b'{"text":"caf\xe9"}']),
        ),
        max_size=8,
    )
)
def test_a_stream_reads_as_it_did_line_by_line(chunks: list[bytes]) -> None:
    _check_stream(b"\n".join(chunks))


def test_long_lines_and_progress_read_as_they_did(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "PROGRESS_LINES", 3)
    good = _serialise(GOOD, False).encode()
    room = MAX_LINE_BYTES - len(good) - 1  # spaces that still fit on the line
    for raw in [
        b"\n".join([good] * 10) + b"\n",
        good + b" " * room + b"\n" + good,  # exactly the longest line
        good + b" " * (room + 1) + b"\n" + good,  # a byte too long
        good + b"\n" + good + b" " * (room + 1),  # the last line too long, no newline
        good + b"\n" + good + b" " * room,
        b"\n".join([good] * 5 + [good[:-1]] + [good] * 5),
    ]:
        _check_stream(raw)


def test_events_are_equal_to_the_constructors_and_stay_frozen() -> None:
    made = fast_event(_serialise(GOOD, False).encode())
    assert made is not None
    assert type(made) is NewEvent
    built = event_from_object(GOOD)
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    with pytest.raises(AttributeError):
        made.text = "changed"  # type: ignore[misc]


@given(st.text(max_size=30))
def test_loads_strict_reads_text_as_it_did(text: str) -> None:
    def as_it_was(text: str) -> object:
        def no_constant(name: str) -> Any:
            raise BadInput(f"not valid JSON ({name} is not a JSON value)")

        try:
            return json.loads(text, parse_constant=no_constant)
        except json.JSONDecodeError as exc:
            raise BadInput(f"not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise BadInput("JSON nested too deeply") from None
        except ValueError:
            raise BadInput("not valid JSON (a number too long to read)") from None

    for candidate in (text, "[" + text + "]", '{"a":' + text + "}", "\ufeff" + text):
        try:
            expected: object = as_it_was(candidate)
        except BadInput as exc:
            expected = str(exc)
        try:
            got: object = loads_strict(candidate)
        except BadInput as exc:
            got = str(exc)
        assert got == expected
