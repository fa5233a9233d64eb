"""The relay's fast path, pinned to the general path by differential tests.

`relaywire.ForwardDecoder`, the relay's frame splitter, turns Sends into
Delivers in the same pass, remembering recipients and frame sizes it has seen.
Whatever the chunking and whatever the frames (canonical or not, mutated,
oversized), it must yield exactly what a plain frame splitter followed by
`relaywire.parse_send` and `deliver_frame` yields, and keep the same buffering
state. `FrameDecoder` (which slices whole frames straight out of each chunk)
is checked the same way against a straightforward reference.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pixie.protocol import relaywire as rw
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import MAX_FRAME_BYTES, FrameDecoder, encode_frame


class ReferenceDecoder:
    """The obvious frame splitter: a length prefix, then that many bytes."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames = []
        while True:
            if self._need is None:
                if len(self._buffer) < 4:
                    break
                size = int.from_bytes(self._buffer[:4], "big")
                if size > self.limit:
                    raise ProtocolError("over the limit")
                del self._buffer[:4]
                self._need = size
            if len(self._buffer) < self._need:
                break
            frames.append(bytes(self._buffer[: self._need]))
            del self._buffer[: self._need]
            self._need = None
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def at_boundary(self) -> bool:
        return self._need is None and not self._buffer


KEYS = [bytes([i]) * 32 for i in range(3)]
SENDER = b"\xee" * 32  # the key the decoder's connection proved
SIZES = st.sampled_from([0, 1, 5, 255, 256, 1000, 65535, 65536, 70000])


def _send(key: int, envelope: bytes) -> bytes:
    return encode_frame(rw.encode(rw.Send(KEYS[key], envelope)))


def _mutate(frame: bytes, at: int, value: int) -> bytes:
    return frame[:at] + bytes([value]) + frame[at + 1 :]


FRAMES = st.one_of(
    st.builds(
        lambda k, n, b: _send(k, bytes([b]) * n), st.integers(0, 2), SIZES, st.integers(0, 255)
    ),
    st.builds(_send, st.integers(0, 2), st.binary(max_size=40)),
    st.builds(lambda t: encode_frame(rw.encode(rw.Ping(t))), st.integers(0, 1000)),
    # non-canonical Sends: a bin16 or bin32 header where bin8 would do
    st.builds(
        lambda e: encode_frame(
            b"\x93\x05\xc4\x20" + KEYS[0] + b"\xc5" + len(e).to_bytes(2, "big") + e
        ),
        st.binary(max_size=30),
    ),
    st.builds(
        lambda e: encode_frame(
            b"\x93\x05\xc4\x20" + KEYS[1] + b"\xc6" + len(e).to_bytes(4, "big") + e
        ),
        st.binary(max_size=30),
    ),
    st.binary(max_size=60).map(encode_frame),
    st.builds(
        _mutate,
        st.builds(lambda k, n: _send(k, b"x" * n), st.integers(0, 2), st.integers(0, 300)),
        st.integers(0, 45),
        st.integers(0, 255),
    ),
)


def _expected(frame: bytes) -> tuple[Any, ...]:
    send = rw.parse_send(frame)
    if send is not None:
        return ("send", send[0], rw.deliver_frame(SENDER, send[1]), len(send[1]))
    return ("raw", frame)


def _flatten(items: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for item in items:
        if isinstance(item, bytes):
            out.append(("raw", item))
            continue
        recipient, frames, total = item
        assert total == sum(len(rw.deliver_envelope(f)) for f in frames)
        out.extend(("send", recipient, f, len(rw.deliver_envelope(f))) for f in frames)
    return out


def _cuts(stream: bytes, cuts: list[int]) -> list[tuple[int, int]]:
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    return list(itertools.pairwise(points))


@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    st.lists(FRAMES, max_size=25),
    st.lists(st.integers(0, 400_000), max_size=12),
    st.booleans(),
    st.binary(max_size=6),
    st.booleans(),
)
def test_fast_decoder_yields_what_the_general_path_yields(
    frames: list[bytes], cuts: list[int], fast: bool, trailer: bytes, shared: bool
) -> None:
    stream = b"".join(frames) + trailer
    shapes: dict[Any, Any] = {}
    if shared:  # another connection, with another key, taught the relay these shapes first
        other = rw.ForwardDecoder(MAX_FRAME_BYTES, shapes, 0)
        other.fast, other.sender = True, b"\x01" * 32
        with contextlib.suppress(ProtocolError):
            other.items(stream)
    new, old = rw.ForwardDecoder(MAX_FRAME_BYTES, shapes, 0), ReferenceDecoder()
    new.fast, new.sender = fast, SENDER
    got: list[tuple[Any, ...]] = []
    want: list[tuple[Any, ...]] = []
    for a, b in _cuts(stream, cuts):
        chunk = stream[a:b]
        old_error = new_error = None
        try:
            old_frames = old.feed(chunk)
        except ProtocolError as exc:
            old_error = exc
        try:
            new_items = new.items(chunk)
        except ProtocolError as exc:
            new_error = exc
        assert (old_error is None) == (new_error is None)
        if old_error is not None:
            return
        want += [_expected(f) if fast else ("raw", f) for f in old_frames]
        got += _flatten(new_items)
        assert (new.buffered, new.at_boundary()) == (old.buffered, old.at_boundary())
    assert got == want


def test_fast_decoder_refuses_an_oversized_prefix_however_it_is_cut() -> None:
    for before in [b"", encode_frame(b"abc")]:
        data = before + (MAX_FRAME_BYTES + 1).to_bytes(4, "big") + b"x"
        for cut in range(1, 5):
            decoder = rw.ForwardDecoder(MAX_FRAME_BYTES, {}, 0)
            decoder.fast = True
            try:
                decoder.items(data[: len(before) + cut])
                decoder.items(data[len(before) + cut :])
            except ProtocolError:
                continue
            raise AssertionError(f"an oversized prefix cut at {cut} was accepted")


@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    st.lists(FRAMES, max_size=25),
    st.lists(st.integers(0, 400_000), max_size=12),
    st.binary(max_size=6),
    st.booleans(),
)
def test_frame_decoder_matches_the_reference(
    frames: list[bytes], cuts: list[int], trailer: bytes, as_bytearray: bool
) -> None:
    stream = b"".join(frames) + trailer
    new, old = FrameDecoder(), ReferenceDecoder()
    for a, b in _cuts(stream, cuts):
        chunk: bytes = bytearray(stream[a:b]) if as_bytearray else stream[a:b]
        old_error = new_error = None
        try:
            old_frames = old.feed(chunk)
        except ProtocolError as exc:
            old_error = exc
        try:
            new_frames = new.feed(chunk)
        except ProtocolError as exc:
            new_error = exc
        assert (old_error is None) == (new_error is None)
        if old_error is not None:
            return
        assert old_frames == new_frames and all(type(f) is bytes for f in new_frames)
        assert (new.buffered, new.at_boundary()) == (old.buffered, old.at_boundary())
