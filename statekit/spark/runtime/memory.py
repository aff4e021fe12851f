"""Memory an epoch freed, handed back to the operating system; and how much a process grew since it started.

An epoch's task allocates and frees a lot (Arrow tables, numpy columns, per-key Python objects).
Freed, that memory stays in the process: Arrow's allocator keeps its pages for reuse, and glibc's
``malloc`` keeps free heap memory until ``malloc_trim``. A state host or Python worker would then sit
between epochs, and after its run, at its epoch's high-water mark.

A state host also starts with Arrow's allocator (mimalloc) purging freed pages at once
(``ALLOCATOR_ENV``): an epoch allocates and frees in bursts, and pages kept for their purge delay
add up to the epoch's peak. Both effects are measured in docs/bench/runtime.md.

``grown_bytes`` is the resident memory a process gained since its first task began (``mark_start``): what its
kept state, caches and working memory take. ``peak_grown_bytes`` is the same at its highest since ``reset_peak``;
``take_peak`` reads it and starts it anew. A final watermark's fires can take a multiple of the state for a moment
and be freed by the commit, and a commit's snapshot comes after its check, so the memory budget's check and a
run's ``state_bytes`` metric use the peak since the previous check (docs/configuration.md, "Memory budget").
"""

from __future__ import annotations

import ctypes
import os
import re
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


_PAGE = os.sysconf("SC_PAGE_SIZE")
_start: tuple[int, int] | None = None
"""(pid, resident bytes) when this process's first task began; a forked child marks its own."""


def resident_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``; 0 where there is no ``/proc``)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def mark_start() -> None:
    """Record this process's resident memory before its first task (idempotent; anew in a forked child)."""
    global _start
    if _start is None or _start[0] != os.getpid():
        _start = (os.getpid(), resident_bytes())


def grown_bytes() -> int:
    """Resident bytes this process gained since ``mark_start`` (0 when it shrank, or without ``/proc``)."""
    mark_start()
    return max(0, resident_bytes() - _start[1])


_HWM = re.compile(rb"VmHWM:\s+(\d+) kB")


def reset_peak() -> None:
    """Start this process's peak resident memory anew from now (Linux's ``clear_refs``; a no-op elsewhere)."""
    mark_start()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_grown_bytes() -> int:
    """Resident bytes this process gained since ``mark_start`` at their highest since ``reset_peak`` (Linux's
    ``VmHWM``); ``grown_bytes`` where the peak is not known."""
    mark_start()
    try:
        with open("/proc/self/status", "rb") as f:
            found = _HWM.search(f.read())
    except OSError:
        found = None
    now = grown_bytes()
    return now if found is None else max(now, int(found.group(1)) * 1024 - _start[1])


def take_peak() -> int:
    """``peak_grown_bytes``, then the peak started anew: each call sees the highest memory since the one before
    (an epoch's check sees the snapshot the previous commit wrote after its own check, and the epoch's work)."""
    peak = peak_grown_bytes()
    reset_peak()
    return peak
