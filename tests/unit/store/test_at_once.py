"""`at_once`: small database work on the event loop itself, unless it would wait."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio

from pixie.device.node.keyed import Node
from pixie.device.store import db
from pixie.device.store.db import at_once, peek

COUNTER_SQL = "SELECT sent FROM peer_counter WHERE key = ?"
KEY = bytes(32)


class Fallback:
    """The worker-thread path, recording each use; ``before`` runs first."""

    def __init__(self, before: Callable[[], None] = lambda: None) -> None:
        self.calls = 0
        self.before = before
        self.thread: int | None = None

    async def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.calls += 1
        self.before()

        def run() -> Any:
            self.thread = threading.get_ident()
            return fn(*args)

        return await trio.to_thread.run_sync(run)


def sent(node: Node) -> int:
    rows = peek(node.db, COUNTER_SQL, (KEY.hex(),))
    return int(rows[0][0]) if rows else 0


def test_unhindered_work_runs_on_the_calling_thread(node: Node) -> None:
    fallback = Fallback()
    where: list[int] = []

    def reserve() -> int:
        where.append(threading.get_ident())
        return node.siblings.next_send_counter(KEY)

    async def main() -> list[int]:
        return [await at_once(reserve, otherwise=fallback) for _ in range(3)]

    assert trio.run(main) == [1, 2, 3]
    assert fallback.calls == 0 and where == [threading.get_ident()] * 3
    assert sent(node) == 3


def test_a_write_lock_held_elsewhere_sends_the_work_to_the_thread_once(node: Node) -> None:
    """Another process holds the write lock: the attempt here gives up at once,
    changing nothing, and the work is done exactly once, in the worker thread,
    when the lock is free."""
    other = sqlite3.connect(node.db.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    fallback = Fallback(before=lambda: other.execute("COMMIT"))

    async def main() -> int:
        return await at_once(node.siblings.next_send_counter, KEY, otherwise=fallback)

    assert trio.run(main) == 1
    assert fallback.calls == 1 and fallback.thread != threading.get_ident()
    assert sent(node) == 1
    other.close()


def test_durable_commits_and_sessions_never_run_on_the_loop(node: Node) -> None:
    """An fsync is a wait: a durable plain write, or any session write, goes
    to the thread, and is done there exactly once."""

    def durable() -> None:
        with node.db.writing(plain=True) as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")

    def session_write() -> None:
        with node.db.writing(durable=False) as session:
            session.connection().exec_driver_sql("INSERT INTO meta (key, value) VALUES ('b', '2')")

    fallback = Fallback()

    async def main() -> None:
        await at_once(durable, otherwise=fallback)
        await at_once(session_write, otherwise=fallback)

    trio.run(main)
    assert fallback.calls == 2
    assert node.db.meta()["a"] == "1" and node.db.meta()["b"] == "2"


def test_errors_of_the_work_itself_are_raised_not_retried(node: Node) -> None:
    fallback = Fallback()

    def broken() -> None:
        with node.db.writing(plain=True, durable=False) as conn:
            conn.execute("INSERT INTO peer_counter VALUES ('k', 1, 0, '0')")
            raise ValueError("no")

    async def main() -> None:
        await at_once(broken, otherwise=fallback)

    with pytest.raises(ValueError, match="no"):
        trio.run(main)
    assert fallback.calls == 0
    assert peek(node.db, "SELECT count(*) FROM peer_counter") == [(0,)]


def test_the_loop_never_checkpoints_and_the_thread_does_every_so_often(node: Node) -> None:
    """A checkpoint fsyncs the database file: the loop's connection has them
    off, and one write in AT_ONCE_CHECKPOINT_EVERY goes to the thread, where
    a commit checkpoints a WAL that is due."""
    fallback = Fallback()
    every = db.AT_ONCE_CHECKPOINT_EVERY

    async def main() -> None:
        for _ in range(2 * every):
            await at_once(node.siblings.next_send_counter, KEY, otherwise=fallback)

    trio.run(main)
    assert fallback.calls == 2
    assert sent(node) == 2 * every
    loop_conn = node.db._at_once.connection()
    assert loop_conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    assert node.db._waiting.connection().execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)


def test_work_done_on_the_loop_is_not_lost_to_a_cancellation(node: Node) -> None:
    """Like a worker-thread call, a finished inline call returns its result
    even when its caller is being cancelled (a counter once reserved, or an
    envelope once accepted, must reach the caller)."""
    fallback = Fallback()
    got: list[int] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            got.append(await at_once(node.siblings.next_send_counter, KEY, otherwise=fallback))

    trio.run(main)
    assert got == [1] and sent(node) == 1 and fallback.calls == 0
