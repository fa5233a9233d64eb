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
from .framing import MAX_FRAME_BYTES, encode_frame
from .packing import unpack

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
    """client -> relay: Ed25519 signature over AUTH_CONTEXT + nonce + key."""

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


def _bytes(value: Any, what: str, exact: int | None = None, limit: int | None = None) -> bytes:
    if not isinstance(value, bytes):
        raise ProtocolError(f"{what} must be bytes")
    if exact is not None and len(value) != exact:
        raise ProtocolError(f"{what} must be {exact} bytes, not {len(value)}")
    if limit is not None and len(value) > limit:
        raise ProtocolError(f"{what} is over {limit} bytes")
    return value


def _uint(value: Any, what: str, limit: int = (1 << 63) - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ProtocolError(f"{what} must be an integer from 0 to {limit}")
    return value


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
        return Hello(_uint(fields[0], "version", 255), _bytes(fields[1], "key", KEY_BYTES))
    if code == 2:
        return Challenge(_bytes(fields[0], "nonce", NONCE_BYTES))
    if code == 3:
        return Prove(_bytes(fields[0], "signature", SIGNATURE_BYTES))
    if code == 4:
        return Welcome(_uint(fields[0], "queued", 1 << 32))
    if code == 5:
        return Send(
            _bytes(fields[0], "recipient", KEY_BYTES),
            _bytes(fields[1], "envelope", limit=MAX_ENVELOPE_BYTES),
        )
    if code == 6:
        return Deliver(
            _bytes(fields[0], "sender", KEY_BYTES),
            _bytes(fields[1], "envelope", limit=MAX_ENVELOPE_BYTES),
        )
    if code in (7, 8):
        token = _uint(fields[0], "token")
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
# generically), so these two functions handle exactly those shapes. They are
# pinned byte for byte to `decode`/`encode` by a differential test.

_SEND_CODE = _TYPES[Send]
_DELIVER_CODE = _TYPES[Deliver]
# fixarray(3), positive fixint type code, bin8 header of a 32-byte key
_SEND_PREFIX = bytes([0x93, _SEND_CODE, 0xC4, KEY_BYTES])
# ... and of a Deliver: the same but for the type code; the sender's key follows.
DELIVER_PREFIX = bytes([0x93, _DELIVER_CODE, 0xC4, KEY_BYTES])
_RECIPIENT_END = len(_SEND_PREFIX) + KEY_BYTES
_BIN8, _BIN16, _BIN32 = 0xC4, 0xC5, 0xC6
_pack = msgpack.Packer(use_bin_type=True).pack


def parse_send(frame: bytes) -> tuple[bytes, bytes] | None:
    """``(recipient, envelope)`` if ``frame`` is a Send in the shape `encode` writes.

    For anything else it returns None, which is not a verdict: the caller then
    runs `decode`, which stays the judge of what is malformed.
    """
    if not frame.startswith(_SEND_PREFIX) or len(frame) <= _RECIPIENT_END + 1:
        return None
    marker = frame[_RECIPIENT_END]
    if marker == _BIN8:
        start = _RECIPIENT_END + 2
        size = frame[_RECIPIENT_END + 1]
    elif marker == _BIN16:
        start = _RECIPIENT_END + 3
        size = int.from_bytes(frame[_RECIPIENT_END + 1 : start], "big")
    elif marker == _BIN32:
        start = _RECIPIENT_END + 5
        size = int.from_bytes(frame[_RECIPIENT_END + 1 : start], "big")
    else:
        return None
    if start + size != len(frame) or size > MAX_ENVELOPE_BYTES:
        return None
    return frame[len(_SEND_PREFIX) : _RECIPIENT_END], frame[start:]


def deliver_frame(sender: bytes, envelope: bytes) -> bytes:
    """``encode_frame(encode(Deliver(sender, envelope)))``, without the general encoder.

    A Deliver is laid out as a Send is (a 32-byte key, then the envelope), so the
    Deliver of a Send from ``sender`` has the Send's length, its type code
    replaced and its recipient replaced by ``sender``."""
    return encode_frame(_pack([_DELIVER_CODE, sender, envelope]))
