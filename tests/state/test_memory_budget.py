"""The memory budget (issue 46): its value's parsing, its default and split rules, and one RocksDB cache and
write-buffer manager per process shared by every RocksDB backend it opens, sized by the budget unless the
rocksdb.* options size it."""

from __future__ import annotations

import pytest

from statekit import ConfigError, MemoryBudgetError, StateConfig, ValueStateDescriptor, create_backend
from statekit.config import parse_budget
from statekit.memory_budget import (BUDGET_SETTING, budget_warning, check_budget, default_budget, machine_memory,
                                    process_share, ROCKSDB_CACHE_CAP, rocksdb_cache_size, write_buffers_size)

MIB = 1 << 20


@pytest.fixture
def backends(tmp_path):
    made = []

    def new(**config):
        b = create_backend(StateConfig(backend="rocksdb", local_dir=str(tmp_path / f"db-{len(made)}"), **config))
        made.append(b)
        return b

    yield new
    for b in made:
        b.close()


def test_two_backends_of_a_process_share_one_cache_sized_by_the_budget(backends):
    a, b = backends(memory_budget="128m", max_parallelism=8), backends(memory_budget="128m", max_parallelism=8)
    assert a.memory is b.memory
    assert a.memory.capacity == rocksdb_cache_size(128 * MIB) == 32 * MIB
    assert a.memory.write_buffer_capacity == write_buffers_size(32 * MIB) == 16 * MIB
    before = a.memory.usage()
    for backend in (a, b):  # both write into the one cache: memtables are charged to it
        v = backend.get_state(ValueStateDescriptor("v"))
        for i in range(2000):
            backend.set_current_key(i)
            v.update("x" * 200)
        backend.flush()
    assert a.memory.usage() > before and b.memory.usage() == a.memory.usage()


def test_rocksdb_options_override_the_budgets_split(backends):
    sized = backends(memory_budget="128m", options={"rocksdb.block_cache_size": "48m"})
    assert (sized.memory.capacity, sized.memory.write_buffer_capacity) == (48 * MIB, 24 * MIB)
    both = backends(memory_budget="128m", options={"rocksdb.block_cache_size": "1g",
                                                   "rocksdb.write_buffer_manager_size": "8m"})
    assert (both.memory.capacity, both.memory.write_buffer_capacity) == (1 << 30, 8 * MIB)  # past the cap
    assert backends(memory_budget="128m").memory.capacity == 32 * MIB  # another sizing: another shared memory


def test_split_and_default_rules():
    assert process_share(4 << 30, 4) == 1 << 30 and process_share(10, 0) == 10 and process_share(1, 8) == 1
    assert rocksdb_cache_size(1) == MIB and write_buffers_size(MIB) == MIB  # never a cache too small to open
    assert rocksdb_cache_size(64 << 30) == ROCKSDB_CACHE_CAP  # a large budget leaves the rest to the working sets
    assert default_budget(4 << 30) == 2 << 30
    assert default_budget(None) == machine_memory() // 4 > 0


@pytest.mark.parametrize("value,message", [
    ("lots", "spark.statekit.memory_budget='lots': not a size"), ("0", "expected a size above 0"),
    ("-1g", "not a size"), (True, "not a size")])
def test_bad_budgets_are_refused_naming_the_setting(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_budget(value, BUDGET_SETTING)
    with pytest.raises(ConfigError, match="memory_budget="):
        StateConfig(memory_budget=value)


def test_budget_from_a_config_env_and_spark_conf():
    assert parse_budget("1g", BUDGET_SETTING) == 1 << 30 and parse_budget("512m", BUDGET_SETTING) == 512 * MIB
    assert StateConfig.from_env({"STATEKIT_MEMORY_BUDGET": "2g"}).memory_budget == 2 << 30
    config = StateConfig.from_dict({"backend": "rocksdb", "memory_budget": "300m"})
    assert StateConfig.from_dict(config.to_dict()).memory_budget == 300 * MIB


def test_heap_past_its_budget_fails_naming_memory_the_setting_and_rocksdb():
    assert check_budget(79, 100, "heap", 2) is None
    assert "81% of its memory budget" in check_budget(81, 100, "heap", 2) and "--backend rocksdb" in check_budget(
        81, 100, "heap", 2)
    with pytest.raises(MemoryBudgetError, match=r"memory budget .*spark\.statekit\.memory_budget.* --backend rocksdb"):
        check_budget(101, 100, "heap", 2)
    on_disk = check_budget(101, 100, "rocksdb", 2)  # its state on disk: a warning, not an error
    assert on_disk == budget_warning(101, 100, "rocksdb") and "working sets" in on_disk and "--backend" not in on_disk
