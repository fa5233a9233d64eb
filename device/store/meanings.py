"""The note_meaning table: a meaning vector for each clear note, derived.

A row holds the vector of one clear note's title, tags and body, the
note's ``updated_at`` stamp when it was made (a later stamp means the note
changed and the vector is stale) and the name of what made it (vectors of
two models do not compare). Like the text mirror it is derived data: local to
this database, never synced or exported, rebuilt by re-embedding whatever is
missing or stale (`stale`), and dropped with its note (by a trigger, in the
same statement that deletes it).

Only clear notes ever get a row: `stale` reads the clear zone alone, so a
sealed note's meaning is never computed, let alone stored. The statements
that read and write the table live here (its model is in `notetable`, with
the note tables; this module needs no database layer); the notebook's
`nearby` module decides when they run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

_LIVE_CLEAR = "note.zone = 'clear' AND NOT note.deleted"
# Clear notes without a vector of ``model`` made at their current stamp.
_STALE_SQL = (
    "SELECT note.n, note.updated_at, note.title, note.tags, note.body FROM note "
    "LEFT JOIN note_meaning m ON m.note_n = note.n "
    f"WHERE {_LIVE_CLEAR} AND (m.note_n IS NULL OR m.updated_at != note.updated_at "
    "OR m.model != ?) ORDER BY note.n DESC LIMIT ?"
)
# A vector goes in only while its note is a live clear note: one deleted
# while it was embedded outside the lock gets none (the triggers below drop
# the vectors of notes deleted later).
_PUT_SQL = (
    "INSERT INTO note_meaning (note_n, updated_at, model, vec) "
    f"SELECT note.n, ?, ?, ? FROM note WHERE note.n = ? AND {_LIVE_CLEAR} "
    "ON CONFLICT (note_n) DO UPDATE SET updated_at = excluded.updated_at, "
    "model = excluded.model, vec = excluded.vec"
)
_ALL_SQL = "SELECT note_n, vec FROM note_meaning WHERE model = ? ORDER BY note_n"
# A generation number in the meta table, moved on by every write here: a
# cached matrix of the vectors is current while it stays the same.
_GENERATION_KEY = "meaning_generation"
_BUMP_SQL = (
    "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE "
    "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
)
_GENERATION_SQL = "SELECT value FROM meta WHERE key = ?"


def stale(conn: sqlite3.Connection, model: str, limit: int) -> list[tuple[int, str, str]]:
    """Up to ``limit`` live clear notes whose vector is missing or stale, the
    newest first (the ones most likely asked about, when a search catches up
    on a backlog): (note n, its stamp, the text to embed: title, tags, body)."""
    out = []
    for n, stamp, title, tags, body in conn.execute(_STALE_SQL, (model, limit)):
        words = " ".join(t for t in _tags(tags))
        out.append((n, stamp, "\n".join(p for p in (title, words, body) if p)))
    return out


def _tags(tags: str | None) -> list[str]:
    if not tags:
        return []
    found = json.loads(tags)
    return [t for t in found if isinstance(t, str)] if isinstance(found, list) else []


def put(conn: sqlite3.Connection, model: str, rows: Iterable[tuple[int, str, bytes]]) -> None:
    """Store (note n, its stamp, vector) rows, in the caller's transaction;
    a row whose note is no longer a live clear note is left out."""
    conn.executemany(_PUT_SQL, ((stamp, model, vec, n) for n, stamp, vec in rows))
    conn.execute(_BUMP_SQL, (_GENERATION_KEY,))


# Whether anything may be stale, without reading every note: a counter of
# note writes that triggers move on every insert and every change of stamp
# (a local write and a note merged from a sibling alike, whose stamp may be
# older than the newest), and the value it had when a refresh last caught up.
_WRITES_KEY = "note_writes"
_SEEN_KEY = "meaning_seen"
_SEEN_SQL = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
    "SET value = excluded.value"
)
_COUNT_WRITE = f"UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = '{_WRITES_KEY}'"
# The triggers and the counter's row, as a new data dir creates them and the
# migration to schema 6 adds them. A note deleted, or (never, but checked)
# out of the clear zone, loses its vector in the same statement: a vector
# says what a note was about.
MEANINGS_DDL: tuple[str, ...] = (
    f"INSERT OR IGNORE INTO meta (key, value) VALUES ('{_WRITES_KEY}', '0')",
    "CREATE TRIGGER IF NOT EXISTS note_meaning_on_insert AFTER INSERT ON note "
    f"BEGIN {_COUNT_WRITE}; END",
    "CREATE TRIGGER IF NOT EXISTS note_meaning_on_change AFTER UPDATE OF updated_at ON note "
    f"BEGIN {_COUNT_WRITE}; END",
    "CREATE TRIGGER IF NOT EXISTS note_meaning_on_gone AFTER UPDATE OF deleted, zone ON note "
    "WHEN new.deleted OR new.zone != 'clear' "
    "BEGIN DELETE FROM note_meaning WHERE note_n = new.n; END",
    "CREATE TRIGGER IF NOT EXISTS note_meaning_on_delete AFTER DELETE ON note "
    "BEGIN DELETE FROM note_meaning WHERE note_n = old.n; END",
)


def writes(conn: sqlite3.Connection) -> str:
    """The note-write counter (see above)."""
    row = conn.execute(_GENERATION_SQL, (_WRITES_KEY,)).fetchone()
    return str(row[0]) if row is not None else ""


def seen(conn: sqlite3.Connection) -> str:
    """The counter's value when the last complete refresh began."""
    row = conn.execute(_GENERATION_SQL, (_SEEN_KEY,)).fetchone()
    return str(row[0]) if row is not None else ""


def mark_seen(conn: sqlite3.Connection, value: str) -> None:
    conn.execute(_SEEN_SQL, (_SEEN_KEY, value))


def generation(conn: sqlite3.Connection) -> str:
    """A value that changes whenever the table does."""
    row = conn.execute(_GENERATION_SQL, (_GENERATION_KEY,)).fetchone()
    return str(row[0]) if row is not None else "0"


def every(conn: sqlite3.Connection, model: str) -> list[tuple[int, bytes]]:
    """Every vector of ``model``, by note n."""
    return [(int(n), bytes(vec)) for n, vec in conn.execute(_ALL_SQL, (model,))]


__all__ = [
    "MEANINGS_DDL",
    "every",
    "generation",
    "mark_seen",
    "put",
    "seen",
    "stale",
    "writes",
]
