"""The statements of a distillation pass: what it reads of the memory log, the
contact book and the clear notes it merges into, and the watermarks it moves
(`distill_mark`).

`pixie.device.distill` decides what a source is and how its lines are shown;
every statement it runs is here, on the driver connection of its session's
transaction (`db.driver_of`) or, for the one-statement read of a filed
source, on `peek`. Rows come back as `Row`: (n, kind, at,
contact id, from me, text); lists of them newest first unless said.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from pixie.device.store.db import Database, peek
from pixie.device.store.identities import FROM_ME_SQL

Row = tuple[int, str, int, str | None, bool, str]

CHUNK = 500  # ids or row numbers bound in one IN (...)
MAX_THREAD_PEOPLE = 64  # the people of a thread a pass looks at

# from_me as corrected by the identity events (`identities.FROM_ME_SQL`).
_COLUMNS = f"n, kind, at, contact_id, {FROM_ME_SQL} AS from_me, text"
_NEWEST = "ORDER BY at DESC, n DESC LIMIT ?"
_THREAD_SQL = f"SELECT {_COLUMNS} FROM memory_event WHERE thread = ? AND kind = ? {_NEWEST}"
_THREAD_TOP_SQL = "SELECT max(n) FROM memory_event WHERE thread = ? AND kind = ?"
_THREAD_NEW_SQL = (
    f"SELECT {_COLUMNS} FROM memory_event WHERE thread = ? AND kind = ? AND n > ? {_NEWEST}"
)
_THREAD_PEOPLE_SQL = (
    "SELECT DISTINCT contact_id FROM memory_event "
    f"WHERE thread = ? AND kind = ? AND contact_id IS NOT NULL LIMIT {MAX_THREAD_PEOPLE}"
)
_THREAD_COUNT_SQL = "SELECT count(*) FROM memory_event WHERE thread = ? AND kind = 'message'"
_MONTH_SQL = (
    f"SELECT {_COLUMNS} FROM memory_event WHERE thread = ? AND kind = 'message' "
    f"AND at >= ? AND at < ? {_NEWEST}"
)
_DIRECT = "FROM memory_event WHERE thread IS NULL AND kind = 'message' AND contact_id = ?"
_DIRECT_SQL = f"SELECT {_COLUMNS} {_DIRECT} {_NEWEST}"
_DIRECT_TOP_SQL = f"SELECT max(n) {_DIRECT}"
_DIRECT_NEW_SQL = f"SELECT {_COLUMNS} {_DIRECT} AND n > ? {_NEWEST}"
_BY_SOURCE_SQL = f"SELECT {_COLUMNS} FROM memory_event WHERE source = ? AND kind IN ({{}})"
_BY_ID_SQL = f"SELECT {_COLUMNS} FROM memory_event WHERE id = ?"
_BY_N_SQL = f"SELECT {_COLUMNS} FROM memory_event WHERE n IN ({{}})"
# A card's email addresses: the contact book keeps those as names a contact
# is known by, so they are read from its aliases as one "email" detail
# (``{}``: which contacts). GROUP BY, not HAVING alone: older SQLite refuses
# HAVING without it.
_EMAILS_SQL = (
    "SELECT contact_id, group_concat(alias, ', ') AS emails FROM (SELECT contact_id, alias "
    "FROM contact_alias WHERE contact_id {} AND alias LIKE '%@%' ORDER BY contact_id, alias) "
    "GROUP BY contact_id"
)
_DETAILS_SQL = (
    "SELECT field, value FROM contact_detail WHERE contact_id = ? "
    "UNION ALL SELECT 'email', emails FROM (" + _EMAILS_SQL.format("= ?") + ")"
)
# Rows (0), watermark (1), names (2: id, name) and the other people's cards
# (3: field, contact id, value) of a source whose rows are all new, as one
# statement: see `filed`.
_FILED_SQL = (
    f"WITH r AS (SELECT {_COLUMNS} FROM memory_event WHERE n IN ({{}})) "
    f"SELECT 0, {_COLUMNS} FROM r "
    "UNION ALL SELECT 1, seen_n, NULL, NULL, NULL, NULL, NULL FROM distill_mark WHERE source = ? "
    "UNION ALL SELECT 2, NULL, id, NULL, NULL, NULL, name FROM contact "
    "WHERE id IN (SELECT contact_id FROM r) "
    "UNION ALL SELECT 3, NULL, field, NULL, contact_id, NULL, value FROM contact_detail "
    "WHERE contact_id IN (SELECT contact_id FROM r WHERE NOT from_me) "
    "UNION ALL SELECT 3, NULL, 'email', NULL, contact_id, NULL, emails FROM ("
    + _EMAILS_SQL.format("IN (SELECT contact_id FROM r WHERE NOT from_me)")
    + ")"
)
_MARK_READ_SQL = "SELECT seen_n FROM distill_mark WHERE source = ?"
_MARK_SQL = (
    "INSERT INTO distill_mark (source, seen_n) VALUES (?, ?) "
    "ON CONFLICT (source) DO UPDATE SET seen_n = excluded.seen_n"
)
_SCAN_SQL = (
    "SELECT n, id, kind, thread, contact_id, source FROM memory_event "
    "WHERE n > ? AND kind IN ({}) ORDER BY n"
)
_ANY_SQL = "SELECT 1 FROM memory_event WHERE n > ? AND kind IN ({}) LIMIT 1"
_TOP_SQL = "SELECT max(n) FROM memory_event"
# Repeating entries whose note is about an occurrence more than ``late`` past
# while the log has a later one (see `due_series`).
_DUE_SERIES_SQL = (
    "SELECT note.source_ref FROM note WHERE note.zone = 'clear' AND NOT note.deleted "
    "AND note.kind = 'conversation_digest' AND note.source_ref LIKE ?1 || '%' "
    "AND NOT note.user_edited AND note.body IS NOT NULL "
    "AND note.about_date < ?2 AND EXISTS (SELECT 1 FROM memory_event e "
    "WHERE e.thread = substr(note.source_ref, length(?1) + 1) "
    "AND e.kind = 'calendar' AND e.at > note.about_date + ?3) LIMIT ?4"
)
_AGENT_SQL = (
    "SELECT n, at, text FROM memory_event WHERE kind = 'agent_chat_agent' AND n > ? "
    "ORDER BY n LIMIT ?"
)
_STORED_SQL = (
    "SELECT title, body, tags, contact_id, source_ref, about_date, user_edited FROM note "
    "WHERE zone = 'clear' AND kind = ? AND identity_key = ?"
)


def _rows(result: Iterable[Any]) -> list[Row]:
    return [(n, kind, at, cid, bool(me), text) for n, kind, at, cid, me, text in result]


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


# -- watermarks -------------------------------------------------------------------------


def mark_of(conn: sqlite3.Connection, key: str) -> int | None:
    found = conn.execute(_MARK_READ_SQL, (key,)).fetchone()
    return None if found is None else int(found[0])


def set_mark(conn: sqlite3.Connection, key: str, n: int) -> None:
    """Move ``key``'s watermark to ``n``, in the caller's transaction."""
    conn.execute(_MARK_SQL, (key, n))


# -- the scan ---------------------------------------------------------------------------


def newest_n(conn: sqlite3.Connection) -> int:
    return int(conn.execute(_TOP_SQL).fetchone()[0] or 0)


def scan(conn: sqlite3.Connection, since: int, kinds: Sequence[str]) -> list[tuple[Any, ...]]:
    """(n, id, kind, thread, contact id, source) of each row of ``kinds``
    past ``since``, in log order."""
    return conn.execute(_SCAN_SQL.format(_marks(kinds)), (since, *kinds)).fetchall()


def any_since(conn: sqlite3.Connection, since: int, kinds: Sequence[str]) -> bool:
    return conn.execute(_ANY_SQL.format(_marks(kinds)), (since, *kinds)).fetchone() is not None


def due_series(
    conn: sqlite3.Connection, prefix: str, before: int, late: int, *, limit: int = 1000
) -> list[str]:
    """The source references (``prefix`` + thread) of the live, unedited
    digests of repeating entries about an occurrence before ``before`` while
    the log has one more than ``late`` microseconds after it: the note named
    it as the next, and is to be written again (at most ``limit``)."""
    return [r[0] for r in conn.execute(_DUE_SERIES_SQL, (prefix, before, late, limit))]


# -- a thread, a direct chat, filed sources ---------------------------------------------


def thread_top(conn: sqlite3.Connection, thread: str, kind: str) -> int | None:
    top = conn.execute(_THREAD_TOP_SQL, (thread, kind)).fetchone()[0]
    return None if top is None else int(top)


def thread_rows(conn: sqlite3.Connection, thread: str, kind: str, limit: int) -> list[Row]:
    return _rows(conn.execute(_THREAD_SQL, (thread, kind, limit)))


def thread_rows_after(
    conn: sqlite3.Connection, thread: str, kind: str, after: int, limit: int
) -> list[Row]:
    return _rows(conn.execute(_THREAD_NEW_SQL, (thread, kind, after, limit)))


def thread_people(conn: sqlite3.Connection, thread: str, kind: str) -> list[str]:
    return [r[0] for r in conn.execute(_THREAD_PEOPLE_SQL, (thread, kind))]


def thread_messages(conn: sqlite3.Connection, thread: str) -> int:
    return int(conn.execute(_THREAD_COUNT_SQL, (thread,)).fetchone()[0])


def month_rows(
    conn: sqlite3.Connection, thread: str, start: int, end: int, limit: int
) -> list[Row]:
    return _rows(conn.execute(_MONTH_SQL, (thread, start, end, limit)))


def direct_top(conn: sqlite3.Connection, contact: str) -> int | None:
    top = conn.execute(_DIRECT_TOP_SQL, (contact,)).fetchone()[0]
    return None if top is None else int(top)


def direct_rows(conn: sqlite3.Connection, contact: str, limit: int) -> list[Row]:
    return _rows(conn.execute(_DIRECT_SQL, (contact, limit)))


def direct_rows_after(conn: sqlite3.Connection, contact: str, after: int, limit: int) -> list[Row]:
    return _rows(conn.execute(_DIRECT_NEW_SQL, (contact, after, limit)))


def rows_by_id(conn: sqlite3.Connection, event_id: str) -> list[Row]:
    return _rows(conn.execute(_BY_ID_SQL, (event_id,)))


def rows_by_source(conn: sqlite3.Connection, source: str, kinds: Sequence[str]) -> list[Row]:
    return _rows(conn.execute(_BY_SOURCE_SQL.format(_marks(kinds)), (source, *kinds)))


def rows_by_n(conn: sqlite3.Connection, ns: Sequence[int]) -> list[Row]:
    rows: list[Row] = []
    for i in range(0, len(ns), CHUNK):
        chunk = ns[i : i + CHUNK]
        rows += _rows(conn.execute(_BY_N_SQL.format(_marks(chunk)), chunk))
    return rows


def filed(
    db: Database, ns: Sequence[int], key: str
) -> tuple[list[Row], int | None, dict[str, str], dict[str, dict[str, str]]]:
    """In one statement on one snapshot, no session: the rows numbered
    ``ns`` (at most `CHUNK`), ``key``'s watermark, the names of the contacts
    in them and the cards (details and addresses) of those not from me."""
    found = peek(db, _FILED_SQL.format(_marks(ns)), (*ns, key))
    rows: list[Row] = []
    mark: int | None = None
    names: dict[str, str] = {}
    cards: dict[str, dict[str, str]] = {}
    for part, n, kind, at, cid, me, text in found:
        if part == 0:
            rows.append((n, kind, at, cid, bool(me), text))
        elif part == 1:
            mark = n
        elif part == 2:
            names[kind] = text
        else:
            cards.setdefault(cid, {})[kind] = text
    return rows, mark, names, cards


# -- the contact book -------------------------------------------------------------------


def card(conn: sqlite3.Connection, contact: str) -> dict[str, str]:
    """A contact's details by field, its addresses as one "email" value."""
    return dict(conn.execute(_DETAILS_SQL, (contact, contact)).fetchall())


