"""How `pixie run` logs: human-readable lines by default, JSON Lines with
``--json-logs``. Log calls carry ids, fingerprints, sizes, counts and reasons;
never a note's body, an event's text or a key."""

from __future__ import annotations

import json
import logging
import sys
import time

_HANDLER_MARK = "_pixie_run"


def _utc(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + (
        f".{int(record.msecs):03d}Z"
    )


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{_utc(record)} {record.levelname.lower()} {record.name}: {record.getMessage()}"


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": _utc(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def configure_logging(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    """Send the ``pixie`` loggers to stderr in the chosen format (once)."""
    root = logging.getLogger("pixie")
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines() if json_lines else _Text())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level)
