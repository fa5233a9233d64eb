"""What the browser tests share: Debian's Chromium, the marks that skip them
where it is missing, and a plain asyncio loop for Playwright's sync API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Slow, and skipped where Chromium is not installed.
BROWSER_MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's chromium is not installed (apt-get install chromium; "
        "scripts/lib/bootstrap.sh does it with the test extra)",
    ),
]


@contextlib.contextmanager
def plain_asyncio() -> Iterator[None]:
    """Playwright's sync API runs its own asyncio loop in this thread. Once
    trio-asyncio is imported (the relay fleet's tests import it), a new
    loop would be trio-asyncio's, which Playwright cannot drive; a policy
    set in this thread gives Playwright a plain one (trio-asyncio keeps it
    per thread), and the one in force before comes back after."""
    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(before)
