"""Checking and writing what a sibling sent: events checked whole before any is
written, notes checked and merged by version order (a body held by the
Homebase or resident here), the digest moved in the same transaction."""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy.orm import Session

from pixie.device.errors import BadInput
from pixie.device.store.holdings import RELEASE_LATER_SQL
from pixie.device.store.memlog import (
    MAX_REF_CHARS,
    MAX_TEXT_CHARS,
    TOP_SEQ_SQL,
    check_ref,
    check_text,
    parse_kind,
)
from pixie.device.store.notes import (
    NoteKind,
    Zone,
    clean_tags,
    content_hash,
    sealed_hash,
    tags_json,
)
from pixie.device.store.replicarows import _HELD_COLUMNS, _HOLDING_BODY_SQL
from pixie.protocol.clock import Clock
from pixie.protocol.digest import (
    note_item,
)
from pixie.protocol.hlc import Stamp
from pixie.protocol.syncmessages import EventColumns, NoteVersion


def _held_seq(session: Session, origin: str) -> int:
    """The highest sequence number of ``origin`` this replica holds (0 for
    none), read on the session's driver connection inside its transaction;
    what the session has pending is flushed first, as an ORM read would."""
    if session.autoflush:
        session.flush()
    cursor = session.connection().connection.cursor()
    try:
        row = cursor.execute(TOP_SEQ_SQL, (origin,)).fetchone()
    finally:
        cursor.close()
    return int(row[0] or 0) if row else 0


def _check_events(events: EventColumns) -> None:
    """What the log demands of an event (`parse_kind`, `check_ref`, `check_text`),
    of a whole batch at once: over the distinct values of a column where values
    repeat, over the column in one pass where they do not. Raises BadInput (or
    ProtocolError for an id that is not one)."""
    events.id_bytes()
    for kind in set(events.kinds):
        parse_kind(kind)
    for thread in set(events.threads):
        check_ref(thread, "thread")
    sources = events.sources
    if not _all_refs(sources):
        for source in sources:
            check_ref(source, "source")
    texts = events.texts
    if not _all_texts(texts):
        for text in texts:
            check_text(text)


def _all_refs(values: Sequence[str | None]) -> bool:
    """Whether every value passes `check_ref`, without a call per value."""
    try:
        present = [v for v in values if v is not None]
        joined = "".join(present)
    except TypeError:
        return False
    return (
        all(map(str.strip, present))
        and max(map(len, present), default=0) <= MAX_REF_CHARS
        and not ("\n" in joined or "\r" in joined or "\x00" in joined)
    )


def _all_texts(texts: Sequence[str]) -> bool:
    """Whether every text passes `check_text`, without a call per text."""
    try:
        joined = "".join(texts)
    except TypeError:
        return False
    return (
        all(map(str.strip, texts))
        and max(map(len, texts), default=0) <= MAX_TEXT_CHARS
        and "\x00" not in joined
    )


def _checked_note(n: NoteVersion) -> NoteVersion:
    if n.clear is not None:
        try:
            NoteKind(n.clear.kind)
        except ValueError:
            raise BadInput(f"unknown note kind {n.clear.kind!r:.40}") from None
        if clean_tags(list(n.clear.tags)) != n.clear.tags:
            raise BadInput("note tags are not in their stored form")
        if n.clear.body is not None and content_hash(n.clear.body) != n.content_hash:
            raise BadInput(f"note {n.id}: the body does not match its content hash")
    elif sealed_hash(n.nonce or b"", n.ciphertext or b"") != n.content_hash:
        raise BadInput(f"sealed note {n.id}: the ciphertext does not match its hash")
    return n


class _Body(enum.Enum):
    NOWHERE = "no body to be had for this version"
    PARKED = "the row's own parked body is this version's"


_NOWHERE, _KEEP_PARKED = _Body.NOWHERE, _Body.PARKED


