from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path

import pytest

from pixie.device.errors import BadInput, DataDirError
from pixie.device.node.keyed import Node
from pixie.device.store.db import peek
from pixie.device.store.memlog import OPTIMISTIC_EVENTS, EventKind, EventRecord, NewEvent
from pixie.device.store.version import SCHEMA_VERSION
from pixie.protocol.ids import id_time_ms, new_id, parse_id
from pixie.protocol.timestamps import parse_time


def ev(text: str, at: str = "2025-01-02T03:04:05Z", **kw: object) -> NewEvent:
    kind = kw.pop("kind", EventKind.MESSAGE)
    return NewEvent(kind=kind, at=parse_time(at), text=text, **kw)  # type: ignore[arg-type]


def test_ids_are_uuid7_and_strictly_increasing() -> None:
    ids = [new_id() for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for i in ids[:10]:
        assert uuid.UUID(i).version == 7
        assert parse_id(i) == i
    # A clock that steps backwards never breaks the order within a process.
    later = new_id(now_ms=1_000)
    assert later > ids[-1]
    assert id_time_ms(later) is not None and id_time_ms(later) >= (id_time_ms(ids[-1]) or 0)


def test_append_assigns_gap_free_sequence_per_origin(node: Node) -> None:
    a = node.log.append([ev("one"), ev("two")], now=0)
    b = node.log.append([ev("three")], now=0)
    seqs = [r.seq for r in node.log.all_records()]
    assert seqs == [1, 2, 3]
    assert len(a.ids) == 2 and len(b.ids) == 1
    assert {r.origin for r in node.log.all_records()} == {node.origin}


def test_given_ids_are_insert_if_absent(node: Node) -> None:
    eid = new_id()
    first = node.log.append([ev("x", id=eid), ev("y", id=eid)], now=0)
    again = node.log.append([ev("x", id=eid), ev("z")], now=0)
    assert first.ids == (eid,) and first.skipped == 1
    assert again.skipped == 1 and len(again.ids) == 1
    # skipped rows consume no sequence numbers
    assert [r.seq for r in node.log.all_records()] == [1, 2]


def test_insert_if_absent_keeps_remote_origin_and_is_idempotent(node: Node) -> None:
    rec = EventRecord(
        id=new_id(),
        origin="other",
        seq=7,
        kind=EventKind.JOURNAL,
        at=5,
        contact_id=None,
        thread=None,
        source=None,
        from_me=None,
        text="remote",
    )
    assert node.log.insert_if_absent([rec, rec]) == 1
    assert node.log.insert_if_absent([rec]) == 0
    assert node.log.get(rec.id) == rec


def test_unknown_contacts_are_created_and_resolved_case_insensitively(node: Node) -> None:
    res = node.log.append(
        [ev("hi", contact="Ada Lovelace"), ev("yo", contact="ADA lovelace")], now=0
    )
    assert res.new_contacts == 1
    records = node.log.all_records()
    assert records[0].contact_id == records[1].contact_id
    node.contacts.add("Ada Lovelace", ["Ada"], now=0)
    assert node.contacts.resolve("ada") == records[0].contact_id
    with pytest.raises(BadInput):
        node.contacts.add("Someone Else", ["ADA"], now=0)


def test_database_refuses_update_and_delete(node: Node) -> None:
    node.log.append([ev("kept")], now=0)
    con = sqlite3.connect(node.db.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            con.execute("UPDATE memory_event SET text = 'changed'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            con.execute("DELETE FROM memory_event")
    finally:
        con.close()
    assert [r.text for r in node.log.all_records()] == ["kept"]


def test_store_has_no_edit_or_delete_path(node: Node) -> None:
    public = {name for name in dir(node.log) if not name.startswith("_")}
    assert not {n for n in public if any(w in n for w in ("update", "edit", "delete", "remove"))}


def test_connections_are_wal_and_synchronous_full(node: Node) -> None:
    with node.db.reading() as session:
        conn = session.connection()
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def test_only_bookkeeping_writes_skip_the_fsync(node: Node) -> None:
    """``durable=False`` runs its transaction at synchronous=NORMAL and the next
    ordinary write is back at FULL, on the same pooled connection."""
    for durable, level in [(False, 1), (True, 2), (False, 1), (False, 1), (True, 2)]:
        with node.db.writing(durable=durable) as session:
            assert session.connection().exec_driver_sql("PRAGMA synchronous").scalar() == level


def test_failed_batch_writes_nothing(node: Node) -> None:
    good = ev("fine")
    bad = NewEvent(kind=EventKind.MESSAGE, at=0, text="x", contact="")  # invalid name
    with pytest.raises(BadInput):
        node.log.append([good, bad], now=0)
    assert node.log.count() == 0


def test_open_refuses_missing_and_corrupt_dirs(tmp_path: Path) -> None:
    with pytest.raises(DataDirError, match="pixie init"):
        Node.open(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pixie.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DataDirError):
        Node.open(bad)
    assert (bad / "pixie.db").read_bytes() == b"this is not sqlite" * 100


def _set_version(path: Path, version: int, *statements: str) -> None:
    con = sqlite3.connect(path / "pixie.db")
    with con:
        for statement in statements:
            con.execute(statement)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    con.close()


def test_an_older_schema_is_migrated_on_open_and_keeps_its_data(data_dir: Path) -> None:
    with Node.open(data_dir) as n:
        n.log.append([ev("kept across the migration")], now=0)
        peek(n.db, "SELECT 1")
    # What a version-3 database looked like: holdings without their counter.
    _set_version(
        data_dir,
        3,
        "INSERT INTO holding (note_id, content_hash, owner, body, held_at) "
        "VALUES ('n', 'h', 'o', x'00', 0)",
        "ALTER TABLE holding DROP COLUMN offload_counter",
    )
    with Node.open(data_dir) as n:
        assert [r.text for r in n.log.all_records()] == ["kept across the migration"]
        assert n.db.meta()["schema_version"] == str(SCHEMA_VERSION)
        assert peek(n.db, "SELECT note_id, offload_counter FROM holding") == [("n", 0)]


@pytest.mark.parametrize("version", [2, SCHEMA_VERSION + 1])
def test_a_schema_with_no_migration_is_refused_untouched(data_dir: Path, version: int) -> None:
    _set_version(data_dir, version)
    with pytest.raises(DataDirError, match=f"schema version {version}; this pixie understands"):
        Node.open(data_dir)
    con = sqlite3.connect(data_dir / "pixie.db")
    columns = [row[1] for row in con.execute("PRAGMA table_info(holding)")]
    (stored,) = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    con.close()
    assert stored == str(version) and "offload_counter" in columns


def test_rows_are_read_back_after_a_long_write_only_for_a_listener_that_wants_them(
    node: Node,
) -> None:
    heard: list[int] = []
    wanted = [False]
    node.log.subscribe(lambda rows: heard.extend(r[0] for r in rows), wants_rows=lambda: wanted[0])
    node.log.append([ev("one")], now=0)
    node.log.committed_after(0)
    assert heard == [1]  # the write itself was heard; the read-back was skipped
    heard.clear()
    wanted[0] = True
    node.log.committed_after(0)
    assert heard == [1]


def test_the_text_mirror_built_after_a_write_it_skipped_still_finds_it(node: Node) -> None:
    assert not node.mirror.is_built()
    with node.log.db.writing() as session:
        first = node.log.top_in(session)
        node.log.append_in(session, [ev("the lighthouse keeper")], now=0)
    node.log.committed_after(first)  # nothing built, nothing read back
    assert not node.mirror.is_built()
    node.mirror.ensure_current()
    assert [h.body for h in node.mirror.search(re.compile(rb"lighthouse"), 12)] == [
        "the lighthouse keeper"
    ]


def test_a_batch_with_repeats_and_known_ids_writes_each_new_event_once_in_order(
    node: Node,
) -> None:
    known, fresh = new_id(), new_id()
    node.log.append([ev("known", id=known)], now=0)
    heard: list[tuple[object, ...]] = []
    node.log.subscribe(heard.extend)
    result = node.log.append(
        [
            ev("a", contact="Grace"),
            ev("known again", id=known),
            ev("b", id=fresh, contact="Ada"),
            ev("b again", id=fresh, contact="Linus"),
            ev("c", contact="Ada", from_me=True, thread="t", source="s"),
        ],
        now=0,
    )
    assert result.skipped == 2 and result.new_contacts == 2  # Linus's event was skipped
    records = node.log.all_records()
    assert [r.text for r in records] == ["known", "a", "b", "c"]
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert result.ids == tuple(r.id for r in records[1:]) and records[2].id == fresh
    assert records[2].contact_id == records[3].contact_id != records[1].contact_id
    assert (records[3].from_me, records[3].thread, records[3].source) == (True, "t", "s")
    assert [r[0] for r in heard] == [2, 3, 4]
    assert [r[4] for r in heard] == ["message"] * 3 and type(heard[0][4]) is str
    assert node.recompute_digest() == node.digest()


@pytest.mark.parametrize("known_at", [None, "first", "middle", "last"])
def test_a_long_batch_skips_ids_the_log_holds_wherever_they_are(
    node: Node, known_at: str | None
) -> None:
    # A long batch takes its ids to be new unless its first or last is known;
    # one known in the middle makes it start again, looking each id up.
    total = OPTIMISTIC_EVENTS + 10
    ids = [new_id() for _ in range(total)]
    at = {None: None, "first": 0, "middle": total // 2, "last": total - 1}[known_at]
    if at is not None:
        node.log.append([ev("known", id=ids[at], contact="Grace")], now=0)
    before = node.log.count()
    heard: list[tuple[object, ...]] = []
    node.log.subscribe(heard.extend)
    batch = [ev(f"e{i}", id=ids[i], contact="Ada" if i % 2 else "Lin") for i in range(total)]
    batch.insert(7, ev("a repeat within the batch", id=ids[3]))

    result = node.log.append(batch, now=0)

    assert result.skipped == 1 + (at is not None)
    assert result.new_contacts == 2
    records = node.log.all_records()
    assert len(records) == total  # each id once, the known one where it was
    assert [r.seq for r in records] == list(range(1, total + 1))
    assert sorted(r.id for r in records) == sorted(ids)
    assert [r[0] for r in heard] == list(range(before + 1, total + 1))
    assert node.recompute_digest() == node.digest()


def test_a_long_batch_of_new_events_is_written_in_order_with_its_contacts(node: Node) -> None:
    # The way a long batch of new ids takes: no lookups, every field in place.
    node.log.append([ev("before", contact="Lin")], now=0)
    total = OPTIMISTIC_EVENTS + 10
    ids = [new_id() if i % 3 else None for i in range(total)]
    names = [None, "Ada", "Lin", "Grace"]
    batch = [
        NewEvent(
            EventKind.MESSAGE if i % 2 else EventKind.JOURNAL,
            1_700_000_000_000_000 + i,
            f"e{i}",
            contact=names[i % 4],
            thread=f"t{i % 5}" if i % 5 else None,
            source=f"s{i}" if i % 7 else None,
            from_me=bool(i % 2) if i % 3 else None,
            id=ids[i],
        )
        for i in range(total)
    ]
    result = node.log.append(batch, now=0)
    assert result.skipped == 0 and result.new_contacts == 2  # Ada and Grace
    records = node.log.all_records()[1:]
    assert [r.seq for r in records] == list(range(2, total + 2))
    assert list(result.ids) == [r.id for r in records]
    assert all(r.id == i for r, i in zip(records, ids, strict=True) if i is not None)
    assert len({r.id for r in records}) == total
    by_name = {name: node.contacts.resolve(name) for name in names[1:]}
    for r, e in zip(records, batch, strict=True):
        assert (r.text, r.at, r.kind, r.thread, r.source, r.from_me) == (
            e.text,
            e.at,
            e.kind,
            e.thread,
            e.source,
            e.from_me,
        )
        assert r.contact_id == (None if e.contact is None else by_name[e.contact])
    assert node.recompute_digest() == node.digest()


def test_a_long_append_reports_progress_up_to_the_total_once_committed(node: Node) -> None:
    heard: list[tuple[int, int]] = []
    total = 2 * 4096 + 5
    node.log.append([ev(f"e{i}") for i in range(total)], now=0, progress=lambda *p: heard.append(p))
    done = [d for d, _ in heard]
    assert done == sorted(done) and done[0] == 0 and done[-1] == total and len(done) >= 3
    assert {t for _, t in heard} == {total}
    assert node.log.count() == total
