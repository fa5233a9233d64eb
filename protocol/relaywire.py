"""What a client and the relay say to each other: routing, never content.

Every relay frame is a msgpack array whose first item is a small integer type.
A client proves it holds the private key of the identity it claims before it can
send or receive anything (the relay signs nothing and holds no key: the client
signs the relay's random challenge with its Ed25519 identity key, as DERP has a
client prove its key). After that the relay only ever sees a recipient key and
an opaque envelope, and it tells each recipient which key sent each envelope:
the key that sender's connection proved (as DERP's RecvPacket carries the
source key), so a recipient can drop mail from keys it does not know before it
spends any cryptography on it.

Version 2 added that sender to Deliver. A relay refuses a Hello of any other
version, so a relay and the peers of one release go together.

The decoder is strict: bounded lengths, exact arity, every field type-checked,
frozen dataclasses out, `ProtocolError` for anything else. It checks a value's
type and size before anything formats, logs or walks into it: an error message
names fields and bounds, never a value a peer sent (a value nested a thousand
deep would exhaust the stack of `repr`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from .errors import ProtocolError
from .framing import (
    HEADER_BYTES,
    MAX_FRAME_BYTES,
    FrameDecoder,
    encode_frame,
    oversize,
    pack_header,
    unpack_header,
)
from .packing import unpack
from .validate import binary, integer

RELAY_VERSION = 2  # 2: Deliver carries the sender's proven key
KEY_BYTES = 32
NONCE_BYTES = 32
SIGNATURE_BYTES = 64
MAX_REASON_CHARS = 200
# Room for the routing header inside one frame.
MAX_ENVELOPE_BYTES = MAX_FRAME_BYTES - 64
AUTH_CONTEXT = b"pixie-relay-auth-v1\x00"


@dataclass(frozen=True, slots=True)
class Hello:
    """client -> relay: the identity key it claims."""

    version: int
    key: bytes


@dataclass(frozen=True, slots=True)
class Challenge:
    """relay -> client: fresh random bytes to sign."""

    nonce: bytes


@dataclass(frozen=True, slots=True)
class Prove:
    """client -> relay: Ed25519 signature over AUTH_CONTEXT + nonce + key (see `proof`)."""

    signature: bytes


@dataclass(frozen=True, slots=True)
class Welcome:
    """relay -> client: authenticated; ``queued`` envelopes wait in its mailbox."""

    queued: int


@dataclass(frozen=True, slots=True)
class Send:
    """client -> relay: route ``envelope`` to ``recipient``."""

    recipient: bytes
    envelope: bytes


@dataclass(frozen=True, slots=True)
class Deliver:
    """relay -> client: an envelope addressed to it, from the key ``sender``'s
    connection proved (the envelope's own signature must name the same key)."""

    sender: bytes
    envelope: bytes


@dataclass(frozen=True, slots=True)
class Ping:
    token: int


@dataclass(frozen=True, slots=True)
class Pong:
    token: int


@dataclass(frozen=True, slots=True)
class Refuse:
    """relay -> client: why the relay is closing the connection."""

    reason: str


RelayMessage = Hello | Challenge | Prove | Welcome | Send | Deliver | Ping | Pong | Refuse

_TYPES: dict[type[Any], int] = {
    Hello: 1,
    Challenge: 2,
    Prove: 3,
    Welcome: 4,
    Send: 5,
    Deliver: 6,
    Ping: 7,
    Pong: 8,
    Refuse: 9,
}


def auth_message(nonce: bytes, key: bytes) -> bytes:
    return AUTH_CONTEXT + nonce + key


def encode(message: RelayMessage) -> bytes:
    code = _TYPES[type(message)]
    match message:
        case Hello(version, key):
            fields: list[Any] = [version, key]
        case Challenge(nonce):
            fields = [nonce]
        case Prove(signature):
            fields = [signature]
        case Welcome(queued):
            fields = [queued]
        case Send(recipient, envelope):
            fields = [recipient, envelope]
        case Deliver(sender, envelope):
            fields = [sender, envelope]
        case Ping(token) | Pong(token):
            fields = [token]
        case Refuse(reason):
            fields = [reason[:MAX_REASON_CHARS]]
    packed: bytes = msgpack.packb([code, *fields], use_bin_type=True)
    return packed


_ARITY = {1: 2, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2, 7: 1, 8: 1, 9: 1}  # fields after the type


def decode(frame: bytes) -> RelayMessage:
    """Decode one relay frame, or raise `ProtocolError`. Never a half-built message."""
    items = unpack(
        frame, "relay frame", max_bin=MAX_ENVELOPE_BYTES, max_str=MAX_REASON_CHARS * 4, max_array=4
    )
    if type(items) is not list or not items:
        raise ProtocolError("a relay frame must be a non-empty array")
    code, *fields = items
    if type(code) is not int:  # checked before anything formats it
        raise ProtocolError("a relay frame type must be an integer")
    if code not in _ARITY:
        raise ProtocolError(f"unknown relay frame type {code}")
    if len(fields) != _ARITY[code]:
        raise ProtocolError(f"relay frame type {code} has {len(fields)} fields")
    if code == 1:
        return Hello(
            integer(fields[0], "version", 0, 255),
            binary(fields[1], "key", size=KEY_BYTES, show_length=True),
        )
    if code == 2:
        return Challenge(binary(fields[0], "nonce", size=NONCE_BYTES, show_length=True))
    if code == 3:
        return Prove(binary(fields[0], "signature", size=SIGNATURE_BYTES, show_length=True))
    if code == 4:
        return Welcome(integer(fields[0], "queued", 0, 1 << 32))
    if code == 5:
        return Send(
            binary(fields[0], "recipient", size=KEY_BYTES, show_length=True),
            binary(fields[1], "envelope", limit=MAX_ENVELOPE_BYTES),
        )
    if code == 6:
        return Deliver(
            binary(fields[0], "sender", size=KEY_BYTES, show_length=True),
            binary(fields[1], "envelope", limit=MAX_ENVELOPE_BYTES),
        )
    if code in (7, 8):
        token = integer(fields[0], "token")
        return Ping(token) if code == 7 else Pong(token)
    reason = fields[0]
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise ProtocolError("reason must be a short string")
    return Refuse(reason)


# -- the forwarding path ------------------------------------------------------------------
#
# Every envelope the relay forwards arrives as a Send and leaves as a Deliver.
# For 1 KiB envelopes the general `decode` and `encode` cost more than all of
# the relay's own routing (choosing among types and checking fields
# generically), so the byte layout of exactly those shapes is written down
# here, once, and read by `parse_send`, `deliver_frame`, `deliver_envelope` and
# `ForwardDecoder`. Differential tests pin all of them to `decode`/`encode`.
#
# A Send as `encode` writes it (and a Deliver alike, but for its type code):
#
#     0x93            fixarray of 3
#     0x05 | 0x06     the type code (Send | Deliver), a positive fixint
#     0xC4 0x20       bin8 header of a 32-byte key
#     key             32 bytes: the recipient (Send) or the proven sender (Deliver)
#     header          the envelope's bin8, bin16 or bin32 length header
#     envelope        the rest of the frame
#
# so a Deliver is as long as the Send it forwards, and the same from the
# envelope's length header on.

_SEND_CODE = _TYPES[Send]
_DELIVER_CODE = _TYPES[Deliver]
# fixarray(3), positive fixint type code, bin8 header of a 32-byte key
_SEND_PREFIX = bytes([0x93, _SEND_CODE, 0xC4, KEY_BYTES])
# ... and of a Deliver: the same but for the type code; the sender's key follows.
DELIVER_PREFIX = bytes([0x93, _DELIVER_CODE, 0xC4, KEY_BYTES])
# In a Send or a Deliver (without its length prefix): where the key starts, and
# where it ends and the envelope's length header starts.
KEY_AT = len(_SEND_PREFIX)
KEY_END = KEY_AT + KEY_BYTES
_BIN8, _BIN16, _BIN32 = 0xC4, 0xC5, 0xC6
# How long the envelope's length header is, by its marker.
_LENGTH_HEADER_BYTES = {_BIN8: 2, _BIN16: 3, _BIN32: 5}
# In a Deliver frame as `deliver_frame` makes it (length prefix included): where
# the envelope's length header starts, and where the envelope starts, by the
# header's marker.
_DELIVER_MARKER_AT = HEADER_BYTES + KEY_END
_DELIVER_ENVELOPE_AT = {m: _DELIVER_MARKER_AT + n for m, n in _LENGTH_HEADER_BYTES.items()}
_pack = msgpack.Packer(use_bin_type=True).pack


def parse_send(frame: bytes) -> tuple[bytes, bytes] | None:
    """``(recipient, envelope)`` if ``frame`` is a Send in the shape `encode` writes.

    For anything else it returns None, which is not a verdict: the caller then
    runs `decode`, which stays the judge of what is malformed.
    """
    if not frame.startswith(_SEND_PREFIX) or len(frame) <= KEY_END + 1:
        return None
    header = _LENGTH_HEADER_BYTES.get(frame[KEY_END])
    if header is None:
        return None
    start = KEY_END + header
    size = int.from_bytes(frame[KEY_END + 1 : start], "big")
    if start + size != len(frame) or size > MAX_ENVELOPE_BYTES:
        return None
    return frame[KEY_AT:KEY_END], frame[start:]


def deliver_frame(sender: bytes, envelope: bytes) -> bytes:
    """``encode_frame(encode(Deliver(sender, envelope)))``, without the general encoder."""
    return encode_frame(_pack([_DELIVER_CODE, sender, envelope]))


def deliver_head(size: int, sender: bytes) -> bytes:
    """The first bytes of a Deliver frame from ``sender`` whose payload is ``size``
    bytes long: its length prefix, array header, type code and the sender's key.
    The Send it forwards, from its envelope's length header on, completes it."""
    return pack_header(size) + DELIVER_PREFIX + sender


def deliver_envelope(frame: bytes) -> bytes:
    """The envelope inside a frame `deliver_frame` made."""
    return frame[_DELIVER_ENVELOPE_AT[frame[_DELIVER_MARKER_AT]] :]


def deliver_envelope_size(frame: bytes) -> int:
    """``len(deliver_envelope(frame))``, without the copy."""
    return len(frame) - _DELIVER_ENVELOPE_AT[frame[_DELIVER_MARKER_AT]]


# What `ForwardDecoder.items` yields, in stream order: a frame to decode as it is,
# or a run of Sends to one recipient, already re-framed as Delivers (each as
# `deliver_frame` makes it), with the bytes of their envelopes in all.
Run = tuple[bytes, list[bytes], int]
Item = bytes | Run
# What Sends of one frame size share, relay-wide: (the envelope's length header,
# the envelope's size).
Shape = tuple[bytes, int]
# What one connection's Sends of one frame size become: (the envelope's length
# header, the Deliver's bytes up to the end of the sender's key, the envelope's size).
_Known = tuple[bytes, bytes, int]
SHAPES = 1024  # frame sizes remembered, relay-wide (real envelopes come in size buckets)
_KNOWN = 32  # ... and by each connection, for its own key


class ForwardDecoder(FrameDecoder):
    """Splits a client's byte stream into frames as `FrameDecoder` does (the same
    bound, refused as soon as a length prefix announces more), and once the client
    is authenticated (``fast``, with its proven key as ``sender``) turns its Sends
    into Delivers in the same pass.

    A Send that `parse_send` accepts, written the way `encode` writes it, teaches
    two things: its first bytes (type and recipient) and, for its frame size, its
    envelope's length header (``shapes``, shared by the relay's connections).
    parse_send reads nothing but those bytes and the frame's size, so a later
    frame of a known size that starts with the same type and recipient and has
    the same length header is a Send to that recipient whose envelope is its
    tail. Its Deliver is as long as the Send and laid out alike: a known head
    (`deliver_head`) and the Send from its length header on. Two comparisons
    and a slice instead of a parse and an encode, and nothing accepted that
    `parse_send` would not accept alike. Anything else is yielded as the frame
    it is, for `decode`. Sends with an envelope under ``min_envelope`` bytes
    teach nothing, so every Send in a run is long enough; the short ones are
    yielded as frames."""

    def __init__(self, limit: int, shapes: dict[int, Shape], min_envelope: int) -> None:
        super().__init__(limit)
        self.min_envelope = min_envelope
        self.fast = False
        self.sender = bytes(KEY_BYTES)  # the key this connection proved
        self._shapes = shapes
        self._known: dict[int, _Known] = {}  # the shapes this connection used, with its key
        self._to = b""  # the first bytes of the last Send learned, up to its recipient's end
        self._recipient = b""  # and that recipient

    def _adopt(self, size: int) -> _Known | None:
        """What a Send of frame size ``size`` from this connection becomes, if that
        size is known relay-wide."""
        shape = self._shapes.get(size)
        if shape is None:
            return None
        known = self._known
        if len(known) >= _KNOWN:
            known.clear()
        known[size] = entry = (shape[0], deliver_head(size, self.sender), shape[1])
        return entry

    def items(self, data: bytes) -> list[Item]:
        """Every frame ``data`` completes, in order (see `Item`)."""
        items: list[Item] = []
        pos = 0
        if self._rest:
            frame, pos = self._finish(data)
            if frame is None:
                return items
            self._frame(frame, items)
        end = len(data)
        limit = self.limit
        to = self._to
        mine = self._known.get
        after_to = KEY_END
        run: list[bytes] = []
        run_bytes = 0
        while end - pos >= HEADER_BYTES:
            (size,) = unpack_header(data, pos)
            if size > limit:
                raise oversize(size, limit)
            start = pos + HEADER_BYTES
            if start + size > end:
                break
            pos = start + size
            known = mine(size)
            if known is None and to:  # nothing learned on this connection: no fast path
                known = self._adopt(size)
            if known is not None:
                length, head, envelope = known
                if data.startswith(to, start) and data.startswith(length, start + after_to):
                    run.append(head + data[start + after_to : pos])
                    run_bytes += envelope
                    continue
            if run:
                items.append((self._recipient, run, run_bytes))
                run = []
                run_bytes = 0
            self._frame(data[start:pos], items)
            to = self._to
        if run:
            items.append((self._recipient, run, run_bytes))
        self._keep(data, pos)
        return items

    def _frame(self, frame: bytes, items: list[Item]) -> None:
        """One whole frame, the slower way: a Send of a known size (perhaps to another
        recipient), or a Send `parse_send` accepts (and what it teaches learned), or
        else the frame itself."""
        to = self._to
        known = (self._known.get(len(frame)) or self._adopt(len(frame))) if to else None
        if (
            known is not None
            and frame.startswith(known[0], KEY_END)
            and frame.startswith(to[:KEY_AT])  # the type, as in every Send learned
        ):
            if not frame.startswith(to):
                self._to = frame[:KEY_END]
                self._recipient = frame[KEY_AT:KEY_END]
            items.append((self._recipient, [known[1] + frame[KEY_END:]], known[2]))
            return
        send = parse_send(frame) if self.fast else None
        if send is None:
            items.append(frame)
            return
        recipient, envelope = send
        if len(envelope) < self.min_envelope:
            items.append(frame)  # refused (and counted) by whoever routes it
            return
        deliver = deliver_frame(self.sender, envelope)
        tail = len(frame) - len(envelope)
        length = frame[KEY_END:tail]
        head = deliver_head(len(frame), self.sender)
        if (
            frame[KEY_AT:KEY_END] == recipient
            and frame[tail:] == envelope
            and deliver == head + length + envelope  # the layout `encode` writes, not another
        ):
            if frame[:KEY_END] != self._to:
                self._to = frame[:KEY_END]
                self._recipient = recipient
            recipient = self._recipient
            shapes = self._shapes
            if len(frame) not in shapes:
                if len(shapes) >= SHAPES:
                    shapes.clear()
                shapes[len(frame)] = (length, len(envelope))
        items.append((recipient, [deliver], len(envelope)))
