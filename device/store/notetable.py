"""The Notebook's tables: one for notes (two zones), their tags, the note
marks, and their full-text index and triggers. The shapes code sees notes
in, and the rules for their fields, are in `notes`.

A sealed row holds only what sync needs to order and compare versions (id,
zone, clock stamp, tombstone flag and a hash of the ciphertext) and the
ciphertext itself; CHECK constraints make the database refuse a sealed row
that carries any readable field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import CheckConstraint, Index, LargeBinary, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.store.db import Base
from pixie.device.store.notes import (
    CLEAR_COLUMNS,
    MAX_IDENTITY_CHARS,
    MAX_TAG_CHARS,
    MAX_TITLE_CHARS,
    STAMP_ORIGIN_AT,
    ClearNote,
    Zone,
    clear_note_from_columns,
)


class Note(Base):
    __tablename__ = "note"

    # Local row number: the full-text index keys on it. Never synced.
    n: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    zone: Mapped[str] = mapped_column(String(8))
    # An HLC stamp, text-sortable. Indexed: every write reads the newest stamp,
    # and listings sort by it.
    updated_at: Mapped[str] = mapped_column(String(90), index=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    deleted: Mapped[bool] = mapped_column(default=False)
    user_edited: Mapped[bool] = mapped_column(default=False)
    # Clear zone only (NULL on sealed rows):
    kind: Mapped[str | None] = mapped_column(String(24))
    identity_key: Mapped[str | None] = mapped_column(String(MAX_IDENTITY_CHARS))
    title: Mapped[str | None] = mapped_column(String(MAX_TITLE_CHARS))
    body: Mapped[str | None] = mapped_column(Text)
    contact_id: Mapped[str | None] = mapped_column(String(32))
    tags: Mapped[str | None] = mapped_column(String(1024))  # JSON array of strings
    source_ref: Mapped[str | None] = mapped_column(String(MAX_IDENTITY_CHARS))
    about_date: Mapped[int | None]  # microseconds UTC
    created_at: Mapped[int | None]
    updated_wall: Mapped[int | None]  # the stamp's wall time in microseconds, for date filters
    # Sealed zone only: AES-GCM's nonce and ciphertext (with its tag), in two
    # columns so that neither sealing nor opening copies the ciphertext.
    nonce: Mapped[bytes | None] = mapped_column(LargeBinary)
    ciphertext: Mapped[bytes | None] = mapped_column(LargeBinary)
    # Residency, per replica and never synced or hashed: set while the body is
    # parked with a holder (its public key, hex); the body column is then NULL
    # and content_hash is the hash the holder acknowledged.
    holder: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        CheckConstraint("zone IN ('clear', 'sealed')", name="ck_note_zone"),
        CheckConstraint(
            "(zone = 'clear' AND nonce IS NULL AND ciphertext IS NULL"
            " AND kind IS NOT NULL AND title IS NOT NULL"
            " AND created_at IS NOT NULL AND updated_wall IS NOT NULL)"
            " OR (zone = 'sealed' AND length(nonce) = 12 AND ciphertext IS NOT NULL"
            " AND kind IS NULL"
            " AND identity_key IS NULL AND title IS NULL AND body IS NULL AND contact_id IS NULL"
            " AND tags IS NULL AND source_ref IS NULL AND about_date IS NULL"
            " AND created_at IS NULL AND updated_wall IS NULL AND user_edited = 0"
            " AND holder IS NULL)",
            name="ck_note_sealed_rows_hold_nothing_readable",
        ),
        # A clear note's body is resident or parked with a holder, never neither.
        CheckConstraint(
            "zone = 'sealed' OR (body IS NULL) = (holder IS NOT NULL)",
            name="ck_note_body_resident_or_held",
        ),
        # "Everything about Ada, newest first" reads this index in order.
        Index("ix_note_contact_updated", "contact_id", "updated_at"),
        # One distilled note per identity (a person page per contact, a digest
        # per source, the about_you singleton, guidance by title). Tombstones
        # keep their identity so a deleted note is not silently re-created.
        Index(
            "uq_note_identity",
            "kind",
            "identity_key",
            unique=True,
            sqlite_where=text("zone = 'clear' AND identity_key IS NOT NULL"),
        ),
    )


class NoteTag(Base):
    """Tags of clear notes, one row each, for the topic filter. Kept by triggers."""

    __tablename__ = "note_tag"

    note_n: Mapped[int] = mapped_column(primary_key=True)
    tag: Mapped[str] = mapped_column(String(MAX_TAG_CHARS), primary_key=True, index=True)


class NoteMark(Base):
    """Per origin, the newest note stamp of that origin this replica has seen
    (written here or merged from a sibling, whether or not it won the merge).
    Sync sends a sibling the versions newer than its marks. Never synced."""

    __tablename__ = "note_mark"

    origin: Mapped[str] = mapped_column(String(64), primary_key=True)
    stamp: Mapped[str] = mapped_column(String(90))


class NoteMeaning(Base):
    __tablename__ = "note_meaning"

    note_n: Mapped[int] = mapped_column(primary_key=True)  # note.n
    updated_at: Mapped[str] = mapped_column(String(90))  # the note's stamp when embedded
    model: Mapped[str] = mapped_column(String(64))
    vec: Mapped[bytes] = mapped_column(LargeBinary)


_MARK_SQL = (
    "INSERT INTO note_mark (origin, stamp) VALUES (?, ?) "
    "ON CONFLICT (origin) DO UPDATE SET stamp = max(stamp, excluded.stamp)"
)


def record_marks(session: Any, stamps: Sequence[str]) -> None:
    """Move the note marks up to cover ``stamps`` (inside the caller's transaction)."""
    newest: dict[str, str] = {}
    for stamp in stamps:
        origin = stamp[STAMP_ORIGIN_AT:]
        if stamp > newest.get(origin, ""):
            newest[origin] = stamp
    if newest:
        session.connection().exec_driver_sql(_MARK_SQL, list(newest.items()))


SERIES_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS ix_note_series_due ON note (about_date) "
    "WHERE kind = 'conversation_digest' AND source_ref LIKE 'series:%'"
)
# The full-text index covers live clear notes only, and triggers keep it (and
# the tag table) exact whatever path writes a note. Sealed rows never enter it.
NOTEBOOK_DDL = (
    # check_notebook's date window, answered from the index alone.
    """CREATE INDEX IF NOT EXISTS ix_note_effective_date
       ON note (coalesce(about_date, updated_wall)) WHERE zone = 'clear' AND deleted = 0""",
    # The repeating entries whose next occurrence has passed, which every
    # daemon poll asks after: the series notes alone, by the day they are about.
    SERIES_INDEX_DDL,
    """CREATE VIRTUAL TABLE IF NOT EXISTS note_fts USING fts5(
           title, tags, body, tokenize = 'unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER IF NOT EXISTS note_index_insert AFTER INSERT ON note
       WHEN new.zone = 'clear' AND new.deleted = 0 BEGIN
         INSERT INTO note_fts(rowid, title, tags, body)
           VALUES (new.n, new.title, coalesce(new.tags, ''), coalesce(new.body, ''));
         INSERT INTO note_tag(note_n, tag) SELECT new.n, value FROM json_each(new.tags);
       END""",
    """CREATE TRIGGER IF NOT EXISTS note_index_delete AFTER DELETE ON note BEGIN
         DELETE FROM note_fts WHERE rowid = old.n;
         DELETE FROM note_tag WHERE note_n = old.n;
       END""",
    """CREATE TRIGGER IF NOT EXISTS note_index_update AFTER UPDATE ON note BEGIN
         DELETE FROM note_fts WHERE rowid = old.n;
         DELETE FROM note_tag WHERE note_n = old.n;
         INSERT INTO note_fts(rowid, title, tags, body)
           SELECT new.n, new.title, coalesce(new.tags, ''), coalesce(new.body, '')
           WHERE new.zone = 'clear' AND new.deleted = 0;
         INSERT INTO note_tag(note_n, tag) SELECT new.n, value FROM json_each(new.tags)
           WHERE new.zone = 'clear' AND new.deleted = 0;
       END""",
)


def to_clear_note(row: Note) -> ClearNote:
    if row.zone != Zone.CLEAR or row.kind is None or row.title is None:
        raise AssertionError("to_clear_note called on a row that is not clear")
    return clear_note_from_columns([getattr(row, name) for name in CLEAR_COLUMNS])
