"""What one sync session did: its outcome, its report (what `pixie sync`
prints, `--json` and all), and the last report kept per sibling. A module of
its own so that the driver stays about moving messages."""

from __future__ import annotations

import enum
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pixie.device.errors import DeviceError
from pixie.device.node.keyed import Node
from pixie.device.store.db import put_meta
from pixie.device.sync.lastsync import LAST_SYNC_KEY, last_syncs_in


class SyncOutcome(enum.StrEnum):
    """How one session went, as `pixie sync` reports it."""

    IN_SYNC = "in_sync"  # already equal at the Hello
    SYNCED = "synced"  # records moved, and both sides now hold the same
    SUPERSEDED = "superseded"  # another session with the sibling did the work instead
    NO_ANSWER = "no_answer"  # the sibling said nothing (not running, or away)
    FAILED = "failed"  # anything else: see the report's error

    @property
    def ok(self) -> bool:
        return self in (SyncOutcome.IN_SYNC, SyncOutcome.SYNCED, SyncOutcome.SUPERSEDED)


@dataclass
class SyncReport:
    """What one session did, as `pixie sync --json` prints it."""

    sibling: str
    role: str  # opener or responder
    outcome: SyncOutcome
    round_trips: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    records_sent: int = 0
    records_received: int = 0
    applied: int = 0
    repair_rounds: int = 0
    seconds: float = 0.0
    error: str | None = None
    finished_at: float = field(default_factory=time.time)  # unix seconds (the endpoint's clock)
    name: str = ""  # the sibling's name in this device's book, if it has one

    @property
    def who(self) -> str:
        """The sibling as people know it: its name, else its fingerprint."""
        return self.name or self.sibling

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "outcome": self.outcome.value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SyncReport:
        """A report as `as_json` wrote it (a daemon's, over the control socket)."""
        try:
            return cls(**{**data, "outcome": SyncOutcome(data["outcome"])})
        except (KeyError, TypeError, ValueError):
            raise DeviceError("the running daemon sent a sync report we cannot read") from None

    def describe(self, idle_timeout: float) -> str:
        """One line for people (``idle_timeout``: how long a silent sibling was given)."""
        if self.outcome is SyncOutcome.NO_ANSWER:
            return (
                f"no answer from {self.who} within {idle_timeout:g} s: is `pixie run` going on it?"
            )
        what = {
            SyncOutcome.IN_SYNC: "already in sync",
            SyncOutcome.SYNCED: "synced",
            SyncOutcome.SUPERSEDED: "synced by the sibling's own session",
            SyncOutcome.FAILED: "FAILED",
        }[self.outcome]
        plural = "s" if self.round_trips != 1 else ""
        return (
            f"{self.who}: {what} in {self.round_trips} round trip{plural}; sent "
            f"{self.records_sent} records ({self.bytes_sent:,} B), received "
            f"{self.records_received} ({self.bytes_received:,} B), applied {self.applied}"
            + (f"; {self.error}" if self.error and self.outcome is SyncOutcome.FAILED else "")
        )


def _last_sync_key(sibling: str) -> str:
    return f"{LAST_SYNC_KEY}:{sibling}"


def record_last_sync(node: Node, report: SyncReport) -> None:
    """Keep the last report per sibling in meta (local state; never synced)."""
    value = json.dumps(
        {
            "outcome": report.outcome.value,
            "at": round(report.finished_at, 3),
            "round_trips": report.round_trips,
            "bytes_sent": report.bytes_sent,
            "bytes_received": report.bytes_received,
            "applied": report.applied,
            "error": (report.error or "")[:200] or None,
        },
        sort_keys=True,
    )
    put_meta(node.db, _last_sync_key(report.sibling), value)


def last_syncs(node: Node) -> dict[str, object]:
    """The last sync report per sibling fingerprint."""
    return last_syncs_in(node.db)


__all__ = ["SyncOutcome", "SyncReport", "last_syncs", "record_last_sync"]
