"""The text mirror on disk: kept between processes, repaired when it cannot be trusted.

Each test damages or outruns the files the way a crash, another writer or a
restored database would, then checks that the next search answers exactly
what a mirror rebuilt from the log answers.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.node.keyed import Node
from pixie.device.store import mirror, mirrorfiles
from pixie.device.store.memlog import CHAT_KINDS, EventKind, NewEvent
from pixie.device.store.mirror import MIRROR_FOLDER, MemoryTextMirror
from pixie.device.store.provision import create_data_dir

T0 = 1_700_000_000_000_000
HOUR = 3_600_000_000


def ev(text: str, *, at: int = T0, contact: str | None = None) -> NewEvent:
    return NewEvent(kind=EventKind.MESSAGE, at=at, text=text, contact=contact)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d"
    create_data_dir(path, name="t", role="device")
    return path


def rebuilt_lines(node: Node) -> list[tuple[str, str]]:
    fresh = MemoryTextMirror(node.db)  # a private folder: built from the log alone
    try:
        fresh.rebuild()
        return fresh.lines()
    finally:
        fresh.close()


def head(path: Path) -> dict[str, object]:
    found: dict[str, object] = json.loads((path / MIRROR_FOLDER / "head.json").read_bytes())
    return found


@contextmanager
def counting_rebuilds() -> Iterator[list[int]]:
    count = [0]
    inner = MemoryTextMirror._rebuild_locked

    def counted(self: MemoryTextMirror, folder: Path) -> None:
        if folder.name == MIRROR_FOLDER:  # not a reference built in a private folder
            count[0] += 1
        inner(self, folder)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MemoryTextMirror, "_rebuild_locked", counted)
        yield count


def test_a_new_process_maps_the_mirror_without_rebuilding_it(data: Path) -> None:
    with Node.open(data) as node:
        node.log.append([ev(f"line {i}", at=T0 + i * HOUR) for i in range(50)], now=0)
        node.mirror.ensure_current()
        node.log.append([ev("after the build, through the listener", at=T0 + 99 * HOUR)], now=0)
        before = node.mirror.lines()
    with counting_rebuilds() as rebuilds, Node.open(data) as again:
        assert again.mirror.lines() == before == rebuilt_lines(again)
        hits = again.mirror.search(re.compile(rb"listener"), 12)
        assert [h.body for h in hits] == ["after the build, through the listener"]
    assert rebuilds == [0]


def test_rows_committed_while_no_mirror_was_open_are_read_on_the_next_open(data: Path) -> None:
    with Node.open(data) as node:
        node.log.append([ev("before")], now=0)
        node.mirror.ensure_current()
    # A writer whose mirror never opened: as a crash between the database
    # commit and the mirror append leaves it.
    with Node.open(data) as writer:
        writer.log.append([ev("while away", at=T0 + HOUR)], now=0)
        assert not writer.mirror.is_built()
    with counting_rebuilds() as rebuilds, Node.open(data) as node:
        assert [line for _, line in node.mirror.lines()] == ["before", "while away"]
    assert rebuilds == [0]  # caught up by appending, not rebuilt


def _built(data: Path, texts: list[str]) -> list[tuple[str, str]]:
    with Node.open(data) as node:
        node.log.append([ev(t, at=T0 + i * HOUR) for i, t in enumerate(texts)], now=0)
        node.mirror.ensure_current()
        node.log.append([ev("in the tail", at=T0 + 50 * HOUR)], now=0)  # appended
        return node.mirror.lines()


def test_bytes_past_the_head_are_cut_off_and_never_read(data: Path) -> None:
    expected = _built(data, ["one", "two"])
    tail = head(data)["tail"]
    folder = data / MIRROR_FOLDER
    # A writer that appended and stopped before writing its head.
    with (folder / f"{tail}.txt").open("ab") as f:
        f.write(b"needle that no event says\n")
    with (folder / f"{tail}.idx").open("ab") as f:
        f.write(b"\x00" * mirrorfiles.REC.size)
    with Node.open(data) as node:
        assert node.mirror.search(re.compile(rb"needle"), 12) == []
        node.log.append([ev("later", at=T0 + 60 * HOUR)], now=0)
        node.mirror.ensure_current()
        assert node.mirror.lines() == rebuilt_lines(node)
        assert [line for _, line in node.mirror.lines()][-1] == "later"
        assert node.mirror.lines()[:-1] == expected


@pytest.mark.parametrize(
    "damage",
    [
        "flip a tail byte",
        "shorten the tail",
        "shorten the base",
        "remove the base",
        "garbage head",
        "head of another format",
        "negative count",
        "no head",
    ],
)
def test_a_mirror_that_does_not_match_its_head_is_rebuilt(data: Path, damage: str) -> None:
    expected = _built(data, ["alpha", "beta", "gamma"])
    folder = data / MIRROR_FOLDER
    h = head(data)
    base, tail = folder / f"{h['base']}.txt", folder / f"{h['tail']}.txt"
    if damage == "flip a tail byte":
        raw = bytearray(tail.read_bytes())
        raw[0] ^= 0x20
        tail.write_bytes(bytes(raw))
    elif damage == "shorten the tail":
        tail.write_bytes(tail.read_bytes()[:-3])
    elif damage == "shorten the base":
        base.write_bytes(base.read_bytes()[:-3])
    elif damage == "remove the base":
        base.unlink()
    elif damage == "garbage head":
        (folder / "head.json").write_bytes(b"\x00{not json")
    elif damage == "head of another format":
        (folder / "head.json").write_text(json.dumps({**h, "format": 99}))
    elif damage == "negative count":
        (folder / "head.json").write_text(json.dumps({**h, "base_lines": -1}))
    else:
        (folder / "head.json").unlink()
    with counting_rebuilds() as rebuilds, Node.open(data) as node:
        assert node.mirror.lines() == expected == rebuilt_lines(node)
        hits = node.mirror.search(re.compile(rb"tail"), 12)
        assert [h.body for h in hits] == ["in the tail"]
    assert rebuilds[0] >= 1


def test_a_renamed_contact_rebuilds_the_lines_that_carry_the_name(data: Path) -> None:
    with Node.open(data) as node:
        node.log.append([ev("hello", contact="Ada")], now=0)
        node.mirror.ensure_current()
        assert [line for _, line in node.mirror.lines()] == ["Ada: hello"]
        contact_id = next(iter(node.contacts.names()))
    with sqlite3.connect(data / "pixie.db") as con:  # renamed by another process
        con.execute("UPDATE contact SET name = 'Ada Lovelace' WHERE id = ?", (contact_id,))
    with Node.open(data) as node:
        assert [line for _, line in node.mirror.lines()] == ["Ada Lovelace: hello"]
        assert node.mirror.search(re.compile(rb"Lovelace"), 12)[0].contact == "Ada Lovelace"


def test_another_database_in_the_folder_is_never_answered_from_the_old_mirror(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for path, words in ((first, "old secret words"), (second, "new words")):
        create_data_dir(path, name="t", role="device")
        with Node.open(path) as node:
            node.log.append([ev(words)], now=0)
            node.mirror.ensure_current()
    # The second data dir's database, restored over the first one's.
    (first / "pixie.db").write_bytes((second / "pixie.db").read_bytes())
    with Node.open(first) as node:
        assert [line for _, line in node.mirror.lines()] == ["new words"]
        assert node.mirror.search(re.compile(rb"secret"), 12) == []


def test_two_openers_append_in_turn_and_each_sees_the_others_lines(data: Path) -> None:
    with Node.open(data) as a, Node.open(data) as b:
        a.mirror.ensure_current()
        b.mirror.ensure_current()
        for i in range(6):
            writer = (a, b)[i % 2]
            writer.log.append([ev(f"turn {i}", at=T0 + i * HOUR)], now=0)
        for node in (a, b):
            assert [line for _, line in node.mirror.lines()] == [f"turn {i}" for i in range(6)]
            assert node.mirror.lines() == rebuilt_lines(node)


events = st.builds(
    lambda at, text, contact: NewEvent(kind=EventKind.MESSAGE, at=at, text=text, contact=contact),
    st.integers(0, 30).map(lambda d: T0 + d * HOUR),
    st.sampled_from(["ada", "lyon", "café lyon", "a\nb", "zoë", "x"]),
    st.sampled_from([None, "Ada", "Zoë"]),
)


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(st.lists(events, min_size=1, max_size=9), min_size=1, max_size=8),
    opened_after=st.integers(0, 3),
    reopen=st.sets(st.integers(0, 7)),
)
def test_small_segments_merge_and_search_like_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[NewEvent]],
    opened_after: int,
    reopen: set[int],
) -> None:
    """With a tail that outgrows its share after a few lines, scans of two
    lines and runs of four scanned in parts on threads, appends, merges and
    reopenings keep the lines and the newest hits of a rebuild."""
    path = tmp_path_factory.mktemp("m") / "d"
    create_data_dir(path, name="t", role="device")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mirror, "COMPACT_MIN", 5)
        mp.setattr(mirrorfiles, "BLOCK_LINES", 2)
        mp.setattr(mirrorfiles, "PARALLEL_LINES", 4)  # runs of 4 lines on in parts
        node = Node.open(path)
        try:
            for i, batch in enumerate(batches):
                if i == opened_after:
                    node.mirror.ensure_current()
                node.log.append(batch, now=0)
                if i in reopen:
                    node.close()
                    node = Node.open(path)
            assert node.mirror.lines() == rebuilt_lines(node)
            records = [r for r in node.log.all_records() if r.kind not in CHAT_KINDS]
            assert len(node.mirror) == len(records)
            for word in (rb"lyon", rb"ada", rb"^x$", rb"zo"):
                # Multi-line, as grep_memory compiles every pattern ("(?m)"):
                # "^" and "$" are a line's ends wherever a scan starts.
                pattern = re.compile(word, re.MULTILINE)
                got = [h.event_id for h in node.mirror.search(pattern, 3)]
                fresh = MemoryTextMirror(node.db)
                try:
                    want = [h.event_id for h in fresh.search(pattern, 3)]
                finally:
                    fresh.close()
                assert got == want, word
        finally:
            node.close()


def test_searches_while_another_opener_rebuilds_always_answer_whole(data: Path) -> None:
    with Node.open(data) as a, Node.open(data) as b:
        a.log.append([ev(f"line {i}", at=T0 + i * HOUR) for i in range(300)], now=0)
        a.mirror.ensure_current()
        pattern = re.compile(rb"line 1\d")
        want = [h.event_id for h in a.mirror.search(pattern, 12)]
        assert len(want) == 12
        failures: list[BaseException] = []
        done = threading.Event()

        def rebuild() -> None:
            try:
                for _ in range(15):
                    a.mirror.rebuild()  # new files each time, the old ones unlinked
            except BaseException as exc:  # reported below, in the test's thread
                failures.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=rebuild)
        worker.start()
        searches = 0
        while not done.is_set() or searches == 0:
            assert [h.event_id for h in b.mirror.search(pattern, 12)] == want
            searches += 1
        worker.join()
        assert failures == []
