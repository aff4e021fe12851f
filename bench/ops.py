"""State-operation throughput of both backends next to raw ``dict`` and raw ``rocksdict`` doing the
same work, and value state scaling from 10^3 to 10^7 keys.

(1) Operations over one pre-generated random key sequence. The backend side includes the
``set_current_key`` of every record (as an operator does) and a ``flush()`` every ``EPOCH`` records
(RocksDB writes its epoch batch there). Raw ``dict`` is keyed by ``(key, namespace)`` and runs the
same user functions: its ratio is the layer's overhead on the heap (goal <= 4x on value
get+update). Raw ``rocksdict`` does the same gets and puts of msgpack bytes under the same cell
keys (precomputed, untimed; WAL off, the backend's memory options): its ratio is the layer's
overhead on RocksDB (goal <= 2x on value get+update). Figures are steady state (one untimed pass
over the same keys first) except "cold", which times the first pass. Best of a few repeats that
alternate between the sides, so load from other processes hits all of them alike.

(2) Scaling: per backend and state size, in a fresh process, insert N keys of value state, then
random get+update over them; insert and update rates, peak RSS, memory per key (peak RSS minus the
process's RSS before inserting, over N). Heap sizes stop once the projected RSS of the next size
would exceed ``HEAP_LIMIT``: where heap stops being usable, while RocksDB keeps a flat memory
footprint.
"""

from __future__ import annotations

import random
import tempfile
from functools import partial
from pathlib import Path
from typing import Callable

import msgpack
import psutil
from rocksdict import Rdict, WriteOptions

from statekit.backends.rocksdb import RocksDBKeyedStateBackend
from statekit.backends.rocksdb.db import make_options
from statekit.backends.rocksdb.shared_memory import SharedMemory
from statekit import (KEY_SERIALIZER, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                      StateConfig, ValueStateDescriptor, create_backend, key_group_for)

from .common import MIB, SumCount, progress, rate, run_isolated, timed
from .report import BenchReport

BACKENDS = ("heap", "rocksdb")
RAW_DICT, RAW_ROCKS = "raw dict", "raw rocksdict"
EPOCH = 10_000
AGG = SumCount()
HEAP_LIMIT = 8 << 30
"""Heap scaling stops before a size whose projected peak RSS exceeds this (or half the memory
available, if less); the report gives the keys per GiB, to size against an executor's memory."""
ROCKSDB_RSS_GOAL = 1 << 30


# -- backend side: each function runs one epoch of records and returns how many -------------------

def value_keyed(b, keys: list) -> int:
    st = b.get_state(ValueStateDescriptor("count", default=0))
    set_key, value, update = b.set_current_key, st.value, st.update
    for k in keys:
        set_key(k)
        update(value() + 1)
    return len(keys)


def value_same_key(b, keys: list) -> int:
    st = b.get_state(ValueStateDescriptor("count", default=0))
    value, update = st.value, st.update
    b.set_current_key(keys[0])
    for _ in keys:
        update(value() + 1)
    return len(keys)


def list_add(b, keys: list) -> int:
    st = b.get_state(ListStateDescriptor("events"))
    set_key, add = b.set_current_key, st.add
    for i, k in enumerate(keys):
        set_key(k)
        add(i)
    return len(keys)


def map_put_get(b, keys: list) -> int:
    st = b.get_state(MapStateDescriptor("seen"))
    set_key, put, get = b.set_current_key, st.put, st.get
    for i, k in enumerate(keys):
        set_key(k)
        put(i & 63, i)
        get((i + 1) & 63)
    return len(keys)


def aggregating_add(b, keys: list) -> int:
    st = b.get_state(AggregatingStateDescriptor("avg", AGG))
    set_key, add = b.set_current_key, st.add
    for i, k in enumerate(keys):
        set_key(k)
        add(i)
    return len(keys)


def merge_setup(b, keys: list) -> Callable[[list], int]:
    """Fill two source windows per merge (untimed); the returned function does the merges."""
    st = b.get_state(ListStateDescriptor("window"))
    for i, k in enumerate(keys):
        b.set_current_key(k)
        for j in (0, 1):
            st.set_current_namespace(("w", i, j))
            st.add(i)
    b.flush()

    def merge(chunk: list) -> int:
        set_key, merge_ns = b.set_current_key, st.merge_namespaces
        for i, k in chunk:
            set_key(k)
            merge_ns("session", [("w", i, 0), ("w", i, 1)])
        return len(chunk)

    return merge


# -- raw dict side ---------------------------------------------------------------------------------

def value_keyed_dict(d: dict, keys: list) -> int:
    get = d.get
    for k in keys:
        ck = (k, None)
        d[ck] = get(ck, 0) + 1
    return len(keys)


