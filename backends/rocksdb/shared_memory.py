"""RocksDB's memory in one process: one block cache and one write-buffer manager for every RocksDB backend.

Every backend the process opens (operators, partitions, column families) uses the same LRU block cache for
data, index and filter blocks, with all memtables charged to it through one WriteBufferManager, as Flink's
managed memory does per slot: RocksDB's memory in the process stays near one capacity however many backends
it opens. The capacity comes from the process's memory budget (``statekit.memory_budget``), or from
``rocksdb.block_cache_size`` and ``rocksdb.write_buffer_manager_size`` where they are set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocksdict import Cache, WriteBufferManager

from statekit import StateConfig
from statekit.memory_budget import budget_of, rocksdb_cache_size, write_buffers_size


@dataclass(frozen=True)
class SharedMemory:
    """One process's RocksDB cache (``capacity`` bytes) and write-buffer manager (``write_buffer_capacity``
    bytes, charged to the cache); ``for_config`` hands out the process's, one per sizing."""

    capacity: int
    write_buffer_capacity: int
    cache: Cache = field(init=False, repr=False, compare=False)
    write_buffers: WriteBufferManager = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cache = Cache(self.capacity)
        object.__setattr__(self, "cache", cache)
        object.__setattr__(self, "write_buffers", WriteBufferManager.new_write_buffer_manager_with_cache(
            self.write_buffer_capacity, False, cache))

    def usage(self) -> int:
        """Bytes held in the cache now (blocks and the memtables charged to it)."""
        return self.cache.get_usage()

    @classmethod
    def for_config(cls, config: StateConfig) -> "SharedMemory":
        """The process's shared memory for a backend of ``config``: sized by its budget's RocksDB share, unless
        its ``rocksdb.*`` options set the sizes (an explicit option wins over the budget's split)."""
        cache = config.options.get("rocksdb.block_cache_size") or rocksdb_cache_size(budget_of(config))
        sizes = (cache, config.options.get("rocksdb.write_buffer_manager_size") or write_buffers_size(cache))
        memory = _PROCESS.get(sizes)
        if memory is None:
            memory = _PROCESS[sizes] = cls(*sizes)
        return memory


_PROCESS: dict[tuple[int, int], SharedMemory] = {}
"""The process's shared memories by (cache, write buffers) size: backends of one job share one."""
