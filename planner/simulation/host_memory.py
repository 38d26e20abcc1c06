"""The host allocator, told when to give memory back: glibc's ``mallopt`` and ``malloc_trim``.

Two ways memory a run freed stays in the process and raises a later peak:

* glibc raises its mmap threshold after big arrays are freed (up to 32 MiB), after which arrays of a few MiB
  come from the heap and their freed memory stays in the process: :func:`keep_large_blocks_mapped` fixes the
  threshold, so blocks of 128 KiB and more are mmapped and unmapped when freed (the simulator's activations);
* XLA's host devices run on threads of their own, and glibc keeps what a thread frees in that thread's arena,
  where another thread does not reuse it: :func:`release_free_memory` (``malloc_trim(0)``) hands every free
  page back (``shardplan run``, after compiling and after every run of the step).

Elsewhere (another C library, another OS) both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["keep_large_blocks_mapped", "release_free_memory"]

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _LIBC = False
    return _LIBC or None


def keep_large_blocks_mapped() -> None:
    """Have glibc hand every freed block of 128 KiB or more back to the OS at once (a fixed mmap threshold)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)


def release_free_memory() -> None:
    """Return the allocator's free pages to the system, whichever thread's arena holds them (``malloc_trim(0)``)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
