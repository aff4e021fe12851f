"""Key groups: the unit of state partitioning and rescaling (Flink's KeyGroupRangeAssignment).

A key's group comes from a stable hash of its serialized bytes, the same in every process and
on every machine (never Python's salted ``hash()``), so state can be moved between partitions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence
from zlib import crc32

import numpy as np

from .serialization import KEY_SERIALIZER

DEFAULT_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


def fmix32(h: int) -> int:
    """Murmur3's 32-bit finalizer: every input bit affects every output bit."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def stable_hash(data: bytes) -> int:
    """CRC32 of ``data`` spread by murmur3's 32-bit finalizer (crc32 alone clusters similar keys)."""
    return fmix32(crc32(data))


def key_group_for_bytes(key_bytes: bytes, max_parallelism: int) -> int:
    """Key group of an already serialized key."""
    return stable_hash(key_bytes) % max_parallelism


def fmix32_many(h: np.ndarray) -> np.ndarray:
    """``fmix32`` of many 32-bit values (uint64), as int64."""
    mask = np.uint64(0xFFFFFFFF)
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & mask
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & mask
    h ^= h >> np.uint64(16)
    return h.astype(np.int64)


def stable_hashes(keys_bytes: Sequence[bytes]) -> np.ndarray:
    """``stable_hash`` of many serialized keys at once (CRC32 per key in C, the finalizer in numpy), as int64."""
    return fmix32_many(np.fromiter(map(crc32, keys_bytes), np.uint64, len(keys_bytes)))


def key_groups_for_bytes(keys_bytes: Sequence[bytes], max_parallelism: int) -> np.ndarray:
    """``key_group_for_bytes`` of many serialized keys at once."""
    return stable_hashes(keys_bytes) % max_parallelism


def key_groups_and_bytes(keys: Sequence[object], max_parallelism: int) -> tuple[np.ndarray, list[bytes]]:
    """Key groups and serialized bytes of many keys: serialized one by one in C, hashed together
    (SerializationError for a key that cannot be serialized)."""
    kbs = KEY_SERIALIZER.dumps_many(keys)
    return key_groups_for_bytes(kbs, max_parallelism), kbs


def key_group_for(key: object, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """Key group of ``key`` in ``[0, max_parallelism)``."""
    return stable_hash(KEY_SERIALIZER.dumps(key)) % max_parallelism


@lru_cache(maxsize=8)
def key_group_representatives(max_parallelism: int) -> tuple[int, ...]:
    """For each key group, the smallest non-negative int key in it: the key under which state kept per
    key group (not per user key) is stored, so it moves with its group on rescaling like any key's."""
    found = np.full(max_parallelism, -1, np.int64)
    start, block = 0, max(1024, 4 * max_parallelism)
    while (found < 0).any():
        candidates = np.arange(start, start + block)
        groups = key_groups_and_bytes(candidates.tolist(), max_parallelism)[0]
        fresh = found[groups] < 0
        first = np.unique(groups[fresh], return_index=True)  # the smallest candidate of each group not found yet
        found[first[0]] = candidates[fresh][first[1]]
        start += block
    return tuple(found.tolist())


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """Reject a parallelism/max-parallelism pair that cannot be assigned."""
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max_parallelism must be in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {max_parallelism}")
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(f"parallelism must be in [1, max_parallelism={max_parallelism}], got {parallelism}")


def key_groups_for_partition(partition: int, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> range:
    """Contiguous key-group range served by ``partition`` of ``parallelism`` partitions."""
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= partition < parallelism:
        raise ValueError(f"partition must be in [0, {parallelism}), got {partition}")
    start = (partition * max_parallelism + parallelism - 1) // parallelism
    end = ((partition + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def partition_for_key_group(key_group: int, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The partition whose range holds ``key_group`` (inverse of ``key_groups_for_partition``)."""
    return key_group * parallelism // max_parallelism
