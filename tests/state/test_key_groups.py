"""Key groups (Flink's assignment): a stable hash of the serialized key, spread over the groups, and
partitions owning contiguous, covering ranges.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgpack
import pytest

from statekit import key_group_for, key_groups_for_partition, partition_for_key_group, stable_hash


STABLE_KEYS = ["user-1", 42, -7, ("a", 1), b"\x00raw", 3.25, ("nested", ("t", 2), [1, 2])]


def test_key_group_for_is_stable_across_processes():
    code = ("import json, sys; from statekit import key_group_for\n"
            "keys = [\"user-1\", 42, -7, (\"a\", 1), b\"\\x00raw\", 3.25, (\"nested\", (\"t\", 2), [1, 2])]\n"
            "print(json.dumps([[key_group_for(k, m) for k in keys] for m in (128, 4096, 7)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[key_group_for(k, m) for k in STABLE_KEYS] for m in (128, 4096, 7)]


def test_key_group_hashes_serialized_key_bytes():
    for m in (128, 1000, 32768):
        for key in ("user-1", 42, b"raw"):
            assert key_group_for(key, m) == stable_hash(msgpack.packb(key, use_bin_type=True)) % m


def test_key_group_for_in_range_and_spread():
    groups = [key_group_for(f"user-{i}", 128) for i in range(5000)]
    assert min(groups) >= 0 and max(groups) < 128
    counts = [groups.count(g) for g in range(128)]
    assert min(counts) > 0
    assert max(counts) < 3 * 5000 / 128


def test_key_groups_for_partition_matches_flink_formula():
    assert [key_groups_for_partition(p, 3, 128) for p in range(3)] == [range(0, 43), range(43, 86), range(86, 128)]
    assert [key_groups_for_partition(p, 2, 128) for p in range(2)] == [range(0, 64), range(64, 128)]
    assert key_groups_for_partition(0, 1, 128) == range(0, 128)
    assert [key_groups_for_partition(p, 4, 10) for p in range(4)] == [range(0, 3), range(3, 5), range(5, 8), range(8, 10)]


@pytest.mark.parametrize("max_parallelism", [1, 7, 128, 1000, 32768])
def test_key_groups_for_partition_cover_without_overlap(max_parallelism):
    for parallelism in sorted(p for p in {1, 2, 3, 5, 16, max_parallelism // 3 or 1, max_parallelism}
                              if p <= max_parallelism):
        ranges = [key_groups_for_partition(p, parallelism, max_parallelism) for p in range(parallelism)]
        flat = [g for r in ranges for g in r]
        assert flat == list(range(max_parallelism))
        assert all(len(r) >= 1 for r in ranges)
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
        for p, r in enumerate(ranges):
            assert all(partition_for_key_group(g, parallelism, max_parallelism) == p for g in r)


def test_key_groups_for_partition_rejects_bad_arguments():
    for args in [(3, 3, 128), (-1, 3, 128), (0, 0, 128), (0, 129, 128), (0, 1, 0)]:
        with pytest.raises(ValueError):
            key_groups_for_partition(*args)
