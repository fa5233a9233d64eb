"""Offload, fetch and release, decided without I/O.

A device parks the body of a clear note with a holder (its Homebase) and keeps
the note's index; later it fetches the body back to show it, or recalls it. The
drivers (`pixie.device.sync.offload`, `pixie.homebase.holder`) move messages and
touch databases; every judgement about a message is made here, so the same
rules run under the real relay, in tests and in the simulator:

- `OffloadAttempt` decides whether a reply is the valid ack of one request:
  from the holder's key, naming this request, the same note id and the same
  content hash. Anything else is refused or set aside, and the body stays.
- `FetchAttempt` gathers a body's parts and accepts the bytes only if they
  re-hash to the content hash stamped at offload time (fail closed).
- `holder_parts` / `check_offload` are the holder's side of the same gates.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

from .clock import SYSTEM_ENTROPY, Entropy
from .peerwire import (
    MAX_HELD_BYTES,
    PART_BYTES,
    REQUEST_ID_BYTES,
    FetchPart,
    FetchRequest,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    PeerMessage,
    Release,
    Released,
)


def body_hash(body: bytes) -> bytes:
    """The content hash of a body's canonical bytes (SHA-256)."""
    return hashlib.sha256(body).digest()


def new_request_id(entropy: Entropy = SYSTEM_ENTROPY) -> bytes:
    """A fresh request id. An attempt draws one from the system's entropy
    unless given ``request=new_request_id(entropy)``."""
    return entropy.token_bytes(REQUEST_ID_BYTES)


class Outcome(enum.StrEnum):
    """How one offload, fetch or release ended. Only HELD lets a device clear a
    body; only FETCHED hands bytes to a caller."""

    HELD = "held"
    FETCHED = "fetched"
    RELEASED = "released"
    REFUSED = "refused"  # the holder said no
    WRONG_ID = "wrong_id"  # an ack naming another note
    WRONG_HASH = "wrong_hash"  # an ack or body naming another content hash
    CORRUPT = "corrupt"  # served bytes that do not re-hash
    TIMEOUT = "timeout"  # no valid answer in time
    RELAY_DOWN = "relay_down"  # the relay could not be reached or went away


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    detail: str
    body: bytes | None = None  # FETCHED only


@dataclass
class _Attempt:
    """What every request shares: who must answer, about what, and a log of the
    replies that were set aside (so a timeout can say what came instead)."""

    holder: bytes
    note_id: str
    content_hash: bytes
    request: bytes = field(default_factory=new_request_id)
    ignored: list[str] = field(default_factory=list)

    def _triage(self, sender: bytes, message: PeerMessage) -> bool:
        """True if ``message`` is an answer to this request from the holder.
        Replies to other requests (a replayed or late ack) and answers from any
        other key are noted and set aside."""
        request = getattr(message, "request", None)
        if not isinstance(message, OffloadAck | HolderRefusal | FetchPart | Released):
            return False
        if request != self.request:
            self.ignored.append(
                f"a {type(message).__name__} for another request (stale or replayed)"
            )
            return False
        if sender != self.holder:
            self.ignored.append(f"a {type(message).__name__} from a key that is not the holder")
            return False
        return True

    def timed_out(self, seconds: float) -> Verdict:
        extra = f"; set aside: {'; '.join(self.ignored[:3])}" if self.ignored else ""
        return Verdict(Outcome.TIMEOUT, f"no valid answer from the holder in {seconds:g} s{extra}")


@dataclass
class OffloadAttempt(_Attempt):
    """One offload request and the judgement of its answer."""

    def request_message(self, body: bytes) -> OffloadRequest:
        return OffloadRequest(self.request, self.note_id, self.content_hash, body)

    def on_message(self, sender: bytes, message: PeerMessage) -> Verdict | None:
        """The verdict ``message`` settles, or None if it settles nothing."""
        if not self._triage(sender, message):
            return None
        if isinstance(message, HolderRefusal):
            return Verdict(Outcome.REFUSED, f"the holder refused: {message.reason}")
        if not isinstance(message, OffloadAck):
            self.ignored.append(f"a {type(message).__name__} where an ack was due")
            return None
        if message.note_id != self.note_id:
            return Verdict(Outcome.WRONG_ID, f"the ack names note {message.note_id}")
        if message.content_hash != self.content_hash:
            return Verdict(Outcome.WRONG_HASH, "the ack names another content hash")
        return Verdict(Outcome.HELD, "the holder acknowledged the body")


