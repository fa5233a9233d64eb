"""The clear zone's store: every read and write of clear notes, and no key.

`ClearNotebookStore` is what chat, MCP, distillation and any page showing the
Notebook are given. It cannot open the sealed zone: it holds no key store and
imports neither the seal nor the sealed module, and the import contracts in
pyproject.toml keep it that way. `NotebookStore` (in `store.py`) adds the
sealed side on top of it for the few callers that hold the keys.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.clearrows import (
    _CONTACT_NAME_SQL,
    _EDIT_SQL,
    _EDIT_VALUES,
    _INSERT_SQL,
    _LIVE_ROW_SQL,
    _PIN_SOURCE_SQL,
    _UPDATE_SQL,
    _grows_beside,
    _Row,
    _stored_rows,
)
from pixie.device.notebook.clearview import ClearNotebook, ScoredNote
from pixie.device.notebook.versions import NoteStamper, versioned
from pixie.device.store import statedigest
from pixie.device.store.db import Database, driver_of
from pixie.device.store.holdings import RELEASE_LATER_SQL, make_resident
from pixie.device.store.memlog import EventKind, MemoryLog, NewEvent
from pixie.device.store.notes import (
    ABOUT_YOU_KEY,
    MAX_BODY_CHARS,
    MAX_IDENTITY_CHARS,
    ClearNote,
    NoteKind,
    Zone,
    clean_tags,
    clean_text,
    clean_title,
    content_hash,
    identity_note_id,
    kept_up_identity,
    kept_up_title,
    tags_json,
    unsaid,
)
from pixie.device.store.notetable import Note, record_marks
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.hlc import Stamp
from pixie.protocol.ids import IdMinter, minter_for

_CONTACT_ID = re.compile(r"[0-9a-f]{32}")
PIN_TITLE_CHARS = 80


class UpsertOutcome(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"  # identical content: nothing written, clock untouched
    KEPT_USER_EDIT = "kept_user_edit"  # the user's version wins


@dataclass(frozen=True, slots=True)
class Distilled:
    """One clear note as distillation produces it, keyed by its identity."""

    kind: NoteKind
    identity_key: str
    title: str
    body: str
    contact_id: str | None = None
    tags: tuple[str, ...] = ()
    source_ref: str | None = None
    about_date: int | None = None


@dataclass(frozen=True, slots=True)
class UpsertResult:
    note_id: str
    outcome: UpsertOutcome


# An item as `_clean_distilled` passes it on: the item, then its cleaned title,
# body and tags, and its identity.
_Cleaned = tuple[Distilled, str, str, tuple[str, ...], str]


def identity_for(kind: NoteKind, identity_key: str | None, title: str) -> str | None:
    """The identity a clear note is upserted by, normalised per kind."""
    if kind is NoteKind.ABOUT_YOU:
        return ABOUT_YOU_KEY
    if kind is NoteKind.GUIDANCE:
        return " ".join(title.casefold().split())
    if kind is NoteKind.SPARKED:
        return None  # pins accumulate: every pin is a new note
    if not identity_key:
        raise BadInput(f"a {kind.value} note needs an identity key")
    return clean_text(identity_key, "identity key", 200)


class ClearNotebookStore:
    """The clear zone: the read API for tools and displays, and every clear write.

    ``clock`` dates pins and, unless ``wall`` (milliseconds) is given, stamps
    every version; new note ids come from ``ids`` (by default the minter for
    ``clock`` and ``entropy``). ``settings`` is the data dir's config file,
    whose ``[search] meaning`` can turn search by meaning off.
    """

    def __init__(
        self,
        db: Database,
        origin: str,
        log: MemoryLog,
        *,
        wall: Callable[[], int] | None = None,
        stamper: NoteStamper | None = None,
        clock: Clock | None = None,
        entropy: Entropy = SYSTEM_ENTROPY,
        ids: IdMinter | None = None,
        settings: Path | None = None,
    ) -> None:
        self._db = db
        self._origin = origin
        self._log = log
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._entropy = entropy
        self._ids = ids if ids is not None else minter_for(self._clock, entropy)
        self._stamper = stamper or NoteStamper(origin, wall, clock=self._clock)
        self._clear = ClearNotebook(db, settings=settings)

    @property
    def database(self) -> Database:
        return self._db

    # -- the clear read API ----------------------------------------------------

    def clear_view(self) -> ClearNotebook:
        """The clear zone alone, holding no key: what tools and displays are given."""
        return self._clear

    def clear_notes(self, kind: NoteKind | None = None) -> list[ClearNote]:
        return self._clear.clear_notes(kind)

    def search_clear(
        self,
        query: str = "",
        contact_id: str | None = None,
        topic: str | None = None,
        since: int | None = None,
        until: int | None = None,
    ) -> list[ScoredNote]:
        return self._clear.search_clear(query, contact_id, topic, since, until)

    # -- clear writes ------------------------------------------------------------

    def upsert_clear(self, item: Distilled) -> UpsertResult:
        """Create or update a distilled note in place, by its identity.

        Two guards: a note the user has edited (or deleted) is never
        overwritten, and identical content is a true no-op. The second matters
        for sync: the stamp is part of the state digest two peers compare, and
        re-stamping unchanged notes on every pass would make converged peers
        look different forever.
        """
        (result,) = self.upsert_many([item])
        return result

    def upsert_many(self, items: Sequence[Distilled]) -> list[UpsertResult]:
        """`upsert_clear` for a batch, in one durable transaction: all or nothing."""
        cleaned = [self._clean_distilled(item) for item in items]
        with self._db.writing() as session:
            return self._upsert_batch(session, cleaned)

    def upsert_with(
        self,
        build: Callable[[Session], Sequence[Distilled]],
        then: Callable[[Session, Sequence[UpsertResult]], None],
    ) -> list[UpsertResult]:
        """`upsert_many` for the items ``build`` makes from what is stored, read
        in the same transaction, with ``then`` run before it commits.

        Distillation needs both: the about_you merge starts from the stored
        note (read under the write lock, so no concurrent write is lost), and a
        source's watermark must commit together with the notes derived from it.
        """
        with self._db.writing() as session:
            cleaned = [self._clean_distilled(item) for item in build(session)]
            results = self._upsert_batch(session, cleaned)
            then(session, results)
            return results

    @staticmethod
    def _clean_distilled(item: Distilled) -> _Cleaned:
        if item.kind is NoteKind.SPARKED:
            raise BadInput("pins are created with pin_spark, not upserted")
        title = clean_title(item.title)
        body = clean_text(item.body, "body", MAX_BODY_CHARS)
        tags = clean_tags(item.tags)
        # What a sibling would refuse must not be written here either: a note
        # that cannot sync would stay behind on one side for good.
        if item.contact_id is not None and not _CONTACT_ID.fullmatch(item.contact_id):
            raise BadInput(f"contact id {item.contact_id!r:.40} is not a contact's id")
        if item.source_ref is not None and (
            len(item.source_ref) > MAX_IDENTITY_CHARS or not item.source_ref.strip()
        ):
            raise BadInput(f"a source reference is 1 to {MAX_IDENTITY_CHARS} characters")
        identity = identity_for(item.kind, item.identity_key, title)
        assert identity is not None  # only pins have none
        return item, title, body, tags, identity

    def _upsert_batch(self, session: Session, cleaned: Sequence[_Cleaned]) -> list[UpsertResult]:
        """Upsert ``cleaned`` in order, inside ``session``'s transaction, through
        the driver: one lookup of the stored rows per few hundred identities,
        then each item decided in order against the rows as the items before it
        left them (so an identity twice in a batch behaves as two upserts), and
        the rows written with one ``executemany`` for the new ones and one for
        the changed ones, the state digest and the note marks moved once."""
        if not cleaned:
            return []
        conn = driver_of(session, flush=True)
        stored = _stored_rows(conn, [(c[0].kind.value, c[4]) for c in cleaned])
        created: dict[tuple[str, str], _Row] = {}
        changed: dict[int, _Row] = {}
        releases: list[tuple[str, str, str, int]] = []
        added: list[bytes] = []
        removed: list[bytes] = []
        results: list[UpsertResult] = []
        for item, item_title, item_body, tags, item_identity in cleaned:
            title, body, identity = item_title, item_body, item_identity
            contact = item.contact_id
            key = (item.kind.value, identity)
            row = stored.get(key)
            if row is not None and _grows_beside(row):
                # The user's page stays exactly theirs; what it does not say
                # goes to distillation's own page beside it.
                assert row.body is not None
                body = unsaid(row.body, body)
                if not body:
                    results.append(UpsertResult(row.id, UpsertOutcome.KEPT_USER_EDIT))
                    continue
                identity, title = kept_up_identity(identity), kept_up_title(title)
                contact = contact or row.contact_id  # the same person's page
                key = (item.kind.value, identity)
                if key not in stored:
                    stored.update(_stored_rows(conn, [key]))
                row = stored.get(key)
            if row is None:
                stamp = self._stamp(session)
                wall = stamp.wall_ms * 1000
                row = _Row(
                    n=None,
                    id=identity_note_id(item.kind.value, identity),
                    kind=item.kind.value,
                    identity_key=identity,
                    title=title,
                    body=body,
                    content_hash=content_hash(body),
                    tags=tags_json(tags),
                    contact_id=contact,
                    source_ref=item.source_ref,
                    about_date=item.about_date,
                    user_edited=False,
                    deleted=False,
                    holder=None,
                    updated_at=stamp.encode(),
                    created_at=wall,
                    updated_wall=wall,
                )
                stored[key] = created[key] = row
                added.append(row.version())
                results.append(UpsertResult(row.id, UpsertOutcome.CREATED))
                continue
            if row.user_edited:  # theirs: never written by distillation
                results.append(UpsertResult(row.id, UpsertOutcome.KEPT_USER_EDIT))
                continue
            new_title, new_body, tags_text = title, body, tags_json(tags)
            contact_id, source_ref = contact, item.source_ref
            about_date = item.about_date
            same = (
                row.title == title
                and (
                    row.body == body
                    if row.holder is None
                    else row.content_hash == content_hash(body)
                )
                and row.tags == tags_text
                and row.contact_id == contact_id
                and row.source_ref == source_ref
                and row.about_date == about_date
            )
            if same:
                results.append(UpsertResult(row.id, UpsertOutcome.UNCHANGED))
                continue
            removed.append(row.version())
            stamp = self._stamp(session)
            if row.holder is not None:  # a new version makes the body resident again
                releases.append((row.id, row.content_hash, row.holder, self._clock.now_us()))
                row.holder = None
            row.title, row.tags = new_title, tags_text
            row.body, row.content_hash = new_body, content_hash(new_body)
            row.contact_id, row.source_ref, row.about_date = contact_id, source_ref, about_date
            row.updated_at, row.updated_wall = stamp.encode(), stamp.wall_ms * 1000
            added.append(row.version())
            if row.n is not None:
                changed[row.n] = row
            results.append(UpsertResult(row.id, UpsertOutcome.UPDATED))
        if releases:
            conn.executemany(RELEASE_LATER_SQL, releases)
        if created:
            conn.executemany(_INSERT_SQL, [row.insert_values() for row in created.values()])
        if changed:
            conn.executemany(_UPDATE_SQL, [row.update_values() for row in changed.values()])
        if added or removed:
            statedigest.update(session, add=added, remove=removed)
            record_marks(session, [r.updated_at for r in (*created.values(), *changed.values())])
        return results

    def add_user_note(self, kind: NoteKind, title: str, body: str, tags: Sequence[str] = ()) -> str:
        """The user writes a guidance or about_you note; it is theirs from the start."""
        if kind not in (NoteKind.GUIDANCE, NoteKind.ABOUT_YOU):
            raise BadInput("only guidance and about_you notes are added by hand")
        title = clean_title(title)
        body = clean_text(body, "body", MAX_BODY_CHARS)
        clean = clean_tags(list(tags))
        identity = identity_for(kind, None, title)
        with self._db.writing() as session:
            existing = session.scalar(
                select(Note).where(
                    Note.zone == Zone.CLEAR.value,
                    Note.kind == kind.value,
                    Note.identity_key == identity,
                )
            )
            if existing is not None and not existing.deleted:
                what = "an about_you note" if kind is NoteKind.ABOUT_YOU else "a guidance note"
                raise BadInput(f"there is already {what} like that ({existing.id}); edit it")
            if existing is not None:  # a tombstone: the user brings it back
                old = statedigest.note_version(existing)
                stamp = self._stamp(session)
                existing.deleted, existing.user_edited = False, True
                existing.title, existing.body, existing.tags = title, body, tags_json(clean)
                existing.content_hash = content_hash(body)
                existing.updated_at, existing.updated_wall = stamp.encode(), stamp.wall_ms * 1000
                self._versioned(session, old, existing)
                return existing.id
            return self._insert_clear(
                session, kind, identity, title, body, None, clean, None, None, user_edited=True
            )

    def edit(
        self,
        note_id: str,
        *,
        title: str | None = None,
        body: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> bool:
        """The user's edit: it marks the note theirs and bumps its stamp.

        Returns False (and writes nothing) when the edit changes nothing.
        """
        new_title = clean_title(title) if title is not None else None
        new_body = clean_text(body, "body", MAX_BODY_CHARS) if body is not None else None
        tags_given = tags is not None
        new_tags = tags_json(clean_tags(list(tags or [])))
        with self._db.writing() as session:
            # On the driver, as the batched upsert writes: an edit is one
            # small row, and the ORM's unit of work cost several times the
            # statements.
            conn = driver_of(session, flush=True)
            found = conn.execute(_LIVE_ROW_SQL, (note_id,)).fetchone()
            if found is None:
                # The same words whether the id is unknown or names a sealed note.
                raise NotFound(f"no note with id {note_id}")
            row = _Row(*found)
            if row.holder is not None:
                raise BadInput(
                    f"note {note_id} is offloaded to your Homebase; "
                    f"bring it back with `pixie recall {note_id}` before editing it"
                )
            retitle = new_title is not None and new_title != row.title
            rewrite = new_body is not None and new_body != row.body
            retag = tags_given and new_tags != row.tags
            if not (retitle or rewrite or retag):
                return False
            old = row.version()
            stamp = self._stamp(session)
            if retitle:
                assert new_title is not None
                row.title = new_title
            if rewrite:
                assert new_body is not None
                row.body, row.content_hash = new_body, content_hash(new_body)
            if retag:
                row.tags = new_tags
            row.user_edited = True
            row.updated_at, row.updated_wall = stamp.encode(), stamp.wall_ms * 1000
            conn.execute(_EDIT_SQL, _EDIT_VALUES(row))
            statedigest.update(session, add=[row.version()], remove=[old])
            record_marks(session, [row.updated_at])
            return True

    def delete(self, note_id: str) -> None:
        """Tombstone a clear note: its content goes, its identity and stamp stay
        so the deletion can sync, and distillation will not bring it back."""
        with self._db.writing() as session:
            row = self._live_clear_row(session, note_id)
            old = statedigest.note_version(row)
            stamp = self._stamp(session)
            row.deleted, row.user_edited = True, True
            row.title, row.tags = "", None
            make_resident(session, row, "", content_hash(""), clock=self._clock)
            row.updated_at, row.updated_wall = stamp.encode(), stamp.wall_ms * 1000
            self._versioned(session, old, row)

    def pin_spark(self, event_id: str, tags: Sequence[str] = ()) -> str:
        """Pin a moment: a new sparked note, and a spark event so grep sees it.

        Private by construction: this writes two local rows and touches no
        outbox, compose or network path. (Sync to the user's own devices later
        carries it like any other note.)
        """
        clean = clean_tags(list(tags))
        now = self._clock.now_us()
        with self._db.writing() as session:
            conn = driver_of(session, flush=True)
            source = conn.execute(_PIN_SOURCE_SQL, (event_id,)).fetchone()
            if source is None:
                raise NotFound(f"no event with id {event_id}")
            kind, source_text, contact_id, thread = source
            if kind in (EventKind.AGENT_CHAT_USER.value, EventKind.AGENT_CHAT_AGENT.value):
                raise BadInput("agent chat turns cannot be pinned")
            text = clean_text(source_text, "pinned text", MAX_BODY_CHARS)
            first_line = " ".join(text.split())
            title = first_line[:PIN_TITLE_CHARS] + (
                "…" if len(first_line) > PIN_TITLE_CHARS else ""
            )
            note_id = self._insert_clear(
                session,
                NoteKind.SPARKED,
                None,
                title,
                text,
                contact_id,
                clean,
                f"event:{event_id}",
                now,
                user_edited=True,
            )
            contact_name = None
            if contact_id is not None:
                named = conn.execute(_CONTACT_NAME_SQL, (contact_id,)).fetchone()
                contact_name = named[0] if named is not None else None
            _, rows = self._log.append_in(
                session,
                [
                    NewEvent(
                        kind=EventKind.SPARK,
                        at=now,
                        text=text,
                        contact=contact_name,
                        thread=thread,
                        source=f"event:{event_id}",
                    )
                ],
                now=now,
            )
        self._log.committed(rows)
        return note_id

    def counts(self) -> dict[str, int]:
        with self._db.reading() as session:
            rows = session.execute(
                select(Note.zone, func.count()).where(Note.deleted.is_(False)).group_by(Note.zone)
            ).all()
            offloaded = session.scalar(
                select(func.count()).where(
                    Note.zone == Zone.CLEAR.value, Note.deleted.is_(False), Note.holder.is_not(None)
                )
            )
        found = {str(zone): int(count) for zone, count in rows}
        return {
            "clear": found.get("clear", 0),
            "sealed": found.get("sealed", 0),
            "offloaded": int(offloaded or 0),
        }

    # -- internals -----------------------------------------------------------------

    def _stamp(self, session: Session) -> Stamp:
        return self._stamper.stamp(session)

    @staticmethod
    def _versioned(session: Session, old: bytes | None, row: Note) -> None:
        versioned(session, old, row)

    def _live_clear_row(self, session: Session, note_id: str) -> Note:
        row = session.scalar(
            select(Note).where(
                Note.zone == Zone.CLEAR.value, Note.deleted.is_(False), Note.id == note_id
            )
        )
        if row is None:
            # The same words whether the id is unknown or names a sealed note.
            raise NotFound(f"no note with id {note_id}")
        return row

    def _insert_clear(
        self,
        session: Session,
        kind: NoteKind,
        identity: str | None,
        title: str,
        body: str,
        contact_id: str | None,
        tags: tuple[str, ...],
        source_ref: str | None,
        about_date: int | None,
        *,
        user_edited: bool,
    ) -> str:
        stamp = self._stamp(session)
        note_id = self._ids.new_id() if identity is None else identity_note_id(kind.value, identity)
        wall = stamp.wall_ms * 1000
        row = _Row(
            n=None,
            id=note_id,
            kind=kind.value,
            identity_key=identity,
            user_edited=user_edited,
            deleted=False,
            title=title,
            tags=tags_json(tags),
            body=body,
            content_hash=content_hash(body),
            holder=None,
            contact_id=contact_id,
            source_ref=source_ref,
            about_date=about_date,
            updated_at=stamp.encode(),
            updated_wall=wall,
            created_at=wall,
        )
        # On the driver, as the batched upsert inserts.
        conn = driver_of(session, flush=True)
        conn.execute(_INSERT_SQL, row.insert_values())
        statedigest.update(session, add=[row.version()])
        record_marks(session, [row.updated_at])
        return note_id

    def get_clear(self, note_id: str) -> ClearNote:
        note = self._clear.get_clear(note_id)
        if note is None:
            raise NotFound(f"no note with id {note_id}")
        return note


__all__ = [
    "ClearNotebookStore",
    "Distilled",
    "UpsertOutcome",
    "UpsertResult",
    "identity_for",
]
