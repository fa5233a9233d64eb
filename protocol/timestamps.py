"""Event times: integer microseconds since the Unix epoch, UTC.

Integers sort, compare and hash the same on every replica; text forms are only
for people and files. Input must carry an explicit offset (``Z`` or ``+02:00``):
a naive time means a different instant on every machine that reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from . import clock
from .errors import ProtocolError

# Bounds keep arithmetic and display sane; nothing in a life log is outside them.
MIN_US = int(datetime(1900, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
MAX_US = int(datetime(2200, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(text: object) -> int:
    """Parse an ISO 8601 date-time with an offset into UTC microseconds."""
    if not isinstance(text, str) or not 10 <= len(text) <= 40:
        raise ProtocolError(f"not an ISO 8601 time: {text!r:.60}")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ProtocolError(f"not an ISO 8601 time: {text!r:.60}") from None
    if "T" not in text.upper() and " " not in text:
        raise ProtocolError(f"a time needs a time of day and an offset, not just a date: {text!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ProtocolError(f"time {text!r} has no UTC offset (add Z or +HH:MM)")
    delta = value - _EPOCH
    us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if not MIN_US <= us < MAX_US:
        raise ProtocolError(f"time {text!r} is outside 1900-2199")
    return us


def format_time(us: int) -> str:
    """UTC ISO 8601 with a Z suffix; microseconds only when present."""
    value = _EPOCH + timedelta(microseconds=us)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_date(us: int) -> str:
    return (_EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%d")


def now_us() -> int:
    """The system clock's time. Code that may be given a clock reads that instead."""
    return clock.SYSTEM_CLOCK.now_us()
