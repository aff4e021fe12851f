"""Bad input through the operators and the state layer, on every backend: each class is refused with
an error naming the field and the record, or lands in the invalid side output with a reason and a
count; valid-but-odd input (negative, out-of-order, far-future, duplicate timestamps, huge values,
empty epochs) gives the reference model's results."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from statekit.testing import BACKENDS
from statekit.operators import (EventTimeSessionWindows, InvalidRecord, InvalidRecordError, Output, ProcessWindowFunction,
                       TumblingEventTimeWindows, WindowOperator)
from statekit.operators.testing import OperatorHarness
from operators_support import KeyedWindowResult, SumCount
from reliability_support import GAP, MAX_PAR, OP, make_job, model_run, random_epochs, session_operator, windows_of
from statekit import (MAX_TIMESTAMP, InvalidKeyError, ListStateDescriptor, SerializationError, StateConfig,
                      ValueStateDescriptor, create_backend)
from statekit.checkpoint import CheckpointStore
from statekit.clickstream import generate_clickstream, sessionize_reference

YEAR_MS = 365 * 24 * 3600 * 1000
BAD_KEYS = {"none-key": None, "nan-key": math.nan, "list-key": [1, 2], "dict-key": {"a": 1}, "object-key": object()}
BAD_TIMESTAMPS = {"missing": None, "float": 5.5, "nan": math.nan, "string": "5", "bool": True,
                  "above-int64": 1 << 64, "below-int64": -(1 << 64), "int64-max": MAX_TIMESTAMP,
                  "beyond-2**62": (1 << 62) + 1}


def harness(op, backend: str, tmp_path: Path) -> OperatorHarness:
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=str(tmp_path / f"h-{backend}-{id(op)}")))
    h.open()
    return h


@pytest.mark.parametrize("label", sorted(BAD_KEYS) + sorted(BAD_TIMESTAMPS))
@pytest.mark.parametrize("batch", [True, False], ids=["batch", "element"])
def test_invalid_record_raises_naming_field_and_record(backend_name, tmp_path, label, batch):
    bad = (BAD_KEYS[label], 7, 5) if label in BAD_KEYS else ("k", 7, BAD_TIMESTAMPS[label])
    field = "key" if label in BAD_KEYS else "timestamp"
    h = harness(session_operator(), backend_name, tmp_path)
    with pytest.raises(InvalidRecordError) as err:
        h.process_batch([bad]) if batch else h.process_element(*bad)
    assert f"invalid record {bad!r}"[:60] in str(err.value) and f": {field}: " in str(err.value)
    assert h.num_entries() == 0 and h.output() == []
    h.close()


@pytest.mark.parametrize("label", sorted(BAD_TIMESTAMPS) + ["list-key", "dict-key"])
def test_bad_record_anywhere_in_a_batch_fails_before_any_state_change(backend_name, tmp_path, label):
    bad = ("k", 7, BAD_TIMESTAMPS[label]) if label in BAD_TIMESTAMPS else (BAD_KEYS[label], 7, 5)
    h = harness(session_operator(), backend_name, tmp_path)
    with pytest.raises(InvalidRecordError):
        h.process_batch([("a", 1, 1), ("b", 2, 2), bad, ("c", 3, 3)])
    assert h.num_entries() == 0
    h.close()


def test_invalid_records_go_to_the_side_output_with_reason_and_count(backend_name, tmp_path):
    clicks = generate_clickstream(400, 12, seed=3, max_disorder_ms=0)
    good = [(c.user_id, c.value, c.ts_ms) for c in clicks]
    bad = [(BAD_KEYS[k], 1, 5) for k in sorted(BAD_KEYS)] + [("u", 1, BAD_TIMESTAMPS[t]) for t in sorted(BAD_TIMESTAMPS)]
    rng = random.Random(5)
    stream = list(good)
    for rec in bad:
        stream.insert(rng.randrange(len(stream) + 1), rec)
    gap = 30_000
    results = {}
    for mode in ("batch", "element"):
        op = WindowOperator(EventTimeSessionWindows.with_gap(gap), function=SumCount(),
                            window_function=KeyedWindowResult(fold=True), invalid_output_tag="invalid")
        h = harness(op, backend_name, tmp_path)
        if mode == "batch":
            h.process_batch(stream)
        else:
            for rec in stream:
                h.process_element(*rec)
        h.process_watermark(MAX_TIMESTAMP)
        results[mode] = windows_of(h.output())
        invalid = h.side_output("invalid")
        assert h.metrics["invalid"] == len(bad) == len(invalid)
        assert all(ts is None and isinstance(rec, InvalidRecord) and rec.reason for rec, ts in invalid)
        assert sorted(repr(tuple(rec[:3])) for rec, _ in invalid) == sorted(repr(r) for r in bad)
        assert {rec.field for rec, _ in invalid} == {"key", "timestamp"}
        assert h.num_entries() == 0
        h.close()
    expected = [(u, s, e, total, n) for u, s, e, total, n in sessionize_reference(clicks, gap)]
    assert results["batch"] == results["element"] == sorted(expected, key=repr)


def test_unserializable_value_names_the_state_and_a_restart_recovers(backend_name, tmp_path):
    class Elements(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (key, context.window.start, sorted(elements, key=repr))

    store = CheckpointStore(str(tmp_path / "ckpt"))
    cfg = StateConfig(backend=backend_name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / "l0"))
    make = lambda: WindowOperator(TumblingEventTimeWindows.of(10), function=Elements())  # noqa: E731
    r = store.restore(OP, cfg)
    op, out = make(), Output()
    op.open(r.backend, out)
    op.process_batch([("k", 1, 1), ("j", 2, 12)])
    store.commit(OP, 0, r.backend, op.snapshot_metadata())
    with pytest.raises(SerializationError, match="state 'window-contents'.*object"):
        op.process_batch([("k", 3, 3), ("k", object(), 4), ("j", 5, 15)])
    # the epoch failed: the kept backend changed, so restore goes back to epoch 0
    r2 = store.restore(OP, cfg.with_options(local_dir=str(tmp_path / "l1")), epoch=0, backend=r.backend)
    assert not r2.fast_path
    op2, out2 = make(), Output()
    op2.open(r2.backend, out2)
    op2.restore_metadata(r2.metadata[0])
    op2.process_batch([("k", 3, 3), ("j", 5, 15)])
    op2.process_watermark(MAX_TIMESTAMP)
    assert sorted(v for v, _ in out2.drain()) == [("j", 10, [2, 5]), ("k", 0, [1, 3])]
    r2.backend.close()


def test_failure_inside_a_key_does_not_leak_into_the_next_key(backend_name, tmp_path):
    """Regression: timers and accumulators buffered for a key whose records failed were applied
    to the next key processed (a phantom window under the wrong key)."""
    h = harness(session_operator(), backend_name, tmp_path)
    with pytest.raises(TypeError):
        h.process_batch([("k", 1, 1), ("k", "not a number", 2)])
    h.process_batch([("x", 5, 50)])
    h.process_watermark(MAX_TIMESTAMP)
    assert windows_of(h.output()) == [("x", 50, 50 + GAP, 5, 1)]
    assert h.num_entries() == 0
    h.close()


def test_negative_out_of_order_and_duplicate_timestamps_match_the_model(backend_name, tmp_path):
    rng = random.Random(11)
    epochs = random_epochs(rng, 6, 25, ["a", "b", ("t", 2), 7], disorder=70, delay=5)
    shifted = [([(k, rid, ts - 500) for k, rid, ts in recs], wm - 500 if wm != MAX_TIMESTAMP else wm)
               for recs, wm in epochs]  # every timestamp negative
    doubled = [(recs + [recs[0]] if recs else recs, wm) for recs, wm in shifted]  # a duplicate per epoch
    expected = model_run(doubled)
    assert any(late for _, late in expected.values()) and any(w for w, _ in expected.values())
    job = make_job(tmp_path, backend_name)
    for e, (recs, wm) in enumerate(doubled):
        job.run_epoch(e, recs, wm)
    assert job.results == expected
    job.close()


def test_far_future_record_keeps_its_window_open_until_the_watermark_passes(backend_name, tmp_path):
    now = 1_700_000_000_000
    far = now + 100 * YEAR_MS
    h = harness(session_operator(), backend_name, tmp_path)
    h.process_batch([("a", 1, now), ("b", 2, now + 3), ("a", 3, far), ("c", 4, now + 5)])
    h.process_watermark(now + 1000)
    assert windows_of(h.output()) == [("a", now, now + GAP, 1, 1), ("b", now + 3, now + 3 + GAP, 2, 1),
                                      ("c", now + 5, now + 5 + GAP, 4, 1)]
    assert h.num_entries() > 0  # the far window is still open: state and timers kept
    h.process_batch([("a", 5, now + 2000)])
    h.process_watermark(far - 1)
    assert windows_of(h.output()) == [("a", now + 2000, now + 2000 + GAP, 5, 1)]
    h.process_watermark(far + GAP - 1)
    assert windows_of(h.output()) == [("a", far, far + GAP, 3, 1)]
    assert h.num_entries() == 0
    h.close()


def test_empty_epochs_and_empty_input(backend_name, tmp_path):
    rng = random.Random(2)
    epochs = random_epochs(rng, 4, 20, ["a", "b"], disorder=10, delay=0)
    with_empty = [([], -(1 << 62))] + [x for ep in epochs[:-1] for x in (ep, ([], ep[1]))] + [epochs[-1]]
    job = make_job(tmp_path, backend_name)
    for e, (recs, wm) in enumerate(with_empty):
        job.run_epoch(e, recs, wm)
    assert job.results == model_run(with_empty)
    job.close()
    empty = make_job(tmp_path, backend_name, "empty")
    empty.run_epoch(0, [], MAX_TIMESTAMP)
    empty.restart()
    empty.run_epoch(1, [], MAX_TIMESTAMP)
    assert empty.results == {0: ([], []), 1: ([], [])}
    assert all(b.num_entries() == 0 for b in empty.kept.values())
    empty.close()


@pytest.mark.parametrize("target", BACKENDS)
def test_large_values_and_lists_round_trip_through_checkpoints(backend_name, tmp_path, target):
    big = random.Random(1).randbytes(10 << 20)
    elements = list(range(100_000))
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(StateConfig(backend=backend_name, local_dir=str(tmp_path / "src")))
    value, lst = b.get_state(ValueStateDescriptor("blob")), b.get_state(ListStateDescriptor("many"))
    for key in ("k1", "k2"):
        b.set_current_key(key)
        value.update(big)
        lst.add_all(elements)
    lst.add("tail")
    store.commit(OP, 0, b)
    b.close()
    r = store.restore(OP, StateConfig(backend=target, local_dir=str(tmp_path / "dst")))
    value, lst = r.backend.get_state(ValueStateDescriptor("blob")), r.backend.get_state(ListStateDescriptor("many"))
    r.backend.set_current_key("k1")
    assert value.value() == big and lst.get() == elements
    r.backend.set_current_key("k2")
    assert value.value() == big and lst.get() == elements + ["tail"]
    r.backend.close()


@pytest.mark.parametrize("key", [None, math.nan, [1], object()], ids=["none", "nan", "list", "object"])
def test_state_layer_rejects_bad_keys_by_name(backend_name, make_backend, key):
    b = make_backend()
    with pytest.raises(InvalidKeyError, match="key"):
        b.set_current_key(key)
    assert b.num_entries() == 0


def test_state_layer_rejects_unserializable_values_naming_state(make_backend):
    b = make_backend()
    st = b.get_state(ValueStateDescriptor("v"))
    b.set_current_key("k")
    with pytest.raises(SerializationError, match="state 'v'.*set"):
        st.update({1, 2})
    assert b.num_entries() == 0
