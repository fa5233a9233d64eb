"""What relays of a fleet say to each other on core NATS, and who is where.

Three kinds of message, each a few bytes of header and then packed fields,
each bounded and each checked whole before anything in it is used:

- **presence** (on `PRESENCE_SUBJECT`, which every relay reads): a relay
  announces the keys connected to it (as their fleet names, never the keys),
  withdraws them when they leave, asks everyone to announce again when it
  starts, and says when it is leaving. An announcement is a lease: a claim
  not renewed within its lease lapses, so a relay that dies without a word
  stops drawing mail within one lease.
- **a batch** (on the owning relay's own subject): parcels for keys connected
  there, each the Deliver frames of one sender to one key, with a number the
  sending relay gave it.
- **an answer** (on the sending relay's own subject): which numbers were
  written to their recipients, which the recipient's outbox refused, and which
  were for a key no longer there.

Nothing here does input or output; `pixie.relay.hotpath` moves the bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pixie.protocol import relaywire
from pixie.protocol.framing import HEADER_BYTES

RELAY_ID_BYTES = 8
NAME_BYTES = 16  # a key's fleet name: the first 16 bytes of its keyed hash
PRESENCE_SUBJECT = "pixie.fleet.presence"
# Names in one presence message, at most (64 KiB of them).
MAX_NAMES = 4096
# Claims remembered across the fleet, at most; past that a new claim is not
# taken and mail for that key goes through JetStream, as for an unknown one.
MAX_CLAIMS = 1 << 20
# Numbers in one answer, at most (the sender waits for the rest in the next).
MAX_ANSWERS = 8192
# What may follow a Deliver's sender key: msgpack's bin8, bin16 and bin32 markers.
_LENGTH_MARKERS = frozenset((0xC4, 0xC5, 0xC6))
# Frames in one parcel, at most (a parcel is the Sends of one read, at most).
MAX_PARCEL_FRAMES = 1 << 16

ANNOUNCE, WITHDRAW, QUERY, LEAVING = b"A", b"W", b"Q", b"L"
_BATCH, _ANSWER = b"B", b"R"
_PRESENCE_HEAD = struct.Struct("<c8sH")  # kind, relay id, lease in seconds
_BATCH_HEAD = struct.Struct("<c8sI")  # kind, relay id, entries
# recipient's name, number, sender's key, frames, their bytes
_ENTRY_HEAD = struct.Struct("<16sQ32sII")
_ANSWER_HEAD = struct.Struct("<cIII")  # kind, written, refused, gone
ENTRY_OVERHEAD = _ENTRY_HEAD.size
BATCH_OVERHEAD = _BATCH_HEAD.size


def batch_subject(relay: bytes) -> str:
    return f"pixie.fleet.to.{relay.hex()}"


def answer_subject(relay: bytes) -> str:
    return f"pixie.fleet.answer.{relay.hex()}"


# -- presence --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PresenceMessage:
    kind: bytes  # ANNOUNCE, WITHDRAW, QUERY or LEAVING
    relay: bytes
    lease: float  # seconds (announcements only)
    names: tuple[bytes, ...]


def presence(
    kind: bytes, relay: bytes, names: list[bytes] | tuple[bytes, ...] = (), lease: float = 0.0
) -> bytes:
    if len(names) > MAX_NAMES:
        raise ValueError(f"at most {MAX_NAMES} names in one presence message")
    return _PRESENCE_HEAD.pack(kind, relay, min(int(lease), 0xFFFF)) + b"".join(names)


def read_presence(data: bytes) -> PresenceMessage | None:
    """The presence message in ``data``, or None if it is not a whole one."""
    head = _PRESENCE_HEAD.size
    if len(data) < head or (len(data) - head) % NAME_BYTES:
        return None
    kind, relay, lease = _PRESENCE_HEAD.unpack_from(data)
    count = (len(data) - head) // NAME_BYTES
    if kind not in (ANNOUNCE, WITHDRAW, QUERY, LEAVING) or count > MAX_NAMES:
        return None
    if kind in (QUERY, LEAVING) and count:
        return None
    names = tuple(data[at : at + NAME_BYTES] for at in range(head, len(data), NAME_BYTES))
    return PresenceMessage(kind, relay, float(lease), names)


def announcements(kind: bytes, relay: bytes, names: list[bytes], lease: float = 0.0) -> list[bytes]:
    """``names`` in as many presence messages as they need."""
    return [
        presence(kind, relay, names[at : at + MAX_NAMES], lease)
        for at in range(0, len(names), MAX_NAMES)
    ]


class Presence:
    """Which relay holds each key, by the fleet's announcements: name to
    (relay, when the claim lapses). The newest claim wins (a key that moves
    is announced by its new relay); a withdrawal counts only from the relay
    that holds the claim."""

    __slots__ = ("_claims", "_swept", "max_claims")

    def __init__(self, max_claims: int = MAX_CLAIMS) -> None:
        self._claims: dict[bytes, tuple[bytes, float]] = {}
        self.max_claims = max_claims
        self._swept = float("-inf")  # when the full table was last swept for lapsed claims

    def __len__(self) -> int:
        return len(self._claims)

    def where(self, name: bytes, now: float) -> bytes | None:
        claim = self._claims.get(name)
        if claim is None:
            return None
        if claim[1] <= now:
            del self._claims[name]
            return None
        return claim[0]

    def claim(self, relay: bytes, names: tuple[bytes, ...], until: float, now: float) -> None:
        claims = self._claims
        for name in names:
            if name not in claims and len(claims) >= self.max_claims:
                if now - self._swept < 1.0:
                    return  # full, and swept a moment ago: no sweep per claim
                self._swept = now
                self._expire(now)
                claims = self._claims
                if len(claims) >= self.max_claims:
                    return  # full: the rest go through JetStream
            claims[name] = (relay, until)

    def withdraw(self, relay: bytes, names: tuple[bytes, ...] | list[bytes]) -> None:
        claims = self._claims
        for name in names:
            claim = claims.get(name)
            if claim is not None and claim[0] == relay:
                del claims[name]

    def drop_relay(self, relay: bytes) -> None:
        self._claims = {n: c for n, c in self._claims.items() if c[0] != relay}

    def _expire(self, now: float) -> None:
        self._claims = {n: c for n, c in self._claims.items() if c[1] > now}


# -- batches and answers -----------------------------------------------------------


def batch(relay: bytes, entries: list[bytes]) -> bytes:
    """One batch from ``relay`` of `parcel` bytes."""
    return batch_head(relay, len(entries)) + b"".join(entries)


def batch_head(relay: bytes, parcels: int) -> bytes:
    """What precedes a batch's ``parcels`` parcels (the sender joins the parts
    once, as it writes: see `pixie.relay.natscore.CoreLink.send`)."""
    return _BATCH_HEAD.pack(_BATCH, relay, parcels)


def parcel(name: bytes, number: int, sender: bytes, frames: list[bytes]) -> bytes:
    """One parcel of a batch: Deliver frames from ``sender`` (as
    `relaywire.deliver_frame` makes them) for the key named ``name``."""
    body = b"".join(frames)
    return parcel_head(name, number, sender, len(frames), len(body)) + body


def parcel_head(name: bytes, number: int, sender: bytes, frames: int, size: int) -> bytes:
    """What precedes a parcel's ``frames`` frames of ``size`` bytes in all."""
    return _ENTRY_HEAD.pack(name, number, sender, frames, size)


