"""The clear zone's batched upsert on the driver connection: the statements
it runs, a note row as it reads and writes it (`_Row`), and the reads of what
is stored already."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, cast

from sqlalchemy import Table, bindparam, select

from pixie.device.store.contactbook import Contact
from pixie.device.store.db import driver_sql
from pixie.device.store.memlog import MemoryEvent
from pixie.device.store.notes import (
    NoteKind,
    Zone,
    is_kept_up_identity,
)
from pixie.device.store.notetable import Note
from pixie.protocol.digest import note_item

# -- the batched upsert's statements, on the driver connection -------------------------
#
# Column names come from the ORM tables, which stay the schema's one definition.

_NOTE = cast(Table, Note.__table__)
_INSERT_COLUMNS = tuple(c.name for c in _NOTE.columns if c.name != "n")
_INSERT_SQL = (
    f"INSERT INTO {_NOTE.name} ({', '.join(_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_INSERT_COLUMNS))})"
)
# What an upsert can change in a stored row (`_Row.update_values`' order).
_UPDATE_COLUMNS = (
    "title",
    "tags",
    "body",
    "content_hash",
    "holder",
    "contact_id",
    "source_ref",
    "about_date",
    "updated_at",
    "updated_wall",
)
_UPDATE_SQL = (
    f"UPDATE {_NOTE.name} SET {', '.join(f'{_NOTE.c[c].name} = ?' for c in _UPDATE_COLUMNS)} "
    f"WHERE {_NOTE.c.n.name} = ?"
)
# What an upsert reads of a stored row (`_Row`'s fields but created_at).
_READ_COLUMNS = (
    "n",
    "id",
    "kind",
    "identity_key",
    "user_edited",
    "deleted",
    *_UPDATE_COLUMNS,
)
_LOOKUP_CHUNK = 500  # identities per lookup statement
# A pin: what it reads of the event pinned, and of its contact.
_PIN_SOURCE_SQL = driver_sql(
    select(MemoryEvent.kind, MemoryEvent.text, MemoryEvent.contact_id, MemoryEvent.thread).where(
        MemoryEvent.id == bindparam("id")
    )
)
_CONTACT_NAME_SQL = driver_sql(select(Contact.name).where(Contact.id == bindparam("id")))
# A user's edit: what it reads of the live row, and what it can change.
_LIVE_ROW_SQL = (
    f"SELECT {', '.join(_READ_COLUMNS)} FROM {_NOTE.name} "
    "WHERE zone = 'clear' AND deleted = 0 AND id = ?"
)
_EDIT_COLUMNS = (
    "title",
    "body",
    "content_hash",
    "tags",
    "user_edited",
    "updated_at",
    "updated_wall",
)
_EDIT_SQL = (
    f"UPDATE {_NOTE.name} SET {', '.join(f'{_NOTE.c[c].name} = ?' for c in _EDIT_COLUMNS)} "
    f"WHERE {_NOTE.c.n.name} = ?"
)


class _Row:
    """A clear row as the batched upsert reads, decides on and writes it."""

    __slots__ = (*_READ_COLUMNS, "created_at")

    n: int | None  # None until inserted
    id: str
    kind: str
    identity_key: str | None  # None for a pin (a sparked note)
    user_edited: bool | int
    deleted: bool | int
    title: str
    tags: str | None
    body: str | None
    content_hash: str
    holder: str | None
    contact_id: str | None
    source_ref: str | None
    about_date: int | None
    updated_at: str
    updated_wall: int
    created_at: int

    def __init__(
        self,
        n: int | None,
        id: str,
        kind: str,
        identity_key: str | None,
        user_edited: bool | int,
        deleted: bool | int,
        title: str,
        tags: str | None,
        body: str | None,
        content_hash: str,
        holder: str | None,
        contact_id: str | None,
        source_ref: str | None,
        about_date: int | None,
        updated_at: str,
        updated_wall: int,
        created_at: int = 0,
    ) -> None:
        self.n, self.id, self.kind, self.identity_key = n, id, kind, identity_key
        self.user_edited, self.deleted = user_edited, deleted
        self.title, self.tags, self.body, self.content_hash = title, tags, body, content_hash
        self.holder, self.contact_id, self.source_ref = holder, contact_id, source_ref
        self.about_date, self.updated_at, self.updated_wall = about_date, updated_at, updated_wall
        self.created_at = created_at

    def version(self) -> bytes:
        """The row's version key in the state digest (see `statedigest.note_version`)."""
        return note_item(
            self.id, self.updated_at, self.content_hash, bool(self.user_edited), bool(self.deleted)
        )

    def insert_values(self) -> tuple[Any, ...]:
        return _INSERT_VALUES(self)

    def update_values(self) -> tuple[Any, ...]:
        return _UPDATE_VALUES(self)

    # Constant columns of every clear row this path inserts.
    zone = Zone.CLEAR.value
    nonce = ciphertext = None


_INSERT_VALUES = attrgetter(*_INSERT_COLUMNS)
_UPDATE_VALUES = attrgetter(*_UPDATE_COLUMNS, "n")
_EDIT_VALUES = attrgetter(*_EDIT_COLUMNS, "n")


def _grows_beside(row: _Row) -> bool:
    """A person page the user edited, live and resident: distillation writes
    what it learns about that person to a page beside it (see
    `pixie.device.store.notes.kept_up_identity`). Any other note the user
    edited or deleted, a page parked on the Homebase, and an edited page
    beside are simply kept."""
    return bool(
        row.user_edited
        and row.kind == NoteKind.PERSON.value
        and not row.deleted
        and row.body is not None
        and row.holder is None
        and row.identity_key is not None
        and not is_kept_up_identity(row.identity_key)
    )


def _stored_rows(
    conn: sqlite3.Connection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], _Row]:
    """The stored clear rows of these (kind, identity) keys, by key: one
    statement per kind and few hundred identities, on the identity index."""
    by_kind: dict[str, list[str]] = {}
    for kind, identity in dict.fromkeys(keys):
        by_kind.setdefault(kind, []).append(identity)
    found: dict[tuple[str, str], _Row] = {}
    columns = ", ".join(_READ_COLUMNS)
    for kind, identities in by_kind.items():
        for i in range(0, len(identities), _LOOKUP_CHUNK):
            chunk = identities[i : i + _LOOKUP_CHUNK]
            sql = (
                f"SELECT {columns} FROM {_NOTE.name} WHERE zone = 'clear' AND kind = ? "
                f"AND identity_key IN ({', '.join('?' * len(chunk))})"
            )
            for values in conn.execute(sql, (kind, *chunk)):
                row = _Row(*values)
                assert row.identity_key is not None  # it matched one
                found[(row.kind, row.identity_key)] = row
    return found
