"""Length-prefixed frames on a byte stream, with a hard size bound.

A frame is a 4-byte big-endian length followed by that many bytes. Anything
above `MAX_FRAME_BYTES` is refused as soon as its length prefix arrives, before
a single byte of the body is buffered, so a peer cannot make us hold more than
one maximal frame. Larger bodies are chunked by the layer above.
"""

from __future__ import annotations

from .errors import ProtocolError

MAX_FRAME_BYTES = 1 << 20  # 1 MiB
HEADER_BYTES = 4


def encode_frame(payload: bytes, limit: int = MAX_FRAME_BYTES) -> bytes:
    if len(payload) > limit:
        raise ProtocolError(f"frame of {len(payload)} bytes is over the {limit}-byte limit")
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


class FrameDecoder:
    """Feed it bytes as they arrive; it returns the complete frames."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._need: int | None = None  # body length of the frame being read

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buffer) < HEADER_BYTES:
                    break
                size = int.from_bytes(self._buffer[:HEADER_BYTES], "big")
                if size > self.limit:
                    raise ProtocolError(
                        f"frame of {size} bytes announced; the limit is {self.limit}"
                    )
                del self._buffer[:HEADER_BYTES]
                self._need = size
            if len(self._buffer) < self._need:
                break
            frames.append(bytes(self._buffer[: self._need]))
            del self._buffer[: self._need]
            self._need = None
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete (bounded by the limit plus a header)."""
        return len(self._buffer)

    def at_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for a stream to end)."""
        return self._need is None and not self._buffer
