"""Invite codes from a user's hands: any text either parses into a code whose
key an envelope can be sealed to, or is refused with `BadInput` (one line,
exit 2); nothing else may escape `InviteCode.parse`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.device.errors import BadInput
from pixie.device.sync.pairing import CODE_PREFIX, InviteCode
from pixie.device.sync.relayclient import RelayAddress
from pixie.protocol.envelope import seal
from pixie.protocol.identity import new_identity
from tests.support.cli import run_cli
from tests.support.fuzzing import fuzz_settings

SENDER = new_identity()
REAL = InviteCode(
    bytes(new_identity().verify_key),
    RelayAddress("relay.example", 7700, tls=True),
    b"s" * 16,
    int(time.time()) + 3600,
).encode()
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=!. \n"


def _parse_or_refuse(text: str) -> None:
    try:
        code = InviteCode.parse(text)
    except BadInput:
        return
    seal(
        SENDER, code.inviter, b"a PairRequest would go here", now=time.monotonic()
    )  # the key is usable


@pytest.mark.fuzz
@fuzz_settings()
@given(st.text(max_size=500))
def test_random_text_parses_or_is_refused(text: str) -> None:
    _parse_or_refuse(text)
    _parse_or_refuse(CODE_PREFIX + text)


@pytest.mark.fuzz
@fuzz_settings()
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=len(CODE_PREFIX), max_value=len(REAL) - 1),
            st.sampled_from(ALPHABET),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(min_value=0, max_value=3),
)
def test_mutated_real_codes_parse_or_are_refused(edits: list[tuple[int, str]], cut: int) -> None:
    chars = list(REAL)
    for at, char in edits:
        chars[at] = char
    text = "".join(chars)
    _parse_or_refuse(text[: len(text) - cut])


def test_a_key_that_is_no_curve_point_is_refused_as_damaged() -> None:
    """Most 32-byte strings (a typo in the key part makes one) are no
    Curve25519 point: such a code used to parse, and `pixie pair` then died
    sealing its request with a traceback."""
    real = InviteCode.parse(REAL)
    damaged = InviteCode(bytes(range(32)), real.relay, real.secret, real.expires_at).encode()
    with pytest.raises(BadInput, match="damaged"):
        InviteCode.parse(damaged)


def test_pair_with_a_damaged_key_is_one_line_and_exit_2(data_dir: Path) -> None:
    real = InviteCode.parse(REAL)
    damaged = InviteCode(bytes(range(32)), real.relay, real.secret, real.expires_at).encode()
    result = run_cli("--data", str(data_dir), "pair", damaged)
    assert result.code == 2
    assert result.err.splitlines() == [
        "pixie: error: that invite code is damaged (check it was copied whole)"
    ]
