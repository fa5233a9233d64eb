"""Where time and randomness come from: a `Clock` and an `Entropy`, passed in.

Everything that reads the wall clock (a stamp, an event id, the date of a pin)
or draws random bytes (an id's random bits, a nonce, a session or request id,
a new data dir's origin and keys) takes them from one of these two objects
rather than from the process. Ordinary use passes nothing and gets the real
world: `SYSTEM_CLOCK` and `SYSTEM_ENTROPY`, which read ``time.time_ns`` and
``os.urandom`` at each call. A simulated world, or a test, passes a
`ManualClock` that moves only when told and a `SeededEntropy` drawn from a
seed, and gets the same bytes on every run.

Why not patch ``time`` and ``os`` instead? A patch is process-wide, so two
simulated peers in one process cannot have two clocks, and anything else
running meanwhile sees the fake world too. And some randomness cannot be
patched at all: libsodium draws key material from the operating system on its
own. Where such a key is made, a seeded `Entropy` supplies the seed instead
(see `is_system`), while the system source leaves it to the library as before.

Sans-IO: nothing here touches a socket, a file or a database.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Wall time since the Unix epoch, UTC."""

    def now_us(self) -> int:
        """Microseconds."""
        ...

    def now_ms(self) -> int:
        """Milliseconds (what stamps and event ids carry)."""
        ...


@runtime_checkable
class Entropy(Protocol):
    """A source of random bytes."""

    def token_bytes(self, n: int) -> bytes:
        """``n`` bytes, unpredictable unless the source was seeded."""
        ...


class SystemClock:
    """The machine's clock, read afresh on every call."""

    def now_us(self) -> int:
        return time.time_ns() // 1000

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SYSTEM_CLOCK"


class SystemEntropy:
    """The operating system's randomness (``os.urandom``), read on every call."""

    def token_bytes(self, n: int) -> bytes:
        return os.urandom(n)

    def __repr__(self) -> str:
        return "SYSTEM_ENTROPY"


SYSTEM_CLOCK: Clock = SystemClock()
SYSTEM_ENTROPY: Entropy = SystemEntropy()


def is_system(entropy: Entropy) -> bool:
    """True for the operating system's randomness.

    Key material is then left to the crypto library that makes the key (as it
    always was); any other source, a seeded one above all, supplies the key's
    seed itself, so that a seeded run makes the same keys every time.
    """
    return isinstance(entropy, SystemEntropy)


@dataclass
class ManualClock:
    """A clock that only moves when told: tests and simulations.

    It may be set backwards (a wall clock can be), which is what the id minter
    and the hybrid clock must survive.
    """

    us: int = 0

    def now_us(self) -> int:
        return self.us

    def now_ms(self) -> int:
        return self.us // 1000

    def advance(self, us: int) -> None:
        """Move forward by ``us`` microseconds (never back)."""
        self.us += max(us, 0)

    def advance_ms(self, ms: int) -> None:
        self.advance(ms * 1000)

    def set(self, us: int) -> None:
        """Jump to ``us``, forwards or backwards."""
        self.us = us


@dataclass
class SeededEntropy:
    """Bytes from a seeded `random.Random`: repeatable, and not secret.

    Two sources made from the same seed hand out the same bytes in the same
    order. Never use one for real keys: anyone who knows the seed knows them.
    """

    seed: int | str | bytes
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def token_bytes(self, n: int) -> bytes:
        return self._rng.randbytes(n)


__all__ = [
    "SYSTEM_CLOCK",
    "SYSTEM_ENTROPY",
    "Clock",
    "Entropy",
    "ManualClock",
    "SeededEntropy",
    "SystemClock",
    "SystemEntropy",
    "is_system",
]
