"""Every `pixie` process keeps freed memory for reuse (64-bit glibc only):
large blocks freed by one request are not faulted in again by the next."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import sysconfig

import pytest

from pixie.entry.allocator import keep_freed_memory

# A request's worth of large blocks (about 6 MB touched: some 1,460 pages),
# allocated and freed twenty times; prints the page faults one round costs
# once warm. Transparent huge pages are turned off for the child first
# (prctl PR_SET_THP_DISABLE), where they would fault 2 MB at a time.
CHURN = """
import ctypes, resource, sys
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
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

APPLIES = (
    platform.system() == "Linux"
    and platform.libc_ver()[0] == "glibc"
    and ctypes.sizeof(ctypes.c_void_p) == 8
)
# Where the C library's allocator is not the one that serves bytes objects,
# or the environment tunes it already, the comparison says nothing.
PLAIN_ALLOCATOR = not sysconfig.get_config_var("Py_GIL_DISABLED")
TUNING = ("GLIBC_TUNABLES", "LD_PRELOAD", "PYTHONMALLOC")


def faults_per_request(mode: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in TUNING and not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", CHURN, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    return float(out.stdout)


@pytest.mark.skipif(not (APPLIES and PLAIN_ALLOCATOR), reason="the thresholds are glibc's")
def test_freed_blocks_are_reused_without_faulting_their_pages_in_again() -> None:
    # With glibc's defaults most of the pages fault in again every round;
    # kept, none do.
    assert faults_per_request("default") > 500
    assert faults_per_request("kept") < 10


@pytest.mark.skipif(APPLIES, reason="only elsewhere")
def test_elsewhere_nothing_is_changed() -> None:
    assert keep_freed_memory() is False
