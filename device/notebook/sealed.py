"""The sealed zone: notes only the huddle pass may read, stored as ciphertext.

Writes seal the note under the Notebook key before anything reaches the
database; the one read decrypts for huddle reasoning and nothing else. No
function here turns a sealed note into a clear one. Chat, MCP, distillation
and web modules may not import this module (an import contract says so), so
the boundary is a fact of the import graph rather than a promise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from pixie.device.notebook.seal import NotebookSeal, SealError
from pixie.device.notebook.versions import NoteStamper, versioned
from pixie.device.store.db import Database, Meta
from pixie.device.store.keystore import KeyStore, open_key_store
from pixie.device.store.notes import (
    MAX_BODY_CHARS,
    SealedKind,
    Zone,
    clean_tags,
    clean_text,
    clean_title,
    sealed_hash,
)
from pixie.device.store.notetable import Note
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.hlc import Stamp
from pixie.protocol.ids import IdMinter, minter_for

SEAL_FINGERPRINT_KEY = "seal_key_fingerprint"


def seal_key_name(origin: str) -> str:
    """The key-store name of the Notebook's seal key for the data dir ``origin``."""
    return f"{origin}-notebook-seal"


@dataclass(frozen=True, slots=True)
class SealedNote:
    """Sealed plaintext. Only `sealed_notes_for_huddle_reasoning` makes these."""

    id: str
    kind: SealedKind
    contact_id: str | None
    contact_name: str | None
    title: str
    body: str
    tags: tuple[str, ...]
    about_date: int | None
    created_at: int
    updated_at: Stamp
    from_other_agents: bool


class SealedZone:
    """Sealed writes and the huddle's decrypting read, for one data dir.

    A sealed note's id comes from ``ids`` (by default the minter for ``clock``
    and ``entropy``), its creation time from ``clock``, and the seal's nonces
    (and its key, the first time, unless ``entropy`` is the system's) from
    ``entropy``.
    """

    def __init__(
        self,
        db: Database,
        origin: str,
        stamper: NoteStamper,
        *,
        key_store: KeyStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
        entropy: Entropy = SYSTEM_ENTROPY,
        ids: IdMinter | None = None,
    ) -> None:
        self._db = db
        self._origin = origin
        self._stamper = stamper
        self._key_store = key_store
        self._clock = clock
        self._entropy = entropy
        self._ids = ids if ids is not None else minter_for(clock, entropy)
        self._seal: NotebookSeal | None = None

    def record_sealed(
        self,
        kind: SealedKind,
        *,
        title: str,
        body: str,
        contact_id: str | None = None,
        contact_name: str | None = None,
        tags: Sequence[str] = (),
        about_date: int | None = None,
        from_other_agents: bool = False,
    ) -> str:
        """Write a sealed note: only ciphertext reaches the database."""
        title = clean_title(title)
        body = clean_text(body, "body", MAX_BODY_CHARS)
        clean = clean_tags(list(tags))
        note_id = self._ids.new_id()
        created = self._clock.now_us()
        plaintext = json.dumps(
            {
                "v": 1,
                "kind": kind.value,
                "title": title,
                "body": body,
                "contact_id": contact_id,
                "contact_name": contact_name,
                "tags": list(clean),
                "about_date": about_date,
                "created_at": created,
                "from_other_agents": from_other_agents or kind is SealedKind.FROM_OTHER_AGENTS,
            },
            ensure_ascii=False,
            sort_keys=True,
        ).encode()
        with self._db.writing() as session:
            seal = self._seal_for_write(session)
            nonce, ciphertext = seal.seal(note_id, Zone.SEALED.value, plaintext)
            stamp = self._stamp(session)
            row = Note(
                id=note_id,
                zone=Zone.SEALED.value,
                updated_at=stamp.encode(),
                content_hash=sealed_hash(nonce, ciphertext),
                deleted=False,
                user_edited=False,
                nonce=nonce,
                ciphertext=ciphertext,
            )
            session.add(row)
            self._versioned(session, None, row)
        return note_id

    def sealed_notes_for_huddle_reasoning(self) -> list[SealedNote]:
        """Decrypt the sealed zone, for the huddle/nudge pass and nothing else."""
        with self._db.reading() as session:
            rows = session.execute(
                select(Note.id, Note.nonce, Note.ciphertext, Note.updated_at).where(
                    Note.zone == Zone.SEALED.value, Note.deleted.is_(False)
                )
            ).all()
            expected = session.scalar(select(Meta.value).where(Meta.key == SEAL_FINGERPRINT_KEY))
        if not rows:
            return []
        seal = self._seal or NotebookSeal.load(
            self._keys(), self._key_name, expected, self._entropy
        )
        if seal is None:
            raise SealError("sealed notes exist but no key was ever recorded for them")
        self._seal = seal
        out = []
        for note_id, nonce, ciphertext, updated_at in rows:
            data = json.loads(
                seal.open(note_id, Zone.SEALED.value, nonce or b"", ciphertext or b"")
            )
            out.append(
                SealedNote(
                    id=note_id,
                    kind=SealedKind(data["kind"]),
                    contact_id=data["contact_id"],
                    contact_name=data["contact_name"],
                    title=data["title"],
                    body=data["body"],
                    tags=tuple(data["tags"]),
                    about_date=data["about_date"],
                    created_at=data["created_at"],
                    updated_at=Stamp.decode(updated_at),
                    from_other_agents=bool(data["from_other_agents"]),
                )
            )
        out.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
        return out

    @property
    def _key_name(self) -> str:
        return seal_key_name(self._origin)

    def _keys(self) -> KeyStore:
        if self._key_store is None:
            self._key_store = open_key_store()
        return self._key_store

    def _seal_for_write(self, session: Session) -> NotebookSeal:
        """The seal key, minted on first use; its fingerprint recorded with the write."""
        if self._seal is not None:
            return self._seal
        recorded = session.get(Meta, SEAL_FINGERPRINT_KEY)
        seal = NotebookSeal.load(
            self._keys(), self._key_name, recorded.value if recorded else None, self._entropy
        )
        if seal is None:
            seal = NotebookSeal.mint(self._keys(), self._key_name, self._entropy)
        if recorded is None:
            session.add(Meta(key=SEAL_FINGERPRINT_KEY, value=seal.fingerprint))
        self._seal = seal
        return seal

    def _stamp(self, session: Session) -> Stamp:
        return self._stamper.stamp(session)

    @staticmethod
    def _versioned(session: Session, old: bytes | None, row: Note) -> None:
        versioned(session, old, row)


__all__ = ["SEAL_FINGERPRINT_KEY", "SealedNote", "SealedZone", "seal_key_name", "sealed_hash"]
