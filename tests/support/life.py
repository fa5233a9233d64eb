"""A log of plain messages in JSON Lines, to import."""

from __future__ import annotations

import json
from pathlib import Path


def write_life(path: Path, events: int) -> Path:
    lines = (
        json.dumps(
            {
                "kind": "message",
                "at": f"2026-01-{1 + i % 28:02d}T10:00:00Z",
                "text": f"message number {i}",
                "contact": "Ada Lovelace",
            }
        )
        for i in range(events)
    )
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
