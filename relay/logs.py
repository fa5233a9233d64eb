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
from collections.abc import Callable, Iterator
from typing import IO, Any

LOGGER_NAME = "pixie.relay"
# trio.serve_listeners reports EMFILE and friends here; the relay's log shows them too.
_ALSO = ("trio.serve_listeners",)

log = logging.getLogger(LOGGER_NAME)


def event(level: int, name: str, **fields: object) -> None:
    if log.isEnabledFor(level):
        log.log(level, name, extra={"fields": fields})


class Throttle:
    """Per-connection events, summarised once they come in floods.

    Of each kind (an event name and a reason) the first `FIRST` in an interval of
    `INTERVAL` seconds are logged as they come; the rest are counted, and once the
    interval is over (at the next event of any kind, or at `flush`) one line says
    how many of each kind were left out: ``suppressed event=closed reason=idle
    count=9995 seconds=60``. However many come, the log grows by at most
    ``FIRST + 1`` lines per kind per interval. Sans-IO: ``clock`` gives the time."""

    FIRST = 5
    INTERVAL = 60.0
    MAX_KINDS = 256  # kinds tracked at once; reasons come from a fixed set in practice

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._started: float | None = None  # when the current interval began
        self._logged: dict[tuple[str, str], int] = {}
        self._left_out: dict[tuple[str, str], tuple[int, int]] = {}  # kind: (count, level)

    def event(self, level: int, name: str, why: str, /, **fields: object) -> None:
        """Log ``name`` with ``fields`` unless its kind (``name``, ``why``) is over its
        share this interval."""
        now = self._clock()
        if self._started is None:
            self._started = now
        elif now - self._started >= self.INTERVAL:
            self.flush(now)
            self._started = now
        kind = (name, why)
        logged = self._logged.get(kind, 0)
        if logged < self.FIRST and len(self._logged) < self.MAX_KINDS:
            self._logged[kind] = logged + 1
            event(level, name, **fields)
            return
        count, worst = self._left_out.get(kind, (0, level))
        self._left_out[kind] = (count + 1, max(level, worst))

    def flush(self, now: float | None = None) -> None:
        """Log how many of each kind were left out, and start a new interval."""
        now = self._clock() if now is None else now
        seconds = round(now - self._started, 3) if self._started is not None else 0.0
        for (name, reason), (count, level) in self._left_out.items():
            event(level, "suppressed", event=name, reason=reason, count=count, seconds=seconds)
        self._left_out.clear()
        self._logged.clear()
        self._started = None


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
