"""What a relay is set to: its listening address, its bounds and deadlines, and
its fault plan (`RelayConfig`). `pixie.relay.cli` makes one from the flags."""

from __future__ import annotations

import math
import ssl
from dataclasses import dataclass, field

from pixie.protocol import relaywire
from pixie.protocol.faults import RELAY_FAULTS, FaultSpecError, parse_faults
from pixie.protocol.framing import MAX_FRAME_BYTES, MIN_ENVELOPE_BYTES

from .errors import RelayError
from .faults import REORDER_HOLD_SECONDS
from .mailbox import MailboxLimits


@dataclass(frozen=True, slots=True)
class RelayConfig:
    host: str | None = "127.0.0.1"  # None or "" listens on every interface
    port: int = 0  # 0 picks a free port; `serve` reports the one it got
    ssl_context: ssl.SSLContext | None = None
    max_connections: int = 10_000
    handshake_timeout: float = 5.0  # Hello to Prove, in all
    idle_timeout: float = 120.0  # no frame from the client for this long closes it
    frame_timeout: float = 30.0  # a frame once begun must be complete within this
    close_grace: float = 1.0  # time to say Refuse to a client before hanging up
    outbox_frames: int = 256  # per connection, waiting to be written
    outbox_bytes: int = 8 << 20  # per connection, FRAME_OVERHEAD per frame included
    # A write the client does not take within this long closes its connection: a
    # reader that stops reading loses its own connection, its mail goes to its mailbox.
    write_timeout: float = 30.0
    # Relay-wide bounds, so that many connections cannot add up to unbounded memory:
    outbox_total_bytes: int = 512 << 20  # queued in all outboxes together
    # Sends whose envelope is shorter than the smallest sealed envelope are dropped.
    min_envelope_bytes: int = MIN_ENVELOPE_BYTES
    receive_total_bytes: int = 256 << 20  # frames half-received on all connections
    envelopes_per_second: float = 500.0  # per client
    envelope_burst: float = 2_000.0
    bytes_per_second: float = 16 << 20
    byte_burst: float = 64 << 20
    # A client whose Sends are dropped for rate or size more than `abuse_factor`
    # times its allowance (its envelope burst, or its rate over the window if more)
    # within `abuse_window` seconds is disconnected ("abusive"): flooding costs it a
    # fresh handshake, not the relay the parsing of everything it cares to send.
    abuse_window: float = 1.0
    abuse_factor: float = 4.0
    mailbox: MailboxLimits = field(default_factory=MailboxLimits)
    stats_interval: float = 60.0  # seconds between stats log lines
    sweep_interval: float = 10.0  # seconds between sweeps for expired mail
    # Faults to inject into forwarding (a `pixie.protocol.faults` SPEC; "" for none),
    # the seed of their dice (None: a random one, logged), and how long a reordered
    # envelope waits to be overtaken. Each `Relay` starts its own plan afresh.
    faults: str = ""
    fault_seed: int | None = None
    reorder_hold: float = REORDER_HOLD_SECONDS

    def __post_init__(self) -> None:
        for name in (
            "max_connections",
            "handshake_timeout",
            "idle_timeout",
            "frame_timeout",
            "close_grace",
            "outbox_frames",
            "outbox_bytes",
            "write_timeout",
            "outbox_total_bytes",
            "receive_total_bytes",
            "envelopes_per_second",
            "envelope_burst",
            "bytes_per_second",
            "byte_burst",
            "abuse_window",
            "abuse_factor",
            "stats_interval",
            "sweep_interval",
            "reorder_hold",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
                raise RelayError(f"{name} must be a positive number, not {value!r}")
        if isinstance(self.min_envelope_bytes, bool) or not (
            0 <= self.min_envelope_bytes <= relaywire.MAX_ENVELOPE_BYTES
        ):
            raise RelayError(
                f"min_envelope_bytes must be from 0 to {relaywire.MAX_ENVELOPE_BYTES}, "
                f"not {self.min_envelope_bytes!r}"
            )
        if not 0 <= self.port <= 65535:
            raise RelayError(f"port must be from 0 to 65535, not {self.port}")
        if self.envelope_burst < 1 or self.byte_burst < relaywire.MAX_ENVELOPE_BYTES:
            raise RelayError("bursts must admit at least one envelope of the largest size")
        for name in ("outbox_bytes", "outbox_total_bytes", "receive_total_bytes"):
            if getattr(self, name) < MAX_FRAME_BYTES:
                raise RelayError(f"{name} must hold at least one frame ({MAX_FRAME_BYTES})")
        try:
            parse_faults(self.faults, RELAY_FAULTS)
        except FaultSpecError as exc:
            raise RelayError(f"bad --faults: {exc}") from None


__all__ = ["RelayConfig"]
