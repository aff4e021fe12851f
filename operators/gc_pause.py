"""Keeping Python's cyclic garbage collector off an epoch's bulk work and off long-lived state.

An epoch allocates millions of small, acyclic objects (session lists, accumulators, timers) while
state holds millions more: with the collector on, every few hundred allocations start a collection
that walks the young objects, and the full ones walk all of state, which measured about half of an
epoch at 10^5-10^6 keys. So the collector is off inside the block; at its end one collection frees
whatever cyclic garbage the block made, and what survives is frozen (``gc.freeze``): state that
lives on is not walked again by later collections. (Frozen objects are still freed by reference
counting; only a cycle formed among them later would stay.)
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; at its end collect the block's cyclic garbage and
    freeze the survivors (nested uses keep it off until the outermost ends)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.collect()
            gc.freeze()
            gc.enable()
