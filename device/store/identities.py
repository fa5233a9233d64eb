"""Who the user is, as the log records it: ``identity`` events.

An import marks the user's own messages ``from_me`` only if it was told who
the user is. When it was not, the user's messages were logged as a contact's
(their own name became a contact). ``pixie contacts me NAME`` does not edit
those events, since the log is append-only: it logs one ``identity`` event
naming the contact (``contact_id``) and the identity the user gave (its
text). Every read that reports ``from_me`` reads it as `FROM_ME_SQL` does:
the stored flag, or the event's contact is one an identity event names. The
event syncs to every sibling like any other, so the correction holds there
too, and later imports on any of them take its text (and the contact's name
and aliases) as the user's.
"""

from __future__ import annotations

import sqlite3

from pixie.device.store.kinds import SEARCHABLE_KINDS, EventKind

IDENTITY = EventKind.IDENTITY.value
# The contacts identity events name, read through the partial index
# ``ix_event_identity`` (schema 10).
_ME_CONTACTS = (
    f"SELECT contact_id FROM memory_event WHERE kind = '{IDENTITY}' AND contact_id IS NOT NULL"
)
# ``from_me`` as every read reports it, on a row of memory_event.
FROM_ME_SQL = (
    f"(coalesce(from_me, 0) OR (contact_id IS NOT NULL AND contact_id IN ({_ME_CONTACTS})))"
)
# The contact a line names, on a row of memory_event: none for the user's own
# words (an import that knew who you are names the other party, or nobody; a
# message re-marked as yours names the contact you were imported as, which
# would read "you -> you").
SHOWN_CONTACT_SQL = f"(CASE WHEN contact_id IN ({_ME_CONTACTS}) THEN NULL ELSE contact_id END)"
_SEARCHABLE = ", ".join(f"'{k.value}'" for k in sorted(SEARCHABLE_KINDS))
_IDENTITIES_SQL = (
    f"SELECT e.text, c.name FROM memory_event e LEFT JOIN contact c ON c.id = e.contact_id "
    f"WHERE e.kind = '{IDENTITY}' "
    "UNION SELECT a.alias, NULL FROM contact_alias a "
    f"WHERE a.contact_id IN ({_ME_CONTACTS})"
)
_NOT_MINE_SQL = (
    "SELECT count(*) FROM memory_event WHERE contact_id = ? AND NOT coalesce(from_me, 0) "
    f"AND kind IN ({_SEARCHABLE})"
)
_IS_ME_SQL = f"SELECT 1 FROM memory_event WHERE kind = '{IDENTITY}' AND contact_id = ? LIMIT 1"
_LANDED_SQL = f"SELECT 1 FROM memory_event WHERE kind = '{IDENTITY}' AND n > ? LIMIT 1"


def me_contacts(conn: sqlite3.Connection) -> frozenset[str]:
    """The contacts the log says are the user."""
    return frozenset(str(r[0]) for r in conn.execute(_ME_CONTACTS))


def known(conn: sqlite3.Connection) -> list[str]:
    """Every identity the log knows for the user: what ``pixie contacts me``
    was given, and the names and aliases of the contacts it named."""
    out: dict[str, None] = {}
    for row in conn.execute(_IDENTITIES_SQL):
        for value in row:
            if value:
                out[str(value)] = None
    return list(out)


def is_me(conn: sqlite3.Connection, contact_id: str) -> bool:
    """Whether an identity event names ``contact_id`` already."""
    return conn.execute(_IS_ME_SQL, (contact_id,)).fetchone() is not None


def not_mine(conn: sqlite3.Connection, contact_id: str) -> int:
    """How many searchable events of ``contact_id`` are stored as not the user's."""
    return int(conn.execute(_NOT_MINE_SQL, (contact_id,)).fetchone()[0])


def landed_after(conn: sqlite3.Connection, n: int) -> bool:
    """Whether an identity event is in the log past row ``n``."""
    return conn.execute(_LANDED_SQL, (n,)).fetchone() is not None


__all__ = [
    "FROM_ME_SQL",
    "IDENTITY",
    "SHOWN_CONTACT_SQL",
    "is_me",
    "known",
    "me_contacts",
    "not_mine",
]
