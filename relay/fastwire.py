"""The two relay frames on the forwarding path, without the general codec.

Every envelope the relay forwards arrives as a ``Send`` and leaves as a
``Deliver``. For 1 KiB envelopes `relaywire.decode` and `relaywire.encode`
cost more than all of the relay's own routing (about 3 us each, mostly
choosing among message types and checking fields generically), so this module
handles exactly those two shapes directly and leaves everything else to
relaywire:

- `parse_send` recognises a Send in the shape encoders write (a three-item
  array: type code, 32-byte recipient, binary envelope that ends the frame)
  and returns the recipient and envelope `relaywire.decode` would put in its
  `Send`; for any other frame it returns None and the caller decodes it with
  relaywire, which stays the judge of what is malformed.
- `deliver_frame` packs a Deliver frame byte for byte as
  ``encode_frame(relaywire.encode(Deliver(envelope)))``.

The type codes and prefixes come from relaywire itself, and a differential test
pins both functions to relaywire for every size class and for mutated frames.
(They belong in relaywire; until they are there, they live here.)
"""

from __future__ import annotations

import msgpack

from pixie.protocol import relaywire
from pixie.protocol.framing import encode_frame

# The start of a Send as relaywire encodes it: fixarray(3), type code, bin8 of 32 bytes.
_SEND_PREFIX = relaywire.encode(relaywire.Send(bytes(relaywire.KEY_BYTES), b""))[:4]
_RECIPIENT_END = len(_SEND_PREFIX) + relaywire.KEY_BYTES
_DELIVER_CODE: int = msgpack.unpackb(relaywire.encode(relaywire.Deliver(b"")))[0]
_BIN8, _BIN16, _BIN32 = 0xC4, 0xC5, 0xC6

_pack = msgpack.Packer(use_bin_type=True).pack


def parse_send(frame: bytes) -> tuple[bytes, bytes] | None:
    """``(recipient, envelope)`` if ``frame`` is a Send in the shape encoders write,
    else None (which is not an error: relaywire then decides)."""
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
    if start + size != len(frame) or size > relaywire.MAX_ENVELOPE_BYTES:
        return None
    return frame[len(_SEND_PREFIX) : _RECIPIENT_END], frame[start:]


def deliver_frame(envelope: bytes) -> bytes:
    """``encode_frame(relaywire.encode(relaywire.Deliver(envelope)))``, faster."""
    return encode_frame(_pack([_DELIVER_CODE, envelope]))
