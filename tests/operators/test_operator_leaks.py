"""No state leaks: after every window is cleaned, the backend is empty, for every variant
(event time, processing time, merging, evictors, per-window state)."""

from __future__ import annotations

import random

import pytest

from statekit import MAX_TIMESTAMP, ValueStateDescriptor
from statekit.operators import (ContinuousProcessingTimeTrigger, CountEvictor, DynamicProcessingTimeSessionWindows,
                       EventTimeSessionWindows, ProcessingTimeSessionWindows, ProcessWindowFunction, TimeEvictor,
                       TumblingEventTimeWindows, TumblingProcessingTimeWindows, WindowOperator)
from tests.operators_support import ListAgg, KeyedWindowResult, Sum, make_harness, window_variants


class PerWindowCounter(ProcessWindowFunction):
    seen = ValueStateDescriptor("seen", default=0)

    def process(self, key, context, elements):
        st = context.window_state.get_state(self.seen)
        st.update(st.value() + 1)
        yield (key, st.value())

    def clear(self, context):
        context.window_state.get_state(self.seen).clear()


EVENT_TIME = dict(window_variants())
EVENT_TIME["tumbling-per-window-state"] = lambda: WindowOperator(
    TumblingEventTimeWindows.of(15), function=PerWindowCounter(), allowed_lateness=20)
EVENT_TIME["session-time-evictor-lateness"] = lambda: WindowOperator(
    EventTimeSessionWindows.with_gap(6), function=KeyedWindowResult(), evictor=TimeEvictor.of(4), allowed_lateness=9)

PROCESSING_TIME = {
    "processing-sessions": lambda: WindowOperator(ProcessingTimeSessionWindows.with_gap(7), function=Sum()),
    "dynamic-processing-sessions-evictor": lambda: WindowOperator(
        DynamicProcessingTimeSessionWindows.with_dynamic_gap(lambda v: 3 + v % 5), function=ListAgg(),
        evictor=CountEvictor.of(2)),
    "processing-tumbling-continuous": lambda: WindowOperator(
        TumblingProcessingTimeWindows.of(20), function=Sum(), trigger=ContinuousProcessingTimeTrigger.of(6)),
}


@pytest.mark.parametrize("variant", sorted(EVENT_TIME))
def test_event_time_variant_leaves_nothing(backend_name, tmp_path, variant):
    h = make_harness(EVENT_TIME[variant](), backend_name, tmp_path)
    rnd = random.Random(variant)
    wm = 0
    for epoch in range(15):
        h.process_batch([(f"k{rnd.randrange(5)}", (f"k{epoch}", i), wm + rnd.randint(-15, 25)) for i in range(20)])
        wm += rnd.randint(0, 12)
        h.process_watermark(wm)
    assert h.num_entries() > 0
    fired = h.metrics["windows_fired"]
    h.process_watermark(MAX_TIMESTAMP)
    assert h.metrics["windows_fired"] >= fired
    assert h.num_entries() == 0, h.backend.state_entry_counts()


@pytest.mark.parametrize("variant", sorted(PROCESSING_TIME))
def test_processing_time_variant_leaves_nothing(backend_name, tmp_path, variant):
    h = make_harness(PROCESSING_TIME[variant](), backend_name, tmp_path)
    rnd = random.Random(variant)
    now = 0
    for epoch in range(15):
        h.set_processing_time(now)
        h.process_batch([(f"k{rnd.randrange(5)}", rnd.randrange(100), None) for _ in range(10)])
        now += rnd.randint(0, 8)
    assert h.num_entries() > 0
    h.set_processing_time(MAX_TIMESTAMP)
    assert h.output() != []
    assert h.num_entries() == 0, h.backend.state_entry_counts()
