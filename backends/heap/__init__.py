"""In-memory (dict) keyed-state backend."""

from . import snapshot as _snapshot  # noqa: F401  (attaches the checkpoint hooks to the backend class)
from .backend import DELETED, HeapKeyedStateBackend
from .timers import HeapTimerQueue

__all__ = ["DELETED", "HeapKeyedStateBackend", "HeapTimerQueue"]
