"""The command line against hostile files: config.toml, JSON Lines event files
and huddle records.

Inputs are random bytes, and valid files mutated: a value swapped for one of
another type or a hostile one (a lone surrogate, a NUL, NaN, a 5000-digit
number, deep nesting, a huge string), a field dropped or added, then the text
itself cut, spliced or bit-flipped. The contract: `pixie` ends with status 0,
or with status 2 and exactly one line on stderr that is one of the errors the
code raises on purpose (never the entry point's last-resort "unexpected ..."
line), and a refused run leaves the data dir's files byte for byte as they were.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pixie.device.errors import BadInput
from pixie.device.store import config
from pixie.device.store.memlog import EventKind
from pixie.device.store.provision import create_data_dir
from tests.support.cli import CliResult, run_cli
from tests.support.fuzzing import fuzz_settings

pytestmark = pytest.mark.fuzz

# -- hostile pieces ---------------------------------------------------------------------------

HOSTILE_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\ud800",
        "a\udfffb",
        "line\nbreak",
        "\r",
        "\u202eevil",
        "x" * 70_000,
        "Ada",
        "journal",
        "2024-01-01T00:00:00Z",
        "2024-01-01",
        "9999-12-31T23:59:59+14:00",
        "00000000-0000-0000-0000-000000000000",
        "http://127.0.0.1:9/v1",
    ]
)
TEXT = st.text(max_size=30) | st.text(
    alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=5
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats()
    | TEXT
    | HOSTILE_STRINGS
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=8,
)
EXTRA = b"1" * 5000  # makes a number Python's int() refuses to read

# Spliced into the text after encoding: things `json.dumps` would never write.
TOKENS = st.sampled_from(
    [
        b"1" * 5000,
        b"-1e999",
        b"NaN",
        b"Infinity",
        b"\\ud800",
        b"\\udc80\\ud800",
        b'"\\u0000"',
        b"\xff",
        b"\xed\xa0\x80",  # a surrogate encoded as UTF-8 bytes: not valid UTF-8
        b"[" * 3000,
        b"{" * 3000,
        b"\x00",
        b"\n",
        b"\r\n",
        b'"',
        b"\\",
        b"1979-05-27T07:32:00Z",
        b"[llm]\n",
        b"[relay]\n",
        b'"""',
        b"'",
        b"=",
        b"inf",
        b"nan",
    ]
)


