"""Rows read by name: each row shape's fields are the columns its SQL selects,
and the sync replica reads the time from the clock it is given."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from pixie.device.node.keyed import Node
from pixie.device.store import memlog, mirror, mirrorfiles, notes, replicarows
from pixie.device.store.contactbook import Contact
from pixie.device.store.db import peek
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import (
    CLEAR_COLUMNS,
    ClearColumns,
    clear_note_from_columns,
    content_hash,
)
from pixie.device.store.notetable import Note
from pixie.device.store.provision import create_data_dir
from pixie.device.store.replica import NodeReplica
from pixie.protocol.clock import SYSTEM_CLOCK, ManualClock
from pixie.protocol.hlc import Stamp
from pixie.protocol.syncmessages import ClearFields, LogEvent, NoteVersion, Records


def open_pair(tmp: Path) -> tuple[Node, Node]:
    create_data_dir(tmp / "device", name="phone", role="device")
    create_data_dir(tmp / "homebase", name="mac", role="homebase")
    return Node.open(tmp / "device"), Node.open(tmp / "homebase")


def say(node: Node, text: str, contact: str) -> None:
    at = 1_700_000_000_000_000
    node.log.append([NewEvent(EventKind.MESSAGE, at, text, contact=contact, thread="t1")], now=at)


def _selected(db_path: Path, sql: str, params: tuple[object, ...]) -> tuple[str, ...]:
    con = sqlite3.connect(db_path)
    try:
        cursor = con.execute(sql, params)
        return tuple(d[0] for d in cursor.description)
    finally:
        con.close()


def test_replica_event_rows_are_the_log_event_fields(tmp_path: Path) -> None:
    fields = replicarows._EventRow._fields
    assert fields == tuple(f.name for f in dataclasses.fields(LogEvent))
    a, b = open_pair(tmp_path)
    try:
        assert _selected(a.db.path, replicarows._EVENTS_AFTER, ("o", 0, 1)) == fields
        assert _selected(a.db.path, replicarows._EVENTS_BY_ID.format("?"), ("x",)) == fields
    finally:
        a.close()
        b.close()


def test_replica_event_rows_become_the_batch_columns(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    try:
        at = 1_700_000_000_000_000
        a.log.append(
            [
                NewEvent(EventKind.MESSAGE, at, "hello", contact="Ada", thread="t1", source="s"),
                NewEvent(EventKind.MESSAGE, at + 1, "again", thread="t1", from_me=True),
                NewEvent(EventKind.MESSAGE, at + 2, "more", thread="t2", from_me=False),
            ],
            now=at,
        )
        marks = NodeReplica(b.db, b.log, b.origin).marks()
        records = list(NodeReplica(a.db, a.log, a.origin).missing(marks))
        events = [e for r in records for e in r.events]
        assert [e.text for e in events] == ["hello", "again", "more"]
        assert [e.seq for e in events] == [1, 2, 3]
        assert {e.origin for e in events} == {a.origin}
        assert {e.kind for e in events} == {EventKind.MESSAGE.value}
        assert [e.from_me for e in events] == [None, True, False]
        assert [e.thread for e in events] == ["t1", "t1", "t2"]
        assert [e.source for e in events] == ["s", None, None]
        assert [e.at for e in events] == [at, at + 1, at + 2]
        assert events[0].contact_id is not None and events[1].contact_id is None
        assert [e.id for e in events] == [r.id for r in a.log.all_records()]
    finally:
        a.close()
        b.close()


def test_mirror_rows_are_the_log_columns_and_its_select() -> None:
    assert mirror._Logged._fields == memlog.COLUMNS
    columns = set(memlog.MemoryEvent.__table__.columns.keys())
    assert set(mirror._Searchable._fields) <= columns
    assert mirror._RAW_ROWS_SQL.startswith(f"SELECT {', '.join(mirror._Searchable._fields)} ")


def test_mirror_indexes_rows_by_commit_and_by_rebuild_alike(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    try:
        m = mirror.MemoryTextMirror(a.db)
        m.rebuild()
        a.log.subscribe(m.on_commit)
        say(a, "fed by the commit", contact="Ada Lovelace")
        m.ensure_current()
        fed = m.lines()
        m.rebuild()
        assert m.lines() == fed
        assert [line for _, line in fed] == ["Ada Lovelace: fed by the commit"]
    finally:
        a.close()
        b.close()


def test_notes_clear_columns_name_note_columns() -> None:
    assert ClearColumns._fields == CLEAR_COLUMNS
    table = Note.__table__.columns
    assert all(name in table for name in CLEAR_COLUMNS)
    assert notes.CLEAR_COLUMNS is ClearColumns._fields


def test_notes_clear_note_from_columns_reads_by_name() -> None:
    stamp = Stamp(1_700_000_000_000, 0, "a" * 16).encode()
    values = ClearColumns(
        id="n1",
        kind="person",
        identity_key="ada",
        title="Ada",
        body="Counts.",
        contact_id=None,
        tags='["maths"]',
        source_ref="s",
        about_date=5,
        created_at=None,
        updated_at=stamp,
        user_edited=1,
        content_hash="h",
        deleted=0,
    )
    note = clear_note_from_columns(values)
    assert (note.id, note.title, note.body, note.tags) == ("n1", "Ada", "Counts.", ("maths",))
    assert (note.about_date, note.created_at, note.source_ref) == (5, 0, "s")
    assert note.user_edited is True and note.deleted is False
    assert clear_note_from_columns(list(values)) == note


def test_replica_clock_defaults_to_the_logs(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    try:
        r = NodeReplica(a.db, a.log, a.origin)
        assert r.wall_clock is a.log.clock
        assert a.log.clock is SYSTEM_CLOCK
        manual = ManualClock(1_800_000_000_000_000)
        r = NodeReplica(a.db, a.log, a.origin, clock=manual)
        assert r.wall_clock is manual
        assert r.clock.now().wall_ms == 1_800_000_000_000
        manual.advance_ms(5)
        assert r.clock.now().wall_ms == 1_800_000_000_005
    finally:
        a.close()
        b.close()


def test_replica_dates_a_release_by_its_clock(tmp_path: Path) -> None:
    """A version with a body of its own, arriving for an offloaded row, queues
    the release of the holding, dated by the replica's clock."""
    a, b = open_pair(tmp_path)
    try:
        manual = ManualClock(1_800_000_000_000_000)
        r = NodeReplica(a.db, a.log, a.origin, clock=manual)
        note_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

        def version(body: str, wall_ms: int) -> NoteVersion:
            return NoteVersion(
                note_id,
                Stamp(wall_ms, 0, b.origin).encode(),
                content_hash(body),
                user_edited=True,
                deleted=False,
                clear=ClearFields("person", "ada", "Ada", body, None, (), None, None, 1),
            )

        r.apply(Records(notes=(version("old", 1_700_000_000_000),)), in_order=True)
        with a.db.writing(plain=True) as conn:  # parked, as after an offload
            conn.execute(
                "UPDATE note SET body = NULL, holder = ? WHERE id = ?", ("ab" * 16, note_id)
            )
        r.apply(Records(notes=(version("new", 1_700_000_000_001),)), in_order=True)

        assert peek(a.db, "SELECT note_id, holder, since FROM pending_release") == [
            (note_id, "ab" * 16, manual.us)
        ]
        assert peek(a.db, "SELECT holder, body FROM note WHERE id = ?", (note_id,)) == [
            (None, "new")
        ]
    finally:
        a.close()
        b.close()


def test_the_mirror_files_statements_read_the_log_and_the_contacts() -> None:
    """The quick grep runs these on the driver, without the models: they must
    say what the models do."""
    events, contact = memlog.MemoryEvent.__table__.columns, Contact.__table__.columns
    assert mirrorfiles.TOP_SQL == memlog.TOP_SQL
    assert (
        f"SELECT id FROM {memlog.MemoryEvent.__tablename__} WHERE n = ?"
    ) == mirrorfiles.ROW_ID_SQL
    assert f"SELECT id, name FROM {Contact.__tablename__}" == mirrorfiles.NAMES_SQL
    assert {"id", "n"} <= set(events.keys())
    assert {"id", "name"} <= set(contact.keys())
