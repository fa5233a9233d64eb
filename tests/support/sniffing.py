"""Asking an importer's sniff about a path that could block (a named pipe),
in a thread with a deadline, so a sniff that opens the pipe fails the test
instead of hanging the run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pixie.device.ingest.base import Importer

DEADLINE_S = 5.0


def sniff_without_blocking(importer: Importer, path: Path) -> bool:
    """``importer.sniff(path)``; the test fails if it has not answered in time."""
    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(importer.sniff(path)), daemon=True)
    worker.start()
    worker.join(timeout=DEADLINE_S)
    if worker.is_alive():  # unblock the reader so the test run can end
        with path.open("wb"):
            pass
        worker.join()
        pytest.fail(f"{importer.name}: sniff blocked on {path.name}")
    return answer[0]
