"""Checkpoints in the background: a long-running process (`pixie run`) moves
the WAL into the database file from a task of its own, never inside the
commit of a request that waits for its ack. Durability does not depend on
it: a commit is durable once its WAL frames are synced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from pixie.device.errors import DataDirError
from pixie.device.node.keyed import Node
from pixie.device.store import db
from pixie.device.store.db import at_once, checkpoint_in_background, peek
from pixie.device.store.memlog import EventKind, NewEvent

PAGE = 4096
DEFAULT_PAGES = 1000  # SQLite's wal_autocheckpoint
KEY = bytes(32)


def wal_pages(node: Node) -> int:
    wal = Path(str(node.db.path) + "-wal")
    return wal.stat().st_size // PAGE if wal.exists() else 0


def write_megabytes(node: Node, megabytes: int) -> None:
    """About ``megabytes`` MB into the log, 240 KB a durable transaction."""
    text = "x" * 60_000
    for i in range(megabytes * 1_000_000 // 240_000):
        events = [
            NewEvent(EventKind.JOURNAL, 1_700_000_000_000_000 + 4 * i + k, f"{i} {k} {text}")
            for k in range(4)
        ]
        node.log.append(events, now=0)


def test_by_default_a_commit_checkpoints_a_full_wal(node: Node) -> None:
    write_megabytes(node, 10)
    # Checkpointed along the way, the WAL starts over: it never holds the 10 MB.
    assert wal_pages(node) < 1.5 * DEFAULT_PAGES


def test_deferred_commits_leave_the_wal_to_the_checkpoint(node: Node) -> None:
    node.db.defer_checkpoints()
    backstop = db.DEFERRED_AUTOCHECKPOINT_PAGES
    with node.db.writing() as session:
        (pages,) = session.connection().exec_driver_sql("PRAGMA wal_autocheckpoint").one()
    assert pages == backstop > 2.5 * DEFAULT_PAGES
    waiting = node.db._waiting.connection()
    assert waiting.execute("PRAGMA wal_autocheckpoint").fetchone() == (backstop,)
    at_once = node.db._at_once.connection()
    assert at_once.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)

    write_megabytes(node, 10)
    assert wal_pages(node) > 2 * DEFAULT_PAGES  # nothing moved it

    busy, in_wal, moved = node.db.checkpoint()
    assert busy == 0 and in_wal == moved > 2 * DEFAULT_PAGES
    assert node.db.checkpoint() == (0, in_wal, in_wal)  # nothing new: nothing to do
    node.log.append([NewEvent(EventKind.JOURNAL, 1_800_000_000_000_000, "after")], now=0)
    busy, in_wal, moved = node.db.checkpoint()
    assert busy == 0 and in_wal == moved < 50  # the WAL started over
    # Everything written is there, through a connection of its own.
    con = sqlite3.connect(node.db.path)
    try:
        assert con.execute("SELECT count(*) FROM memory_event").fetchone() == (node.log.count(),)
    finally:
        con.close()


def test_deferred_a_commit_still_checkpoints_a_wal_past_the_backstop(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that never pause could keep a checkpoint beside them from ever
    catching up: past the backstop a commit checkpoints as it did."""
    monkeypatch.setattr(db, "DEFERRED_AUTOCHECKPOINT_PAGES", 1500)
    node.db.defer_checkpoints()
    write_megabytes(node, 12)  # some 3,000 pages
    assert wal_pages(node) < 1.5 * 1500


def test_deferred_the_loop_never_detours_to_the_thread(node: Node) -> None:
    """The detour that let a worker thread's commit checkpoint every
    AT_ONCE_CHECKPOINT_EVERY writes has no purpose once checkpoints run in
    the background."""
    node.db.defer_checkpoints()
    detours = 0

    async def fallback(fn: object, *args: object) -> object:
        nonlocal detours
        detours += 1
        return await trio.to_thread.run_sync(fn, *args)  # type: ignore[arg-type]

    async def main() -> None:
        for _ in range(3 * db.AT_ONCE_CHECKPOINT_EVERY):
            await at_once(node.siblings.next_send_counter, KEY, otherwise=fallback)

    trio.run(main)
    assert detours == 0
    assert peek(node.db, "SELECT sent FROM peer_counter") == [(3 * db.AT_ONCE_CHECKPOINT_EVERY,)]


def test_the_background_task_checkpoints_every_period(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Virtual time (an autojump clock); each checkpoint reports on a channel
    # from its worker thread, so the test waits for exactly that.
    send, heard = trio.open_memory_channel[tuple[int, int, int]](10)
    checkpoint = node.db.checkpoint

    def reported() -> tuple[int, int, int]:
        answer = checkpoint()
        trio.from_thread.run_sync(send.send_nowait, answer)
        return answer

    monkeypatch.setattr(node.db, "checkpoint", reported)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(checkpoint_in_background, node.db, 10.0)
            await trio.testing.wait_all_tasks_blocked()
            write_megabytes(node, 5)  # deferred: the commits leave the WAL alone
            assert wal_pages(node) > DEFAULT_PAGES
            busy, in_wal, moved = await heard.receive()
            assert trio.current_time() >= 10  # not before its time
            assert busy == 0 and in_wal == moved > DEFAULT_PAGES
            assert await heard.receive() == (0, in_wal, in_wal)  # nothing new, nothing done
            assert trio.current_time() >= 20
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_failed_checkpoint_is_logged_and_tried_again(
    node: Node, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    send, heard = trio.open_memory_channel[int](10)
    calls = 0

    def busy() -> tuple[int, int, int]:
        nonlocal calls
        calls += 1
        trio.from_thread.run_sync(send.send_nowait, calls)
        if calls == 1:
            raise DataDirError("the database is busy")
        return (0, 0, 0)

    monkeypatch.setattr(node.db, "checkpoint", busy)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(checkpoint_in_background, node.db, 1.0)
            assert await heard.receive() == 1
            assert await heard.receive() == 2
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert "a checkpoint failed: the database is busy" in caplog.text


def test_started_the_task_has_deferred_the_checkpoints(node: Node) -> None:
    """`pixie run` starts it with `nursery.start`: once started, every commit
    of the process leaves the WAL to it, before any other work begins."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(checkpoint_in_background, node.db)
            with node.db.writing() as session:
                (pages,) = session.connection().exec_driver_sql("PRAGMA wal_autocheckpoint").one()
            assert pages == db.DEFERRED_AUTOCHECKPOINT_PAGES
            nursery.cancel_scope.cancel()

    trio.run(main)
