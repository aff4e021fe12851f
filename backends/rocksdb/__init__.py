"""RocksDB keyed-state backend (rocksdict, raw mode) with a cached timer queue."""

from . import snapshot as _snapshot  # noqa: F401  (attaches the checkpoint hooks to the backend class)
from .backend import RocksDBKeyedStateBackend
from .timers import RocksDBTimerQueue

__all__ = ["RocksDBKeyedStateBackend", "RocksDBTimerQueue"]
