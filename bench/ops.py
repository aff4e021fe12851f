"""State-operation throughput of every backend next to a raw ``dict`` doing the same work.

Each operation runs over a pre-generated random key sequence; the backend side includes the
``set_current_key`` of every record (as an operator does) and a final ``flush()`` (RocksDB
writes its epoch batch there). The raw dict is keyed by ``(key, namespace)`` and runs the same
user functions, so the ratio is the layer's overhead. Figures are steady state: one untimed pass
over the same keys first (keys seen before, key-group cache warm), except the "cold" figure, which
times the first pass (every new key is serialized and hashed to its key group once). Value
get+update is also measured under one already-set key, which isolates the state call from key
switching.
"""

from __future__ import annotations

import gc
import random
import tempfile
import time
from typing import Callable

from statekit import (AggregateFunction, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                      StateConfig, ValueStateDescriptor, available_backends, create_backend)

from .report import BenchReport, progress, rate

REPORTED = ("heap", "rocksdb")
"""Backends the report table has columns for; others are measured and listed in the notes."""


class SumCount(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


AGG = SumCount()


# -- one function per (operation, side): each returns the number of operations it did --------

def value_keyed(b, keys: list) -> int:
    st = b.get_state(ValueStateDescriptor("count", default=0))
    set_key, value, update = b.set_current_key, st.value, st.update
    for k in keys:
        set_key(k)
        update(value() + 1)
    return len(keys)


def value_keyed_raw(d: dict, keys: list) -> int:
    get = d.get
    for k in keys:
        ck = (k, None)
        d[ck] = get(ck, 0) + 1
    return len(keys)


def value_same_key(b, keys: list) -> int:
    st = b.get_state(ValueStateDescriptor("count", default=0))
    value, update = st.value, st.update
    b.set_current_key(keys[0])
    for _ in keys:
        update(value() + 1)
    return len(keys)


def value_same_key_raw(d: dict, keys: list) -> int:
    get = d.get
    ck = (keys[0], None)
    for _ in keys:
        d[ck] = get(ck, 0) + 1
    return len(keys)


def list_add(b, keys: list) -> int:
    st = b.get_state(ListStateDescriptor("events"))
    set_key, add = b.set_current_key, st.add
    for i, k in enumerate(keys):
        set_key(k)
        add(i)
    return len(keys)


def list_add_raw(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        cell = d.get(ck)
        if cell is None:
            d[ck] = [i]
        else:
            cell.append(i)
    return len(keys)


def map_put_get(b, keys: list) -> int:
    st = b.get_state(MapStateDescriptor("seen"))
    set_key, put, get = b.set_current_key, st.put, st.get
    for i, k in enumerate(keys):
        set_key(k)
        put(i & 63, i)
        get((i + 1) & 63)
    return len(keys)


def map_put_get_raw(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        cell = d.get(ck)
        if cell is None:
            d[ck] = cell = {}
        cell[i & 63] = i
        cell.get((i + 1) & 63)
    return len(keys)


def aggregating_add(b, keys: list) -> int:
    st = b.get_state(AggregatingStateDescriptor("avg", AGG))
    set_key, add = b.set_current_key, st.add
    for i, k in enumerate(keys):
        set_key(k)
        add(i)
    return len(keys)


def aggregating_add_raw(d: dict, keys: list) -> int:
    for i, k in enumerate(keys):
        ck = (k, None)
        acc = d.get(ck)
        d[ck] = AGG.add(i, AGG.create_accumulator() if acc is None else acc)
    return len(keys)


def merge_setup(b, keys: list) -> Callable[[], int]:
    """Fill two source windows per merge (untimed); the returned closure does the merges."""
    st = b.get_state(ListStateDescriptor("window"))
    for i, k in enumerate(keys):
        b.set_current_key(k)
        for j in (0, 1):
            st.set_current_namespace(("w", i, j))
            st.add(i)
    b.flush()

    def merge() -> int:
        set_key, merge_ns = b.set_current_key, st.merge_namespaces
        for i, k in enumerate(keys):
            set_key(k)
            merge_ns("session", [("w", i, 0), ("w", i, 1)])
        return len(keys)

    return merge


def merge_setup_raw(d: dict, keys: list) -> Callable[[], int]:
    for i, k in enumerate(keys):
        for j in (0, 1):
            d[(k, ("w", i, j))] = [i]

    def merge() -> int:
        pop, get = d.pop, d.get
        for i, k in enumerate(keys):
            merged = None
            for src in (("w", i, 0), ("w", i, 1)):
                cell = pop((k, src), None)
                if cell is not None:
                    merged = cell if merged is None else merged + cell
            if merged is not None:
                tk = (k, "session")
                current = get(tk)
                d[tk] = merged if current is None else current + merged
        return len(keys)

    return merge


WARM, COLD, SETUP = "warm", "cold", "setup"
OPERATIONS: dict[str, tuple[Callable, Callable, str]] = {
    "value get+update (set_current_key per op)": (value_keyed, value_keyed_raw, WARM),
    "value get+update (key already set)": (value_same_key, value_same_key_raw, WARM),
    "value get+update (cold: first pass, new keys)": (value_keyed, value_keyed_raw, COLD),
    "list add": (list_add, list_add_raw, WARM),
    "map put+get": (map_put_get, map_put_get_raw, WARM),
    "aggregating add": (aggregating_add, aggregating_add_raw, WARM),
    "merge_namespaces (2 list windows)": (merge_setup, merge_setup_raw, SETUP),
}
"""name -> (backend function, raw-dict function, mode): WARM times a second pass, COLD the first,
SETUP times the closure the function returns."""


def _timed(fn: Callable[[], int], flush: Callable[[], None]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    n = fn()
    flush()
    return rate(n, time.perf_counter() - t0)


def _no_flush() -> None:
    return None


def measure(side: str, op: str, keys: list, tmp: str) -> float:
    """ops/s of ``op`` on ``side`` (a backend name or 'raw') on a fresh state."""
    fn, raw_fn, mode = OPERATIONS[op]
    b = None if side == "raw" else create_backend(StateConfig(backend=side, local_dir=tempfile.mkdtemp(dir=tmp)))
    target, run_fn, flush = ({}, raw_fn, _no_flush) if b is None else (b, fn, b.flush)
    try:
        if mode == SETUP:
            return _timed(run_fn(target, keys), flush)
        if mode == WARM:
            run_fn(target, keys)
            flush()
        return _timed(lambda: run_fn(target, keys), flush)
    finally:
        if b is not None:
            b.close()


class Sides:
    """Best ops/s per side (raw dict and each backend); repeats alternate between the sides so
    that load from other processes hits all of them alike. A failing backend is recorded, not fatal."""

    def __init__(self, sides: list[str], repeats: int, tmp: str) -> None:
        self.sides, self.repeats, self.tmp = sides, repeats, tmp
        self.errors: dict[str, str] = {}

    def best(self, op: str, keys: list) -> dict[str, float | None]:
        best: dict[str, float | None] = dict.fromkeys(self.sides)
        for _ in range(self.repeats):
            for side in self.sides:
                if side in self.errors:
                    continue
                try:
                    ops = measure(side, op, keys, self.tmp)
                except Exception as e:  # a broken backend is reported, the others still measured
                    self.errors[side] = f"{type(e).__name__}: {e}"
                    best[side] = None
                    continue
                best[side] = max(ops, best[side] or 0.0)
        return best


def run(quick: bool = False) -> BenchReport:
    n_ops, n_keys, repeats = (20_000, 2_000, 3) if quick else (200_000, 20_000, 5)
    scaling_keys = [100, 1_000, 10_000] if quick else [100, 1_000, 10_000, 100_000]
    rng = random.Random(42)
    key_pool = [f"user-{i}" for i in range(n_keys)]
    keys = [rng.choice(key_pool) for _ in range(n_ops)]
    backends = available_backends()
    rep = BenchReport("ops", params={"ops_per_measurement": n_ops, "distinct_keys": n_keys, "best_of": repeats,
                                     "backends": backends, "key": "str 'user-N'", "scaling_keys": scaling_keys})
    lines: dict[str, list[tuple[float, float]]] = {"raw dict": [], **{b: [] for b in backends}}
    with tempfile.TemporaryDirectory(prefix="statekit-bench-ops-") as tmp:
        sides = Sides(["raw", *backends], repeats, tmp)
        for op in progress(OPERATIONS, total=len(OPERATIONS), desc="ops"):
            best = sides.best(op, keys)
            others = "; ".join(f"{b}: {best[b]:,.0f} ops/s" for b in backends
                               if b not in REPORTED and best[b] is not None)
            rep.add(op, unit="ops/s", baseline=best["raw"], baseline_name="raw dict", notes=others,
                    **{b: best[b] for b in backends if b in REPORTED})
        for nk in progress(scaling_keys, total=len(scaling_keys), desc="ops scaling"):
            pool = key_pool[:nk] if nk <= n_keys else [f"user-{i}" for i in range(nk)]
            best = sides.best("value get+update (set_current_key per op)", [rng.choice(pool) for _ in range(n_ops)])
            for side, ops in best.items():
                if ops is not None:
                    lines["raw dict" if side == "raw" else side].append((nk, ops))
    if sides.errors:
        rep.params["errors"] = sides.errors
    rep.series("value get+update (set_current_key per op) vs distinct keys", x_label="distinct keys",
               y_label="ops/s", lines=lines, log_x=True, log_y=True)
    return rep
