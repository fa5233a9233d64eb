"""The byte layout of Sends and Delivers, which the relay's fast path relies on,
agrees with the general codec.

`relaywire` writes the layout down once (`KEY_AT`, `KEY_END`, `parse_send`,
`deliver_frame`, `deliver_head`, `deliver_envelope`); these tests check each
against `relaywire.encode`/`decode` for envelopes of every length-header size
(bin8, bin16, bin32), and the whole fast path (`ForwardDecoder`) against
decoding each Send and encoding its Deliver the general way.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pixie.protocol import relaywire as rw
from pixie.protocol.framing import HEADER_BYTES, MAX_FRAME_BYTES, encode_frame

KEYS = st.binary(min_size=rw.KEY_BYTES, max_size=rw.KEY_BYTES)
# Around each boundary of the envelope's length header: bin8 up to 255 bytes,
# bin16 up to 65,535, bin32 beyond.
ENVELOPES = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda n, b: bytes([b]) * n,
        st.sampled_from([0, 1, 255, 256, 65_535, 65_536, 70_000]),
        st.integers(0, 255),
    ),
)
SETTINGS = settings(max_examples=150, suppress_health_check=list(HealthCheck), deadline=None)


def test_the_key_offsets_are_where_the_codec_writes_the_key() -> None:
    key = bytes(range(rw.KEY_BYTES))
    send = rw.encode(rw.Send(key, b""))
    deliver = rw.encode(rw.Deliver(key, b""))
    assert send[rw.KEY_AT : rw.KEY_END] == key == deliver[rw.KEY_AT : rw.KEY_END]
    assert deliver[: rw.KEY_AT] == rw.DELIVER_PREFIX
    assert send[rw.KEY_END :] == deliver[rw.KEY_END :] == b"\xc4\x00"  # bin8, 0 bytes


@SETTINGS
@given(recipient=KEYS, sender=KEYS, envelope=ENVELOPES)
def test_the_fast_layout_agrees_with_the_codec(
    recipient: bytes, sender: bytes, envelope: bytes
) -> None:
    send = rw.encode(rw.Send(recipient, envelope))
    deliver = rw.deliver_frame(sender, envelope)
    # A Deliver is the codec's, framed.
    assert deliver == encode_frame(rw.encode(rw.Deliver(sender, envelope)))
    assert rw.decode(deliver[HEADER_BYTES:]) == rw.Deliver(sender, envelope)
    # A Send is read where the codec writes it.
    assert rw.parse_send(send) == (recipient, envelope)
    assert send[rw.KEY_AT : rw.KEY_END] == recipient
    # The Deliver of a Send: the known head, then the Send from its envelope's
    # length header on (what the fast path builds, with one slice).
    assert rw.deliver_head(len(send), sender) + send[rw.KEY_END :] == deliver
    # ... and its envelope read back.
    assert rw.deliver_envelope(deliver) == envelope
    assert rw.deliver_envelope_size(deliver) == len(envelope)


Sent = tuple[int, bytes]
SENDS = st.lists(
    st.tuples(st.integers(0, 2), ENVELOPES),
    max_size=12,
)


@SETTINGS
@given(
    first=SENDS,
    second=SENDS,
    cuts=st.lists(st.integers(0, 300_000), max_size=6),
    min_envelope=st.sampled_from([0, 1, 256]),
)
def test_the_fast_path_forwards_what_the_codec_would(
    first: list[Sent], second: list[Sent], cuts: list[int], min_envelope: int
) -> None:
    """Each Send becomes exactly the Deliver the codec writes for the Send the codec
    reads, to the recipient the codec reads, through however many shapes the
    decoder has learned (the second stream repeats recipients and sizes)."""
    recipients = [bytes([i + 1]) * rw.KEY_BYTES for i in range(3)]
    sender = b"\xee" * rw.KEY_BYTES
    decoder = rw.ForwardDecoder(MAX_FRAME_BYTES, {}, min_envelope)
    decoder.fast, decoder.sender = True, sender
    for sends in (first, second, first):
        payloads = [rw.encode(rw.Send(recipients[i], e)) for i, e in sends]
        stream = b"".join(map(encode_frame, payloads))
        points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
        got: list[tuple[bytes, bytes]] = []
        for a, b in itertools.pairwise(points):
            for item in decoder.items(stream[a:b]):
                if isinstance(item, bytes):
                    message = rw.decode(item)  # left to the codec: a short envelope
                    assert isinstance(message, rw.Send)
                    assert len(message.envelope) < min_envelope
                    got.append((message.recipient, rw.deliver_frame(sender, message.envelope)))
                    continue
                recipient, frames, size = item
                assert size == sum(map(rw.deliver_envelope_size, frames))
                assert all(rw.deliver_envelope_size(f) >= min_envelope for f in frames)
                got.extend((recipient, f) for f in frames)
        want = []
        for payload in payloads:
            send = rw.decode(payload)
            assert isinstance(send, rw.Send)
            want.append(
                (send.recipient, encode_frame(rw.encode(rw.Deliver(sender, send.envelope))))
            )
        assert got == want
        assert decoder.at_boundary()
