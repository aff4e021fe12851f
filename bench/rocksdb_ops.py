"""RocksDB backend next to raw rocksdict, and state size scaling.

(1) State operations on the rocksdb backend beside raw ``rocksdict`` doing the same gets and
puts of the same msgpack bytes under the same cell keys (raw mode, WAL off, same memory
options), in the same run: value get+update, list add, map put+get. The backend side includes
``set_current_key`` per record and ``flush()`` every epoch; the heap backend is listed for context.
(2) 10^6 and 10^7 keys of value state on rocksdb in a fresh process each: insert rate, read-back
rate and the process's peak RSS (goal <= 1 GiB).
"""

from __future__ import annotations

import random
import tempfile
import time

import msgpack
from rocksdict import Rdict, WriteOptions

from backends.rocksdb import RocksDBKeyedStateBackend
from backends.rocksdb.db import make_options
from statekit import (KEY_SERIALIZER, ListStateDescriptor, MapStateDescriptor, StateConfig, ValueStateDescriptor,
                      create_backend, key_group_for)

from .report import BenchReport, progress, rate, run_isolated

EPOCH = 10_000
RSS_GOAL = 1 << 30


def _raw_db(path: str) -> Rdict:
    """A raw-mode rocksdict with the backend's default memory options and WAL off."""
    defaults = {s.name.split(".", 1)[1]: s.default for s in RocksDBKeyedStateBackend.OPTIONS}
    db = Rdict(path, options=make_options(defaults))
    wo = WriteOptions()
    wo.disable_wal = True
    db.set_write_options(wo)
    return db


def _cell(key, ns=None) -> bytes:
    return key_group_for(key, 128).to_bytes(2, "big") + KEY_SERIALIZER.dumps(key) + KEY_SERIALIZER.dumps(ns)


# -- backend side ---------------------------------------------------------------------------------

def _backend_value(backend_name: str, keys: list) -> float:
    b = create_backend(StateConfig(backend=backend_name))
    try:
        st = b.get_state(ValueStateDescriptor("v", default=0))
        set_key = b.set_current_key
        for k in keys:                              # untimed warm-up: keys known, state exists
            set_key(k)
            st.update(st.value() + 1)
        b.flush()
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            set_key(k)
            st.update(st.value() + 1)
            if i % EPOCH == EPOCH - 1:
                b.flush()
        b.flush()
        return rate(len(keys), time.perf_counter() - t0)
    finally:
        b.close()


def _backend_list_add(backend_name: str, keys: list) -> float:
    b = create_backend(StateConfig(backend=backend_name))
    try:
        st = b.get_state(ListStateDescriptor("l"))
        set_key = b.set_current_key
        for k in set(keys):
            set_key(k)
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            set_key(k)
            st.add(i)
            if i % EPOCH == EPOCH - 1:
                b.flush()
        b.flush()
        return rate(len(keys), time.perf_counter() - t0)
    finally:
        b.close()


def _backend_map(backend_name: str, keys: list) -> float:
    b = create_backend(StateConfig(backend=backend_name))
    try:
        st = b.get_state(MapStateDescriptor("m"))
        set_key = b.set_current_key
        for k in keys:
            set_key(k)
            st.put(k, 0)
        b.flush()
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            set_key(k)
            st.put(k, st.get(k) + 1)
            if i % EPOCH == EPOCH - 1:
                b.flush()
        b.flush()
        return rate(len(keys), time.perf_counter() - t0)
    finally:
        b.close()


# -- raw rocksdict side ---------------------------------------------------------------------------

def _raw_value(keys: list) -> float:
    with tempfile.TemporaryDirectory() as d:
        db = _raw_db(d)
        cells = {k: _cell(k) for k in keys}
        pack, unpack = msgpack.packb, msgpack.unpackb
        for k in keys:
            db.put(cells[k], pack(0))
        t0 = time.perf_counter()
        for k in keys:
            ck = cells[k]
            db.put(ck, pack(unpack(db.get(ck)) + 1))
        elapsed = time.perf_counter() - t0
        db.close()
    return rate(len(keys), elapsed)


def _raw_list_add(keys: list) -> float:
    with tempfile.TemporaryDirectory() as d:
        db = _raw_db(d)
        cells = {k: _cell(k) for k in keys}
        pack = msgpack.packb
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            db.put(cells[k] + i.to_bytes(8, "big"), pack(i))
        elapsed = time.perf_counter() - t0
        db.close()
    return rate(len(keys), elapsed)


