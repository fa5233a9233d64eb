"""What distillation reads: a source (a conversation thread, a post, a call,
a journal entry, a calendar entry, mail), its kind and its reference, and
what one pass loaded of it (`Loaded`). No I/O."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pixie.device.distill.contract import (
    SourceKind,
)
from pixie.device.store.notes import (
    MAX_IDENTITY_CHARS,
    NoteKind,
)

if TYPE_CHECKING:
    pass


log = logging.getLogger("pixie.distill")

SCAN_KEY = "*scan"  # the scan watermark's row; no source key starts with '*'
ABOUT_YOU_TITLE = "About you"
EARLIER_SCAN = 5_000  # older new rows of a thread looked at for facts, newest first

# Mail, journal and calendar notes are filed as conversation digests: the
# Notebook has no kind of its own for them (yet), and a digest with a source
# reference is what they are.
DIGEST_KIND = {
    SourceKind.CONVERSATION: NoteKind.CONVERSATION_DIGEST,
    SourceKind.POST: NoteKind.POST_DIGEST,
    SourceKind.CALL: NoteKind.CALL_DIGEST,
    SourceKind.JOURNAL: NoteKind.CONVERSATION_DIGEST,
    SourceKind.CALENDAR: NoteKind.CONVERSATION_DIGEST,
    SourceKind.MAIL: NoteKind.CONVERSATION_DIGEST,
}
_EVENT_KINDS = {"message": SourceKind.CONVERSATION, "post": SourceKind.POST}
_EVENT_KINDS |= {"call": SourceKind.CALL, "voicemail": SourceKind.CALL}
_EVENT_KINDS |= {"journal": SourceKind.JOURNAL, "calendar": SourceKind.CALENDAR}
_EVENT_KINDS |= {"email": SourceKind.MAIL}
SOURCE_ORDER = {kind: i for i, kind in enumerate(SourceKind)}
DISTILLED_KINDS = ("message", "post", "call", "voicemail", "journal", "calendar", "email")
# The log kind a thread's rows have, for the sources read by thread: a chat,
# a mail thread, and every occurrence of a repeating calendar entry.
THREAD_KIND = {
    SourceKind.CONVERSATION: "message",
    SourceKind.MAIL: "email",
    SourceKind.CALENDAR: "calendar",
}


@dataclass(frozen=True, slots=True)
class Source:
    """Where distilled material comes from: a thread (or, for messages filed
    without one, the implicit thread with their contact), or a post, call,
    journal or calendar source id (or, without one, the event itself)."""

    kind: SourceKind
    key: str  # the digest's identity key and its reference back to the source
    thread: str | None = None
    contact_id: str | None = None
    source: str | None = None
    event_id: str | None = None
    # Read again although its watermark covers it: a repeating entry whose
    # next occurrence has passed (`distillreads.due_series`).
    again: bool = False

    @property
    def mark_key(self) -> str:
        return f"{self.kind.value}|{self.key}"


def _ref(prefix: str, value: str) -> str:
    ref = f"{prefix}:{value}"
    if len(ref) <= MAX_IDENTITY_CHARS:
        return ref
    return f"{prefix}-sha256:{hashlib.sha256(value.encode()).hexdigest()}"


def source_of(
    kind: str, event_id: str, thread: str | None, contact_id: str | None, source: str | None
) -> Source | None:
    """The source an event belongs to, or None if it is not distilled."""
    family = _EVENT_KINDS.get(kind)
    if family is SourceKind.CONVERSATION:
        if thread is not None:
            return Source(family, _ref("thread", thread), thread=thread)
        if contact_id is not None:
            return Source(family, f"contact:{contact_id}", contact_id=contact_id)
        return None
    if family is None:
        return None
    if family is SourceKind.MAIL and thread is not None:
        # A mail thread is one digest, however many replies it gathers.
        return Source(family, _ref("mail", thread), thread=thread)
    if family is SourceKind.CALENDAR and thread is not None:
        # Every occurrence of a repeating entry shares its thread: one note
        # for the series, not one per week that would fill a search's places.
        return Source(family, _ref("series", thread), thread=thread)
    if source is not None:
        return Source(family, source[:MAX_IDENTITY_CHARS], source=source)
    return Source(family, f"event:{event_id}", event_id=event_id)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A source's newest events, read in one snapshot with what they need."""

    source: Source
    rows: tuple[tuple[int, str, int, str | None, bool, str], ...]  # n, kind, at, cid, me, text
    newest_n: int  # the newest row of the source, whether or not it is in ``rows``
    names: dict[str, str]  # contact id -> display name
    participants: tuple[str, ...]  # contact ids in the source, ordered by name
    one_to_one: str | None  # the contact, when the source is a thread with one other person
    earlier: tuple[Row, ...] = ()  # older new rows that state a fact, oldest first
    details: tuple[tuple[str, str], ...] = ()  # the one other person's contact card
    occurrences: tuple[int, ...] = ()  # a repeating calendar entry's starts, earliest first
    now: int = 0  # for a repeating entry: when the pass read it
    # For a thread longer than one request: each month with new messages and
    # its newest messages, oldest first (see `month_items`).
    months: tuple[tuple[str, tuple[Row, ...]], ...] = ()


def count_phrase(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


NOT_FOR_MODELS = frozenset({"phone", "email", "address"})

Row = tuple[int, str, int, str | None, bool, str]
