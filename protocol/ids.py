"""Globally unique, time-sortable 128-bit identifiers (UUID version 7, RFC 9562).

Event ids are minted on whichever device writes the event and must never collide
across devices, so they carry 74 random bits; they lead with a millisecond
timestamp so that ids sort roughly by creation time, which keeps B-tree inserts
local and makes ties in time order deterministic on every replica.
"""

from __future__ import annotations

import re
import threading
import uuid

from .clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from .errors import ProtocolError

_HEX = "[0-9a-fA-F]"
CANONICAL_ID = re.compile(f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}")


class IdMinter:
    """Mints UUIDv7 ids from one clock and one entropy source.

    The ids of one minter are strictly increasing, even when its clock stands
    still or steps back: when two ids fall in the same millisecond (or an
    earlier one), the 12-bit ``rand_a`` field acts as a counter (RFC 9562
    method 1); if it overflows the minter borrows the next millisecond. That
    memory (the last millisecond and counter) is per minter, so a seeded minter
    mints the same ids whatever else ran in the process before it.
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK, entropy: Entropy = SYSTEM_ENTROPY) -> None:
        self.clock = clock
        self.entropy = entropy
        self._lock = threading.Lock()
        self._last_ms = 0
        self._last_counter = 0

    @property
    def state(self) -> tuple[int, int]:
        """The last millisecond and counter minted (what keeps ids increasing)."""
        return self._last_ms, self._last_counter

    @state.setter
    def state(self, value: tuple[int, int]) -> None:
        with self._lock:
            self._last_ms, self._last_counter = value

    def new_id(self, now_ms: int | None = None) -> str:
        """A new UUIDv7 in canonical lowercase text form."""
        draw = self.entropy.token_bytes
        with self._lock:
            ms = self.clock.now_ms() if now_ms is None else now_ms
            if ms <= self._last_ms:
                ms = self._last_ms
                counter = self._last_counter + 1
                if counter > 0xFFF:
                    ms += 1
                    counter = int.from_bytes(draw(2), "big") & 0x7FF
            else:
                counter = int.from_bytes(draw(2), "big") & 0x7FF
            self._last_ms, self._last_counter = ms, counter
        rand_b = int.from_bytes(draw(8), "big") & ((1 << 62) - 1)
        value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand_b
        return str(uuid.UUID(int=value))

    def new_ids(self, count: int, now_ms: int | None = None) -> list[str]:
        """``count`` ids at once (bulk imports): one entropy read, no UUID objects."""
        if count <= 0:
            return []
        entropy = self.entropy.token_bytes(10 * count)
        with self._lock:
            ms = self.clock.now_ms() if now_ms is None else now_ms
            ms = max(ms, self._last_ms)
            counter = self._last_counter if ms == self._last_ms else -1
            out: list[str] = []
            head = ms.to_bytes(6, "big")
            for i in range(count):
                counter += 1
                if counter > 0xFFF:
                    ms, counter = ms + 1, 0
                    head = ms.to_bytes(6, "big")
                j = 10 * i + 2
                # variant bits 10, then 62 random bits
                tail = bytes((0x80 | (entropy[j] & 0x3F),)) + entropy[j + 1 : j + 8]
                out.append(id_text(head + (0x7000 | counter).to_bytes(2, "big") + tail))
            self._last_ms, self._last_counter = ms, counter
        return out


# The process's own minter, over the system clock and entropy: what `new_id`
# and `new_ids` use, and what any store given no clock or entropy shares.
DEFAULT_MINTER = IdMinter()


def minter_for(clock: Clock, entropy: Entropy) -> IdMinter:
    """The minter for a clock and entropy: the shared default for the system's
    pair (so ids stay increasing across every store in the process), a fresh
    one for any other."""
    if clock is SYSTEM_CLOCK and entropy is SYSTEM_ENTROPY:
        return DEFAULT_MINTER
    return IdMinter(clock, entropy)


def new_id(now_ms: int | None = None) -> str:
    """Mint a new UUIDv7 from the process's default minter (system clock and
    entropy). Within one process, these ids are strictly increasing."""
    return DEFAULT_MINTER.new_id(now_ms)


def id_text(raw: bytes) -> str:
    """16 bytes as canonical 8-4-4-4-12 text (what ``str(uuid.UUID(bytes=raw))``
    gives, without building a UUID object)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_ids(count: int, now_ms: int | None = None) -> list[str]:
    """Mint ``count`` ids at once from the default minter (bulk imports)."""
    return DEFAULT_MINTER.new_ids(count, now_ms)


def parse_id(text: str) -> str:
    """Validate an event id and return its canonical form.

    Any RFC 9562 UUID in canonical 8-4-4-4-12 text is accepted (ids that came
    from elsewhere need not be version 7); case is normalised to lowercase.
    """
    if not isinstance(text, str) or CANONICAL_ID.fullmatch(text) is None:
        raise ProtocolError(f"not a UUID in 8-4-4-4-12 form: {text!r:.60}")
    return text.lower()


def id_time_ms(event_id: str) -> int | None:
    """The millisecond timestamp inside a version-7 id, or None for other versions."""
    value = uuid.UUID(event_id)
    if value.version != 7:
        return None
    return value.int >> 80
