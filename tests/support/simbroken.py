"""Deliberately broken variants of the real code, for proving the simulator can fail.

Each function applies one bug with pytest's monkeypatch (so it is undone when
the test ends) and says which invariant must catch it. A simulator that has
never caught anything checks nothing: `test_simulate.py` runs seeds against
each variant until one fails, within a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pixie.device.notebook.store import NotebookStore, UpsertOutcome, UpsertResult
from pixie.device.store import replica as syncstore
from pixie.device.store import statedigest
from pixie.device.store.notes import NoteKind
from pixie.device.store.notetable import Note
from pixie.device.store.replica import NodeReplica
from pixie.device.sync.offload import OffloadLedger
from pixie.homebase.holding import HolderCore
from pixie.protocol import envelope
from pixie.protocol.offload import FetchAttempt, Outcome, Verdict
from pixie.protocol.peerwire import FetchPart, OffloadRequest, PeerMessage


def clear_before_ack(mp: pytest.MonkeyPatch) -> None:
    """The body is erased as the request leaves, not after the ack."""
    original = OffloadLedger.candidate

    def candidate(self: OffloadLedger, note_id: str) -> Any:
        found = original(self, note_id)
        self.compare_and_clear(note_id, found.content_hash)
        return found

    mp.setattr(OffloadLedger, "candidate", candidate)


def skip_rehash(mp: pytest.MonkeyPatch) -> None:
    """A fetched body is taken as served, without re-hashing it."""
    original = FetchAttempt.on_message

    def on_message(self: FetchAttempt, sender: bytes, message: PeerMessage) -> Verdict | None:
        if isinstance(message, FetchPart) and message.request == self.request:
            return Verdict(Outcome.FETCHED, "taken on trust", message.data)
        return original(self, sender, message)

    mp.setattr(FetchAttempt, "on_message", on_message)


def last_writer_wins(mp: pytest.MonkeyPatch) -> None:
    """Merge by stamp alone: the user's edits get no precedence."""
    mp.setattr(syncstore, "_version_order", lambda _edited, stamp: (False, stamp))


def noop_bumps_clock(mp: pytest.MonkeyPatch) -> None:
    """An upsert of unchanged content re-stamps the note anyway."""
    original = NotebookStore._upsert_batch

    def upsert_batch(self: NotebookStore, session: Session, *args: Any) -> list[UpsertResult]:
        results = original(self, session, *args)
        for result in results:
            if result.outcome is UpsertOutcome.UNCHANGED:
                row = session.scalars(select(Note).where(Note.id == result.note_id)).one()
                old = statedigest.note_version(row)
                stamp = self._stamp(session)
                row.updated_at, row.updated_wall = stamp.encode(), stamp.wall_ms * 1000
                self._versioned(session, old, row)
        return results

    mp.setattr(NotebookStore, "_upsert_batch", upsert_batch)


def holder_acks_unstored(mp: pytest.MonkeyPatch) -> None:
    """The holder says "stored" without committing anything."""

    def store(self: HolderCore, sender: bytes, req: OffloadRequest, counter: int) -> str | None:
        return None

    mp.setattr(HolderCore, "store", store)


def merge_drops_notes(mp: pytest.MonkeyPatch) -> None:
    """A replica takes a sibling's batches and quietly applies no note in them."""
    mp.setattr(NodeReplica, "_merge_notes", lambda self, session, notes: 0)


def plaintext_envelopes(mp: pytest.MonkeyPatch) -> None:
    """Envelopes go out unencrypted (padded, so they still look the size)."""

    def seal(sender: Any, recipient: bytes, body: bytes, **_: Any) -> bytes:
        return bytes(32) + body + bytes(envelope.MIN_BUCKET)

    mp.setattr(envelope, "seal", seal)


def sealed_into_clear(mp: pytest.MonkeyPatch) -> None:
    """A sealed write lands in the clear zone (a "reclassify to clear")."""

    def record_sealed(self: NotebookStore, kind: Any, *, title: str, body: str, **_: Any) -> str:
        return self.add_user_note(NoteKind.GUIDANCE, title, body)

    mp.setattr(NotebookStore, "record_sealed", record_sealed)


# variant -> (the patch, the invariant that must catch it, the seeds allowed for it)
VARIANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], int, int]] = {
    "clear_before_ack": (clear_before_ack, 2, 10),
    "skip_rehash": (skip_rehash, 2, 60),
    "last_writer_wins": (last_writer_wins, 4, 60),
    "noop_bumps_clock": (noop_bumps_clock, 5, 20),
    "holder_acks_unstored": (holder_acks_unstored, 1, 10),
    "merge_drops_notes": (merge_drops_notes, 3, 10),
    "plaintext_envelopes": (plaintext_envelopes, 6, 3),
    "sealed_into_clear": (sealed_into_clear, 7, 10),
}
