"""The quick commands' reads: whether a data dir may be read as it is, and
what `pixie status` counts, on a plain read-only connection (no ORM).

`pixie status` and `pixie notebook search` answer without the ORM when
they can (see `pixie.device.cli.statusview`, `notebooksearch`); a plain
`pixie grep` checks the text mirror's head on `read_only`. They read a data dir only
when its database is of the current schema and its identity rows are whole,
checked here on a read-only connection; anything else (an older schema that
opening migrates, a damaged file, a missing folder) is left to the full
command, which says what is wrong or repairs it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pixie.device.store.datadir import DB_NAME, has_identity
from pixie.device.store.version import SCHEMA_VERSION

_META_SQL = "SELECT key, value FROM meta"


def read_only(db_path: Path) -> sqlite3.Connection:
    """A read-only connection to ``db_path`` (never creates it), with no
    implicit transactions."""
    uri = db_path.absolute().as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def current_meta(conn: sqlite3.Connection) -> dict[str, str] | None:
    """The meta rows of a database a quick command may read as it is, read
    inside ``conn``'s transaction; None for any other."""
    meta = {str(k): str(v) for k, v in conn.execute(_META_SQL)}
    if meta.get("schema_version") != str(SCHEMA_VERSION) or not has_identity(meta):
        return None
    return meta


@contextmanager
def read_only_transaction(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``db_path`` inside one read transaction,
    closed at the end."""
    conn = read_only(db_path)
    try:
        conn.execute("BEGIN")
        yield conn
    finally:
        conn.close()


@contextmanager
def reading(path: Path) -> Iterator[tuple[sqlite3.Connection, dict[str, str]] | None]:
    """A read-only connection to the data dir at ``path``, inside one read
    transaction, and its meta rows; None if a quick command may not read it."""
    db_path = path / DB_NAME
    if not path.is_dir() or not db_path.is_file():
        yield None
        return
    with read_only_transaction(db_path) as conn:
        meta = current_meta(conn)
        yield None if meta is None else (conn, meta)


def readable(path: Path) -> bool:
    """Whether ``path`` is a data dir whose database a quick command may read."""
    with reading(path) as found:
        return found is not None


__all__ = ["current_meta", "read_only", "readable", "reading"]


_EVENTS_SQL = "SELECT count(*) FROM memory_event"
_CONTACTS_SQL = "SELECT count(*) FROM contact"
_NOTES_SQL = (
    "SELECT zone, count(*), sum(holder IS NOT NULL AND zone = 'clear') FROM note "
    "WHERE NOT deleted GROUP BY zone"
)
_SIBLINGS_SQL = "SELECT key, name, role, relay, paired_at FROM sibling ORDER BY paired_at"


@dataclass(frozen=True, slots=True)
class Counts:
    """What `pixie status` counts, read in the caller's transaction."""

    events: int
    contacts: int
    notes: dict[str, int]  # live notes by zone
    offloaded: int  # live clear notes whose body is parked
    siblings: list[tuple[str, str, str, str, int]]  # key hex, name, role, relay, paired at


def counts(conn: sqlite3.Connection) -> Counts:
    events = int(conn.execute(_EVENTS_SQL).fetchone()[0])
    contacts = int(conn.execute(_CONTACTS_SQL).fetchone()[0])
    notes: dict[str, int] = {}
    offloaded = 0
    for zone, count, held in conn.execute(_NOTES_SQL):
        notes[str(zone)] = int(count)
        offloaded += int(held or 0)
    siblings = [
        (str(key), str(name), str(role), str(relay), int(paired_at))
        for key, name, role, relay, paired_at in conn.execute(_SIBLINGS_SQL)
    ]
    return Counts(events, contacts, notes, offloaded, siblings)
