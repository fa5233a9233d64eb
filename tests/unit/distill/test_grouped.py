"""A big pass commits its sources in groups (`NotetakingService.distill_group`):
the same notes and watermarks as one source a transaction, the user's edits
as untouched, and a pass stopped mid-way redoes at most the group it was in."""

from __future__ import annotations

import dataclasses
import io
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pixie.device.distill import service as service_module
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.distill.sources import SCAN_KEY
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.notebook import store as notebook_module
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import NewEvent
from pixie.device.store.notes import NoteKind, is_kept_up_identity
from pixie.device.store.provision import create_data_dir
from tests.support.distillfaults import POWER_CUT, cut_power_in_write
from tests.testkit.samplelife import write_jsonl

EVENTS = 1200


def life_events(seed: int = 3) -> list[NewEvent]:
    text = io.StringIO()
    write_jsonl(text, seed=seed, events=EVENTS)
    return list(read_events(io.BytesIO(text.getvalue().encode())))


@pytest.fixture
def open_node(tmp_path: Path) -> Iterator[Callable[[str], Node]]:
    opened: list[Node] = []

    def make(name: str) -> Node:
        create_data_dir(tmp_path / name, name=name, role="device")
        node = Node.open(tmp_path / name)
        opened.append(node)
        return node

    yield make
    for node in opened:
        node.close()


async def distil(node: Node, *, everything: bool = False) -> PassReport:
    service = NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),)))
    return await service.run_pass(everything=everything)


def one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "GROUP_BACKLOG", 10**9)


def content(node: Node) -> list[tuple[object, ...]]:
    """What the clear notes say, stamps aside."""
    return sorted(
        (
            n.id,
            n.kind.value,
            n.identity_key,
            n.title,
            n.body,
            n.tags,
            n.contact_id,
            n.source_ref,
            n.about_date,
            n.user_edited,
        )
        for n in node.notebook.clear_notes()
    )


def marks(node: Node) -> list[tuple[object, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute(
            "SELECT source, seen_n FROM distill_mark WHERE source != ? ORDER BY source",
            (SCAN_KEY,),
        ).fetchall()
    finally:
        con.close()


def count_transactions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = notebook_module.NotebookStore.upsert_with

    def counted(self: notebook_module.NotebookStore, build: object, then: object) -> object:
        calls[0] += 1
        return original(self, build, then)  # type: ignore[arg-type]

    monkeypatch.setattr(notebook_module.NotebookStore, "upsert_with", counted)
    return calls


@pytest.mark.parametrize("group", [service_module.MAX_GROUP, 3])
async def test_a_grouped_pass_writes_what_one_source_a_transaction_writes(
    open_node: Callable[[str], Node], monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    events = life_events()
    alone, grouped = open_node("alone"), open_node("grouped")
    for node in (alone, grouped):
        node.log.append(events, now=0)
    with monkeypatch.context() as m:
        one_by_one(m)
        single = await distil(alone)
    monkeypatch.setattr(service_module, "MAX_GROUP", group)
    transactions = count_transactions(monkeypatch)
    report = await distil(grouped)
    assert report.sources == single.sources > service_module.GROUP_BACKLOG
    assert transactions[0] < report.sources  # grouped indeed
    assert report.as_json() | {"seconds": 0} == single.as_json() | {"seconds": 0}
    assert content(grouped) == content(alone)
    assert marks(grouped) == marks(alone)
    # Nothing new: nothing written, no model asked; everything again: what
    # it does one source a transaction.
    again = await distil(grouped)
    assert (again.calls, again.written) == (0, 0)
    redo = await distil(grouped, everything=True)
    with monkeypatch.context() as m:
        one_by_one(m)
        redo_alone = await distil(alone, everything=True)
    assert redo.as_json() | {"seconds": 0} == redo_alone.as_json() | {"seconds": 0}
    assert content(grouped) == content(alone)


async def test_a_grouped_pass_leaves_the_users_edits_and_writes_beside_them(
    open_node: Callable[[str], Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    events = life_events(seed=5)
    half = len(events) // 2
    alone, grouped = open_node("alone"), open_node("grouped")
    for node in (alone, grouped):
        node.log.append(events[:half], now=0)
        await distil(node)
        for note in node.notebook.clear_notes():
            if note.kind in (NoteKind.PERSON, NoteKind.ABOUT_YOU):
                node.notebook.edit(note.id, body=f"My own words about {note.title}.")
        node.log.append(events[half:], now=0)
    mine = {n.id: n for n in grouped.notebook.clear_notes() if n.user_edited}
    assert len(mine) > 3
    with monkeypatch.context() as m:
        one_by_one(m)
        await distil(alone)
    report = await distil(grouped)
    assert report.sources > service_module.GROUP_BACKLOG
    assert content(grouped) == content(alone)
    assert marks(grouped) == marks(alone)
    for note_id, note in mine.items():
        assert grouped.notebook.get_clear(note_id) == note
    beside = [
        n
        for n in grouped.notebook.clear_notes(NoteKind.PERSON)
        if is_kept_up_identity(n.identity_key)
    ]
    assert beside and all(not n.user_edited for n in beside)


async def test_a_grouped_pass_stopped_mid_way_redoes_at_most_its_group(
    open_node: Callable[[str], Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    events = life_events()
    calm, node = open_node("calm"), open_node("stopped")
    for one in (calm, node):
        one.log.append(events, now=0)
    whole = await distil(calm)

    with monkeypatch.context() as m:
        cut_power_in_write(m, 2)
        with pytest.raises(RuntimeError, match=POWER_CUT):
            await distil(node)
    done = len(marks(node))  # the first group, and nothing of the second
    assert 0 < done <= service_module.MAX_GROUP

    resumed = await distil(node)
    assert resumed.skipped == done
    assert resumed.sources == whole.sources - done
    assert content(node) == content(calm)
    assert marks(node) == marks(calm)
    assert (await distil(node)).calls == 0


async def test_a_source_whose_notes_are_refused_fails_alone_in_its_group(
    open_node: Callable[[str], Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    events = life_events()
    alone, grouped = open_node("alone"), open_node("grouped")
    for node in (alone, grouped):
        node.log.append(events, now=0)
    original = service_module.digest_items
    refused: list[str] = []

    def digest_items(loaded: Any, request: Any, result: Any) -> list[Distilled]:
        items = original(loaded, request, result)
        if not refused or refused[0] == loaded.source.key:
            refused[:1] = [loaded.source.key]  # the first source, in every pass
            return [dataclasses.replace(items[0], contact_id="not a contact id!")]
        return items

    monkeypatch.setattr(service_module, "digest_items", digest_items)
    with monkeypatch.context() as m:
        one_by_one(m)
        single = await distil(alone)
    report = await distil(grouped)
    assert report.failed == single.failed == 1
    assert report.as_json() | {"seconds": 0} == single.as_json() | {"seconds": 0}
    assert content(grouped) == content(alone)
    assert marks(grouped) == marks(alone)
    assert len([m for m in marks(grouped) if not str(m[0]).startswith("*")]) == report.sources
