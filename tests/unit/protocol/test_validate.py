"""The wire codecs' shared field checks: what each accepts, and the exact words
of what it refuses (the codecs' error messages, kept as they were)."""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.protocol import peerwire, relaywire, syncwire
from pixie.protocol import validate as v
from pixie.protocol.errors import ProtocolError

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False),
    st.binary(max_size=8),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
)


def _refusal(check: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ProtocolError) as caught:
        check(*args, **kwargs)
    return str(caught.value)


@given(VALUES)
def test_each_check_returns_its_value_or_raises_protocol_error(value: object) -> None:
    checks = [
        lambda: v.integer(value, "n", -5, 5),
        lambda: v.non_negative(value, "n"),
        lambda: v.boolean(value, "b"),
        lambda: v.binary(value, "b", size=4),
        lambda: v.binary(value, "b", limit=4),
        lambda: v.sized(value, "b", 4),
        lambda: v.text(value, "t", 4),
        lambda: v.optional_text(value, "t", 4),
        lambda: v.array(value, "a", 2),
    ]
    for check in checks:
        with contextlib.suppress(ProtocolError):
            assert check() is value


def test_integers_are_bounded_and_never_booleans() -> None:
    assert v.integer(0, "n") == 0 and v.integer(v.INT64_MAX, "n") == v.INT64_MAX
    assert v.integer(-3, "n", -3, 3) == -3
    for bad in (True, -1, v.INT64_MAX + 1, 1.0, "1", None):
        assert _refusal(v.integer, bad, "n") == f"n must be an integer from 0 to {v.INT64_MAX}"
    assert _refusal(v.integer, 4, "seq", 1, 3) == "seq must be an integer from 1 to 3"
    assert v.non_negative(v.INT64_MAX, "token") == v.INT64_MAX
    for bad in (False, -1, 1 << 63, 2.0):
        assert _refusal(v.non_negative, bad, "token") == "token must be a non-negative integer"
    assert v.boolean(False, "last") is False
    for bad in (0, 1, None, "true"):
        assert _refusal(v.boolean, bad, "last") == "last must be true or false"


def test_bytes_say_what_was_wrong_in_each_codecs_words() -> None:
    assert v.binary(b"abcd", "id", size=4, limit=4) == b"abcd"
    assert _refusal(v.binary, "abcd", "id", size=4) == "id must be bytes"
    assert _refusal(v.binary, bytearray(4), "id") == "id must be bytes"
    assert _refusal(v.binary, b"abc", "id", size=4) == "id must be 4 bytes"
    assert (
        _refusal(v.binary, b"abc", "key", size=4, show_length=True) == "key must be 4 bytes, not 3"
    )
    assert _refusal(v.binary, b"abcde", "blob", limit=4) == "blob is over 4 bytes"
    assert v.sized(b"ab", "proof", 2) == b"ab"
    assert _refusal(v.sized, b"a", "proof", 2) == "proof must be 2 bytes"
    assert _refusal(v.sized, "ab", "proof", 2) == "proof must be 2 bytes"


def test_text_and_lists() -> None:
    assert v.text("abc", "title", 3) == "abc"
    assert v.optional_text(None, "thread", 3) is None
    assert _refusal(v.text, "abcd", "title", 3) == "title must be text of at most 3 characters"
    assert _refusal(v.optional_text, b"a", "thread", 3) == (
        "thread must be text of at most 3 characters"
    )
    assert _refusal(v.text, 7, "name", 3, noun="a string") == (
        "name must be a string of at most 3 characters"
    )
    assert v.array([1, 2], "pair", 2, exact=2) == [1, 2]
    assert _refusal(v.array, (1, 2), "pair", 2) == "pair must be a list of at most 2 items"
    assert _refusal(v.array, [1, 2, 3], "pair", 2) == "pair must be a list of at most 2 items"
    assert _refusal(v.array, [1], "pair", 2, exact=2) == "pair must have 2 items"


def test_columns() -> None:
    assert v.integer_column([1, 3], "seq", 2, 1, 3, 10) == (1, 3)
    assert v.text_column(["a", ""], "text", 2, 1, 10) == ("a", "")
    assert v.optional_text_column([None, "ab"], "source", 2, 2, 10) == (None, "ab")
    assert v.column([True, None], "from_me", 2, {bool, type(None)}, 10) == [True, None]
    assert _refusal(v.column, [1] * 11, "seq", 11, {int}, 10) == (
        "seq must be a list of at most 10 items"
    )
    assert _refusal(v.column, [1], "seq", 2, {int}, 10) == "seq must have 2 items, one per event id"
    assert _refusal(v.column, [1, True], "seq", 2, {int}, 10) == "seq must hold only integers"
    assert _refusal(v.column, [1, "a"], "from_me", 2, {bool, type(None)}, 10) == (
        "from_me must hold only booleans or nil"
    )
    assert _refusal(v.integer_column, [0, 3], "seq", 2, 1, 3, 10) == (
        "each seq must be an integer from 1 to 3"
    )
    assert _refusal(v.text_column, ["abc"], "text", 1, 2, 10) == (
        "text must be text of at most 2 characters"
    )
    assert _refusal(v.optional_text_column, [None, "abc"], "source", 2, 2, 10) == (
        "source must be text of at most 2 characters"
    )