def value_same_key_dict(d: dict, keys: list) -> int:
    get = d.get
    ck = (keys[0], None)
    for _ in keys:
        d[ck] = get(ck, 0) + 1
    return len(keys)


def list_add_dict(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        cell = d.get(ck)
        if cell is None:
            d[ck] = [i]
        else:
            cell.append(i)
    return len(keys)


def map_put_get_dict(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        cell = d.get(ck)
        if cell is None:
            d[ck] = cell = {}
        cell[i & 63] = i
        cell.get((i + 1) & 63)
    return len(keys)


def aggregating_add_dict(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        acc = d.get(ck)
        d[ck] = AGG.add(i, AGG.create_accumulator() if acc is None else acc)
    return len(keys)


def merge_setup_dict(d: dict, keys: list) -> Callable[[list], int]:
    for i, k in enumerate(keys):
        for j in (0, 1):
            d[(k, ("w", i, j))] = [i]

    def merge(chunk: list) -> int:
        pop, get = d.pop, d.get
        for i, k in chunk:
            merged = None
            for src in (("w", i, 0), ("w", i, 1)):
                cell = pop((k, src), None)
                if cell is not None:
                    merged = cell if merged is None else merged + cell
            if merged is not None:
                tk = (k, "session")
                current = get(tk)
                d[tk] = merged if current is None else current + merged
        return len(chunk)

    return merge


# -- raw rocksdict side: same bytes under the same cell keys ----------------------------------------

class RawRocks:
    """A raw-mode rocksdict with the backend's default memory options and WAL off, and the cell key
    bytes of every key (computed once, untimed)."""

    def __init__(self, path: str, keys: list) -> None:
        defaults = {s.name.split(".", 1)[1]: s.default for s in RocksDBKeyedStateBackend.OPTIONS}
        self.db = Rdict(path, options=make_options(defaults, SharedMemory.for_config(StateConfig(backend="rocksdb"))))
        wo = WriteOptions()
        wo.disable_wal = True
        self.db.set_write_options(wo)
        self.cells = {k: key_group_for(k, 128).to_bytes(2, "big") + KEY_SERIALIZER.dumps(k) + KEY_SERIALIZER.dumps(None)
                      for k in set(keys)}
        self.entries = {i: KEY_SERIALIZER.dumps(i) for i in range(64)}

    def close(self) -> None:
        self.db.close()


def value_keyed_rocks(r: RawRocks, keys: list) -> int:
    db, cells, pack, unpack = r.db, r.cells, msgpack.packb, msgpack.unpackb
    for k in keys:
        ck = cells[k]
        old = db.get(ck)
        db.put(ck, pack((0 if old is None else unpack(old)) + 1))
    return len(keys)


def list_add_rocks(r: RawRocks, keys: list) -> int:
    db, cells, pack = r.db, r.cells, msgpack.packb
    for i, k in enumerate(keys):
        db.put(cells[k] + i.to_bytes(8, "big"), pack(i))
    return len(keys)


def map_put_get_rocks(r: RawRocks, keys: list) -> int:
    db, cells, entries, pack = r.db, r.cells, r.entries, msgpack.packb
    for i, k in enumerate(keys):
        ck = cells[k]
        db.put(ck + entries[i & 63], pack(i))
        db.get(ck + entries[(i + 1) & 63])
    return len(keys)


def aggregating_add_rocks(r: RawRocks, keys: list) -> int:
    db, cells, pack, unpack = r.db, r.cells, msgpack.packb, msgpack.unpackb
    for i, k in enumerate(keys):
        ck = cells[k]
        old = db.get(ck)
        db.put(ck, pack(AGG.add(i, AGG.create_accumulator() if old is None else tuple(unpack(old)))))
    return len(keys)


WARM, COLD, SETUP = "warm", "cold", "setup"
OPERATIONS: dict[str, tuple[str, dict[str, Callable]]] = {
    "value get+update (set_current_key per op)": (WARM, {"backend": value_keyed, RAW_DICT: value_keyed_dict,
                                                         RAW_ROCKS: value_keyed_rocks}),
    "value get+update (key already set)": (WARM, {"backend": value_same_key, RAW_DICT: value_same_key_dict}),
    "value get+update (cold: first pass, new keys)": (COLD, {"backend": value_keyed, RAW_DICT: value_keyed_dict,
                                                             RAW_ROCKS: value_keyed_rocks}),
    "list add": (WARM, {"backend": list_add, RAW_DICT: list_add_dict, RAW_ROCKS: list_add_rocks}),
    "map put+get": (WARM, {"backend": map_put_get, RAW_DICT: map_put_get_dict, RAW_ROCKS: map_put_get_rocks}),
    "aggregating add": (WARM, {"backend": aggregating_add, RAW_DICT: aggregating_add_dict,
                               RAW_ROCKS: aggregating_add_rocks}),
    "merge_namespaces (2 list windows)": (SETUP, {"backend": merge_setup, RAW_DICT: merge_setup_dict}),
}
"""name -> (mode, function per side): WARM times a second pass, COLD the first, SETUP times the
function that the side's function returns (over (index, key) pairs)."""
GOALS = {"value get+update (set_current_key per op)": {"heap": 4.0, "rocksdb": 2.0}}
"""Overhead goals (x slower than the side's raw baseline): heap vs raw dict, rocksdb vs raw rocksdict."""


def measure(side: str, op: str, keys: list, tmp: str) -> float:
    """ops/s of ``op`` on ``side`` (a backend name, RAW_DICT or RAW_ROCKS) on a fresh state."""
    mode, fns = OPERATIONS[op]
    local = tempfile.mkdtemp(dir=tmp)
    if side == RAW_DICT:
        target, fn, flush, close = {}, fns[RAW_DICT], None, None
    elif side == RAW_ROCKS:
        target = RawRocks(local, keys)
        fn, flush, close = fns[RAW_ROCKS], None, target.close
    else:
        target = create_backend(StateConfig(backend=side, local_dir=local))
        fn, flush, close = fns["backend"], target.flush, target.close
    try:
        if mode == SETUP:
            step, items = fn(target, keys), list(enumerate(keys))
        else:
            step, items = partial(fn, target), keys
        chunks = [items[i:i + EPOCH] for i in range(0, len(items), EPOCH)]
        if mode == WARM:
            _epochs(step, chunks, flush)
        n, seconds = timed(lambda: _epochs(step, chunks, flush))
        return rate(n, seconds)
    finally:
        if close is not None:
            close()


def _epochs(step: Callable[[list], int], chunks: list[list], flush: Callable[[], None] | None) -> int:
    """Run ``step`` over each epoch's records, flushing after each; returns the records done."""
    n = 0
    for chunk in chunks:
        n += step(chunk)
        if flush is not None:
            flush()
    return n


class Sides:
    """Best ops/s per side; repeats alternate between the sides. A failing side is recorded, not fatal."""

    def __init__(self, repeats: int, tmp: str) -> None:
        self.repeats, self.tmp = repeats, tmp
        self.errors: dict[str, str] = {}

    def best(self, op: str, keys: list) -> dict[str, float | None]:
        sides = [s for s in (RAW_DICT, *BACKENDS, RAW_ROCKS) if s in BACKENDS or s in OPERATIONS[op][1]]
        best: dict[str, float | None] = dict.fromkeys(sides)
        for _ in range(self.repeats):
            for side in sides:
                if side in self.errors:
                    continue
                try:
                    ops = measure(side, op, keys, self.tmp)
                except Exception as e:  # a broken side is reported, the others still measured
                    self.errors[side] = f"{type(e).__name__}: {e}"
                    continue
                best[side] = max(ops, best[side] or 0.0)
        return best


# -- scaling ----------------------------------------------------------------------------------------

def fill_and_update(backend_name: str, n: int, updates: int) -> dict:
    """Insert ``n`` keys of value state, then ``updates`` random get+updates; rates and memory."""
    with tempfile.TemporaryDirectory(prefix="statekit-bench-scale-") as tmp:
        rng = random.Random(n)
        sample = [f"user-{rng.randrange(n)}" for _ in range(updates)]
        rss0 = psutil.Process().memory_info().rss
        b = create_backend(StateConfig(backend=backend_name, local_dir=tmp))
        try:
            st = b.get_state(ValueStateDescriptor("v"))
            set_key, value, update = b.set_current_key, st.value, st.update

            def insert() -> None:
                for i in range(n):
                    set_key(f"user-{i}")
                    update(("payload-0123456789", i))
                    if i % EPOCH == EPOCH - 1:
                        b.flush()
                b.flush()

            def get_update() -> None:
                for i, k in enumerate(sample):
                    set_key(k)
                    v = value()
                    update((v[0], v[1] + 1))
                    if i % EPOCH == EPOCH - 1:
                        b.flush()
                b.flush()

            _, t_insert = timed(insert)
            _, t_update = timed(get_update)
            disk = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
            return {"insert": rate(n, t_insert), "update": rate(updates, t_update), "rss0": rss0, "disk": disk}
        finally:
            b.close()


def scaling(rep: BenchReport, sizes: list[int], updates: int) -> None:
    """Throughput, peak RSS and memory per key vs state size; heap stops at ``HEAP_LIMIT``."""
    limit = min(HEAP_LIMIT, psutil.virtual_memory().available // 2)
    rep.params["scaling"] = {"sizes": sizes, "random_updates": updates, "heap_limit_mib": limit // MIB,
                             "value": "('payload-0123456789', i)", "key": "str 'user-N'"}
    res: dict[str, dict[int, dict]] = {b: {} for b in BACKENDS}
    stopped: str | None = None
    runs = [(b, n) for n in sizes for b in BACKENDS]
    for backend, n in progress(runs, total=len(runs), desc="ops scaling"):
        if backend == "heap" and res["heap"]:
            last = res["heap"][max(res["heap"])]
            projected = last["rss0"] + last["per_key"] * n
            if projected > limit:
                stopped = stopped or (f"heap stopped before {n:,} keys: projected {projected / MIB:,.0f} MiB "
                                      f"> limit {limit / MIB:,.0f} MiB")
                continue
        r, peak = run_isolated(fill_and_update, backend, n, updates)
        r["peak"] = peak.total
        r["per_key"] = max(peak.total - r["rss0"], 0) / n
        res[backend][n] = r
    for n in sizes:
        got = {b: res[b].get(n) for b in BACKENDS}

        def col(field: str, scale: float = 1.0) -> dict[str, float | None]:
            return {b: (v[field] / scale if v else None) for b, v in got.items()}

        rep.add(f"scaling {n:,} keys: insert", "ops/s", **col("insert"))
        rep.add(f"scaling {n:,} keys: random get+update", "ops/s", **col("update"), notes=f"{updates:,} random keys")
        note = f"rocksdb files {got['rocksdb']['disk'] / MIB:,.1f} MiB on disk" if got["rocksdb"] else ""
        rep.add(f"scaling {n:,} keys: peak RSS", "MiB", **col("peak", MIB), baseline=ROCKSDB_RSS_GOAL / MIB,
                baseline_name="rocksdb goal 1 GiB", notes=note if got["heap"] else f"{note}; {stopped}")
        rep.add(f"scaling {n:,} keys: memory per key", "bytes/key", **col("per_key"),
                notes="(peak RSS - RSS before inserting) / keys")
    crossing = next((n for n in sizes if res["heap"].get(n) and res["rocksdb"].get(n)
                     and res["rocksdb"][n]["peak"] < 0.9 * res["heap"][n]["peak"]), None)
    if res["heap"]:
        top = max(res["heap"])
        per_key = res["heap"][top]["per_key"]
        notes = [f"{per_key:.0f} bytes/key measured at {top:,} keys", stopped or "",
                 "" if crossing else f"rocksdb's peak RSS not 10% below heap's up to {top:,} keys"]
        rep.add("heap keys per GiB of RSS", "keys/GiB", heap=(1 << 30) / per_key if per_key else None,
                notes="; ".join(n for n in notes if n))
    if crossing:
        rep.add("smallest state where rocksdb uses less memory than heap", "keys", rocksdb=crossing,
                notes="rocksdb peak RSS more than 10% below heap's")
    rep.series("value state: throughput vs state size", "keys", "ops/s",
               {f"{b} {label}": [(n, v[field]) for n, v in res[b].items()] for b in BACKENDS
                for field, label in (("update", "random get+update"), ("insert", "insert"))}, log_x=True, log_y=True)
    rep.series("value state: peak RSS vs state size", "keys", "MiB",
               {b: [(n, v["peak"] / MIB) for n, v in res[b].items()] for b in BACKENDS}, log_x=True, log_y=True)


def run(quick: bool = False) -> BenchReport:
    n_ops, n_keys, repeats = (20_000, 2_000, 1) if quick else (200_000, 20_000, 5)
    sizes = [1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    updates = 20_000 if quick else 200_000
    rng = random.Random(42)
    keys = [f"user-{rng.randrange(n_keys)}" for _ in range(n_ops)]
    rep = BenchReport("ops", params={"ops_per_measurement": n_ops, "distinct_keys": n_keys, "best_of": repeats,
                                     "epoch": EPOCH, "key": "str 'user-N'", "backends": list(BACKENDS)})
    with tempfile.TemporaryDirectory(prefix="statekit-bench-ops-") as tmp:
        sides = Sides(repeats, tmp)
        for op in progress(OPERATIONS, total=len(OPERATIONS), desc="ops"):
            best = sides.best(op, keys)
            goals = GOALS.get(op, {})
            rep.add(op, "ops/s", heap=best["heap"], rocksdb=best["rocksdb"], baseline=best[RAW_DICT],
                    baseline_name=RAW_DICT, notes=f"goal heap <= {goals['heap']:g}x" if goals else "")
            if RAW_ROCKS in best:
                rep.add(f"{op}: rocksdb vs raw rocksdict", "ops/s", rocksdb=best["rocksdb"],
                        baseline=best[RAW_ROCKS], baseline_name=RAW_ROCKS,
                        notes=f"goal rocksdb <= {goals['rocksdb']:g}x" if goals else "")
    if sides.errors:
        rep.params["errors"] = sides.errors
    scaling(rep, sizes, updates)
    return rep
