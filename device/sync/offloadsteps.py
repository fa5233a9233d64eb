"""What the device does with a holder's verdict on an offload, a fetch, a
recall or a release, as steps (sans-IO).

`pixie.protocol.offload` judges the holder's replies (`OffloadAttempt` and
its kin return a `Verdict`); what follows a verdict is written here once, and
two drivers take it: `NoteOffloadService`, under trio (its store calls on the
event loop or in a thread), and the simulator, at once. Each step names one
call of `OffloadLedger` and decides nothing:

- `BeforeClear`: the point between a valid ack and the clear, where a test
  (or the simulator) may stop the device;
- `Clear`: the compare-and-clear, answered True if the body was cleared;
- `Orphan`: the holder holds a body no note here will point at: queue its
  release;
- `Restore`: a recall's verified body goes home, answered True if the note
  had not moved on;
- `Forget`: the holder confirmed a release; it is no longer due.

The rule they carry: a body is cleared only after a valid ack, and only if it
is still the acknowledged one; a copy left pointing at nothing is released
later, never dropped on the floor.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from pixie.protocol.offload import Outcome, Verdict

CHANGED_MEANWHILE = "held, but the note changed meanwhile; kept the local body"


@dataclass(frozen=True, slots=True)
class Pointer:
    """An offloaded note: the hash its body must re-hash to, and who holds it."""

    id: str
    content_hash: str
    holder: str


@dataclass(frozen=True, slots=True)
class BeforeClear:
    note_id: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class Clear:
    note_id: str
    content_hash: str
    request: bytes = b""  # the offload request acked (see `OffloadLedger.asking`)


@dataclass(frozen=True, slots=True)
class Orphan:
    note_id: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class Restore:
    pointer: Pointer
    body: bytes


@dataclass(frozen=True, slots=True)
class Forget:
    note_id: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class Offloaded:
    """How an offload ended: ``cleared`` only after a valid ack and a clear."""

    outcome: Outcome
    detail: str
    cleared: bool


@dataclass(frozen=True, slots=True)
class Fetched:
    """How a fetch or recall ended: ``body`` is the verified body, or None;
    ``restored`` says a recall brought it home."""

    verdict: Verdict
    body: bytes | None
    restored: bool


OffloadStep = BeforeClear | Clear | Orphan | Restore | Forget


def after_offload(
    note_id: str, content_hash: str, verdict: Verdict, request: bytes = b""
) -> Generator[OffloadStep, bool | None, Offloaded]:
    """What follows the holder's verdict on offloading ``note_id`` (asked
    for by ``request``)."""
    if verdict.outcome is not Outcome.HELD:
        return Offloaded(verdict.outcome, verdict.detail, False)
    yield BeforeClear(note_id, content_hash)
    if (yield Clear(note_id, content_hash, request)):
        return Offloaded(Outcome.HELD, verdict.detail, True)
    # The note changed while its body travelled: the edit wins, and the
    # parked copy, which nothing points at, is released later.
    yield Orphan(note_id, content_hash)
    return Offloaded(Outcome.HELD, CHANGED_MEANWHILE, False)


def after_fetch(
    verdict: Verdict, recall: Pointer | None = None
) -> Generator[OffloadStep, bool | None, Fetched]:
    """What follows the holder's verdict on a fetch; with ``recall``, the
    pointer the verified body is restored against."""
    if verdict.outcome is not Outcome.FETCHED or verdict.body is None:
        return Fetched(verdict, None, False)
    if recall is None:
        return Fetched(verdict, verdict.body, False)
    restored = yield Restore(recall, verdict.body)
    return Fetched(verdict, verdict.body, bool(restored))


def after_release(
    note_id: str, content_hash: str, verdict: Verdict
) -> Generator[OffloadStep, bool | None, bool]:
    """What follows the holder's verdict on a release: True if confirmed."""
    if verdict.outcome is not Outcome.RELEASED:
        return False
    yield Forget(note_id, content_hash)
    return True


__all__ = [
    "CHANGED_MEANWHILE",
    "BeforeClear",
    "Clear",
    "Fetched",
    "Forget",
    "OffloadStep",
    "Offloaded",
    "Orphan",
    "Pointer",
    "Restore",
    "after_fetch",
    "after_offload",
    "after_release",
]
