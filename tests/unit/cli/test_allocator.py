"""Every `pixie` process keeps freed memory for reuse (glibc only): large
blocks freed by one request are not faulted in again by the next."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from pixie.entry.allocator import keep_freed_memory

# A request's worth of large blocks, allocated and freed twenty times; prints
# the page faults one round costs once warm.
CHURN = """
import resource, sys
from pixie.entry.allocator import keep_freed_memory
if sys.argv[1] == "kept" and not keep_freed_memory():
    raise SystemExit("not applied")
def request():
    body, part = bytearray(1_000_000), bytearray(1_000_000)
    joined = bytes(body) + bytes(part)
    del body, part, joined
request()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    request()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def faults_per_request(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True, timeout=60
    )
    return float(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_freed_blocks_are_reused_without_faulting_their_pages_in_again() -> None:
    assert keep_freed_memory()
    # Each round touches about 4 MB: 1,000 pages. With glibc's defaults most
    # of them fault in again every round; kept, none do.
    assert faults_per_request("default") > 500
    assert faults_per_request("kept") < 10


@pytest.mark.skipif(GLIBC, reason="only elsewhere")
def test_elsewhere_nothing_is_changed() -> None:
    assert keep_freed_memory() is False
