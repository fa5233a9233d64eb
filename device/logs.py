"""How `pixie run` logs: human-readable lines by default, JSON Lines with
``--json-logs``. Log calls carry ids, fingerprints, sizes, counts and reasons;
never a note's body, an event's text or a key."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

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


class Summarised:
    """Log lines of one kind in full at first, then in summary.

    Per kind (a short reason), the first ``first`` lines of an interval are
    logged as they come; the rest are counted, and once ``interval`` seconds
    have passed since that interval began, one line says how many there were.
    A flood of one kind costs at most ``first`` lines, then one line per
    interval for as long as it lasts; a kind that goes quiet for a whole
    interval starts afresh. A summary is written at the next line of its kind
    or at the next `flush` after its interval ends (nothing runs on a timer).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        first: int = 5,
        interval: float = 60.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.first = first
        self.interval = interval
        self.level = level
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    def log(self, kind: str, msg: str, *args: object) -> None:
        """Log ``msg % args`` now, or count it under ``kind`` for the summary."""
        now = self.clock()
        window = self._windows.get(kind)
        if window is None:
            window = self._windows[kind] = _Window(now)
        elif now - window.start >= self.interval:
            self._close(kind, window, now)
        if window.logged < self.first:
            window.logged += 1
            self.logger.log(self.level, msg, *args)
        else:
            window.held += 1

    def flush(self) -> None:
        """Write the summary of every kind whose interval has ended."""
        now = self.clock()
        for kind, window in self._windows.items():
            if window.held and now - window.start >= self.interval:
                self._close(kind, window, now)

    def _close(self, kind: str, window: _Window, now: float) -> None:
        if window.held:
            self.logger.log(
                self.level,
                "%d more %s as %s in the last %.0f s",
                window.held,
                self.what,
                kind,
                now - window.start,
            )
        else:
            window.logged = 0  # a quiet interval: the next lines are logged in full
        window.start, window.held = now, 0


@dataclass(slots=True)
class _Window:
    start: float
    logged: int = 0
    held: int = 0
