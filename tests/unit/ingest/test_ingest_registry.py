"""The importer registry: JSON Lines is registered first, detection asks
importers in order and never consumes or waits on what it looks at, and
`pixie log import` reads through it with the same results as before."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest import jsonl, registry
from pixie.device.ingest.base import ImportOptions, Item, Progress
from pixie.device.store import strictjson
from pixie.device.store.memlog import NewEvent
from tests.support.cli import run_cli

EVENT = {"kind": "journal", "at": "2025-01-02T00:00:00Z", "text": "I live in Porto"}


def write_events(path: Path, *events: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


class Claims:
    """A stand-in importer that claims every file (or none) and reads nothing."""

    units = ("thing", "things")

    def __init__(self, name: str, claims: bool = True) -> None:
        self.name = name
        self.claims = claims

    def sniff(self, path: Path) -> bool:
        return self.claims

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        return iter(())


def test_jsonl_is_registered_first_and_is_the_default() -> None:
    assert registry.REGISTRY.names()[0] == "jsonl"
    assert registry.get("jsonl") is jsonl.IMPORTER
    assert registry.DEFAULT == "jsonl"


def test_an_unknown_importer_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        BadInput,
        match=r"no importer named 'xml' \(one of: jsonl, telegram, mbox, ics, vcf, "
        r"whatsapp, journal\)",
    ):
        registry.get("xml")


def test_a_second_importer_of_the_same_name_is_refused() -> None:
    reg = registry.Registry()
    reg.register(Claims("x"))
    with pytest.raises(ValueError, match="already registered"):
        reg.register(Claims("x"))
    assert reg.names() == ("x",)


def test_detection_asks_in_registration_order(tmp_path: Path) -> None:
    reg = registry.Registry()
    first, second = Claims("first"), Claims("second")
    reg.register(Claims("never", claims=False))
    reg.register(first)
    reg.register(second)
    assert reg.detect(tmp_path / "anything") is first
    assert registry.Registry().detect(tmp_path / "anything") is None


@pytest.mark.parametrize("name", ["life.jsonl", "LIFE.JSONL", "export.ndjson"])
def test_a_json_lines_suffix_is_claimed_without_reading(tmp_path: Path, name: str) -> None:
    # Not even created: the suffix is enough, and nothing is opened.
    assert registry.detect(tmp_path / name) is jsonl.IMPORTER


def test_a_file_whose_first_line_is_an_event_is_claimed(tmp_path: Path) -> None:
    f = write_events(tmp_path / "events.txt", EVENT)
    assert registry.detect(f) is jsonl.IMPORTER


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"From someone@example.org Mon Jan  1 00:00:00 2024\n",
        b"BEGIN:VCARD\r\nVERSION:3.0\r\n",
        b'{\n  "name": "a pretty-printed export"\n}\n',
        b'{"kind": "journal"}\n',  # an object, but not an event
        b"[1, 2, 3]\n",
        b"\xff\xfe not UTF-8\n",
        b'{"at": NaN, "kind": "journal", "text": "x"}\n',
    ],
)
def test_other_content_is_not_claimed_as_json_lines(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "file.dat"
    f.write_bytes(content)
    assert not jsonl.IMPORTER.sniff(f)


def test_a_file_nobody_claims_is_refused_naming_the_formats(tmp_path: Path) -> None:
    f = tmp_path / "file.dat"
    f.write_bytes(b"\x00\x01 binary")
    assert registry.detect(f) is None
    with pytest.raises(BadInput, match=r"cannot tell what format 'file.dat' is in; .*--format"):
        registry.for_path(f)


def test_detection_never_raises_on_a_path_it_cannot_read(tmp_path: Path) -> None:
    assert registry.detect(tmp_path / "missing.txt") is None
    assert registry.detect(tmp_path) is None
    assert registry.detect(tmp_path / ("x" * 300)) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_is_not_opened(tmp_path: Path) -> None:
    # Opening a pipe with no writer would block; reading one would eat the import.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert registry.detect(pipe) is None


def test_the_jsonl_importer_reads_as_read_events_does_with_stable_ids(tmp_path: Path) -> None:
    other = {**EVENT, "text": "and works at the port", "contact": "Ada"}
    given = {**EVENT, "text": "with its own id", "id": "0190a1b2-0000-7000-8000-000000000001"}
    path = write_events(tmp_path / "life.jsonl", EVENT, other, given)
    raw = path.read_bytes()
    heard: list[tuple[int, int]] = []
    items = list(jsonl.IMPORTER.read(path, ImportOptions(), lambda *a: heard.append(a)))
    parsed = jsonl.read_events(io.BytesIO(raw))
    assert [replace(e, id=None) for e in items if isinstance(e, NewEvent)] == [
        replace(e, id=None) for e in parsed
    ]
    ids = [e.id for e in items if isinstance(e, NewEvent)]
    assert ids[2] == given["id"]  # a given id is kept
    assert len(set(ids)) == 3 and None not in ids
    again = list(jsonl.IMPORTER.read(path, ImportOptions(), None))
    assert [e.id for e in again if isinstance(e, NewEvent)] == ids  # derived, not minted
    assert heard[-1] == (len(raw), len(raw))


def test_the_jsonl_importer_refuses_a_bad_line_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "life.jsonl"
    path.write_bytes(json.dumps(EVENT).encode() + b"\n{\n")
    with pytest.raises(BadInput, match=r"^life.jsonl, line 2: not valid JSON"):
        list(jsonl.IMPORTER.read(path, ImportOptions(), None))


def test_loads_strict_lives_in_the_store_and_is_still_exported_by_jsonl() -> None:
    assert jsonl.loads_strict is strictjson.loads_strict
    with pytest.raises(BadInput, match="NaN is not a JSON value"):
        strictjson.loads_strict('{"x": NaN}')


def test_log_import_reads_a_file_of_any_name_through_the_registry(
    tmp_path: Path, data_dir: Path
) -> None:
    f = write_events(tmp_path / "events.txt", EVENT, {**EVENT, "text": "again"})
    res = run_cli("--data", str(data_dir), "log", "import", str(f))
    assert (res.code, res.out) == (0, "imported 2 events (0 already present), 0 new contacts\n")
    weird = tmp_path / "notes.dat"
    weird.write_text("not events\n", encoding="utf-8")
    res = run_cli("--data", str(data_dir), "log", "import", str(weird))
    # No importer claims it, so `log import` reads it as JSON Lines, its old
    # format, and says where it stopped; `pixie import` asks for --format.
    assert (res.code, res.out) == (2, "")
    assert res.err == "pixie: error: notes.dat, line 1: not valid JSON (Expecting value)\n"
    res = run_cli("--data", str(data_dir), "import", str(weird))
    assert res.code == 2
    assert res.err.startswith("pixie: error: cannot tell what format 'notes.dat' is in")
