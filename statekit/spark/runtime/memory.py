"""Memory an epoch freed, handed back to the operating system.

An epoch's task allocates and frees a lot (Arrow tables, numpy columns, per-key Python objects).
Freed, that memory stays in the process: Arrow's allocator keeps its pages for reuse, and glibc's
``malloc`` keeps free heap memory until ``malloc_trim``. A state host or Python worker would then sit
between epochs, and after its run, at its epoch's high-water mark.

A state host also starts with Arrow's allocator (mimalloc) purging freed pages at once
(``ALLOCATOR_ENV``): an epoch allocates and frees in bursts, and pages kept for their purge delay
add up to the epoch's peak. Both effects are measured in docs/bench/runtime.md.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Mapping

ALLOCATOR_ENV = {"MIMALLOC_PURGE_DELAY": "0"}
"""Environment a state host starts with (read by mimalloc when pyarrow loads it): freed pages go back at once."""


def allocator_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``ALLOCATOR_ENV`` added where ``env`` does not set it (a user's own setting wins)."""
    return {**ALLOCATOR_ENV, **env}


@lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (has ``malloc_trim``); None elsewhere (musl, macOS)."""
    try:
        lib = ctypes.CDLL(None)
    except OSError:
        return None
    return lib if hasattr(lib, "malloc_trim") else None


def release_free_memory() -> None:
    """Return the pages Arrow's default pool and glibc's heap keep free to the operating system. Its cost grows
    with what was freed, so it runs at a few points of a task's life only (docs/spark.md lists them)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
