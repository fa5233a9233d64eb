"""The Notebook's rows: one table, two zones, and the shapes code sees them in.

A clear note is readable and editable by its owner. A sealed note is the
agent's private workspace: its row holds only what sync needs to order and
compare versions (id, zone, clock stamp, tombstone flag and a hash of the
ciphertext) and the ciphertext itself; kind, title, body, contact, tags and
dates all live inside the ciphertext. CHECK constraints make the database
refuse a sealed row that carries any readable field.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import CheckConstraint, Index, LargeBinary, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.errors import BadInput
from pixie.device.store.db import Base
from pixie.protocol.hlc import Stamp
from pixie.protocol.ids import id_text
from pixie.protocol.validate import has_lone_surrogate

MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 32_768
MAX_TAGS = 16
MAX_TAG_CHARS = 40
MAX_IDENTITY_CHARS = 200


class Zone(enum.StrEnum):
    CLEAR = "clear"
    SEALED = "sealed"


class NoteKind(enum.StrEnum):
    PERSON = "person"
    ABOUT_YOU = "about_you"
    GUIDANCE = "guidance"
    CONVERSATION_DIGEST = "conversation_digest"
    POST_DIGEST = "post_digest"
    CALL_DIGEST = "call_digest"
    SPARKED = "sparked"


class SealedKind(enum.StrEnum):
    """What the sealed zone holds: the agent's huddle workspace."""

    HUDDLE_PREP = "huddle_prep"
    HUDDLE_TAKEAWAY = "huddle_takeaway"
    FROM_OTHER_AGENTS = "from_other_agents"


ABOUT_YOU_KEY = "about_you"


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


STAMP_ORIGIN_AT = 23  # a stamp is "%015d.%06d.origin": the origin starts here
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


