"""The Notebook's shapes as code sees them: kinds, zones, clear notes, and the
rules their fields follow. The table itself (`notetable`) is apart, so that
a reader without the database layer (the quick `pixie notebook search`)
can use all of this.

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

from pixie.device.errors import BadInput
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


STAMP_ORIGIN_AT = 23  # a stamp is "%015d.%06d.origin": the origin starts here


def identity_note_id(kind: str, identity: str) -> str:
    """The id of the note with this identity, the same on every replica, so two
    devices that distil the same person page make one note, not two."""
    raw = bytearray(hashlib.sha256(f"pixie-note\x00{kind}\x00{identity}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80  # UUID version 8: custom
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return id_text(bytes(raw))


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


def sealed_hash(nonce: bytes, ciphertext: bytes) -> str:
    """A sealed version's content hash: of what the row stores, never of plaintext."""
    digest = hashlib.sha256(nonce)
    digest.update(ciphertext)
    return digest.hexdigest()
