"""Replay protection for envelopes: a high-water mark plus a sliding window.

Each sender numbers its envelopes to each recipient 1, 2, 3, ... The receiver
remembers the highest counter seen and a bitmap of the `WINDOW` counters below
it (the scheme WireGuard uses, RFC 6479 style). A counter above the mark is
new; one inside the window is new unless its bit is set; one below the window
is refused as too old. The receiver persists the state after it has acted on
an envelope, so a restart does not reopen the door to replays.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

WINDOW = 128


class Verdict(enum.StrEnum):
    NEW = "new"
    REPLAY = "replay"
    TOO_OLD = "too_old"


@dataclass(frozen=True, slots=True)
class ReplayWindow:
    high: int = 0  # highest counter accepted (0: none yet)
    bitmap: int = 0  # bit i set: counter high - i was accepted (bit 0 is high itself)

    def check(self, counter: int) -> Verdict:
        if counter <= 0:
            return Verdict.TOO_OLD
        if counter > self.high:
            return Verdict.NEW
        offset = self.high - counter
        if offset >= WINDOW:
            return Verdict.TOO_OLD
        return Verdict.REPLAY if self.bitmap >> offset & 1 else Verdict.NEW

    def accept(self, counter: int) -> ReplayWindow:
        """The window after accepting ``counter`` (which must `check` as NEW)."""
        if self.check(counter) is not Verdict.NEW:
            raise ValueError("accept() of a counter that is not new")
        mask = (1 << WINDOW) - 1
        if counter > self.high:
            shift = counter - self.high
            bitmap = ((self.bitmap << shift) | 1) & mask if shift < WINDOW else 1
            return ReplayWindow(counter, bitmap)
        return ReplayWindow(self.high, self.bitmap | 1 << (self.high - counter))
