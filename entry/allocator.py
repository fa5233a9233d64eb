"""Keep freed memory for reuse instead of handing it back to the kernel at once.

A Homebase serving a 1 MB body, a relay carrying it and a device reassembling
it each allocate and free buffers of hundreds of kilobytes per request (the
body read from SQLite, its parts, their envelopes and frames). With glibc's
defaults, a block that size is freed back to the kernel (an ``mmap`` chunk
unmapped, or the top of the heap trimmed) and the next request faults the same
pages in again, one by one: on a 1 MB fetch that was about a millisecond per
copy, a tenth of the whole fetch.

`keep_freed_memory` raises the two thresholds once per process: blocks up to
`MMAP_THRESHOLD` come from the heap, and the heap gives memory back only once
`TRIM_THRESHOLD` of it lies free at the top. A process then holds at most that
much more than it uses at its peak. Other C libraries (macOS, musl) manage
memory their own way; there this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Above every block the protocol allocates (frames of at most 1 MiB, a held
# body of at most 4 MiB); anything larger is still mapped and unmapped.
MMAP_THRESHOLD = 8 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Apply the thresholds above if this process runs on glibc; True if both took."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 on error.
    mapped = int(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) == 1
    trimmed = int(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) == 1
    return mapped and trimmed


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]
