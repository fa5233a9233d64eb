"""The simulated world's time and randomness, handed to everything it builds.

Nothing is patched: the world owns one `ManualClock` (true simulated time,
moved only by the world) and one seeded `Entropy`, and each peer reads its own
`PeerClock`, the world's time plus the peer's skew. The stores, the log, the
Notebook and its seal, the holder, the envelopes, the session and request ids
all take these as arguments (`pixie.protocol.clock`), so a seed gives the same
bytes on every run, and nothing outside the world sees simulated time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pixie.protocol.clock import ManualClock, SeededEntropy

# 2030-01-01T00:00:00Z: far from the real clock, so a leak of real time shows.
EPOCH_US = 1_893_456_000_000_000


def world_clock() -> ManualClock:
    """True simulated time, starting at `EPOCH_US`."""
    return ManualClock(EPOCH_US)


def world_entropy(seed: int) -> SeededEntropy:
    """The seed's one stream of "random" bytes (ids, keys, nonces)."""
    return SeededEntropy(f"pixie-sim-entropy-{seed}")


@dataclass(frozen=True)
class PeerClock:
    """One peer's wall clock: the world's time plus the peer's current skew
    (milliseconds, read at each call, so a skew set later shows at once)."""

    world: ManualClock
    skew_ms: Callable[[], int]

    def now_us(self) -> int:
        return self.world.now_us() + self.skew_ms() * 1000

    def now_ms(self) -> int:
        return self.world.now_ms() + self.skew_ms()

    def seconds(self) -> float:
        """Seconds, for what reads a float clock (the envelope gate, log summaries)."""
        return self.now_us() / 1_000_000


__all__ = ["EPOCH_US", "PeerClock", "world_clock", "world_entropy"]
