"""glibc malloc settings that keep the daemon's resident memory near what it uses.

Measured with bench.load (2000-entry batches): by default each thread that
allocates gets its own malloc arena (the loop decodes a batch, the writer builds
its rows, readers rank), and glibc raises its mmap threshold after a large
block is freed, so the next batch's megabyte buffers come from the heap and
stay there. Two arenas and a fixed 256 KiB mmap threshold make a batch's
large buffers go back to the system when freed; `trim` returns the rest after
idle work. Elsewhere than glibc these are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # glibc only
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_LIBC = _libc()


def tune() -> None:
    """Call before any thread starts: arenas are made per thread on first allocation."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, 2)
        _LIBC.mallopt(_M_MMAP_THRESHOLD, 256 * 1024)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, 1024 * 1024)


def trim() -> None:
    """Give freed heap memory back to the system (after idle work, a few ms at most)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
