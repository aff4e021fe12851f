"""Keys that Python's ``==`` mixes up (``1``, ``1.0``, ``True``; tuples of them) are separate keys in
every operator path, as their serialized forms (and so the RocksDB backend and key groups) have it."""

from __future__ import annotations

import numpy as np
import pytest

from statekit.operators import (EventTimeSessionWindows, KeyedProcessOperator, TumblingEventTimeWindows,
                                WindowOperator)
from statekit.operators import RowAggregate
from tests.operators_support import CountWithTimer, make_harness

RECORDS = [(1, "a", 100), (True, "b", 101), (1.0, "c", 102), ((1, "x"), "d", 103), ((True, "x"), "e", 104),
           (1, "f", 105)]


@pytest.mark.parametrize("path", ["engine, records", "engine, columns", "record path", "tumbling"])
def test_lookalike_keys_get_separate_windows(backend_name, tmp_path, path):
    assigner = TumblingEventTimeWindows.of(1000) if path == "tumbling" else EventTimeSessionWindows.with_gap(10)
    fn = RowAggregate([("count", None), ("first", 0), ("last", 0)])
    h = make_harness(WindowOperator(assigner, fn, columnar=path != "record path"), backend_name, tmp_path)
    if path == "engine, columns":
        h.process_columns([k for k, _, _ in RECORDS], np.array([t for _, _, t in RECORDS]), [[v for _, v, _ in RECORDS]])
    else:
        h.process_batch([(k, (v,), t) for k, v, t in RECORDS])
    h.process_watermark(10_000)
    assert sorted(v for v, _ in h.output()) == [(1, "b", "b"), (1, "c", "c"), (1, "d", "d"), (1, "e", "e"), (2, "a", "f")]
    assert h.num_entries() == 0


def test_keyed_process_counts_lookalike_keys_apart(backend_name, tmp_path):
    h = make_harness(KeyedProcessOperator(CountWithTimer()), backend_name, tmp_path)
    h.process_batch(RECORDS)
    counts = sorted((value, count) for _, value, count in (v for v, _ in h.output()))
    assert counts == [("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1), ("f", 2)]
    h.process_watermark(10_000)
    fired = [key for (key, _, _), _ in h.output()]  # one timer per record, each under its own key
    assert sorted(map(repr, fired)) == sorted(repr(k) for k, _, _ in RECORDS) and h.num_entries() == 0
