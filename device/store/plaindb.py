"""A data dir's database on plain driver connections, without SQLAlchemy.

`Database` (in `db`) runs on SQLAlchemy's engine and pool, which a command
pays for in imports before it reads a row. Most reads, though, are already
hand-written statements on the driver (``Database.reading(plain=True)``,
`peek`, ``writing(plain=True)``), so a reader that needs nothing else (the quick `pixie
notebook search`, the contact book's and the clear zone's reads) is written
against `DriverAccess`, which both `Database` and `PlainDatabase` provide.

Both open connections the same way (`configure`: WAL, a busy timeout,
synchronous=FULL unless a bookkeeping write asks for NORMAL, foreign keys, a
page cache) and turn SQLite's errors into the same one-line `DataDirError`
(`translate_errors`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

from pixie.device.errors import DataDirError

BUSY_TIMEOUT_MS = 10_000
# Page cache per connection, a ceiling rather than an allocation. SQLite's
# default (2 MiB) holds a fraction of a 10k-note Notebook, and a search that
# joins a thousand full-text hits to their rows then re-reads pages from the OS
# on every call: 64 MiB made check_notebook about 5x faster at 10k notes.
CACHE_KIB = 64 * 1024


class DriverAccess(Protocol):
    """What a reader on the driver needs of a database."""

    @property
    def path(self) -> Path: ...

    def reading(
        self, *, plain: Literal[True], brief: bool = False
    ) -> AbstractContextManager[sqlite3.Connection]:
        """A driver connection inside one read transaction (``brief``: for
        one statement, nothing else done meanwhile)."""
        ...

    def writing(
        self, *, durable: bool = True, plain: Literal[True]
    ) -> AbstractContextManager[sqlite3.Connection]:
        """A small write transaction on a driver connection."""
        ...


def peek(db: DriverAccess, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Every row of one small read statement, on a plain read of ``db``: the
    per-request lookups (the offload path, the holder, the sync's marks),
    where a session costs twenty times the query."""
    with db.reading(plain=True, brief=True) as conn:
        return conn.execute(sql, params).fetchall()


def sqlite_uri(path: Path, mode: str) -> str:
    """The SQLite URI that opens ``path`` in ``mode``, the path percent-encoded:
    pasted in as it is, a ``?`` or ``#`` in a directory name would end the
    path early (``victim.db?x/pixie.db`` opens ``victim.db``) and a ``%41``
    would be decoded."""
    return f"{path.absolute().as_uri()}?mode={mode}"


def configure(conn: sqlite3.Connection) -> None:
    """The settings every connection to a data dir's database runs with."""
    # BEGIN is issued by hand (pysqlite's implicit transactions would defer
    # the lock and hide the mode asked for).
    conn.isolation_level = None
    cur = conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    cur.close()


class Plain:
    """One plain driver connection to the database and the lock that keeps it
    to one caller at a time; ``busy_ms`` is how long it waits for a lock."""

    def __init__(
        self, path: Path, busy_ms: int, *, autocheckpoint_pages: int | None = None
    ) -> None:
        self.path = path
        self.busy_ms = busy_ms
        # None: SQLite's default; 0: never (see `Database.defer_checkpoints`).
        self.autocheckpoint_pages = autocheckpoint_pages
        self.lock = threading.Lock()
        self.level = "NORMAL"
        self._conn: sqlite3.Connection | None = None

    def connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            conn = sqlite3.connect(sqlite_uri(self.path, "rw"), uri=True, check_same_thread=False)
            configure(conn)
            conn.execute(f"PRAGMA busy_timeout={self.busy_ms}")
            conn.execute("PRAGMA synchronous=NORMAL")
            if self.autocheckpoint_pages is not None:
                conn.execute(f"PRAGMA wal_autocheckpoint={self.autocheckpoint_pages}")
            self.level = "NORMAL"
            self._conn = conn
        return conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def one_line(exc: BaseException) -> str:
    """The driver's message, on one bounded line (a damaged schema's message
    quotes the schema, newlines and all)."""
    orig = getattr(exc, "orig", None)
    return " ".join(str(orig if orig is not None else exc).split())[:300]


