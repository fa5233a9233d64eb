"""The simulated clock, and the one scoped patch that makes a run repeatable.

Most of the time the simulator injects what it controls: each peer's hybrid
logical clock reads the peer's own (skewed) simulated wall, session and request
ids are passed in. The stores can be given a clock and an entropy source as
well (`pixie.protocol.clock`), for the UUIDv7 event ids, the seal's nonces, a
data dir's origin and the `now_us` of a pin; but the drivers this world runs
hand them none, so they read the system defaults, which look the real world up
at each call. So `deterministic` patches exactly those reads, in this one
place, only while the simulator is stepping: ``os.urandom`` draws from the
seed's entropy stream and ``time.time``/``time.time_ns`` read the simulated
clock. Everything outside a step sees the real world.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from unittest import mock

from pixie.protocol import ids as ids_module
from pixie.protocol import timestamps

# 2030-01-01T00:00:00Z: far from the real clock, so a leak of real time shows.
EPOCH_US = 1_893_456_000_000_000


@dataclass
class SimClock:
    """True simulated time, in microseconds; it only moves when the world says."""

    now_us: int = EPOCH_US

    def advance(self, us: int) -> None:
        self.now_us += max(us, 0)

    def now_ms(self) -> int:
        return self.now_us // 1000

    def time(self) -> float:
        return self.now_us / 1_000_000

    def time_ns(self) -> int:
        return self.now_us * 1000


@dataclass
class Entropy:
    """The seed's stream of "random" bytes, plus the id minter's memory.

    The process's default id minter (`pixie.protocol.ids.DEFAULT_MINTER`)
    remembers its last millisecond and counter so ids stay increasing within a
    process; a run carries its own copy, so what ran before it in the same
    process cannot change its ids.
    """

    rng: random.Random
    last_ms: int = 0
    last_counter: int = 0

    def urandom(self, n: int) -> bytes:
        return self.rng.randbytes(n)


@contextmanager
def deterministic(clock: SimClock, entropy: Entropy) -> Iterator[None]:
    """Within this block, entropy and wall time come from the simulation."""
    minter = ids_module.DEFAULT_MINTER
    saved = minter.state
    minter.state = (entropy.last_ms, entropy.last_counter)
    try:
        with ExitStack() as stack:
            patches = [
                (os, "urandom", entropy.urandom),
                (time, "time", clock.time),
                (time, "time_ns", clock.time_ns),
                (timestamps, "now_us", lambda: clock.now_us),
            ]
            for target, name, value in patches:
                stack.enter_context(mock.patch.object(target, name, value))
            yield
    finally:
        entropy.last_ms, entropy.last_counter = minter.state
        minter.state = saved


__all__ = ["EPOCH_US", "Entropy", "SimClock", "deterministic"]
