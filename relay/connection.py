"""One client connection's state (`Connection`) and the reasons a connection
ends (`Hangup`), shared by the relay's server and its router."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from pixie.protocol import relaywire
from pixie.protocol.framing import MAX_FRAME_BYTES, encode_frame
from pixie.protocol.keyprint import fingerprint as key_fingerprint

from .config import RelayConfig
from .outbox import ByteBudget, Outbox
from .ratelimit import SendLimit


def fingerprint(key: bytes) -> str:
    """The same fingerprint peers show in `pixie status`; never the key itself."""
    return key_fingerprint(key)


@dataclass(frozen=True, slots=True)
class Hangup:
    """Why a connection ends: a short reason (counted and logged) and what the
    client is told in a `Refuse` before the close, if anything."""

    reason: str
    refuse: str | None = None


EOF = Hangup("eof")
LOST = Hangup("lost")
BUSY = Hangup("busy", "busy")
REPLACED = Hangup("replaced", "replaced by a newer connection for this key")
SHUTDOWN = Hangup("shutdown", "relay shutting down")
FAILED = Hangup("error", "internal error")
TRUNCATED = Hangup("truncated", "connection ended inside a frame")
# Every connection's half-received frames together are over the relay's budget.
OVERLOADED = Hangup("overloaded", "relay overloaded; try again later")
# The relay was at its connection cap and this connection had never carried an envelope.
EVICTED = Hangup("evicted", "relay full: an idle connection made room for a newer one")
# The client took none of a write for `write_timeout`: it is not reading.
STALLED = Hangup("stalled")
# The client's Sends were dropped for rate or size far beyond its allowance.
ABUSIVE = Hangup("abusive", "too many envelopes over the rate limit or too short")


def frame(message: relaywire.RelayMessage) -> bytes:
    return encode_frame(relaywire.encode(message))


class Connection:
    """One client connection as the relay sees it: its stream, its key once
    proven, its outbox, its limits, and why it ends."""

    __slots__ = (
        "abuse_since",
        "abused",
        "clean",
        "decoder",
        "fp",
        "frame_started_at",
        "hangup",
        "held",
        "key",
        "last_frame_at",
        "limit",
        "live",
        "number",
        "opened_at",
        "outbox",
        "pending",
        "pinged",
        "quiet",
        "received",
        "scope",
        "sent",
        "stream",
        "unsent",
    )

    def __init__(
        self,
        number: int,
        stream: trio.abc.Stream,
        config: RelayConfig,
        outboxes: ByteBudget,
        shapes: dict[int, relaywire.Shape],
    ) -> None:
        now = trio.current_time()
        self.number = number
        self.stream = stream
        self.decoder = relaywire.ForwardDecoder(MAX_FRAME_BYTES, shapes, config.min_envelope_bytes)
        self.pending: list[relaywire.Item] = []  # frames that arrived with the Prove
        self.key = b""
        self.fp = "-"
        self.outbox = Outbox(config.outbox_frames, config.outbox_bytes, outboxes)
        self.held = 0  # bytes of a half-received frame, counted in the relay's budget
        self.received = self.sent = 0  # bytes, for the log
        # False while the mailbox drains: envelopes for this key queue behind it.
        self.live = False
        self.scope = trio.CancelScope()
        self.hangup: Hangup | None = None
        self.clean = True  # no frame half-written: a Refuse can still follow
        self.unsent = 0  # envelopes handed to a write that has not finished
        self.opened_at = self.last_frame_at = self.frame_started_at = now
        self.pinged = False
        # Sends dropped for rate or size since ``abuse_since`` (see `pixie.relay.server.Relay`).
        self.abuse_since = now
        self.abused = 0
        # True until an envelope goes either way: only such connections are evicted.
        self.quiet = True
        self.limit = SendLimit(
            config.envelopes_per_second,
            config.envelope_burst,
            config.bytes_per_second,
            config.byte_burst,
            now,
        )

    def close(self, hangup: Hangup) -> None:
        """End this connection from any task; the first reason given wins."""
        if self.hangup is None:
            self.hangup = hangup
        self.scope.cancel()


__all__ = ["Connection", "Hangup", "fingerprint", "frame"]