def database_error(path: Path, exc: BaseException, *, damaged: bool) -> DataDirError:
    """The one-line error for a failure of the database at ``path``: an
    operational one (a missing table, a lock, a file that cannot be opened)
    or, with ``damaged``, any other database error."""
    message = one_line(exc)
    if damaged:
        return DataDirError(f"{path} is damaged or not a Pixie database ({message})")
    if "no such table" in message or "file is not a database" in message:
        return DataDirError(f"{path} is not a Pixie database ({message})")
    if "unable to open" in message:
        return DataDirError(f"cannot open {path} ({message})")
    if "locked" in message or "busy" in message:
        return DataDirError(f"{path} is busy: another pixie is writing; try again")
    return DataDirError(f"database error in {path} ({message})")


@contextmanager
def translate_errors(
    path: Path,
    operational: tuple[type[BaseException], ...] = (sqlite3.OperationalError,),
    other: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,),
) -> Iterator[None]:
    """SQLite's errors inside as one-line `DataDirError`s (``operational``
    and ``other``: the classes of each kind to catch, SQLAlchemy's wrappers
    too in `db`)."""
    try:
        yield
    except operational as exc:
        raise database_error(path, exc, damaged=False) from None
    except other as exc:
        raise database_error(path, exc, damaged=True) from None
    except UnicodeDecodeError:
        # The driver decodes SQLite's own error text and every stored string
        # as UTF-8; only a damaged file holds bytes that are not.
        raise DataDirError(f"{path} is damaged (text that is not UTF-8)") from None


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``conn`` inside one read transaction, rolled back at the end."""
    conn.execute("BEGIN DEFERRED")
    try:
        yield conn
    finally:
        # SQLite may have ended it already (some errors roll back): then a
        # ROLLBACK would only hide that error behind its own.
        if conn.in_transaction:
            conn.execute("ROLLBACK")


@contextmanager
def write_transaction(plain: Plain, *, durable: bool) -> Iterator[sqlite3.Connection]:
    """``plain``'s connection (its lock held by the caller) inside one write
    transaction, committed at synchronous=FULL if ``durable``, else NORMAL
    (set on the connection only when it changes); rolled back on any error."""
    conn = plain.connection()
    level = "FULL" if durable else "NORMAL"
    if plain.level != level:
        conn.execute(f"PRAGMA synchronous={level}")
        plain.level = level
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class PlainDatabase:
    """`DriverAccess` on one plain connection of its own, no SQLAlchemy: for
    a command that only reads (and keeps derived data, such as meaning
    vectors, through ``writing(plain=True, durable=False)``). It does not
    check or migrate the schema: open one only on a database whose version
    the caller has read."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise DataDirError(f"no database at {path}")
        self._path = path
        self._plain = Plain(path, BUSY_TIMEOUT_MS)

    @property
    def path(self) -> Path:
        return self._path

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._plain.lock, translate_errors(self._path):
            yield self._plain.connection()

    @contextmanager
    def reading(self, *, plain: Literal[True], brief: bool = False) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn, read_transaction(conn):
            yield conn

    @contextmanager
    def writing(
        self, *, durable: bool = True, plain: Literal[True]
    ) -> Iterator[sqlite3.Connection]:
        with self._connection(), write_transaction(self._plain, durable=durable) as conn:
            yield conn

    def dispose(self) -> None:
        self._plain.close()


__all__ = [
    "BUSY_TIMEOUT_MS",
    "CACHE_KIB",
    "DriverAccess",
    "Plain",
    "PlainDatabase",
    "configure",
    "database_error",
    "one_line",
    "peek",
    "read_transaction",
    "sqlite_uri",
    "translate_errors",
    "write_transaction",
]