def identity_note_id(kind: str, identity: str) -> str:
    """The id of the note with this identity, the same on every replica, so two
    devices that distil the same person page make one note, not two."""
    raw = bytearray(hashlib.sha256(f"pixie-note\x00{kind}\x00{identity}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80  # UUID version 8: custom
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return id_text(bytes(raw))


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


@dataclass(frozen=True, slots=True)
class ClearNote:
    """A clear-zone note as the UI, the CLI and check_notebook see it."""

    id: str
    kind: NoteKind
    identity_key: str | None
    title: str
    body: str | None  # None once offloaded to the Homebase
    contact_id: str | None
    tags: tuple[str, ...]
    source_ref: str | None
    about_date: int | None
    created_at: int
    updated_at: Stamp
    user_edited: bool
    content_hash: str
    deleted: bool

    @property
    def effective_date(self) -> int:
        """The date the note is about, falling back to when it last changed."""
        return self.about_date if self.about_date is not None else self.updated_at.wall_ms * 1000

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "title": self.title,
            "body": self.body,
            "contact_id": self.contact_id,
            "tags": list(self.tags),
            "source": self.source_ref,
            "about_date": self.about_date,
            "created_at": self.created_at,
            "updated_at": self.updated_at.encode(),
            "user_edited": self.user_edited,
            "content_hash": self.content_hash,
        }


def to_clear_note(row: Note) -> ClearNote:
    if row.zone != Zone.CLEAR or row.kind is None or row.title is None:
        raise AssertionError("to_clear_note called on a row that is not clear")
    return clear_note_from_columns([getattr(row, name) for name in CLEAR_COLUMNS])


class ClearColumns(NamedTuple):
    """A clear row's values as stored, by column name: what a ClearNote is made
    of. `CLEAR_COLUMNS` (the select lists) are these names, in this order."""

    id: str
    kind: str
    identity_key: str | None
    title: str
    body: str | None
    contact_id: str | None
    tags: str | None  # as `tags_json` stores them
    source_ref: str | None
    about_date: int | None
    created_at: int | None
    updated_at: str  # an encoded stamp
    user_edited: bool | int  # 0/1 straight from the driver
    content_hash: str
    deleted: bool | int


CLEAR_COLUMNS: tuple[str, ...] = ClearColumns._fields


def clear_note_from_columns(values: Sequence[Any]) -> ClearNote:
    """A ClearNote from a clear row's values in `CLEAR_COLUMNS` order."""
    r = ClearColumns._make(values)
    return ClearNote(
        id=r.id,
        kind=NoteKind(r.kind),
        identity_key=r.identity_key,
        title=r.title,
        body=r.body,
        contact_id=r.contact_id,
        tags=tuple(json.loads(r.tags)) if r.tags else (),
        source_ref=r.source_ref,
        about_date=r.about_date,
        created_at=r.created_at or 0,
        updated_at=Stamp.decode(r.updated_at),
        user_edited=bool(r.user_edited),
        content_hash=r.content_hash,
        deleted=bool(r.deleted),
    )


def content_hash(body: str) -> str:
    """SHA-256 of a body's canonical bytes (NFC-normalised UTF-8, as stored)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def clean_text(value: object, what: str, limit: int, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string")
    value = unicodedata.normalize("NFC", value).strip()
    if not value and not allow_empty:
        raise BadInput(f"{what} is empty")
    if len(value) > limit:
        raise BadInput(f"{what} is longer than {limit} characters")
    if "\x00" in value:
        raise BadInput(f"{what} contains a NUL character")
    if has_lone_surrogate(value):
        # No character at all (a JSON escape or an argument that is not
        # UTF-8 makes one), and SQLite cannot store it.
        raise BadInput(f"{what} is not valid Unicode (a lone surrogate)")
    return value


def clean_title(value: object) -> str:
    title = clean_text(value, "title", MAX_TITLE_CHARS)
    if "\n" in title or "\r" in title:
        raise BadInput("title must be one line")
    return title


_TAG = re.compile(r"[^\W_][\w\- ]*", re.UNICODE)


def clean_tags(values: object) -> tuple[str, ...]:
    """Tags are short lowercase topics; duplicates collapse, order is kept."""
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise BadInput("tags must be a list of strings")
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise BadInput("tags must be a list of strings")
        tag = _clean_tag(value)
        if tag is None:
            raise BadInput(
                f"bad tag {value!r:.50}: use letters, digits, spaces or '-', "
                f"at most {MAX_TAG_CHARS} characters"
            )
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise BadInput(f"at most {MAX_TAGS} tags")
    return tuple(out)


def _tag_of(value: str) -> str | None:
    """One tag as `clean_tags` keeps it, or None if it is not a tag."""
    tag = " ".join(unicodedata.normalize("NFC", value).casefold().split())
    if not tag or len(tag) > MAX_TAG_CHARS or not _TAG.fullmatch(tag):
        return None
    return tag


# A Notebook has few distinct tags, written again and again: the answer for
# each short one is remembered (bounded in count and size).
_remembered_tag = functools.lru_cache(maxsize=4096)(_tag_of)


def _clean_tag(value: str) -> str | None:
    return _remembered_tag(value) if len(value) <= 4 * MAX_TAG_CHARS else _tag_of(value)


def tags_json(tags: tuple[str, ...]) -> str | None:
    """How tags are stored: a JSON array, or NULL for none (one form only, so
    comparing stored and new tags never sees a difference that is not there)."""
    return json.dumps(list(tags), ensure_ascii=False) if tags else None


# -- a person page the user edited ---------------------------------------------------
#
# A person page the user has edited is theirs: distillation never writes to it
# again (so a user's edit always beats a distillation that had not seen it, on
# any sibling, by the merge order alone). What distillation learns about that
# person afterwards goes to a page of its own beside it, "<name> · kept up to
# date by Pixie": same person, same contact link, the lines the user's page
# does not already say, rewritten on every pass like any distilled note.
KEPT_UP_SUFFIX = "#pixie"
KEPT_UP_TITLE = " · kept up to date by Pixie"


def kept_up_identity(identity: str) -> str:
    """The identity of distillation's own page beside an edited person page."""
    return identity + KEPT_UP_SUFFIX


def is_kept_up_identity(identity: str | None) -> bool:
    return identity is not None and identity.endswith(KEPT_UP_SUFFIX)


def kept_up_title(title: str) -> str:
    room = MAX_TITLE_CHARS - len(KEPT_UP_TITLE)
    return (title if len(title) <= room else title[: room - 1].rstrip() + "…") + KEPT_UP_TITLE


def _said(line: str) -> str:
    line = line.strip()
    if line.startswith(("- ", "* ")):
        line = line[2:]
    return " ".join(line.split()).casefold()


def unsaid(mine: str, distilled: str) -> str:
    """The lines of ``distilled`` that ``mine`` (the user's page) does not
    already say, case and spacing aside. A line over a list is its heading,
    kept only over a list line that is kept; any other line is kept unless
    already said. "" when nothing is left."""
    said = {_said(line) for line in mine.splitlines()}
    lines = [raw.rstrip() for raw in distilled.splitlines() if raw.strip()]
    listed = [line.lstrip().startswith(("- ", "* ")) for line in lines]
    kept: list[str] = []
    heading: str | None = None
    for i, line in enumerate(lines):
        if not listed[i]:
            heading = None
            if i + 1 < len(lines) and listed[i + 1]:
                heading = line  # shown only over a line of its list that is
            elif _said(line) not in said:
                kept.append(line)
            continue
        if _said(line) in said:
            continue
        if heading is not None:
            kept.append(heading)
            heading = None
        kept.append(line)
    return "\n".join(kept)


LABELS = {
    NoteKind.PERSON: "Person",
    NoteKind.ABOUT_YOU: "About you",
    NoteKind.GUIDANCE: "Guidance",
    NoteKind.CONVERSATION_DIGEST: "Conversation",
    NoteKind.POST_DIGEST: "Post",
    NoteKind.CALL_DIGEST: "Call",
    NoteKind.SPARKED: "Sparked by the user (remember this)",
}