def _raw_map(keys: list) -> float:
    with tempfile.TemporaryDirectory() as d:
        db = _raw_db(d)
        entry = {k: _cell(k) + KEY_SERIALIZER.dumps(k) for k in keys}
        pack, unpack = msgpack.packb, msgpack.unpackb
        for k in keys:
            db.put(entry[k], pack(0))
        t0 = time.perf_counter()
        for k in keys:
            ek = entry[k]
            db.put(ek, pack(unpack(db.get(ek)) + 1))
        elapsed = time.perf_counter() - t0
        db.close()
    return rate(len(keys), elapsed)


# -- state size scaling -----------------------------------------------------------------------------

def fill_value_state(n: int) -> dict:
    """Insert ``n`` keys of value state on rocksdb (defaults), read a sample back; rates in ops/s."""
    b = create_backend(StateConfig(backend="rocksdb"))
    try:
        st = b.get_state(ValueStateDescriptor("v"))
        set_key = b.set_current_key
        t0 = time.perf_counter()
        for i in range(n):
            set_key(i)
            st.update((i, "payload"))
            if i % EPOCH == EPOCH - 1:
                b.flush()
        b.flush()
        insert = rate(n, time.perf_counter() - t0)
        rng = random.Random(1)
        sample = [rng.randrange(n) for _ in range(min(n, 200_000))]
        t0 = time.perf_counter()
        for i in sample:
            set_key(i)
            assert st.value() == (i, "payload")
        read = rate(len(sample), time.perf_counter() - t0)
        disk = b._store.family("state:v")[0].property_int_value("rocksdb.total-sst-files-size")
        return {"insert": insert, "read": read, "sst_bytes": disk}
    finally:
        b.close()


def run(quick: bool = False) -> BenchReport:
    n_ops = 50_000 if quick else 300_000
    n_keys = 20_000 if quick else 100_000
    sizes = [100_000, 300_000] if quick else [1_000_000, 10_000_000]
    rep = BenchReport("rocksdb_ops", params={"ops": n_ops, "distinct_keys": n_keys, "epoch": EPOCH,
                                             "scaling_sizes": sizes, "quick": quick})
    rng = random.Random(42)
    keys = [f"user-{rng.randrange(n_keys)}" for _ in range(n_ops)]
    cases = [
        ("value get+update", _backend_value, _raw_value, "raw get, unpack, pack, put"),
        ("list add", _backend_list_add, _raw_list_add, "raw put of one element key"),
        ("map get+put", _backend_map, _raw_map, "raw get, unpack, pack, put of one entry key"),
    ]
    for name, backend_fn, raw_fn, note in progress(cases, total=len(cases), desc="rocksdb ops"):
        raw = raw_fn(keys)
        rocks = backend_fn("rocksdb", keys)
        heap = backend_fn("heap", keys)
        rep.add(name, unit="ops/s", heap=heap, rocksdb=rocks, baseline=raw, baseline_name="raw rocksdict",
                notes=f"{n_keys:,} keys, flush every {EPOCH:,}; baseline: {note}; goal rocksdb <= 2x")
    rss_line, insert_line = [], []
    for n in progress(sizes, total=len(sizes), desc="value state size"):
        res, rss = run_isolated(fill_value_state, n)
        mib = rss / (1 << 20)
        rss_line.append((n, mib))
        insert_line.append((n, res["insert"]))
        rep.add(f"{n:,} keys: peak RSS", unit="MiB", rocksdb=mib, baseline=RSS_GOAL / (1 << 20),
                baseline_name="goal 1 GiB", notes=f"sst {res['sst_bytes'] / (1 << 20):.0f} MiB on disk")
        rep.add(f"{n:,} keys: insert", unit="ops/s", rocksdb=res["insert"], notes="update with set_current_key")
        rep.add(f"{n:,} keys: random read", unit="ops/s", rocksdb=res["read"], notes="200k random keys")
    rep.series("value state size: peak RSS", x_label="keys", y_label="MiB", lines={"rocksdb": rss_line}, log_x=True)
    rep.series("value state size: insert rate", x_label="keys", y_label="ops/s",
               lines={"rocksdb": insert_line}, log_x=True)
    return rep
