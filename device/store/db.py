"""SQLite through SQLAlchemy 2.0: one engine per data dir, durable by default.

Every write that another node may later rely on must survive power loss before
it is acknowledged, so connections run in WAL mode with ``synchronous=FULL``.
Write transactions start with ``BEGIN IMMEDIATE``: taking the write lock up
front means two writers queue on the busy timeout instead of one of them failing
with "database is locked" when it tries to upgrade a read lock.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from sqlalchemy import URL, Engine, String, create_engine, event, text
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.util import LRUCache

from pixie.device.errors import DataDirError
from pixie.device.store.plaindb import (
    BUSY_TIMEOUT_MS,
    Plain,
    configure,
    read_transaction,
    sqlite_uri,
    translate_errors,
    write_transaction,
)
from pixie.device.store.plaindb import peek as peek  # noqa: PLC0414 (the store's one-statement read)
from pixie.device.store.version import SCHEMA_VERSION

if TYPE_CHECKING:
    import trio

log = logging.getLogger(__name__)

T = TypeVar("T")

# How a database of an older version becomes the current one: the statements
# that take version N to N + 1, run in one durable transaction with the new
# version number, so a migration is done whole or not at all.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    3: ("ALTER TABLE holding ADD COLUMN offload_counter INTEGER NOT NULL DEFAULT 0",),
    # Contact details (see `contacts.ContactDetail`, whose table this is, as
    # a new data dir creates it).
    4: (
        "CREATE TABLE IF NOT EXISTS contact_detail ("
        " contact_id VARCHAR(32) NOT NULL,"
        " field VARCHAR(16) NOT NULL,"
        " value VARCHAR(2000) NOT NULL,"
        " at INTEGER NOT NULL,"
        " PRIMARY KEY (contact_id, field),"
        " FOREIGN KEY(contact_id) REFERENCES contact (id))",
    ),
    # Meaning vectors of clear notes (see `meanings.NoteMeaning`): derived,
    # filled in by the next search or distillation pass.
    5: (
        "CREATE TABLE IF NOT EXISTS note_meaning ("
        " note_n INTEGER NOT NULL PRIMARY KEY,"
        " updated_at VARCHAR(90) NOT NULL,"
        " model VARCHAR(64) NOT NULL,"
        " vec BLOB NOT NULL)",
        # Its triggers and counter: `meanings.MEANINGS_DDL`, spelt out here
        # because this module cannot import the table's own (it imports this).
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('note_writes', '0')",
        "CREATE TRIGGER IF NOT EXISTS note_meaning_on_insert AFTER INSERT ON note "
        "BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'note_writes'; END",
        "CREATE TRIGGER IF NOT EXISTS note_meaning_on_change AFTER UPDATE OF updated_at ON note "
        "BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'note_writes'; END",
        "CREATE TRIGGER IF NOT EXISTS note_meaning_on_gone AFTER UPDATE OF deleted, zone ON note "
        "WHEN new.deleted OR new.zone != 'clear' "
        "BEGIN DELETE FROM note_meaning WHERE note_n = new.n; END",
        "CREATE TRIGGER IF NOT EXISTS note_meaning_on_delete AFTER DELETE ON note "
        "BEGIN DELETE FROM note_meaning WHERE note_n = old.n; END",
        # The series notes a daemon's poll reads (`notes.SERIES_INDEX_DDL`).
        "CREATE INDEX IF NOT EXISTS ix_note_series_due ON note (about_date) "
        "WHERE kind = 'conversation_digest' AND source_ref LIKE 'series:%'",
    ),
    # The digest's items by hash and their cells (`itemindex.TABLES_DDL`,
    # spelt out here for the same reason), empty: the first repair fills
    # them (the built mark is left unset).
    6: (
        "CREATE TABLE IF NOT EXISTS digest_item ("
        " top BIGINT NOT NULL, tag BIGINT NOT NULL, key BLOB NOT NULL,"
        " PRIMARY KEY (top, tag)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS digest_cell ("
        " cell INTEGER NOT NULL PRIMARY KEY, high BIGINT NOT NULL, low BIGINT NOT NULL,"
        " n INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS digest_pending ("
        " n INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, top BIGINT NOT NULL, tag BIGINT NOT NULL,"
        " key BLOB NOT NULL, sign INTEGER NOT NULL)",
    ),
    # Peers removed from the account (`siblings.RemovedSibling`).
    7: (
        "CREATE TABLE IF NOT EXISTS removed_sibling ("
        " key VARCHAR(64) NOT NULL PRIMARY KEY,"
        " name VARCHAR(200) NOT NULL,"
        " removed_at INTEGER NOT NULL,"
        " removed_by VARCHAR(64) NOT NULL)",
    ),
    # A holding's owners, one row per device that parked it
    # (`holdings.HoldingOwner`), the one owner each holding had so far first.
    8: (
        "CREATE TABLE IF NOT EXISTS holding_owner ("
        " note_id VARCHAR(36) NOT NULL,"
        " content_hash VARCHAR(64) NOT NULL,"
        " owner VARCHAR(64) NOT NULL,"
        " offload_counter INTEGER DEFAULT '0' NOT NULL,"
        " PRIMARY KEY (note_id, content_hash, owner))",
        "INSERT OR IGNORE INTO holding_owner (note_id, content_hash, owner, offload_counter) "
        "SELECT note_id, content_hash, owner, offload_counter FROM holding",
        # The membership records (`memlog.MemoryEvent`'s partial index).
        "CREATE INDEX IF NOT EXISTS ix_event_membership ON memory_event (n) "
        "WHERE kind = 'membership'",
    ),
    # The identity events (`memlog.MemoryEvent`'s partial index; see
    # `identities.FROM_ME_SQL`).
    9: (
        "CREATE INDEX IF NOT EXISTS ix_event_identity ON memory_event (contact_id) "
        "WHERE kind = 'identity'",
    ),
}
# One in this many unsynced writes `at_once` would make goes to a worker thread,
# where its commit may checkpoint the WAL (see `Database._plain`).
AT_ONCE_CHECKPOINT_EVERY = 64
# How often a long-running process that checkpoints in the background (see
# `Database.defer_checkpoints`) moves the WAL into the database file.
BACKGROUND_CHECKPOINT_SECONDS = 1.0
# A backstop for such a process: a commit still checkpoints a WAL of this many
# pages (40 MiB of 4 KiB pages; SQLite's default is 1000). Writes that never
# pause (a first sync of a long log) could otherwise keep a checkpoint beside
# them from ever catching up, and the WAL from starting over.
DEFERRED_AUTOCHECKPOINT_PAGES = 10_000


# Compiled statements one process keeps when its databases share them (see
# `reuse_across_databases`); each engine keeps 500 of its own otherwise.
SHARED_STATEMENTS = 2000


class _Reuse:
    """What every `Database` opened after `reuse_across_databases` shares with
    the others of its process: one dialect and compiled-statement cache
    (SQLAlchemy keys a compiled statement by its dialect, so sharing the
    cache means sharing the dialect), and the bytes of a new schema."""

    def __init__(self) -> None:
        self.dialect: Dialect | None = None
        self.cache: LRUCache[Any, Any] = LRUCache(SHARED_STATEMENTS)
        self.schemas: dict[tuple[str, ...], bytes] = {}

    def adopt(self, engine: Engine) -> None:
        if self.dialect is None:
            self.dialect = engine.dialect
        else:
            # Every engine here is sqlite+pysqlite with the same arguments,
            # so one dialect serves them all; the engine's own stays unused.
            engine.dialect = self.dialect
            engine.pool._dialect = self.dialect
        engine._compiled_cache = self.cache


# The one in force, if any (a dict, so that switching needs no `global`).
_reuse: dict[str, _Reuse] = {}


def reuse_across_databases(on: bool = True) -> None:
    """Let every `Database` opened from now on share with the others of this
    process what is the same for all of them (``on=False``: nothing again):
    each statement is compiled once per process instead of once per
    database, and a new database starts as a byte copy of the first one's
    new schema instead of running its statements again.

    For the deterministic simulator, which creates and opens thousands of
    short-lived databases one after another (compiling was about a quarter of
    a simulated run, creating schemas a twentieth). The SQL sent, the schema,
    the connections, their pragmas and durability (``synchronous=FULL`` for
    acknowledged writes) are exactly as without it. Off unless called; the
    product never calls it.
    """
    _reuse.pop("on", None)
    if on:
        _reuse["on"] = _Reuse()


# Set while `at_once` runs a function on the event loop's own thread.
_NO_WAIT: contextvars.ContextVar[bool] = contextvars.ContextVar("pixie_no_wait", default=False)


class WouldBlock(Exception):
    """Raised inside `at_once` where the work would have to wait (for a lock
    held by another thread or process, or for an fsync): nothing was changed."""


async def at_once(fn: Callable[..., T], *args: Any, otherwise: Callable[..., Awaitable[Any]]) -> T:
    """Run ``fn(*args)`` right here on the event loop if it needs no waiting,
    else through ``otherwise`` (a worker-thread call).

    A hop to a worker thread and back costs about 130 microseconds, more than
    the small reads and unsynced bookkeeping writes on the offload path cost
    together, and those cannot block the loop for long: in this mode plain
    reads and writes (``reading(plain=True)``, `peek`, ``writing(plain=True,
    durable=False)``) use a connection of their own with no busy timeout, give
    up at once on a lock, and refuse a durable commit, each by raising
    `WouldBlock` before anything is changed; that connection never checkpoints
    the WAL (a checkpoint fsyncs), so one in `AT_ONCE_CHECKPOINT_EVERY` writes
    goes to the thread, whose commit checkpoints when the WAL is due. ``fn``
    must be safe to run again after it raised `WouldBlock` (it is, if its
    writes all go through plain writes)."""
    token = _NO_WAIT.set(True)
    try:
        result = fn(*args)
    except WouldBlock:
        pass
    else:
        # Yield to the scheduler, but never lose the result to a cancellation
        # there: the work is done (an envelope's counter recorded, say), as a
        # worker-thread call would be.
        import trio  # here, not at the top: a command that never awaits need not load it

        await trio.lowlevel.cancel_shielded_checkpoint()
        return result
    finally:
        _NO_WAIT.reset(token)
    late: Any = await otherwise(fn, *args)
    return cast(T, late)


def _locked(exc: sqlite3.OperationalError) -> bool:
    message = str(exc)
    return "locked" in message or "busy" in message


_VERSION = re.compile(r"[0-9]{1,9}")
_VERSION_SQL = "SELECT value FROM meta WHERE key = 'schema_version'"
_SQLITE_DIALECT = sqlite_dialect()


class Base(DeclarativeBase):
    """Declarative base of every table in a Pixie data dir."""


class Meta(Base):
    """Small facts about this data dir: schema version, role, origin id."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(512))


