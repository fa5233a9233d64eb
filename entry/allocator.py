"""Keep freed memory for reuse instead of handing it back to the kernel at once.

A Homebase serving a 1 MB body, a relay carrying it and a device reassembling
it each allocate and free buffers of hundreds of kilobytes per request (the
body read from SQLite, its parts, their envelopes and frames). With glibc's
defaults, freed memory that size is trimmed from the top of the heap (or
unmapped) almost at once, and the next request faults the same pages in
again, one by one: on a 1 MB fetch that was about a millisecond per copy, a
tenth of the whole fetch.

`keep_freed_memory` raises the two thresholds once per process, on 64-bit
glibc: blocks up to `MMAP_THRESHOLD` come from the heap, and a heap gives
memory back only once more than `TRIM_THRESHOLD` of it lies free at its top.
glibc keeps a heap (an arena) per thread that allocates, up to eight per core,
so a process may keep up to `TRIM_THRESHOLD` of freed memory resident per
arena it has used. Elsewhere (macOS, musl, 32-bit glibc, where the mmap
threshold cannot go this high) nothing is changed.
"""

from __future__ import annotations

import ctypes
import platform

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Above every block the protocol allocates (frames of at most 1 MiB, a held
# body of at most 4 MiB); anything larger is still mapped and unmapped.
MMAP_THRESHOLD = 8 * 1024 * 1024
# Room for a 4 MiB body, its parts and their frames at once, freed and reused
# request after request.
TRIM_THRESHOLD = 16 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Apply the thresholds above on 64-bit glibc; True if both took."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if ctypes.sizeof(ctypes.c_void_p) < 8:
        return False
    try:
        # The C library this process already runs on (no search for it: that
        # would start `ldconfig`).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 on error. Setting either threshold turns
    # off glibc's own adjustment of both, so the trim threshold is set only
    # once the mmap threshold has taken.
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]
