"""NotebookStore: the single door every Notebook read and write goes through.

It offers two read APIs that share nothing:

* `clear_notes` / `search_clear` (from `ClearNotebookStore`, which holds no key)
  feed the UI, the CLI and the chat agent's check_notebook tool;
* `sealed_notes_for_huddle_reasoning` (from `SealedZone`) decrypts the sealed
  zone for the non-conversational huddle/nudge pass, which emits finished
  nudges only.

There is deliberately no method that turns a sealed note into a clear one, and
none that hands sealed plaintext to a display or chat caller: the boundary is
the absence of such a method, backed by import contracts that keep the agent,
distillation, ingest and display modules from importing this module, the
sealed one, the seal or the key store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pixie.device.notebook.clear import (
    ClearNotebookStore,
    Distilled,
    UpsertOutcome,
    UpsertResult,
)
from pixie.device.notebook.sealed import SealedNote, SealedZone, sealed_hash
from pixie.device.store.db import Database
from pixie.device.store.keystore import KeyStore
from pixie.device.store.memlog import MemoryLog
from pixie.device.store.notes import SealedKind
from pixie.device.store.notetable import to_clear_note
from pixie.protocol.clock import SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.ids import IdMinter


class NotebookStore(ClearNotebookStore):
    """The clear zone's store, plus the sealed zone for callers holding the keys.

    Both zones share the stamper, the clock, the entropy and the id minter.
    """

    def __init__(
        self,
        db: Database,
        origin: str,
        log: MemoryLog,
        *,
        key_store: KeyStore | None = None,
        wall: Callable[[], int] | None = None,
        clock: Clock | None = None,
        entropy: Entropy = SYSTEM_ENTROPY,
        ids: IdMinter | None = None,
        settings: Path | None = None,
    ) -> None:
        super().__init__(
            db, origin, log, wall=wall, clock=clock, entropy=entropy, ids=ids, settings=settings
        )
        self._sealed = SealedZone(
            db,
            origin,
            self._stamper,
            key_store=key_store,
            clock=self._clock,
            entropy=self._entropy,
            ids=self._ids,
        )

    # -- the sealed zone -----------------------------------------------------------

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
        return self._sealed.record_sealed(
            kind,
            title=title,
            body=body,
            contact_id=contact_id,
            contact_name=contact_name,
            tags=tags,
            about_date=about_date,
            from_other_agents=from_other_agents,
        )

    def sealed_notes_for_huddle_reasoning(self) -> list[SealedNote]:
        """Decrypt the sealed zone, for the huddle/nudge pass and nothing else."""
        return self._sealed.sealed_notes_for_huddle_reasoning()


__all__ = [
    "Distilled",
    "NotebookStore",
    "SealedNote",
    "UpsertOutcome",
    "UpsertResult",
    "sealed_hash",
    "to_clear_note",
]
