"""RocksDB keyed-state backend (rocksdict, raw mode) with a cached timer queue."""

from .backend import RocksDBKeyedStateBackend
from .snapshot import RocksDBSnapshots
from .timers import RocksDBTimerQueue

__all__ = ["RocksDBKeyedStateBackend", "RocksDBSnapshots", "RocksDBTimerQueue"]
