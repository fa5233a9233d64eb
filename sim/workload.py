"""What the simulated user does: append messages, distil, edit, delete, pin,
seal and add guidance, each on one peer, every choice drawn from the seed.

`Workload` is mixed into `pixie.sim.world.World`, which supplies what it
reads (the seed's random stream, the clock, the trace, canaries)."""

from __future__ import annotations

import random
import uuid
from typing import TYPE_CHECKING

from pixie.device.notebook.store import Distilled
from pixie.device.store.contacts import contact_id_for
from pixie.device.store.db import peek
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.protocol.clock import ManualClock
from pixie.sim import invariants
from pixie.sim.invariants import InvariantViolated
from pixie.sim.network import CLEAR_CANARY
from pixie.sim.peer import Peer

CONTACTS = ("Ada Lovelace", "Grace Hopper", "Alan Turing")
THREADS = ("t0", "t1", "t2")
BODIES = (
    "talked about the trip to Lyon",
    "wants to start running again",
    "asked about the cello lessons",
    "moving house in the spring",
)
GUIDANCE = ("Be brief", "Use metric units", "No emoji")
IMPORTED_AT = 1_700_000_000_000_000


class Workload:
    """The user's operations on a peer (see `World._operations`)."""

    rng: random.Random
    clock: ManualClock

    if TYPE_CHECKING:

        def note(self, what: str) -> None: ...

        def canary(self, sealed: bool = False) -> str: ...

    def _live_clear(self, peer: Peer, *, resident: bool | None = None) -> list[str]:
        sql = "SELECT id FROM note WHERE zone = 'clear' AND deleted = 0"
        if resident is True:
            sql += " AND holder IS NULL"
        elif resident is False:
            sql += " AND holder IS NOT NULL"
        return [r[0] for r in peek(peer.node.db, sql + " ORDER BY id")]

    def _distilled(self, index: int, variant: int) -> Distilled:
        if index < len(THREADS):
            thread = THREADS[index]
            return Distilled(
                NoteKind.CONVERSATION_DIGEST,
                f"thread:{thread}",
                f"Conversation {thread}",
                f"{BODIES[variant]} {CLEAR_CANARY.decode()}d{index}v{variant}",
                source_ref=f"thread:{thread}",
                tags=("family",) if variant % 2 else (),
            )
        name = CONTACTS[index - len(THREADS)]
        return Distilled(
            NoteKind.PERSON,
            contact_id_for(name),
            name,
            f"{name} {BODIES[variant]} {CLEAR_CANARY.decode()}p{index}v{variant}",
            contact_id=contact_id_for(name),
        )

    def _distil(self, peer: Peer) -> None:
        item = self._distilled(
            self.rng.randrange(len(THREADS) + len(CONTACTS)), self.rng.randrange(len(BODIES))
        )
        noop = invariants.upsert_is_noop(peer.node, item)
        before = peer.node.digest() if noop or not invariants.SKIP_FOREGONE else None
        result = peer.node.notebook.upsert_clear(item)
        self.note(f"{peer.name} distils {item.identity_key[:12]}: {result.outcome.value}")
        if noop and peer.node.digest() != before:
            raise InvariantViolated(
                5, f"{peer.name}: an upsert of unchanged content changed the digest"
            )

    def _append(self, peer: Peer) -> None:
        count = self.rng.randint(1, 3)
        events = []
        for _ in range(count):
            contact = self.rng.choice(CONTACTS)
            text = f"{self.rng.choice(BODIES)} {self.canary()}"
            at = self.clock.now_us() - self.rng.randint(0, 86_400_000_000)
            thread = self.rng.choice(THREADS)
            event_id = None
            if self.rng.random() < 0.3:
                # An import both peers may make (the same file on both): one of
                # eight events, each wholly determined by its id, merges to one.
                which = self.rng.randrange(8)
                raw = random.Random(which).randbytes(16)
                event_id = str(uuid.UUID(bytes=raw, version=4))
                text = f"imported {which} {CLEAR_CANARY.decode()}i{which}"
                at, contact, thread = IMPORTED_AT + which, CONTACTS[which % 3], THREADS[which % 3]
            events.append(
                NewEvent(EventKind.MESSAGE, at, text, contact=contact, thread=thread, id=event_id)
            )
        result = peer.node.log.append(events)
        self.note(f"{peer.name} appends {count} events ({result.skipped} already held)")

    def _edit(self, peer: Peer) -> None:
        ids = self._live_clear(peer)
        if not ids:
            return
        note_id = self.rng.choice(ids)
        body = f"my own words {self.rng.randrange(5)} {self.canary()}"
        changed = peer.node.notebook.edit(note_id, body=body)
        self.note(f"{peer.name} edits {note_id[:8]}: {'changed' if changed else 'no change'}")

    def _delete(self, peer: Peer) -> None:
        ids = self._live_clear(peer)
        if ids:
            note_id = self.rng.choice(ids)
            peer.node.notebook.delete(note_id)
            self.note(f"{peer.name} deletes {note_id[:8]}")

    def _pin(self, peer: Peer) -> None:
        rows = peek(peer.node.db, "SELECT id FROM memory_event WHERE kind = 'message' ORDER BY id")
        if rows:
            event_id = self.rng.choice(rows)[0]
            note_id = peer.node.notebook.pin_spark(event_id, ["pinned"])
            self.note(f"{peer.name} pins {event_id[:8]} as {note_id[:8]}")

    def _sealed(self, peer: Peer) -> None:
        kind = self.rng.choice(list(SealedKind))
        secret = self.canary(sealed=True)
        note_id = peer.node.notebook.record_sealed(
            kind, title=f"prep {secret}", body=f"what Ada's agent said {secret}"
        )
        self.note(f"{peer.name} seals {note_id[:8]}")

    def _user_note(self, peer: Peer) -> None:
        title = self.rng.choice(GUIDANCE)
        peer.node.notebook.add_user_note(NoteKind.GUIDANCE, title, f"{title}. {self.canary()}")
        self.note(f"{peer.name} adds guidance {title!r}")


__all__ = ["BODIES", "CONTACTS", "GUIDANCE", "THREADS", "Workload"]
