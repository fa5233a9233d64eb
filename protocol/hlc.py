"""Hybrid logical clocks: the one clock every Notebook version is stamped with.

A stamp is (wall milliseconds, counter, origin). It never goes backwards on one
peer even when the wall clock does, it moves past any stamp the peer has seen
from a sibling, and it stays close to real time, so "newer" means what a person
expects. Ties between peers are broken by origin, so any two stamps compare.

Stamps travel as fixed-width text whose byte order is the clock order: that is
what the database sorts and what sync hashes.

A sibling whose clock runs far ahead must not win every merge forever (a phone
set to 2099 would otherwise out-stamp every later edit). `MAX_FORWARD_MS` bounds
how far ahead of our own wall clock a remote stamp may be: beyond it the stamp
is refused (see `HybridClock.observe`), the same choice CockroachDB makes with
its max-offset check. Five minutes tolerates phones that have not synced their
time in a while and still keeps a wrong clock from mattering for long.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .clock import SYSTEM_CLOCK, Clock
from .errors import ProtocolError

MAX_FORWARD_MS = 5 * 60 * 1000
_MAX_WALL = 10**15 - 1  # fifteen decimal digits: far beyond the year 9999
_MAX_COUNTER = 10**6 - 1
_ORIGIN = re.compile(r"[0-9a-z]{1,64}")
_STAMP = re.compile(r"(\d{15})\.(\d{6})\.([0-9a-z]{1,64})")


class ClockSkewError(ProtocolError):
    """A remote stamp lies too far in our future to be believed."""


@dataclass(frozen=True, slots=True, order=True)
class Stamp:
    wall_ms: int
    counter: int
    origin: str

    def __post_init__(self) -> None:
        if not 0 <= self.wall_ms <= _MAX_WALL or not 0 <= self.counter <= _MAX_COUNTER:
            raise ProtocolError(f"clock stamp out of range: {self.wall_ms}.{self.counter}")
        if not _ORIGIN.fullmatch(self.origin):
            raise ProtocolError(f"bad origin in clock stamp: {self.origin!r:.70}")

    def encode(self) -> str:
        return f"{self.wall_ms:015d}.{self.counter:06d}.{self.origin}"

    @classmethod
    def decode(cls, text: object) -> Stamp:
        if not isinstance(text, str):
            raise ProtocolError("a clock stamp must be text")
        m = _STAMP.fullmatch(text)
        if m is None:
            raise ProtocolError(f"not a clock stamp: {text!r:.90}")
        return cls(int(m[1]), int(m[2]), m[3])


def wall_clock_ms() -> int:
    """The system clock in milliseconds."""
    return SYSTEM_CLOCK.now_ms()


class HybridClock:
    """Issues stamps for one origin. Not thread-safe: one owner per peer.

    The physical part comes from ``clock`` (its `now_ms`), or from ``wall``, a
    callable giving milliseconds, when one is given.
    """

    def __init__(
        self,
        origin: str,
        last: Stamp | None = None,
        wall: Callable[[], int] | None = None,
        max_forward_ms: int = MAX_FORWARD_MS,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.origin = origin
        self._wall = wall if wall is not None else clock.now_ms
        self.max_forward_ms = max_forward_ms
        self._last_wall = last.wall_ms if last else 0
        self._last_counter = last.counter if last else 0

    def now(self) -> Stamp:
        """A stamp later than every stamp issued or observed so far."""
        physical = self._wall()
        if physical > self._last_wall:
            self._last_wall, self._last_counter = physical, 0
        else:
            self._bump()
        return Stamp(self._last_wall, self._last_counter, self.origin)

    def observe(self, remote: Stamp) -> None:
        """Move past a stamp received from a sibling, or refuse it if it is too far ahead."""
        physical = self._wall()
        if remote.wall_ms > physical + self.max_forward_ms:
            raise ClockSkewError(
                f"stamp from {remote.origin} is {remote.wall_ms - physical} ms ahead of this "
                f"clock (at most {self.max_forward_ms} ms is believed)"
            )
        self._advance(remote)

    def witness(self, stamp: Stamp) -> None:
        """Move past a stamp this peer already stored (no skew check: it was
        checked when it arrived, or it is our own)."""
        self._advance(stamp)

    def _advance(self, stamp: Stamp) -> None:
        self._last_wall, self._last_counter = max(
            (self._last_wall, self._last_counter), (stamp.wall_ms, stamp.counter)
        )

    def _bump(self) -> None:
        if self._last_counter >= _MAX_COUNTER:
            # Counter exhausted within one millisecond: borrow the next one.
            self._last_wall, self._last_counter = self._last_wall + 1, 0
        else:
            self._last_counter += 1
