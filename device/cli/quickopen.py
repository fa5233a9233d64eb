"""Whether a quick command may read a data dir as it is.

`pixie status` and `pixie notebook search` answer without the ORM when
they can (see `statusview`, `notebooksearch`). They read a data dir only
when its database is of the current schema and its identity rows are whole,
checked here on a read-only connection; anything else (an older schema that
opening migrates, a damaged file, a missing folder) is left to the full
command, which says what is wrong or repairs it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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
def reading(path: Path) -> Iterator[tuple[sqlite3.Connection, dict[str, str]] | None]:
    """A read-only connection to the data dir at ``path``, inside one read
    transaction, and its meta rows; None if a quick command may not read it."""
    db_path = path / DB_NAME
    if not path.is_dir() or not db_path.is_file():
        yield None
        return
    conn = read_only(db_path)
    try:
        conn.execute("BEGIN")
        meta = current_meta(conn)
        yield None if meta is None else (conn, meta)
    finally:
        conn.close()


def readable(path: Path) -> bool:
    """Whether ``path`` is a data dir whose database a quick command may read."""
    with reading(path) as found:
        return found is not None


__all__ = ["current_meta", "read_only", "readable", "reading"]
