"""Reads and writes of many RocksDB keys in key order: RocksDB's memtable inserts a WriteBatch's keys much
faster in key order (it keeps its insert position), and point reads in key order measured twice as fast as
in random order at 500k keys (rocksdict's list multi-get is slower than both); an iterator walked from one
wanted key to the next is faster still where they lie close together."""

from __future__ import annotations

from typing import Any

import numpy as np


def key_order(keys: list[bytes]) -> np.ndarray:
    """Positions of ``keys`` in key order, up to trailing NUL bytes (numpy's fixed-width strings drop them):
    the order in which RocksDB reads or writes them fastest, never what a result depends on."""
    return np.argsort(np.array(keys), kind="stable") if keys else np.zeros(0, np.intp)


_WALK = 4
"""Keys an ordered read steps over to its next target before it takes that one with a point read."""
_PROBE = 64
"""Targets read with point reads after a walk failed, before the iterator is tried again (twice as many each
time it fails again at once, up to 4096)."""


def read_in_order(db: Any, cks: list[bytes]) -> list[bytes | None]:
    """The value (or None) of each of ``cks``, given about in key order: walked to with one iterator
    where they lie close together (a step costs a fraction of a point read: a watermark's due keys, a run
    of new keys), point reads where they do not (more than ``_WALK`` keys apart), the iterator tried again
    after ``_PROBE`` of them."""
    n = len(cks)
    out: list[bytes | None] = [None] * n
    get, it = db.get, db.iter()
    valid, key, step = it.valid, it.key, it.next
    j, probe = 0, _PROBE
    while j < n:
        start, last = j, b""
        it.seek(cks[j])
        while j < n:
            ck = cks[j]
            if ck < last:  # out of order (keys that differ in trailing NULs): the stretch of point reads takes it
                break
            walked = 0
            while walked < _WALK and valid() and key() < ck:
                step()
                walked += 1
            if walked == _WALK and valid() and key() < ck:
                break
            if valid() and key() == ck:
                out[j] = it.value()
            last = ck
            j += 1
        if j < n:
            probe = _PROBE if j - start > 2 * _WALK else min(2 * probe, 4096)
            end = min(n, j + probe)
            out[j:end] = map(get, cks[j:end])
            j = end
    return out


def write_in_order(batch: Any, handle: Any, keys: list[bytes], raws: list[bytes | None]) -> None:
    """Each of ``keys`` put with its raw value into ``batch`` (column family ``handle``), or deleted where it
    is None, in key order."""
    put, delete = batch.put, batch.delete
    for i in key_order(keys).tolist():
        raw = raws[i]
        if raw is None:
            delete(keys[i], handle)
        else:
            put(keys[i], raw, handle)
