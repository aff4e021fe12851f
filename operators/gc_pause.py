"""Pausing Python's cyclic garbage collector over an epoch's bulk work.

An epoch allocates millions of small, acyclic objects (session lists, accumulators, timers) while
state holds millions more: with the collector on, every few hundred allocations start a collection
that walks the young objects, and the frequent full ones walk all of state, which measured about
half of an epoch at 10^5-10^6 keys. Reference counting still frees everything at once; the
collector runs again, as usual, after the epoch.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block (nested uses keep it off until the outermost ends)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