@dataclass
class FetchAttempt(_Attempt):
    """One fetch: parts gathered by offset, accepted only when whole and re-hashed.

    The hash is taken as the parts arrive, over the unbroken run of them from
    offset 0 (a large body's last part then leaves only its own bytes to
    hash); parts out of order wait in ``parts`` until the run reaches them."""

    parts: dict[int, bytes] = field(default_factory=dict)
    total: int | None = None
    received: int = 0
    _hasher: Any = field(default_factory=hashlib.sha256, repr=False)
    _hashed: int = 0  # bytes of the run from offset 0 hashed so far

    def request_message(self) -> FetchRequest:
        return FetchRequest(self.request, self.note_id, self.content_hash)

    def on_message(self, sender: bytes, message: PeerMessage) -> Verdict | None:
        if not self._triage(sender, message):
            return None
        if isinstance(message, HolderRefusal):
            return Verdict(Outcome.REFUSED, f"the holder refused: {message.reason}")
        if not isinstance(message, FetchPart):
            self.ignored.append(f"a {type(message).__name__} where a body was due")
            return None
        if message.note_id != self.note_id:
            return Verdict(Outcome.WRONG_ID, f"the holder served note {message.note_id}")
        if message.content_hash != self.content_hash:
            return Verdict(Outcome.WRONG_HASH, "the holder served another content hash")
        if self.total is None:
            self.total = message.total
        elif message.total != self.total:
            return Verdict(Outcome.CORRUPT, "the served parts disagree on the body's size")
        seen = self.parts.get(message.offset)
        if seen is not None:
            if seen != message.data:
                return Verdict(Outcome.CORRUPT, "two different parts at one offset")
            return None  # a duplicate
        self.parts[message.offset] = message.data
        self.received += len(message.data)
        while (data := self.parts.get(self._hashed)) is not None and data:
            self._hasher.update(data)
            self._hashed += len(data)
        if self.received < self.total:
            return None
        body = self._assemble()
        if body is None:
            return Verdict(Outcome.CORRUPT, "the served parts overlap or leave gaps")
        # Whole, without gaps or overlaps: the run hashed is the body.
        digest = self._hasher.digest() if self._hashed == len(body) else body_hash(body)
        if digest != self.content_hash:
            return Verdict(Outcome.CORRUPT, "the served body does not match its content hash")
        return Verdict(Outcome.FETCHED, f"{len(body)} bytes, hash verified", body)

    def _assemble(self) -> bytes | None:
        """The parts end to end (one copy), or None if they overlap or leave gaps."""
        ordered = sorted(self.parts.items())
        at = 0
        for offset, data in ordered:
            if offset != at:
                return None
            at += len(data)
        if at != self.total:
            return None
        if len(ordered) == 1:
            return ordered[0][1]
        return b"".join(data for _, data in ordered)


@dataclass
class ReleaseAttempt(_Attempt):
    def request_message(self) -> Release:
        return Release(self.request, self.note_id, self.content_hash)

    def on_message(self, sender: bytes, message: PeerMessage) -> Verdict | None:
        if not self._triage(sender, message):
            return None
        if isinstance(message, HolderRefusal):
            return Verdict(Outcome.REFUSED, f"the holder refused: {message.reason}")
        if not isinstance(message, Released):
            return None
        if message.note_id != self.note_id or message.content_hash != self.content_hash:
            return Verdict(Outcome.WRONG_ID, "the release answer names another holding")
        return Verdict(Outcome.RELEASED, "the holder let go of its copy")


# -- the holder's side --------------------------------------------------------------------


def check_offload(request: OffloadRequest) -> str | None:
    """Why a holder must refuse ``request`` (None: it may hold it)."""
    if body_hash(request.body) != request.content_hash:
        return "the body does not match its content hash"
    return None


def holder_parts(request: FetchRequest, body: bytes) -> list[FetchPart]:
    """A held body, as the parts that answer ``request``."""
    if len(body) > MAX_HELD_BYTES:
        raise ValueError("held body is over the size bound")
    parts = [
        FetchPart(
            request.request,
            request.note_id,
            request.content_hash,
            len(body),
            offset,
            body[offset : offset + PART_BYTES],
        )
        for offset in range(0, len(body), PART_BYTES)
    ]
    return parts or [FetchPart(request.request, request.note_id, request.content_hash, 0, 0, b"")]


__all__ = [
    "FetchAttempt",
    "OffloadAttempt",
    "Outcome",
    "ReleaseAttempt",
    "Verdict",
    "body_hash",
    "check_offload",
    "holder_parts",
    "new_request_id",
]