def contact_names(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, str]:
    wanted = sorted(ids)
    names: dict[str, str] = {}
    for i in range(0, len(wanted), CHUNK):
        chunk = wanted[i : i + CHUNK]
        sql = f"SELECT id, name FROM contact WHERE id IN ({_marks(chunk)})"
        names.update(conn.execute(sql, chunk).fetchall())
    return names


def every_name(conn: sqlite3.Connection) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Every contact's name by id, and every (alias key, contact id)."""
    names = dict(conn.execute("SELECT id, name FROM contact").fetchall())
    aliases = conn.execute("SELECT alias_key, contact_id FROM contact_alias").fetchall()
    return names, aliases


# -- what the agent said, the notes a pass merges into ----------------------------------


def agent_answers(conn: sqlite3.Connection, since: int, limit: int) -> list[tuple[int, int, str]]:
    """(n, at, text) of the agent's answers past ``since``, oldest first."""
    return [(n, at, text) for n, at, text in conn.execute(_AGENT_SQL, (since, limit))]


def stored_note(conn: sqlite3.Connection, kind: str, identity: str) -> tuple[Any, ...] | None:
    """(title, body, tags, contact id, source ref, about date, user edited) of
    the clear note of ``kind`` and ``identity``, deleted or not."""
    row = conn.execute(_STORED_SQL, (kind, identity)).fetchone()
    return None if row is None else tuple(row)


__all__ = [
    "CHUNK",
    "Row",
    "agent_answers",
    "any_since",
    "card",
    "contact_names",
    "direct_rows",
    "direct_rows_after",
    "direct_top",
    "due_series",
    "every_name",
    "filed",
    "mark_of",
    "month_rows",
    "newest_n",
    "rows_by_id",
    "rows_by_n",
    "rows_by_source",
    "scan",
    "set_mark",
    "stored_note",
    "thread_messages",
    "thread_people",
    "thread_rows",
    "thread_rows_after",
    "thread_top",
]
