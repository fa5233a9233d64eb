"""A sibling as the rest of the code sees it: key, name, role, relay, when
paired. A module of its own, without the database layer, so that a reader
such as `pixie status` can show siblings without loading the ORM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pixie.device.errors import DeviceError
from pixie.protocol.keyprint import fingerprint


@dataclass(frozen=True, slots=True)
class SiblingInfo:
    key: bytes
    name: str
    role: str
    relay: str
    paired_at: int

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SiblingInfo:
        """A sibling as `as_json` wrote it (a daemon's answer, say)."""
        try:
            key = bytes.fromhex(str(data["key"]))
            return cls(
                key,
                str(data["name"]),
                str(data["role"]),
                str(data["relay"]),
                int(data["paired_at"]),
            )
        except (KeyError, TypeError, ValueError):
            raise DeviceError("a sibling we cannot read") from None

    def as_json(self) -> dict[str, object]:
        return {
            "fingerprint": self.fingerprint,
            "key": self.key.hex(),
            "name": self.name,
            "role": self.role,
            "relay": self.relay,
            "paired_at": self.paired_at,
        }


__all__ = ["SiblingInfo"]
