"""How much one client may send: token buckets for envelopes and for bytes.

Sans-IO: callers pass the time. A client over its rate loses the envelope (the
relay counts it) but keeps its connection, so a burst cannot cut a peer off.
"""

from __future__ import annotations


class SendLimit:
    """An envelope bucket and a byte bucket, each refilled at its rate up to its
    burst. An envelope must fit both; one refused takes nothing from either."""

    __slots__ = (
        "byte_burst",
        "byte_rate",
        "bytes",
        "envelope_burst",
        "envelope_rate",
        "envelopes",
        "stamp",
    )

    def __init__(
        self,
        envelopes_per_second: float,
        envelope_burst: float,
        bytes_per_second: float,
        byte_burst: float,
        now: float,
    ) -> None:
        self.envelope_rate = envelopes_per_second
        self.envelope_burst = self.envelopes = envelope_burst
        self.byte_rate = bytes_per_second
        self.byte_burst = self.bytes = byte_burst
        self.stamp = now

    def allow(self, size: int, now: float) -> bool:
        # Called once per envelope, so both buckets are refilled inline.
        elapsed = now - self.stamp
        if elapsed > 0:
            self.stamp = now
            self.envelopes = min(self.envelope_burst, self.envelopes + elapsed * self.envelope_rate)
            self.bytes = min(self.byte_burst, self.bytes + elapsed * self.byte_rate)
        if self.envelopes < 1 or self.bytes < size:
            return False
        self.envelopes -= 1
        self.bytes -= size
        return True

    def allow_all(self, count: int, size: int, now: float) -> bool:
        """Admit ``count`` envelopes of ``size`` bytes in all at ``now``, or none of them.

        True exactly when `allow` would admit each of them in turn, leaving the
        buckets as it would (bucket levels under 2**53 are exact under subtraction of
        whole numbers). False takes nothing: the caller then asks `allow` one by one."""
        elapsed = now - self.stamp
        if elapsed > 0:
            self.stamp = now
            self.envelopes = min(self.envelope_burst, self.envelopes + elapsed * self.envelope_rate)
            self.bytes = min(self.byte_burst, self.bytes + elapsed * self.byte_rate)
        if self.envelopes < count or self.bytes < size:
            return False
        self.envelopes -= count
        self.bytes -= size
        return True
