"""Length-prefixed frames on a byte stream, with a hard size bound.

A frame is a 4-byte big-endian length followed by that many bytes. Anything
above `MAX_FRAME_BYTES` is refused as soon as its length prefix arrives, before
a single byte of the body is buffered, so a peer cannot make us hold more than
one maximal frame. Larger bodies are chunked by the layer above.
"""

from __future__ import annotations

import struct

from .errors import ProtocolError

MAX_FRAME_BYTES = 1 << 20  # 1 MiB
HEADER_BYTES = 4
# The smallest sealed envelope: an ephemeral key (32), a Box nonce (24), the
# smallest padded plaintext (256) and its Poly1305 tag (16). It lives here, not
# in envelope.py, so the relay (which may not import the envelope code) can
# refuse anything shorter before it holds a byte of it.
MIN_PADDED_BYTES = 256
MIN_ENVELOPE_BYTES = 32 + 24 + 16 + MIN_PADDED_BYTES


def encode_frame(payload: bytes, limit: int = MAX_FRAME_BYTES) -> bytes:
    if len(payload) > limit:
        raise ProtocolError(f"frame of {len(payload)} bytes is over the {limit}-byte limit")
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


class FrameDecoder:
    """Feed it bytes as they arrive; it returns the complete frames.

    Whole frames are sliced straight out of each chunk fed; only a frame that
    straddles chunks is gathered in a buffer (one copy per chunk of it)."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self.limit = limit
        self._rest = bytearray()  # the start of an unfinished frame, length prefix and all
        self._need: int | None = None  # that frame's whole length, once its prefix is in

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        if type(data) is not bytes:
            data = bytes(data)
        frames: list[bytes] = []
        pos = 0
        if self._rest:
            frame, pos = self._finish(data)
            if frame is None:
                return frames
            frames.append(frame)
        end = len(data)
        limit = self.limit
        while end - pos >= HEADER_BYTES:
            (size,) = unpack_header(data, pos)
            if size > limit:
                raise oversize(size, limit)
            start = pos + HEADER_BYTES
            if start + size > end:
                break
            pos = start + size
            frames.append(data[start:pos])
        self._keep(data, pos)
        return frames

    def _finish(self, data: bytes) -> tuple[bytes | None, int]:
        """Complete the unfinished frame from the start of ``data``: that frame and
        where the rest of ``data`` begins, or None if ``data`` did not finish it
        (and is all held)."""
        rest = self._rest
        pos = 0
        if self._need is None:
            pos = HEADER_BYTES - len(rest)
            rest += data[:pos]
            if len(rest) < HEADER_BYTES:
                return None, len(data)
            (size,) = unpack_header(rest)
            if size > self.limit:
                raise oversize(size, self.limit)
            self._need = HEADER_BYTES + size
        want = self._need - len(rest)
        if len(data) - pos < want:
            rest += memoryview(data)[pos:]
            return None, len(data)
        rest += memoryview(data)[pos : pos + want]
        del rest[:HEADER_BYTES]
        frame = bytes(rest)
        rest.clear()
        self._need = None
        return frame, pos + want

    def _keep(self, data: bytes, pos: int) -> None:
        """Hold ``data[pos:]``, the start of a frame (its prefix already checked if whole)."""
        if pos < len(data):
            self._rest += memoryview(data)[pos:]
            if len(data) - pos >= HEADER_BYTES:
                self._need = HEADER_BYTES + unpack_header(data, pos)[0]

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete (bounded by the limit plus a header),
        not counting its length prefix once that is whole."""
        held = len(self._rest)
        return held - HEADER_BYTES if self._need is not None else held

    def at_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for a stream to end)."""
        return not self._rest


# A frame's length prefix, read at an offset (a 1-tuple) and written.
unpack_header = struct.Struct(">I").unpack_from
pack_header = struct.Struct(">I").pack


def oversize(size: int, limit: int) -> ProtocolError:
    """The error for a frame whose length prefix announces more than ``limit`` bytes."""
    return ProtocolError(f"frame of {size} bytes announced; the limit is {limit}")
