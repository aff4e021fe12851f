"""The RocksDB backend: keyed state larger than memory, with memory bounded by configuration.

One column family per state (rather than a state-id prefix in one family): keys carry no
state id, a state's cells are one contiguous key space for scans, snapshots and TTL sweeps,
and the memtables of all families are still bounded together by the WriteBufferManager.
Timers of each (service, domain) get their own column family too (see ``timers``).

``local_dir`` (``StateConfig.local_dir``) is the database directory. Default: a fresh
directory under the system temp dir named after the key-group range, unique per backend.
The backend deletes the directory on ``close()`` when it created it (the default, or a
``local_dir`` that did not exist); an existing directory is kept (``close()`` then writes the
pending overlay first), and a database found there is reopened with its states and timers.
"""

from __future__ import annotations

from statekit import ConfigError, KeyedStateBackend, OptionSpec, StateDescriptor, StateDescriptorError

from .db import Closed, RocksDBStore
from .keys import key_group_prefixes
from .shared_memory import SharedMemory
from .snapshot import RocksDBSnapshots
from .states import KINDS, RocksDBState
from .timers import RocksDBTimerQueue
from .write_buffer import WriteBuffer

_POSITIVE = ("write_buffer_size", "max_write_buffer_number",
             "read_cache_entries", "read_cache_size", "timer_cache_size", "write_batch_size", "max_background_jobs")
_SHARED = ("block_cache_size", "write_buffer_manager_size")
"""Options of the process's shared memory (``SharedMemory``): unset, the memory budget sizes it."""


class RocksDBKeyedStateBackend(RocksDBSnapshots, KeyedStateBackend):
    """Keyed state and timers in an embedded RocksDB, written in one WriteBatch per epoch."""

    name = "rocksdb"
    OPTIONS = (
        OptionSpec("rocksdb.block_cache_size", "size", None,
                   "LRU block cache (data, index and filter blocks) shared by the process's RocksDB backends; "
                   "memtables are charged to it too (default: a quarter of the process's memory budget)"),
        OptionSpec("rocksdb.write_buffer_manager_size", "size", None,
                   "total memtable memory of the process's RocksDB backends, charged to the block cache "
                   "(default: half the block cache)"),
        OptionSpec("rocksdb.write_buffer_size", "size", 16 << 20, "size of one memtable"),
        OptionSpec("rocksdb.max_write_buffer_number", "int", 2, "memtables per column family"),
        OptionSpec("rocksdb.max_background_jobs", "int", 2, "RocksDB flush and compaction threads"),
        OptionSpec("rocksdb.read_cache_entries", "int", 100_000,
                   "deserialized values cached per value/reducing/aggregating state (LRU)"),
        OptionSpec("rocksdb.read_cache_size", "size", 32 << 20,
                   "serialized bytes of the values cached per state; larger values than 1/16 of it are not cached"),
        OptionSpec("rocksdb.timer_cache_size", "int", 128,
                   "earliest timers of each timer queue held in memory"),
        OptionSpec("rocksdb.write_batch_size", "int", 20_000,
                   "pending cells of one state that trigger an early WriteBatch before the epoch ends"),
    )

    def __init__(self, config, key_groups, time_provider) -> None:
        super().__init__(config, key_groups, time_provider)
        settings = {name: config.get("rocksdb." + name) for name in _POSITIVE}
        sizes = {name: config.options.get("rocksdb." + name, 1) for name in _SHARED}
        for name, value in {**settings, **sizes}.items():
            if value < 1:
                raise ConfigError(f"option 'rocksdb.{name}' must be positive, got {value}")
        self._read_cache_entries: int = settings["read_cache_entries"]
        self._read_cache_bytes: int = settings["read_cache_size"]
        self._timer_cache_size: int = settings["timer_cache_size"]
        self._kg_prefixes = key_group_prefixes(self.max_parallelism)
        kgs = self.key_groups
        self.memory = SharedMemory.for_config(config)
        """The process's RocksDB memory this backend's DB uses (one cache and write-buffer manager for all)."""
        self._store = RocksDBStore(config.local_dir, f"statekit-rocksdb-kg{kgs.start}-{kgs.stop - 1}-", settings,
                                   self.memory)
        self._wb = WriteBuffer(self._store, settings["write_batch_size"])

    @property
    def local_dir(self) -> str:
        """The RocksDB directory of this backend."""
        return self._store.path

    def _create_state(self, descriptor: StateDescriptor) -> RocksDBState:
        cls = KINDS.get(descriptor.kind)
        if cls is None:
            raise StateDescriptorError(f"state '{descriptor.name}': unknown state kind {descriptor.kind!r}")
        family = self._store.state_family(descriptor.name, descriptor.kind, descriptor.ttl_config is not None,
                                          descriptor.version)
        return cls(self, descriptor, family, self._wb)

    def _update_stored_version(self, name: str, version: int) -> int:
        return self._store.set_state_version(name, version)

    def _create_timer_queue(self, service: str, domain: str) -> RocksDBTimerQueue:
        return RocksDBTimerQueue(*self._store.timer_family(service, domain), self._timer_cache_size)

    def flush(self) -> None:
        """End of an epoch: flush hooks write their caches, the overlay goes as one WriteBatch, TTL is
        swept and the sweep's deletes are written."""
        self._check_open()
        self._write_back()
        self._wb.write()
        self._sweep_ttl()
        self._wb.write()

    def close(self) -> None:
        """Close RocksDB; delete the directory if this backend created it, else write pending changes first."""
        if self._closed:
            return
        if not self._store.created:
            self._wb.write()
        self._closed = True
        closed = Closed(type(self).__name__)
        for st in self._registry.states.values():
            st._release(closed)
        for svc in self._timers.services.values():
            for _, queue in svc.queues():
                queue._release(closed)
        self._store.close()
