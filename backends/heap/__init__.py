"""In-memory (dict) keyed-state backend."""

from .backend import DELETED, HeapKeyedStateBackend
from .timers import HeapTimerQueue

__all__ = ["DELETED", "HeapKeyedStateBackend", "HeapTimerQueue"]
