"""Messages between a peer and its siblings, inside sealed envelopes.

The relay never sees any of this: a body is msgpack
``[version, type, message id, counter, field...]`` and travels only inside an
envelope (see `envelope.py`). One strict decoder: bounded msgpack, exact arity,
every field checked, frozen dataclasses out, `ProtocolError` for anything else
(an unknown version or type included) and never a half-built message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import msgpack

from .clock import SYSTEM_ENTROPY, Entropy
from .errors import ProtocolError, shown
from .framing import MAX_FRAME_BYTES
from .packing import unpack
from .validate import non_negative, sized, text

PEER_VERSION = 1
MESSAGE_ID_BYTES = 16
MAX_NAME_CHARS = 200
MAX_REASON_CHARS = 200
PROOF_BYTES = 32
MAX_BODY_BYTES = MAX_FRAME_BYTES - 1024  # room for the envelope around it
REQUEST_ID_BYTES = 16
HASH_BYTES = 32  # SHA-256
NOTE_ID_CHARS = 36
# A note body travels whole in an offload request (the Notebook caps bodies far
# below this) and comes back from the holder in parts of at most PART_BYTES.
MAX_OFFLOAD_BYTES = 512 * 1024
PART_BYTES = 256 * 1024
MAX_HELD_BYTES = 4 * 1024 * 1024


class UnknownMessage(ProtocolError):
    """A well-formed body of a version or type this peer does not speak."""


@dataclass(frozen=True, slots=True)
class _PairHello:
    """The two pairing greetings share a shape: who I am, and proof of the code."""

    name: str
    role: str
    proof: bytes

    def fields(self) -> list[Any]:
        return [self.name, self.role, self.proof]

    @classmethod
    def from_fields(cls, f: list[Any]) -> Self:
        return cls(
            text(f[0], "name", MAX_NAME_CHARS, noun="a string"),
            _role(f[1]),
            sized(f[2], "proof", PROOF_BYTES),
        )


@dataclass(frozen=True, slots=True)
class PairRequest(_PairHello):
    """joiner -> inviter: I hold the invite secret (``proof``), here is who I am."""

    TYPE: ClassVar[int] = 1


@dataclass(frozen=True, slots=True)
class PairAccept(_PairHello):
    """inviter -> joiner: so do I; we are siblings now."""

    TYPE: ClassVar[int] = 2


@dataclass(frozen=True, slots=True)
class PairReject:
    TYPE: ClassVar[int] = 3
    reason: str

    def fields(self) -> list[Any]:
        return [self.reason]

    @classmethod
    def from_fields(cls, f: list[Any]) -> PairReject:
        return cls(text(f[0], "reason", MAX_REASON_CHARS, noun="a string"))


@dataclass(frozen=True, slots=True)
class Ping:
    TYPE: ClassVar[int] = 4
    token: int

    def fields(self) -> list[Any]:
        return [self.token]

    @classmethod
    def from_fields(cls, f: list[Any]) -> Ping:
        return cls(non_negative(f[0], "token"))


@dataclass(frozen=True, slots=True)
class Pong:
    TYPE: ClassVar[int] = 5
    token: int

    def fields(self) -> list[Any]:
        return [self.token]

    @classmethod
    def from_fields(cls, f: list[Any]) -> Pong:
        return cls(non_negative(f[0], "token"))


@dataclass(frozen=True, slots=True)
class SyncData:
    """A sync session message (see `syncwire.py`), carried as opaque bytes here."""

    TYPE: ClassVar[int] = 6
    payload: bytes

    def fields(self) -> list[Any]:
        return [self.payload]

    @classmethod
    def from_fields(cls, f: list[Any]) -> SyncData:
        if not isinstance(f[0], bytes) or len(f[0]) > MAX_BODY_BYTES:
            raise ProtocolError("sync payload must be bytes")
        return cls(f[0])


def _note_id(value: Any) -> str:
    if (
        not isinstance(value, str)
        or len(value) != NOTE_ID_CHARS
        or value.count("-") != 4
        or not all(c in "0123456789abcdef-" for c in value)
    ):
        raise ProtocolError("note id must be a 36-character lowercase UUID")
    return value


@dataclass(frozen=True, slots=True)
class _NoteRef:
    """Which body a holder message is about: a request, a note, a content hash."""

    request: bytes
    note_id: str
    content_hash: bytes

    def fields(self) -> list[Any]:
        return [self.request, self.note_id, self.content_hash]

    @classmethod
    def from_fields(cls, f: list[Any]) -> Self:
        return cls(
            sized(f[0], "request id", REQUEST_ID_BYTES),
            _note_id(f[1]),
            sized(f[2], "content hash", HASH_BYTES),
        )


@dataclass(frozen=True, slots=True)
class OffloadRequest:
    """device -> holder: keep this body of a clear note for me."""

    TYPE: ClassVar[int] = 7
    request: bytes
    note_id: str
    content_hash: bytes
    body: bytes

    def fields(self) -> list[Any]:
        return [self.request, self.note_id, self.content_hash, self.body]

    @classmethod
    def from_fields(cls, f: list[Any]) -> OffloadRequest:
        ref = _NoteRef.from_fields(f[:3])
        if not isinstance(f[3], bytes) or len(f[3]) > MAX_OFFLOAD_BYTES:
            raise ProtocolError(f"an offloaded body must be bytes, at most {MAX_OFFLOAD_BYTES}")
        return cls(ref.request, ref.note_id, ref.content_hash, f[3])


@dataclass(frozen=True, slots=True)
class OffloadAck(_NoteRef):
    """holder -> device: that body is durably held (committed before this was sent)."""

    TYPE: ClassVar[int] = 8


@dataclass(frozen=True, slots=True)
class HolderRefusal:
    """holder -> device: no to a request, and why."""

    TYPE: ClassVar[int] = 9
    request: bytes
    reason: str

    def fields(self) -> list[Any]:
        return [self.request, self.reason]

    @classmethod
    def from_fields(cls, f: list[Any]) -> HolderRefusal:
        return cls(
            sized(f[0], "request id", REQUEST_ID_BYTES),
            text(f[1], "reason", MAX_REASON_CHARS, noun="a string"),
        )


@dataclass(frozen=True, slots=True)
class FetchRequest(_NoteRef):
    """device -> holder: send me the body you hold for this note and hash."""

    TYPE: ClassVar[int] = 10


@dataclass(frozen=True, slots=True)
class FetchPart:
    """holder -> device: bytes ``offset``.. of a held body of ``total`` bytes."""

    TYPE: ClassVar[int] = 11
    request: bytes
    note_id: str
    content_hash: bytes
    total: int
    offset: int
    data: bytes

    def fields(self) -> list[Any]:
        return [self.request, self.note_id, self.content_hash, self.total, self.offset, self.data]

    @classmethod
    def from_fields(cls, f: list[Any]) -> FetchPart:
        ref = _NoteRef.from_fields(f[:3])
        total, offset = non_negative(f[3], "total"), non_negative(f[4], "offset")
        data = f[5]
        if not isinstance(data, bytes) or len(data) > PART_BYTES:
            raise ProtocolError(f"a body part must be bytes, at most {PART_BYTES}")
        if total > MAX_HELD_BYTES or offset + len(data) > total:
            raise ProtocolError("a body part must lie within a body of at most 4 MiB")
        return cls(ref.request, ref.note_id, ref.content_hash, total, offset, data)


@dataclass(frozen=True, slots=True)
class Release(_NoteRef):
    """device -> holder: no device of mine points at this holding any more."""

    TYPE: ClassVar[int] = 12


@dataclass(frozen=True, slots=True)
class Released(_NoteRef):
    """holder -> device: the holding is gone (or was never there)."""

    TYPE: ClassVar[int] = 13


def _role(value: Any) -> str:
    if value not in ("device", "homebase"):
        raise ProtocolError("role must be device or homebase")
    return str(value)


PeerMessage = (
    PairRequest
    | PairAccept
    | PairReject
    | Ping
    | Pong
    | SyncData
    | OffloadRequest
    | OffloadAck
    | HolderRefusal
    | FetchRequest
    | FetchPart
    | Release
    | Released
)
HolderReply = OffloadAck | HolderRefusal | FetchPart | Released
_ARITY: dict[int, tuple[int, Callable[[list[Any]], PeerMessage]]] = {
    PairRequest.TYPE: (3, PairRequest.from_fields),
    PairAccept.TYPE: (3, PairAccept.from_fields),
    PairReject.TYPE: (1, PairReject.from_fields),
    Ping.TYPE: (1, Ping.from_fields),
    Pong.TYPE: (1, Pong.from_fields),
    SyncData.TYPE: (1, SyncData.from_fields),
    OffloadRequest.TYPE: (4, OffloadRequest.from_fields),
    OffloadAck.TYPE: (3, OffloadAck.from_fields),
    HolderRefusal.TYPE: (2, HolderRefusal.from_fields),
    FetchRequest.TYPE: (3, FetchRequest.from_fields),
    FetchPart.TYPE: (6, FetchPart.from_fields),
    Release.TYPE: (3, Release.from_fields),
    Released.TYPE: (3, Released.from_fields),
}


@dataclass(frozen=True, slots=True)
class Body:
    """A decoded body: the message plus what replay protection needs."""

    message_id: bytes
    counter: int
    message: PeerMessage


def new_message_id(entropy: Entropy = SYSTEM_ENTROPY) -> bytes:
    """A fresh message id, drawn from ``entropy``."""
    return entropy.token_bytes(MESSAGE_ID_BYTES)


def encode_body(
    message: PeerMessage,
    counter: int,
    message_id: bytes | None = None,
    *,
    entropy: Entropy = SYSTEM_ENTROPY,
) -> bytes:
    """The body of ``message``: its id is ``message_id``, else one drawn from
    ``entropy`` (the sender's; the system's unless given)."""
    if counter < 1:
        raise ProtocolError("counters start at 1")
    mid = message_id or new_message_id(entropy)
    packed: bytes = msgpack.packb(
        [PEER_VERSION, message.TYPE, mid, counter, *message.fields()], use_bin_type=True
    )
    if len(packed) > MAX_BODY_BYTES:
        raise ProtocolError(f"message of {len(packed)} bytes is over {MAX_BODY_BYTES}")
    return packed


def decode_body(data: bytes) -> Body:
    items = unpack(
        data,
        "message body",
        max_bin=MAX_BODY_BYTES,
        max_str=MAX_BODY_BYTES,
        max_array=64,
        max_map=64,
    )
    if not isinstance(items, list) or len(items) < 4:
        raise ProtocolError("a message body must be an array of at least 4 items")
    version, kind, mid, counter, *fields = items
    if type(version) is not int or version != PEER_VERSION:
        raise UnknownMessage(f"unknown message version {shown(version)}")
    if isinstance(kind, bool) or not isinstance(kind, int) or kind not in _ARITY:
        raise UnknownMessage(f"unknown message type {shown(kind)}")
    arity, build = _ARITY[kind]
    if len(fields) != arity:
        raise ProtocolError(f"message type {kind} has {len(fields)} fields, not {arity}")
    counter = non_negative(counter, "counter")
    if counter < 1:
        raise ProtocolError("counters start at 1")
    return Body(sized(mid, "message id", MESSAGE_ID_BYTES), counter, build(fields))