def _on_begin(conn: Any) -> None:
    options = conn.get_execution_options()
    if options.get("pixie_write"):
        # Set outside the transaction (SQLite applies it per connection), and
        # only when it changes, so an ordinary write pays nothing for it.
        level = "NORMAL" if options.get("pixie_lazy") else "FULL"
        info = conn.connection.info
        if info.get("pixie_sync") != level:
            conn.exec_driver_sql(f"PRAGMA synchronous={level}")
            info["pixie_sync"] = level
        # Straight to the driver: SQLAlchemy's execution of a statement costs
        # more than the BEGIN, and it has nothing to track in it.
        conn.connection.driver_connection.execute("BEGIN IMMEDIATE")
    else:
        conn.connection.driver_connection.execute("BEGIN DEFERRED")


class Database:
    """The engine of one data dir, and its two ways in: `reading` and
    `writing`, each a SQLAlchemy session or (``plain=True``) a driver
    connection for the statements the store writes by hand, where the ORM's
    cost would be most of the work. Only `pixie.device.store` (and the
    Notebook's store, for the note tables) runs statements through them;
    other packages call the store's named functions. `checkpoint` and
    `defer_checkpoints` serve the daemon's checkpoint task; `create_schema`,
    `check_schema`, `meta` and `dispose` are the file's life."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if not create and not path.is_file():
            raise DataDirError(f"no database at {path}")
        # mode=rw: opening never creates a stray empty database file. The URI
        # goes to the driver whole, never through a URL string SQLAlchemy
        # would parse again.
        url = URL.create(
            "sqlite+pysqlite",
            database=sqlite_uri(path, "rwc" if create else "rw"),
            query={"uri": "true"},
        )
        self.engine: Engine = create_engine(url, connect_args={"check_same_thread": False})
        reuse = _reuse.get("on")
        if reuse is not None:
            reuse.adopt(self.engine)
        event.listen(self.engine, "connect", self._on_connect)
        event.listen(self.engine, "begin", _on_begin)
        self._write_engine = self.engine.execution_options(pixie_write=True)
        self._lazy_engine = self.engine.execution_options(pixie_write=True, pixie_lazy=True)
        # Plain connections for the per-envelope work: one that waits on
        # locks like the engine's, one that never waits (see `at_once`).
        self._waiting = Plain(path, BUSY_TIMEOUT_MS)
        self._at_once = Plain(path, 0, autocheckpoint_pages=0)
        self._at_once_writes = 0
        self._deferred = False
        self._checkpointer = Plain(path, BUSY_TIMEOUT_MS, autocheckpoint_pages=0)

    def _on_connect(self, dbapi_conn: sqlite3.Connection, record: Any) -> None:
        configure(dbapi_conn)
        if self._deferred:
            dbapi_conn.execute(f"PRAGMA wal_autocheckpoint={DEFERRED_AUTOCHECKPOINT_PAGES}")

    def defer_checkpoints(self) -> None:
        """From now on this process's commits leave checkpointing the WAL to
        `checkpoint`, which a long-running process (a daemon) calls from a
        task of its own (`checkpoint_in_background`); only a WAL grown to
        DEFERRED_AUTOCHECKPOINT_PAGES is still checkpointed by the commit
        that fills it. A checkpoint copies the WAL into the database file and
        fsyncs it; done inside a commit, it lands on whichever request's write
        happened to fill the WAL, which then waits milliseconds for its ack.
        Durability is unchanged: a commit is durable once its WAL frames are
        synced, checkpointed or not. Other processes on the same data dir (a
        CLI command) checkpoint as before."""
        self._deferred = True
        # The setting before the close: a caller reconnecting meanwhile gets it.
        self._waiting.autocheckpoint_pages = DEFERRED_AUTOCHECKPOINT_PAGES
        self._waiting.close()
        self.engine.dispose()  # pooled connections reconnect with the setting

    def checkpoint(self) -> tuple[int, int, int]:
        """Move what the WAL holds into the database file, as far as readers
        allow, without waiting for anyone (SQLite's PASSIVE checkpoint): with
        nothing new in the WAL it does nothing and syncs nothing. Returns
        SQLite's answer: (1 if it could not start, frames in the WAL, frames
        moved)."""
        self._checkpointer.lock.acquire()
        with self._using(self._checkpointer) as conn:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def _plain(self, *, write: bool = False) -> Plain:
        """The plain connection for this caller, its lock held on return."""
        if not _NO_WAIT.get():
            self._waiting.lock.acquire()
            return self._waiting
        if write and not self._deferred:
            # The loop's connection never checkpoints the WAL (a checkpoint
            # fsyncs the database file); every so often a write goes to the
            # thread instead, where committing checkpoints a WAL grown past
            # SQLite's 1000 pages, so the WAL stays bounded however few
            # other writes there are.
            self._at_once_writes += 1
            if self._at_once_writes % AT_ONCE_CHECKPOINT_EVERY == 0:
                raise WouldBlock
        if not self._at_once.lock.acquire(blocking=False):
            raise WouldBlock
        return self._at_once

    @overload
    def reading(
        self, *, plain: Literal[False] = False, brief: bool = False
    ) -> AbstractContextManager[Session]: ...
    @overload
    def reading(
        self, *, plain: Literal[True], brief: bool = False
    ) -> AbstractContextManager[sqlite3.Connection]: ...
    def reading(
        self, *, plain: bool = False, brief: bool = False
    ) -> AbstractContextManager[Session] | AbstractContextManager[sqlite3.Connection]:
        """The way in for reads: one consistent snapshot, rolled back at the end.

        A SQLAlchemy session by default. ``plain=True`` gives a driver
        connection in a read transaction instead, for statements the store
        writes by hand (`driver_sql` compiles them from the models): a session
        costs about 0.25 ms before its first statement, this about 0.03 ms,
        which the per-envelope lookups, the sync's marks and the tools' many
        small reads feel. Inside `at_once` (on the event loop) the plain read
        runs on the loop's own connection, and raises `WouldBlock` rather
        than wait for it; elsewhere on a pooled one. ``brief`` promises one
        statement and nothing else done meanwhile (`peek`): it then takes
        this process's plain connection when no one holds it, which saves the
        pool's checkout (a fifth of a small read)."""
        return self._plain_read(brief) if plain else self._session_read()

    @contextmanager
    def _session_read(self) -> Iterator[Session]:
        with _translate_errors(self.path), Session(self.engine) as session, session.begin():
            yield session

    @contextmanager
    def _plain_read(self, brief: bool) -> Iterator[sqlite3.Connection]:
        if _NO_WAIT.get():
            with self._using(self._plain()) as conn, read_transaction(conn):
                yield conn
            return
        if brief and self._waiting.lock.acquire(blocking=False):
            with self._using(self._waiting) as conn, read_transaction(conn):
                yield conn
            return
        with _translate_errors(self.path):
            fairy = self.engine.raw_connection()
            try:
                with read_transaction(cast(sqlite3.Connection, fairy.driver_connection)) as conn:
                    yield conn
            finally:
                fairy.close()

    @overload
    def writing(
        self, *, durable: bool = True, plain: Literal[False] = False
    ) -> AbstractContextManager[Session]: ...
    @overload
    def writing(
        self, *, durable: bool = True, plain: Literal[True]
    ) -> AbstractContextManager[sqlite3.Connection]: ...
    def writing(
        self, *, durable: bool = True, plain: bool = False
    ) -> AbstractContextManager[Session] | AbstractContextManager[sqlite3.Connection]:
        """The way in for writes: one write transaction (BEGIN IMMEDIATE) that
        commits on success and rolls back on any error.

        ``durable`` (the default) commits at synchronous=FULL: what is
        acknowledged to anyone is written so. ``durable=False`` is for
        bookkeeping whose loss to a power cut (never to a crash of this
        process: WAL commits survive that) costs no data: envelope counters,
        replay windows, a body cleared after its holder's ack, derived rows.
        Such a commit skips the fsync; WAL keeps commits in order, so the next
        durable commit makes it durable too.

        A SQLAlchemy session by default. ``plain=True`` gives this process's
        plain driver connection instead (one caller at a time), for the few
        small writes per envelope and on the offload path, where a session
        would cost ten times the statements. Inside `at_once` only a plain,
        non-durable write may run (a session write may wait for the lock, a
        durable one for an fsync): anything else raises `WouldBlock`."""
        if plain:
            return self._plain_write(durable)
        return self._session_write(durable)

    @contextmanager
    def _session_write(self, durable: bool) -> Iterator[Session]:
        if _NO_WAIT.get():
            raise WouldBlock  # a session write may wait for the lock or an fsync
        engine = self._write_engine if durable else self._lazy_engine
        with (
            _translate_errors(self.path),
            Session(engine, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session

    @contextmanager
    def _plain_write(self, durable: bool) -> Iterator[sqlite3.Connection]:
        if durable and _NO_WAIT.get():
            raise WouldBlock
        plain = self._plain(write=True)
        with self._using(plain), write_transaction(plain, durable=durable) as conn:
            yield conn

    @contextmanager
    def _using(self, plain: Plain) -> Iterator[sqlite3.Connection]:
        """``plain``'s connection, its lock released at the end; errors are
        translated, and on the loop's connection a lock held elsewhere becomes
        `WouldBlock`."""
        try:
            with _translate_errors(self.path):
                try:
                    yield plain.connection()
                except sqlite3.OperationalError as exc:
                    if plain is self._at_once and _locked(exc):
                        raise WouldBlock from None
                    raise
        finally:
            plain.lock.release()

    def create_schema(self, extra_ddl: Sequence[str]) -> None:
        """Create every mapped table, then the triggers and virtual tables given."""
        reuse = _reuse.get("on")
        key = (*Base.metadata.tables, "", *extra_ddl)
        if reuse is not None and key in reuse.schemas and not self.path.exists():
            # Nothing has opened the file yet: it starts as the copy.
            self.path.write_bytes(reuse.schemas[key])
            return
        with self.writing() as session:
            conn = session.connection()
            Base.metadata.create_all(conn)
            for ddl in extra_ddl:
                conn.exec_driver_sql(ddl)
        if reuse is not None and key not in reuse.schemas:
            with self._using(self._plain()) as plain:
                reuse.schemas[key] = plain.serialize()

    def check_schema(self) -> None:
        """Refuse a file that is not a Pixie database of a version we understand;
        bring one of an older version we know how to migrate up to date."""
        version = self._version()
        known = all(v in MIGRATIONS for v in range(version, SCHEMA_VERSION))
        if version < SCHEMA_VERSION and known:
            with self.writing() as session:
                # Read again under the write lock: another process may have
                # migrated it meanwhile.
                version = self._version(session)
                for step in range(version, SCHEMA_VERSION):
                    for statement in MIGRATIONS[step]:
                        session.execute(text(statement))
                session.execute(
                    text("UPDATE meta SET value = :v WHERE key = 'schema_version'"),
                    {"v": str(SCHEMA_VERSION)},
                )
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise DataDirError(
                f"{self.path} has schema version {version}; this pixie understands {SCHEMA_VERSION}"
            )

    def _version(self, session: Session | None = None) -> int:
        if session is None:
            with self.reading(plain=True) as conn:
                row = conn.execute(_VERSION_SQL).fetchone()
        else:
            row = session.execute(text(_VERSION_SQL)).first()
        # ASCII digits only, and few: str.isdigit also admits '²' and other
        # digits int() refuses, and int() refuses more than 4300 of them.
        if row is None or not _VERSION.fullmatch(str(row[0])):
            raise DataDirError(f"{self.path} is not a Pixie database (no readable schema version)")
        return int(row[0])

    def meta(self) -> dict[str, str]:
        with self.reading(plain=True) as conn:
            return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    def dispose(self) -> None:
        self._waiting.close()
        self._at_once.close()
        self._checkpointer.close()
        self.engine.dispose()


async def checkpoint_in_background(
    db: Database,
    every: float = BACKGROUND_CHECKPOINT_SECONDS,
    *,
    task_status: trio.TaskStatus[None] | None = None,
) -> None:
    """Defer ``db``'s checkpoints (`Database.defer_checkpoints`), then (started,
    for `nursery.start`) run one every ``every`` seconds on a worker thread of
    its own, until cancelled.
    SQLite does the work with the GIL released, beside whatever the process
    is doing; between two runs the WAL grows by at most what the process
    wrote in that time. A failed checkpoint (the database busy beyond the
    busy timeout, say) is logged and tried again at the next turn."""
    import trio

    db.defer_checkpoints()
    if task_status is not None:
        task_status.started()
    while True:
        await trio.sleep(every)
        try:
            await trio.to_thread.run_sync(db.checkpoint)
        except DataDirError as exc:
            log.warning("a checkpoint failed: %s", exc)


def put_meta(db: Database, key: str, value: str) -> None:
    """Set one ``meta`` row (made if missing), durably."""
    with db.writing() as session:
        session.merge(Meta(key=key, value=value))


_DRIVER_KEY = "pixie_driver"


def driver_of(session: Session, *, flush: bool) -> sqlite3.Connection:
    """The one way from an ORM session to its driver connection: statements
    run on it inside the session's transaction. Hot paths (appending events,
    merging a sibling's records, a distillation pass) write through it because
    the ORM's unit of work costs several times the statements themselves.

    ``flush``: flush what the session holds first, so that what is read and
    written on the driver and what the session holds never disagree; a caller
    that knows the session holds no changed objects passes False and saves the
    check (which walks the session's objects). The connection is remembered
    for the session's current transaction, since a pass asks for it often."""
    if flush and (session.new or session.dirty or session.deleted):
        session.flush()
    transaction = session.get_transaction()
    held = session.info.get(_DRIVER_KEY)
    if held is not None and held[0] is transaction:
        return cast(sqlite3.Connection, held[1])
    conn = cast(sqlite3.Connection, session.connection().connection.driver_connection)
    session.info[_DRIVER_KEY] = (session.get_transaction(), conn)
    return conn


def driver_sql(statement: Any) -> str:
    """A Core or ORM statement as SQL for the driver (``?`` parameters in
    order): the models stay the schema's one definition, and a read that runs
    often skips the ORM's cost (see `Database.reading`)."""
    return str(statement.compile(dialect=_SQLITE_DIALECT))


def _translate_errors(path: Path) -> AbstractContextManager[None]:
    """`plaindb.translate_errors`, SQLAlchemy's wrappers of the driver's
    errors caught as the driver's own."""
    return translate_errors(
        path, (OperationalError, sqlite3.OperationalError), (DatabaseError, sqlite3.DatabaseError)
    )
