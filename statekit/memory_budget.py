"""The memory budget: how many bytes statekit's state may hold in one process, and how that is shared.

One budget per executor (``spark.statekit.memory_budget``), split evenly across the processes that keep its
partitions' state (its state hosts, a host per core by default), as Flink splits managed memory across slots.
Within a process the RocksDB backends share one block cache with their memtables charged to it
(``ROCKSDB_FRACTION`` of the process's budget, up to ``ROCKSDB_CACHE_CAP``); the rest is left to the read caches and the engines' working
sets. The heap backend holds all its state in memory: past its budget an epoch fails before its commit
instead of the executor being killed for memory. docs/configuration.md, "Memory budget", says what is covered.
"""

from __future__ import annotations

import os

from .config import StateConfig
from .errors import MemoryBudgetError

BUDGET_SETTING = "spark.statekit.memory_budget"
EXECUTOR_FRACTION = 0.5
"""Default budget: this fraction of an executor's memory (``spark.executor.memory``) ..."""
MACHINE_FRACTION = 0.25
"""... or, where the executor's memory is not known (a local master, whose Python processes no JVM heap
bounds), this fraction of the machine's physical memory."""
ROCKSDB_FRACTION = 0.25
"""RocksDB's block cache (memtables charged to it) in a process: this fraction of the process's budget ..."""
ROCKSDB_CACHE_CAP = 64 << 20
"""... at most this many bytes (what one backend's cache was before they were shared) unless
``rocksdb.block_cache_size`` asks for more: a larger cache is memory the engines' working sets may need."""
WRITE_BUFFER_FRACTION = 0.5
"""RocksDB's memtables: at most this fraction of the block cache they are charged to."""
WARN_FRACTION = 0.8
"""Past this fraction of its budget, a process's state is reported (a warning in the metrics and the log)."""
IN_MEMORY_BACKENDS = frozenset({"heap"})
"""Backends that hold all state in the process's memory: past the budget their epoch fails."""
TABLE_FRACTION = 1 / 16
"""On a backend that keeps state on disk, an operator's in-memory session table may hold rows up to this
fraction of its process's budget; past it the operator moves them to a stored cell per key (``table_rows``) ..."""
TABLE_ROW_BYTES = 384
"""... counting this many bytes a row: a session's row, its key's slot and the working copies of an epoch
(measured at 10^6-10^7 open sessions, about 340)."""


def machine_memory() -> int:
    """The physical memory of this machine in bytes."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def default_budget(executor_memory: int | None) -> int:
    """The executor's budget when none is set: ``EXECUTOR_FRACTION`` of ``executor_memory``, or, when that is
    None (not known), ``MACHINE_FRACTION`` of this machine's memory."""
    if executor_memory is None:
        return int(machine_memory() * MACHINE_FRACTION)
    return int(executor_memory * EXECUTOR_FRACTION)


def budget_of(config: StateConfig) -> int:
    """The budget of the process ``config``'s backends run in: ``config.memory_budget``, else the default of a
    process that is its own executor (embedded use; on Spark, ``run_keyed`` always sets it)."""
    return default_budget(None) if config.memory_budget is None else config.memory_budget


def table_rows(config: StateConfig) -> int | None:
    """How many session rows an operator's in-memory table may hold in a process of ``config`` before it moves
    them to cells (the way Spark's hash aggregation falls back to sorting when its map outgrows memory); None on
    a backend of ``IN_MEMORY_BACKENDS``, whose state is in memory whatever its layout."""
    if config.backend in IN_MEMORY_BACKENDS:
        return None
    return max(1, int(budget_of(config) * TABLE_FRACTION) // TABLE_ROW_BYTES)


def process_share(budget: int, processes: int) -> int:
    """One process's share of an executor's ``budget`` kept by ``processes`` processes (at least one byte)."""
    return max(1, budget // max(1, processes))


def rocksdb_cache_size(budget: int) -> int:
    """Bytes of the block cache a process's RocksDB backends share under its ``budget`` (1 MiB at least,
    ``ROCKSDB_CACHE_CAP`` at most)."""
    return max(1 << 20, min(ROCKSDB_CACHE_CAP, int(budget * ROCKSDB_FRACTION)))


def write_buffers_size(cache: int) -> int:
    """Bytes of memtables charged to a block cache of ``cache`` bytes (at least 1 MiB)."""
    return max(1 << 20, int(cache * WRITE_BUFFER_FRACTION))


def budget_warning(state_bytes: int, budget: int, backend: str) -> str | None:
    """What to say when a process's state on ``backend`` passed ``WARN_FRACTION`` of its ``budget``; None below."""
    if state_bytes <= budget * WARN_FRACTION:
        return None
    then = ("past it this run fails: raise it or run with --backend rocksdb" if backend in IN_MEMORY_BACKENDS else
            "the operators' working sets are not bounded by it yet: raise it or give the executor more memory")
    return (f"statekit: the state of one process is {state_bytes / 2**20:,.1f} MiB, {state_bytes / budget:.0%} of "
            f"its memory budget of {budget / 2**20:,.1f} MiB ({BUDGET_SETTING}, split across the executor's state "
            f"hosts); {then}")


def check_budget(state_bytes: int, budget: int, backend: str, processes: int) -> str | None:
    """``budget_warning``'s text, or MemoryBudgetError when a backend of ``IN_MEMORY_BACKENDS`` holds more than
    ``budget`` (the share of one of ``processes`` processes): it names the memory, the setting and the way out."""
    if state_bytes > budget and backend in IN_MEMORY_BACKENDS:
        raise MemoryBudgetError(
            f"out of memory budget: the {backend} backend holds all state in memory, and this process's state grew to "
            f"{state_bytes / 2**20:,.1f} MiB, past its memory budget of {budget / 2**20:,.1f} MiB ({BUDGET_SETTING}="
            f"{budget * processes / 2**20:,.0f}m per executor, split across {processes} state host(s)). This epoch "
            f"was not committed and the checkpoint stays usable: rerun with --backend rocksdb (Spark conf "
            f"spark.statekit.backend=rocksdb), whose state lives on disk, or raise {BUDGET_SETTING}")
    return budget_warning(state_bytes, budget, backend)
