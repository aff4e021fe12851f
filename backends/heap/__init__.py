"""In-memory (dict) keyed-state backend."""

from .backend import HeapKeyedStateBackend
from .snapshot import DELETED, HeapSnapshots
from .timers import HeapTimerQueue

__all__ = ["DELETED", "HeapKeyedStateBackend", "HeapSnapshots", "HeapTimerQueue"]
