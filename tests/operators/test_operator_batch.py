"""Epoch batches: ``process_batch`` gives the same output as one-by-one processing (per key, in
order), on every backend and operator variant; each random stream also ends leak-free."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from statekit.operators import KeyedProcessOperator
from tests.operators_support import CountWithTimer, differential, fresh_stretch, make_harness, per_key, window_variants

VARIANTS = window_variants()
EPOCHS = st.lists(
    st.tuples(st.lists(st.tuples(st.integers(0, 3), st.integers(-25, 40)), max_size=25), st.integers(0, 30)),
    min_size=1, max_size=6)


def fed(one, batch, epochs: list, n: int):
    """Feed each epoch to ``one`` record by record and to ``batch`` as one batch: yields ``(records, None)``
    after an epoch's records and ``(records, watermark)`` after its watermark."""
    wm = fresh_stretch(one, batch)
    ids = itertools.count()
    for records, advance in epochs:
        recs = [(f"e{n}k{k}", (f"e{n}k{k}", next(ids)), wm + dt) for k, dt in records]
        for key, value, ts in recs:
            one.process_element(key, value, ts)
        batch.process_batch(recs)
        yield recs, None
        wm += advance
        one.process_watermark(wm)
        batch.process_watermark(wm)
        yield recs, wm


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_batch_equals_one_by_one(backend_name, tmp_path, variant):
    make = VARIANTS[variant]
    one = make_harness(make(), backend_name, tmp_path)
    batch = make_harness(make(), backend_name, tmp_path)
    examples = itertools.count()

    @differential(backend_name, 40, 20)
    @given(epochs=EPOCHS)
    def check(epochs):
        for _, wm in fed(one, batch, epochs, next(examples)):
            if wm is not None:
                assert per_key(batch.output()) == per_key(one.output())
                assert per_key(batch.side_output("late")) == per_key(one.side_output("late"))
        one.process_watermark(wm + 500)
        batch.process_watermark(wm + 500)
        assert per_key(batch.output()) == per_key(one.output())
        assert one.num_entries() == 0 and batch.num_entries() == 0
        assert batch.metrics == one.metrics

    check()


def test_keyed_process_batch_equals_one_by_one(backend_name, tmp_path):
    one = make_harness(KeyedProcessOperator(CountWithTimer()), backend_name, tmp_path)
    batch = make_harness(KeyedProcessOperator(CountWithTimer()), backend_name, tmp_path)
    recs = [(f"k{i % 3}", i, 100 + (i * 7) % 13) for i in range(30)]
    for r in recs:
        one.process_element(*r)
    batch.process_batch(recs)
    assert per_key(batch.output()) == per_key(one.output())
    one.process_watermark(1000)
    batch.process_watermark(1000)
    assert per_key(batch.output()) == per_key(one.output())
    assert one.num_entries() == 0 and batch.num_entries() == 0


def _grouped_by_first_appearance(records: list, keys_in_order: list) -> list:
    """``records`` (one-by-one order) stably regrouped by their key's first appearance in the batch."""
    rank = {k: i for i, k in enumerate(dict.fromkeys(keys_in_order))}
    return sorted(records, key=lambda r: rank[r[0][0]])


@pytest.mark.parametrize("variant", ["session-count-trigger", "tumbling-count-reduce", "sliding-agg-lateness"])
def test_batch_output_order_is_the_documented_one(backend_name, tmp_path, variant):
    """README's order guarantee: while a batch is processed, results and the late side output come per
    key, keys in order of first appearance in the batch, each key's in arrival order; at a watermark,
    results come in timer order, exactly as one by one."""
    make = VARIANTS[variant]
    one = make_harness(make(), backend_name, tmp_path)
    batch = make_harness(make(), backend_name, tmp_path)
    examples = itertools.count()

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(epochs=EPOCHS)
    def check(epochs):
        for recs, wm in fed(one, batch, epochs, next(examples)):
            if wm is None:
                order = [r[0] for r in recs]
                assert batch.output() == _grouped_by_first_appearance(one.output(), order)
                assert batch.side_output("late") == _grouped_by_first_appearance(one.side_output("late"), order)
            else:
                assert batch.output() == one.output()

    check()