# What a batch holds: (name, number, sender, frames, their bytes in all).
Parcel = tuple[bytes, int, bytes, list[bytes], int]


def read_batch(data: bytes) -> tuple[bytes, list[Parcel]] | None:
    """(sending relay, [(name, number, sender, frames, envelope bytes)]) from a
    whole batch whose every frame is a Deliver from its parcel's sender (its
    length prefix, the Deliver's header with that sender's key, and the marker
    of the envelope's length), else None."""
    if len(data) < _BATCH_HEAD.size:
        return None
    kind, relay, count = _BATCH_HEAD.unpack_from(data)
    if kind != _BATCH:
        return None
    at, end = _BATCH_HEAD.size, len(data)
    unpack, size = _ENTRY_HEAD.unpack_from, _ENTRY_HEAD.size
    header, prefix = HEADER_BYTES, relaywire.DELIVER_PREFIX
    start_of_envelope = header + relaywire.KEY_END
    out: list[Parcel] = []
    for _ in range(count):
        if at + size > end:
            return None
        name, number, sender, frame_count, length = unpack(data, at)
        at += size
        stop = at + length
        if stop > end or frame_count > MAX_PARCEL_FRAMES:
            return None
        head = prefix + sender
        frames: list[bytes] = []
        for _ in range(frame_count):
            if at + start_of_envelope >= stop:
                return None
            frame_end = at + header + int.from_bytes(data[at : at + header], "big")
            if (
                frame_end > stop
                or frame_end <= at + start_of_envelope
                or not data.startswith(head, at + header)
                or data[at + start_of_envelope] not in _LENGTH_MARKERS
            ):
                return None
            frames.append(data[at:frame_end])
            at = frame_end
        if at != stop or not frames:
            return None
        out.append((name, number, sender, frames, length))
    if at != end:
        return None
    return relay, out


def answer(written: list[int], refused: list[int], gone: list[int]) -> bytes:
    numbers = written + refused + gone
    return _ANSWER_HEAD.pack(_ANSWER, len(written), len(refused), len(gone)) + struct.pack(
        f"<{len(numbers)}Q", *numbers
    )


def read_answer(data: bytes) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(written, refused, gone) from a whole answer, else None."""
    head = _ANSWER_HEAD.size
    if len(data) < head:
        return None
    kind, written, refused, gone = _ANSWER_HEAD.unpack_from(data)
    total = written + refused + gone
    if kind != _ANSWER or total > MAX_ANSWERS or len(data) != head + 8 * total:
        return None
    numbers = struct.unpack_from(f"<{total}Q", data, head)
    return (
        numbers[:written],
        numbers[written : written + refused],
        numbers[written + refused :],
    )


__all__ = [
    "ANNOUNCE",
    "BATCH_OVERHEAD",
    "ENTRY_OVERHEAD",
    "LEAVING",
    "MAX_ANSWERS",
    "MAX_NAMES",
    "NAME_BYTES",
    "PRESENCE_SUBJECT",
    "QUERY",
    "RELAY_ID_BYTES",
    "WITHDRAW",
    "Presence",
    "PresenceMessage",
    "announcements",
    "answer",
    "answer_subject",
    "batch",
    "batch_head",
    "batch_subject",
    "parcel",
    "parcel_head",
    "presence",
    "read_answer",
    "read_batch",
    "read_presence",
]