class _Held:
    """A stored note as the merge reads and writes it (`_HELD_COLUMNS`)."""

    __slots__ = _HELD_COLUMNS

    def __init__(
        self,
        n: int,
        id: str,
        zone: str,
        updated_at: str,
        content_hash: str,
        user_edited: bool | int,
        deleted: bool | int,
        body: str | None,
        holder: str | None,
    ) -> None:
        self.n, self.id, self.zone = n, id, zone
        self.updated_at, self.content_hash = updated_at, content_hash
        self.user_edited, self.deleted = user_edited, deleted
        self.body, self.holder = body, holder

    def item(self) -> bytes:
        """The state digest's item of this version (`statedigest.note_version`)."""
        return note_item(
            self.id, self.updated_at, self.content_hash, bool(self.user_edited), bool(self.deleted)
        )


def _resident_body(
    conn: sqlite3.Connection, v: NoteVersion, row: _Held | None
) -> str | _Body | None:
    """The body to store for version ``v`` (None for a sealed note), or one of
    the two markers above. A version that came without its body takes the one
    this replica already has under the same hash."""
    if v.clear is None:
        return None
    if v.clear.body is not None:
        return v.clear.body
    if row is not None and row.content_hash == v.content_hash:
        if row.body is not None:
            return row.body
        if row.holder is not None:
            return _KEEP_PARKED
    found = conn.execute(_HOLDING_BODY_SQL, (v.id, v.content_hash)).fetchone()
    if found is not None and found[0] is not None:
        body = bytes(found[0]).decode("utf-8", errors="replace")
        if content_hash(body) == v.content_hash:
            return body
    return _NOWHERE


def _write(
    conn: sqlite3.Connection,
    row: _Held | None,
    v: NoteVersion,
    body: str | _Body | None,
    clock: Clock,
) -> _Held:
    """Store version ``v`` over ``row`` (or as a new row), and return the row
    as it now stands. What it sets is what a version carries; a body kept
    parked (`_KEEP_PARKED`) keeps the row's body column and holder."""
    holder = None if row is None else row.holder
    if v.clear is not None and body is not _KEEP_PARKED and holder is not None:
        # A newer version with a body of its own makes the note resident here;
        # the holding the row pointed at is released on this device's word,
        # the release dated by ``clock``.
        assert row is not None
        conn.execute(RELEASE_LATER_SQL, (row.id, row.content_hash, holder, clock.now_us()))
        holder = None
    stored_body = None if row is None else row.body
    columns: dict[str, Any] = {
        "updated_at": v.stamp,
        "content_hash": v.content_hash,
        "user_edited": v.user_edited,
        "deleted": v.deleted,
        "holder": holder,
    }
    if v.clear is None:
        columns.update(zone=Zone.SEALED.value, nonce=v.nonce, ciphertext=v.ciphertext)
    else:
        c = v.clear
        if not isinstance(body, _Body):
            stored_body = body
        columns.update(
            zone=Zone.CLEAR.value,
            kind=c.kind,
            identity_key=c.identity_key,
            title=c.title,
            body=stored_body,
            contact_id=c.contact_id,
            tags=tags_json(c.tags),
            source_ref=c.source_ref,
            about_date=c.about_date,
            created_at=c.created_at,
            updated_wall=Stamp.decode(v.stamp).wall_ms * 1000,
        )
    names = list(columns)
    if row is None:
        cursor = conn.execute(
            f"INSERT INTO note (id, {', '.join(names)}) "
            f"VALUES ({', '.join('?' * (len(names) + 1))})",
            (v.id, *columns.values()),
        )
        n = cast(int, cursor.lastrowid)
    else:
        n = row.n
        conn.execute(
            f"UPDATE note SET {', '.join(f'{name} = ?' for name in names)} WHERE n = ?",
            (*columns.values(), n),
        )
    return _Held(
        n,
        v.id,
        columns["zone"],
        v.stamp,
        v.content_hash,
        v.user_edited,
        v.deleted,
        stored_body,
        holder,
    )
