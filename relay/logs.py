"""How the relay writes its log: one line per event, as text or as JSON Lines.

A record is an event name plus flat fields: connection numbers, key
fingerprints, sizes, counts and reasons. Callers never pass a key, an envelope
or any other byte a client sent, so neither format has to guess what to hide.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

LOGGER_NAME = "pixie.relay"
# trio.serve_listeners reports EMFILE and friends here; the relay's log shows them too.
_ALSO = ("trio.serve_listeners",)

log = logging.getLogger(LOGGER_NAME)


def event(level: int, name: str, **fields: object) -> None:
    if log.isEnabledFor(level):
        log.log(level, name, extra={"fields": fields})


def _timestamp(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


def _flat(fields: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, object]]:
    for name, value in fields.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


class TextFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z info closed conn=7 key=3f9a... reason=idle``"""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "fields", {})
        parts = [_timestamp(record), record.levelname.lower(), record.getMessage()]
        for name, value in _flat(fields):
            text = str(value).lower() if isinstance(value, bool) else str(value)
            parts.append(f"{name}={json.dumps(text) if ' ' in text or not text else text}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """``{"ts": "...", "level": "info", "event": "closed", "conn": 7, ...}``"""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "fields", {})
        line = {"ts": _timestamp(record), "level": record.levelname.lower()}
        line["event"] = record.getMessage()
        return json.dumps({**line, **fields}, separators=(",", ":"), default=str)


def configure_logging(
    *, json_lines: bool = False, stream: IO[str] | None = None, level: int = logging.INFO
) -> None:
    """Send the relay's log (and trio's accept-loop complaints) to ``stream``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    for name in (LOGGER_NAME, *_ALSO):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, "_pixie_relay", False)]:
            logger.removeHandler(old)
        handler._pixie_relay = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