def test_coded_columns() -> None:
    def kind(value: Any) -> str:
        return v.text(value, "kind", 5)

    assert v.coded_column(["a", "b"], [1, 0, 1], "kind", 3, kind, 10) == ("b", "a", "b")
    assert v.coded_column([], [], "kind", 0, kind, 10) == ()
    assert _refusal(v.coded_column, ["a", "a"], [0, 1], "kind", 2, kind, 10) == (
        "the kind table holds a value twice"
    )
    assert _refusal(v.coded_column, ["a", "b"], [0, 0], "kind", 2, kind, 10) == (
        "each kind index must name a table entry, and each entry be used"
    )
    assert _refusal(v.coded_column, ["a"], [0, 1], "kind", 2, kind, 10) == (
        "each kind index must name a table entry, and each entry be used"
    )
    assert _refusal(v.coded_column, "a", [0], "kind", 1, kind, 10) == (
        "kind table must be a list of at most 10 items"
    )
    assert _refusal(v.coded_column, ["toolong"], [0], "kind", 1, kind, 10) == (
        "kind must be text of at most 5 characters"
    )
    assert _refusal(v.coded_column, ["a"], [0], "kind", 2, kind, 10) == (
        "kind index must have 2 items, one per event id"
    )


# The codecs say what they said before the checks were shared.


def _relay_refusal(items: list[Any]) -> str:
    return _refusal(relaywire.decode, msgpack.packb(items, use_bin_type=True))


def test_relay_frames_are_refused_in_the_same_words() -> None:
    assert _relay_refusal([1, 2, bytes(31)]) == "key must be 32 bytes, not 31"
    assert _relay_refusal([1, 256, bytes(32)]) == "version must be an integer from 0 to 255"
    assert _relay_refusal([3, "sig"]) == "signature must be bytes"
    assert _relay_refusal([4, -1]) == f"queued must be an integer from 0 to {1 << 32}"
    assert _relay_refusal([7, True]) == f"token must be an integer from 0 to {v.INT64_MAX}"
    assert _relay_refusal([9, 5]) == "reason must be a short string"


def _peer_refusal(kind: int, *fields: Any, mid: Any = bytes(16), counter: Any = 1) -> str:
    body = msgpack.packb([peerwire.PEER_VERSION, kind, mid, counter, *fields], use_bin_type=True)
    return _refusal(peerwire.decode_body, body)


def test_peer_bodies_are_refused_in_the_same_words() -> None:
    assert _peer_refusal(4, 1, mid=bytes(15)) == "message id must be 16 bytes"
    assert _peer_refusal(4, 1, counter=-1) == "counter must be a non-negative integer"
    assert _peer_refusal(4, -1) == "token must be a non-negative integer"
    assert _peer_refusal(3, 7) == "reason must be a string of at most 200 characters"
    assert _peer_refusal(1, "n" * 201, "device", bytes(32)) == (
        "name must be a string of at most 200 characters"
    )
    assert _peer_refusal(1, "n", "device", "proof") == "proof must be 32 bytes"


def _sync_refusal(items: list[Any]) -> str:
    return _refusal(syncwire.decode, msgpack.packb(items, use_bin_type=True))


def test_sync_messages_are_refused_in_the_same_words() -> None:
    session = bytes(syncwire.SESSION_BYTES)
    assert _sync_refusal([3, b"short", bytes(32), 1]) == "session id must be 8 bytes"
    assert _sync_refusal([3, session, bytes(31), 1]) == "digest must be 32 bytes"
    assert _sync_refusal([3, session, bytes(32), -1]) == (
        f"count must be an integer from 0 to {v.INT64_MAX}"
    )
    assert _sync_refusal([6, session, "x"]) == (
        f"acked batch must be an integer from 0 to {v.INT64_MAX}"
    )
    assert _sync_refusal([2, session, 0, 1, []]) == "last must be true or false"
    assert _sync_refusal([5, session, "r" * 301]) == "reason must be text of at most 300 characters"
    assert _sync_refusal([7, session, [], "need"]) == "need must be bytes"
    assert _sync_refusal([4, session, [], []]) == "unknown sync message type 4"
    assert _sync_refusal([2, session, 0, True, [[], [], []]]) == "events must have 14 items"