@st.composite
def spliced(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` with up to three byte-level edits."""
    data = bytearray(raw)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["insert", "flip", "cut", "repeat"]))
        at = draw(st.integers(0, len(data)))
        if op == "insert":
            data[at:at] = draw(TOKENS | st.binary(max_size=8))
        elif op == "flip" and data:
            i = min(at, len(data) - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 20))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 20))]
    return bytes(data)


@st.composite
def mutated(draw: st.DrawFn, obj: dict[str, Any], known: list[str]) -> Any:
    """``obj`` with up to two of its fields changed, dropped or added, or
    replaced as a whole."""
    out: Any = dict(obj)
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["replace", "drop", "add", "whole"]))
        if op == "whole":
            return draw(VALUES)
        if op == "replace" and out:
            out[draw(st.sampled_from(sorted(out)))] = draw(VALUES)
        elif op == "drop" and out:
            del out[draw(st.sampled_from(sorted(out)))]
        else:
            out[draw(st.sampled_from(known) | TEXT)] = draw(VALUES)
    return out


def encode_json(draw: st.DrawFn, obj: Any) -> bytes:
    """``obj`` as JSON: escaped to ASCII, or raw UTF-8 with any lone surrogate
    written as its (invalid) three bytes."""
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


# -- the data dir and the contract -------------------------------------------------------------


def files_state(data: Path) -> str:
    """The bytes of every file in the data dir but SQLite's shared-memory index."""
    digest = hashlib.sha256()
    for f in sorted(data.iterdir()):
        if not f.name.endswith("-shm"):
            digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def check_run(data: Path, *argv: str) -> CliResult:
    """Run ``pixie``, holding it to the contract above."""
    before = files_state(data)
    res = run_cli("--data", str(data), *argv)
    assert res.code in (0, 2), (argv, res.code, res.err[-2000:])
    if res.code == 2:
        assert res.err.startswith("pixie: error: "), res.err[-2000:]
        assert res.err.count("\n") == 1 and res.err.endswith("\n"), res.err[-2000:]
        assert not res.err.startswith("pixie: error: unexpected "), res.err
        assert files_state(data) == before, argv
    return res


@pytest.fixture
def fuzz_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    create_data_dir(path, name="fuzz", role="device")
    assert (
        run_cli("--data", str(path), "contacts", "add", "Ada Lovelace", "--alias", "Ada").code == 0
    )
    added = run_cli(
        "--data", str(path), "log", "add", "--kind", "message", "--text", "tea", "--contact", "Ada"
    )
    assert added.code == 0, added.err
    return path


# -- config.toml ------------------------------------------------------------------------------

CONFIG_LINES = [
    b"[relay]",
    b'address = "127.0.0.1:7700"',
    b"[llm]",
    b'url = "http://127.0.0.1:9/v1"',
    b'model = "m"',
    b"timeout = 5",
    b'timeout = "7"',
    b"[other]",
    b"x = 1",
]


@st.composite
def config_files(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    lines = draw(st.lists(st.sampled_from(CONFIG_LINES), max_size=8))
    for _ in range(draw(st.integers(0, 2))):
        # A known key given a value of any shape TOML can hold.
        key = draw(st.sampled_from([b"address", b"url", b"model", b"timeout", b"api_key"]))
        value = draw(
            st.sampled_from(
                [b"1979-05-27T07:32:00Z", b"[1, 2]", b"{ a = 1 }", b"true", b"inf", b"-0", b"nan"]
            )
            | st.builds(lambda s: json.dumps(s).encode("utf-8", "surrogatepass"), TEXT)
        )
        lines.insert(draw(st.integers(0, len(lines))), key + b" = " + value)
    return draw(spliced(b"\n".join(lines) + b"\n"))


@given(raw=config_files())
@example(raw=b"[relay]\naddress = 1979-05-27T07:32:00Z\n")
@example(raw=b"[llm]\nmodel = [1]\n")
@example(raw=b"relay = 3\n")
@example(raw=b"x = 1%s\n" % EXTRA)
@example(raw=b"a = " + b"[" * 2000 + b"]" * 2000 + b"\n")
@fuzz_settings(short=60)
def test_config_files_are_read_or_refused_in_one_line(fuzz_dir: Path, raw: bytes) -> None:
    path = fuzz_dir / "config.toml"
    path.write_bytes(raw)
    try:
        config.llm(path)
        config.describe(path)
    except BadInput:
        pass
    check_run(fuzz_dir, "config", "show")
    check_run(fuzz_dir, "config", "show", "--json")
    check_run(fuzz_dir, "distill", "--offline", "--json")


# -- JSON Lines event files -------------------------------------------------------------------

EVENT_FIELDS = ["kind", "at", "text", "contact", "thread", "source", "id", "from_me"]


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {
        "kind": draw(st.sampled_from([k.value for k in EventKind])),
        "at": draw(st.sampled_from(["2024-01-01T00:00:00Z", "2025-06-30T12:30:00+02:00"])),
        "text": draw(st.text(min_size=1, max_size=30).filter(str.strip)),
    }
    if draw(st.booleans()):
        event["contact"] = draw(st.sampled_from(["Ada", "Grace Hopper", "Zoë"]))
    if draw(st.booleans()):
        event["thread"] = "t1"
    if draw(st.booleans()):
        event["from_me"] = draw(st.booleans())
    if draw(st.booleans()):
        event["id"] = draw(st.uuids()).hex
    return event


@st.composite
def event_files(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        event = draw(valid_events())
        if draw(st.booleans()):
            event = draw(mutated(event, EVENT_FIELDS))
        lines.append(encode_json(draw, event))
    return draw(spliced(b"\n".join(lines) + b"\n"))


@given(raw=event_files())
@example(raw=b'{"kind":"journal","at":"2024-01-01T00:00:00Z","text":"a\\ud800"}\n')
@example(raw=b'{"kind":"journal","at":"2024-01-01T00:00:00Z","text":"a","from_me":1%s}' % EXTRA)
@fuzz_settings(short=80)
def test_event_files_are_imported_whole_or_refused_in_one_line(
    fuzz_dir: Path, tmp_path: Path, raw: bytes
) -> None:
    f = tmp_path / "events.jsonl"
    f.write_bytes(raw)
    check_run(fuzz_dir, "log", "import", str(f))


# -- huddle records ---------------------------------------------------------------------------

HUDDLE_FIELDS = ["contact", "prep", "takeaways", "from_other_agents"]


@st.composite
def huddle_files(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    texts = st.lists(st.text(min_size=1, max_size=30).filter(str.strip), max_size=3)
    record: dict[str, Any] = {"contact": draw(st.sampled_from(["Ada", "Someone New"]))}
    for key in HUDDLE_FIELDS[1:]:
        if draw(st.booleans()):
            record[key] = draw(texts)
    if draw(st.booleans()):
        record = draw(mutated(record, HUDDLE_FIELDS))
    return draw(spliced(encode_json(draw, record)))


@given(raw=huddle_files(), zone=st.sampled_from(["sealed", "clear"]))
@example(raw=b'{"contact":"Bob\\udc80","prep":["x"]}', zone="sealed")
@example(raw=b'{"contact":"Ada","prep":[1%s]}' % EXTRA, zone="clear")
@fuzz_settings(short=80)
def test_huddle_files_are_filed_or_refused_in_one_line(
    fuzz_dir: Path, tmp_path: Path, raw: bytes, zone: str
) -> None:
    f = tmp_path / "huddle.json"
    f.write_bytes(raw)
    check_run(fuzz_dir, "huddle", "record", str(f), "--zone", zone)
    res = check_run(fuzz_dir, "nudges", "--json")
    assert res.code == 0, res.err
