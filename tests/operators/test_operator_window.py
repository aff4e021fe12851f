"""WindowOperator scenarios (after Flink's WindowOperatorTest), each on every registered backend.

Expected outputs are written out by hand from the scenario; results are stamped with the
window's max timestamp.
"""

from __future__ import annotations

import pytest

from statekit import MAX_TIMESTAMP, ValueStateDescriptor
from statekit.operators import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountEvictor, CountTrigger,
                       EventTimeSessionWindows, DynamicEventTimeSessionWindows, GlobalWindows,
                       ProcessingTimeSessionWindows, ProcessWindowFunction, PurgingTrigger, SlidingEventTimeWindows,
                       SlidingProcessingTimeWindows, TimeEvictor, TumblingEventTimeWindows,
                       TumblingProcessingTimeWindows, WindowOperator, count_window)
from tests.operators_support import KeyedWindowResult, Sum, SumCount, add, by_time, make_harness


def test_tumbling_event_time_reduce_and_late_side_output(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(3000), function=lambda a, b: (a[0], a[1] + b[1]))
    h = make_harness(op, backend_name, tmp_path)
    for key, ts in [("k2", 3999), ("k2", 3000), ("k1", 20), ("k1", 0), ("k1", 999), ("k2", 1998), ("k2", 1999),
                    ("k2", 1000)]:
        h.process_element(key, (key, 1), ts)
    h.process_watermark(999)
    h.process_watermark(1999)
    assert h.output() == []
    h.process_watermark(2999)
    assert by_time(h.output()) == [(("k1", 3), 2999), (("k2", 3), 2999)]
    h.process_watermark(3999)
    assert h.output() == []
    h.process_element("k2", ("k2", 1), 5000)
    h.process_watermark(5999)
    assert h.output() == [(("k2", 3), 5999)]
    h.process_element("k1", ("k1", 1), 100)            # its window [0, 3000) is gone
    assert h.output() == []
    assert h.side_output("late") == [(("k1", 1), 100)]
    assert h.metrics["late_side_output"] == 1 and h.metrics["late_dropped"] == 0
    h.process_watermark(7000)
    assert h.output() == []
    assert h.num_entries() == 0


def test_tumbling_with_offset(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of("1s", offset=200), function=Sum())
    h = make_harness(op, backend_name, tmp_path)
    for v, ts in [(1, 199), (2, 200), (4, 1199), (8, 1200)]:
        h.process_element("k", v, ts)
    h.process_watermark(2198)
    # windows [-800, 200), [200, 1200), [1200, 2200)
    assert h.output() == [(1, 199), (6, 1199)]
    h.process_watermark(2199)
    assert h.output() == [(8, 2199)]


def test_sliding_event_time_reduce(backend_name, tmp_path):
    op = WindowOperator(SlidingEventTimeWindows.of(3000, 1000), function=add)
    h = make_harness(op, backend_name, tmp_path)
    for ts in [3999, 3000, 20, 0, 999, 1998, 1999, 1000]:
        h.process_element("k", 1, ts)
    expected = {999: 3, 1999: 6, 2999: 6, 3999: 5, 4999: 2, 5999: 2}
    for wm in [999, 1999, 2999, 3999, 4999, 5999]:
        h.process_watermark(wm)
        assert h.output() == [(expected[wm], wm)]
    assert h.num_entries() == 0


def test_sliding_element_late_for_some_windows_only(backend_name, tmp_path):
    op = WindowOperator(SlidingEventTimeWindows.of(3000, 1000), function=add)
    h = make_harness(op, backend_name, tmp_path)
    h.process_watermark(2999)
    h.process_element("k", 1, 1500)       # [1000, 4000) still open; [0, 3000), [-1000, 2000) are late
    assert h.side_output("late") == []
    h.process_watermark(3999)
    assert h.output() == [(1, 3999)]
    assert h.num_entries() == 0


def test_session_windows_process_function_touching_and_bridging_merges(backend_name, tmp_path):
    class SumElements(ProcessWindowFunction):
        def process(self, key, context, elements):
            return [(key, context.window.start, context.window.end, sum(elements))]

    op = WindowOperator(EventTimeSessionWindows.with_gap(3000), function=SumElements())
    h = make_harness(op, backend_name, tmp_path)
    for key, v, ts in [("a", 1, 0), ("a", 2, 1000), ("a", 3, 2500), ("b", 1, 10), ("b", 2, 1000)]:
        h.process_element(key, v, ts)
    h.process_watermark(3999)
    assert h.output() == [(("b", 10, 4000, 3), 3999)]
    h.process_element("a", 4, 6000)      # [6000, 9000): no merge with [0, 5500)
    h.process_element("a", 5, 5500)      # [5500, 8500) touches [0, 5500) and overlaps [6000, 9000)
    h.process_element("b", 6, 6000)
    h.process_watermark(5499)
    assert h.output() == []              # [0, 5500)'s timer was deleted by the merge
    h.process_watermark(9000)
    assert by_time(h.output()) == [(("a", 0, 9000, 15), 8999), (("b", 6000, 9000, 6), 8999)]
    assert h.num_entries() == 0


def test_session_windows_aggregate_with_window_function(backend_name, tmp_path):
    op = WindowOperator(EventTimeSessionWindows.with_gap("30s"), function=SumCount(),
                        window_function=KeyedWindowResult(fold=True))
    h = make_harness(op, backend_name, tmp_path)
    h.process_batch([("u", 5, 0), ("u", 7, 20_000), ("v", 1, 5_000), ("u", 1, 100_000)])
    h.process_watermark(50_000)
    assert h.output() == [(("v", 5_000, 35_000, (1, 1)), 34_999), (("u", 0, 50_000, (12, 2)), 49_999)]
    h.process_watermark(200_000)
    assert h.output() == [(("u", 100_000, 130_000, (1, 1)), 129_999)]
    assert h.num_entries() == 0


def test_session_merging_with_lateness_and_merge_after_firing(backend_name, tmp_path):
    op = WindowOperator(EventTimeSessionWindows.with_gap(10), function=Sum(),
                        window_function=KeyedWindowResult(fold=True), allowed_lateness=20)
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 0)          # [0, 10), cleanup at 9 + 20
    h.process_watermark(9)
    assert h.output() == [(("k", 0, 10, 1), 9)]
    h.process_element("k", 5, 5)          # late but allowed: [5, 15) merges with the fired [0, 10)
    assert h.output() == []               # the merged window ends after the watermark: wait for it
    h.process_watermark(14)
    assert h.output() == [(("k", 0, 15, 6), 14)]
    h.process_element("k", 1, 1)          # [1, 11) falls into [0, 15), which already fired: fire again at once
    assert h.output() == [(("k", 0, 15, 7), 14)]
    h.process_watermark(33)
    assert h.num_entries() > 0            # kept until the cleanup time 14 + 20
    h.process_watermark(34)
    assert h.output() == []
    assert h.num_entries() == 0
    h.process_element("k", 2, 2)          # [2, 12) would be cleaned at 31 <= 34: late
    assert h.output() == []
    assert h.side_output("late") == [(2, 2)]
    assert h.num_entries() == 0


def test_session_late_drop_counted_without_tag(backend_name, tmp_path):
    op = WindowOperator(EventTimeSessionWindows.with_gap(10), function=Sum(), late_output_tag=None)
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 0)
    h.process_watermark(100)
    assert h.output() == [(1, 9)]
    h.process_element("k", 1, 5)
    h.process_element("k", 1, 90)         # 90 + 10 - 1 = 99 <= 100: late too
    h.process_element("k", 1, 91)         # [91, 101): maxTs 100 <= 100 is late as well
    h.process_element("k", 1, 92)         # [92, 102) is on time and fires at 101
    assert h.metrics["late_dropped"] == 3
    assert h.side_output("late") == []
    h.process_watermark(101)
    assert h.output() == [(1, 101)]
    assert h.num_entries() == 0


def test_tumbling_allowed_lateness_refires_per_late_element(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(10), function=Sum(), allowed_lateness=5)
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 3)
    h.process_watermark(9)
    assert h.output() == [(1, 9)]
    h.process_element("k", 2, 4)          # allowed: fires immediately with the whole window
    assert h.output() == [(3, 9)]
    h.process_watermark(13)
    h.process_element("k", 4, 8)
    assert h.output() == [(7, 9)]
    h.process_watermark(14)               # cleanup at 9 + 5
    assert h.output() == [] and h.num_entries() == 0
    h.process_element("k", 8, 9)          # 9 + 5 <= 14: late
    assert h.side_output("late") == [(8, 9)]


def test_count_windows_tumbling_and_sliding(backend_name, tmp_path):
    h = make_harness(WindowOperator(count_window(3), function=add), backend_name, tmp_path)
    for v in range(1, 8):
        h.process_element("k", v)
    h.process_element("j", 100)
    assert h.output() == [(6, MAX_TIMESTAMP), (15, MAX_TIMESTAMP)]
    h.process_element("k", 8)
    h.process_element("k", 9)
    assert h.output() == [(24, MAX_TIMESTAMP)]
    h.process_element("j", 1)
    h.process_element("j", 1)
    assert h.output() == [(102, MAX_TIMESTAMP)]
    h.process_watermark(MAX_TIMESTAMP)
    assert h.num_entries() == 0           # every window was purged; GlobalWindow has no cleanup timer

    h = make_harness(WindowOperator(count_window(3, slide=2), function=add), backend_name, tmp_path)
    for v in range(1, 7):
        h.process_element("k", v)
    assert h.output() == [(3, MAX_TIMESTAMP), (9, MAX_TIMESTAMP), (15, MAX_TIMESTAMP)]


def test_purging_trigger_vs_plain_count_trigger(backend_name, tmp_path):
    h = make_harness(WindowOperator(TumblingEventTimeWindows.of(10), function=add,
                                    trigger=PurgingTrigger.of(CountTrigger.of(2))), backend_name, tmp_path)
    for v, ts in [(1, 1), (2, 2), (3, 3)]:
        h.process_element("k", v, ts)
    assert h.output() == [(3, 9)]
    h.process_watermark(9)                # the cleanup timer does not fire a CountTrigger
    assert h.output() == [] and h.num_entries() == 0

    h = make_harness(WindowOperator(TumblingEventTimeWindows.of(10), function=add, trigger=CountTrigger.of(2)),
                     backend_name, tmp_path)
    for v, ts in [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]:
        h.process_element("k", v, ts)
    assert h.output() == [(3, 9), (10, 9)]
    h.process_watermark(9)
    assert h.output() == [] and h.num_entries() == 0


def test_count_trigger_state_merges_on_session_merge(backend_name, tmp_path):
    op = WindowOperator(EventTimeSessionWindows.with_gap(10), function=add, trigger=CountTrigger.of(3))
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 0)          # [0, 10) count 1
    h.process_element("k", 2, 30)         # [30, 40) count 1
    h.process_element("k", 4, 15)         # [15, 25) bridges nothing yet: count 1
    assert h.output() == []
    h.process_element("k", 8, 8)          # [8, 18) merges [0, 10) and [15, 25): counts 1 + 1 + 1 -> fires
    assert h.output() == [(13, 24)]
    h.process_element("k", 16, 31)        # [30, 40) count 2
    assert h.output() == []
    h.process_watermark(MAX_TIMESTAMP)
    assert h.output() == [] and h.num_entries() == 0


def test_evictor_time_evictor_with_process_function_and_lateness(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(10), function=KeyedWindowResult(), evictor=TimeEvictor.of(3),
                        allowed_lateness=10)
    h = make_harness(op, backend_name, tmp_path)
    for v, ts in [("a", 1), ("b", 5), ("c", 7), ("d", 9)]:
        h.process_element("k", v, ts)
    h.process_watermark(9)                # newest 9: keep elements after 6
    assert h.output() == [(("k", 0, 10, ["c", "d"]), 9)]
    h.process_element("k", "e", 2)        # late but allowed: fires now, "e" is evicted right away
    assert h.output() == [(("k", 0, 10, ["c", "d"]), 9)]
    h.process_element("k", "f", 8)
    assert h.output() == [(("k", 0, 10, ["c", "d", "f"]), 9)]
    h.process_watermark(19)
    assert h.output() == [] and h.num_entries() == 0


def test_count_evictor_after_function_with_count_trigger(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(10), function=KeyedWindowResult(), trigger=CountTrigger.of(2),
                        evictor=CountEvictor.of(1, do_evict_after=True))
    h = make_harness(op, backend_name, tmp_path)
    for v, ts in [("a", 1), ("b", 2), ("c", 3), ("d", 4)]:
        h.process_element("k", v, ts)
    assert h.output() == [(("k", 0, 10, ["a", "b"]), 9), (("k", 0, 10, ["b", "c", "d"]), 9)]
    h.process_watermark(9)
    assert h.output() == [] and h.num_entries() == 0


def test_evictor_with_aggregate_and_with_reduce(backend_name, tmp_path):
    h = make_harness(WindowOperator(TumblingEventTimeWindows.of(10), function=Sum(), evictor=CountEvictor.of(2)),
                     backend_name, tmp_path)
    for v, ts in [(1, 1), (2, 2), (3, 3)]:
        h.process_element("k", v, ts)
    h.process_watermark(9)
    assert h.output() == [(5, 9)] and h.num_entries() == 0

    h = make_harness(WindowOperator(TumblingEventTimeWindows.of(10), function=add, evictor=CountEvictor.of(2),
                                    window_function=KeyedWindowResult(fold=True)), backend_name, tmp_path)
    for v, ts in [(1, 1), (2, 2), (3, 3), (10, 12)]:
        h.process_element("k", v, ts)
    h.process_watermark(19)
    assert h.output() == [(("k", 0, 10, 5), 9), (("k", 10, 20, 10), 19)] and h.num_entries() == 0


def test_evictor_on_merging_session_windows(backend_name, tmp_path):
    op = WindowOperator(EventTimeSessionWindows.with_gap(5), function=KeyedWindowResult(),
                        evictor=CountEvictor.of(2))
    h = make_harness(op, backend_name, tmp_path)
    for v, ts in [("a", 0), ("b", 20), ("c", 3), ("d", 21), ("e", 10)]:
        h.process_element("k", v, ts)
    h.process_watermark(100)
    # sessions [0, 8) <- a, c ; [10, 15) <- e ; [20, 26) <- b, d
    assert h.output() == [(("k", 0, 8, ["a", "c"]), 7), (("k", 10, 15, ["e"]), 14), (("k", 20, 26, ["b", "d"]), 25)]
    assert h.num_entries() == 0


def test_process_function_window_and_global_state(backend_name, tmp_path):
    firings = ValueStateDescriptor("firings", default=0)
    total = ValueStateDescriptor("total", default=0)

    class Counting(ProcessWindowFunction):
        def process(self, key, context, elements):
            per_window = context.window_state.get_state(firings)
            per_window.update(per_window.value() + 1)
            everywhere = context.global_state.get_state(total)
            everywhere.update(everywhere.value() + 1)
            yield (context.window.start, per_window.value(), everywhere.value(), int(context.current_watermark))

        def clear(self, context):
            context.window_state.get_state(firings).clear()

    op = WindowOperator(TumblingEventTimeWindows.of(10), function=Counting(), allowed_lateness=10)
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 1)
    h.process_element("k", 1, 11)
    h.process_watermark(9)
    assert h.output() == [((0, 1, 1, 9), 9)]
    h.process_element("k", 1, 2)
    assert h.output() == [((0, 2, 2, 9), 9)]
    h.process_watermark(19)
    assert h.output() == [((10, 1, 3, 19), 19)]
    h.process_watermark(29)
    assert h.num_entries() == 1           # only the global "total" of key k; per-window state was cleared
    assert h.backend.state_entry_counts()["total"] == 1


def test_pyflink_style_context_calls(backend_name, tmp_path):
    class Calls(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (context.window().start, context.current_watermark(), context.current_processing_time())

    op = WindowOperator(TumblingEventTimeWindows.of(10), function=Calls())
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(77)
    h.process_element("k", 1, 5)
    h.process_watermark(10)
    assert h.output() == [((0, 10, 77), 9)]


def test_tumbling_processing_time_windows(backend_name, tmp_path):
    op = WindowOperator(TumblingProcessingTimeWindows.of(10), function=Sum())
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(3)
    h.process_element("k", 1)
    h.process_element("k", 2)
    h.set_processing_time(7)
    h.process_element("k", 3)
    h.process_element("j", 9)
    h.set_processing_time(12)
    assert by_time(h.output()) == [(6, 9), (9, 9)]
    h.process_element("k", 4)
    h.process_watermark(1000)             # event time does not matter
    assert h.output() == []
    h.set_processing_time(25)
    assert h.output() == [(4, 19)]
    assert h.num_entries() == 0


def test_sliding_processing_time_windows(backend_name, tmp_path):
    op = WindowOperator(SlidingProcessingTimeWindows.of(10, 5), function=Sum())
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(6)
    h.process_element("k", 1)            # [5, 15) and [0, 10)
    h.set_processing_time(12)
    h.process_element("k", 2)            # [10, 20) and [5, 15)
    assert h.output() == [(1, 9)]
    h.set_processing_time(30)
    assert h.output() == [(3, 14), (2, 19)]
    assert h.num_entries() == 0


def test_processing_time_sessions(backend_name, tmp_path):
    op = WindowOperator(ProcessingTimeSessionWindows.with_gap(5), function=Sum())
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(0)
    h.process_element("a", 1)            # [0, 5)
    h.set_processing_time(3)
    h.process_element("a", 2)            # [3, 8) -> [0, 8)
    h.set_processing_time(6)
    assert h.output() == []
    h.set_processing_time(7)
    assert h.output() == [(3, 7)]
    h.set_processing_time(9)
    h.process_element("a", 5)
    h.set_processing_time(20)
    assert h.output() == [(5, 13)]
    assert h.num_entries() == 0


def test_dynamic_gap_sessions(backend_name, tmp_path):
    op = WindowOperator(DynamicEventTimeSessionWindows.with_dynamic_gap(lambda v: v[1]),
                        function=lambda a, b: (a[0] + b[0], 0))
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", (1, 10), 0)    # [0, 10)
    h.process_element("k", (2, 1), 12)    # [12, 13)
    h.process_element("k", (4, 3), 9)     # [9, 12) touches both: [0, 13)
    h.process_element("k", (8, 2), 20)    # [20, 22)
    h.process_watermark(100)
    assert h.output() == [((7, 0), 12), ((8, 2), 21)]   # (1 + 2 merged) + 4; a single element is not reduced
    assert h.num_entries() == 0


def test_continuous_event_time_trigger(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(10), function=add, trigger=ContinuousEventTimeTrigger.of(3))
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 1)          # timers at 9 (window end) and 3 (first interval)
    h.process_element("k", 2, 4)
    h.process_watermark(3)
    assert h.output() == [(3, 9)]
    h.process_watermark(6)
    assert h.output() == [(3, 9)]
    h.process_element("k", 4, 7)
    h.process_watermark(9)                # window end (the interval timer at min(9, 9) coincides)
    assert h.output() == [(7, 9)]
    assert h.num_entries() == 0


def test_continuous_event_time_trigger_late_element_fires_without_timers(backend_name, tmp_path):
    op = WindowOperator(TumblingEventTimeWindows.of(10), function=add, trigger=ContinuousEventTimeTrigger.of(3),
                        allowed_lateness=100)
    h = make_harness(op, backend_name, tmp_path)
    h.process_watermark(50)
    h.process_element("k", 5, 1)
    assert h.output() == [(5, 9)]
    assert h.backend.timer_services()["window-timers"].num_event_time_timers() == 1   # only the cleanup timer
    h.process_watermark(109)
    assert h.num_entries() == 0


def test_continuous_processing_time_trigger_fires_repeatedly(backend_name, tmp_path):
    op = WindowOperator(TumblingProcessingTimeWindows.of(100), function=add,
                        trigger=ContinuousProcessingTimeTrigger.of(10))
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(0)
    h.process_element("k", 1)
    h.set_processing_time(10)
    assert h.output() == [(1, 99)]
    h.set_processing_time(15)
    h.process_element("k", 2)
    h.set_processing_time(20)
    assert h.output() == [(3, 99)]
    h.set_processing_time(200)            # fires at 30, 40, ..., 90 and at the window end 99, then cleans up
    assert h.output() == [(3, 99)] * 8
    assert h.num_entries() == 0


def test_global_windows_with_continuous_processing_trigger_and_purging(backend_name, tmp_path):
    op = WindowOperator(GlobalWindows.create(), function=add,
                        trigger=PurgingTrigger.of(ContinuousProcessingTimeTrigger.of(10)))
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(1)
    h.process_element("k", 1)
    h.process_element("k", 2)
    h.set_processing_time(10)
    assert h.output() == [(3, MAX_TIMESTAMP)]
    h.process_element("k", 4)
    h.set_processing_time(20)
    assert h.output() == [(4, MAX_TIMESTAMP)]
    h.set_processing_time(30)             # fires on an empty window: nothing emitted
    assert h.output() == []


def test_merging_assigner_needs_merging_trigger():
    from statekit.operators import Trigger, TriggerResult

    class NoMerge(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            return TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def on_processing_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def clear(self, window, ctx):
            pass

    with pytest.raises(ValueError, match="merging"):
        WindowOperator(EventTimeSessionWindows.with_gap(5), function=add, trigger=NoMerge())


def test_event_time_assigner_rejects_missing_timestamp(backend_name, tmp_path):
    h = make_harness(WindowOperator(TumblingEventTimeWindows.of(10), function=add), backend_name, tmp_path)
    with pytest.raises(ValueError, match="timestamp"):
        h.process_element("k", 1)


class ClearCounting:
    """Mixin counting ``clear`` calls per window (Flink calls it once per window)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.clears = {}

    def clear(self, window, ctx):
        self.clears[window] = self.clears.get(window, 0) + 1
        super().clear(window, ctx)


class CountingContinuousProcessing(ClearCounting, ContinuousProcessingTimeTrigger):
    pass


class CountingContinuousEvent(ClearCounting, ContinuousEventTimeTrigger):
    pass


class CountingPurging(ClearCounting, PurgingTrigger):
    pass


@pytest.mark.parametrize("make_trigger", [lambda: CountingContinuousProcessing(10),
                                          lambda: CountingPurging(ContinuousProcessingTimeTrigger.of(10))])
def test_continuous_processing_trigger_fires_each_timer_once_and_clears_once(backend_name, tmp_path, make_trigger):
    trigger = make_trigger()
    op = WindowOperator(TumblingProcessingTimeWindows.of(100), function=add, trigger=trigger)
    h = make_harness(op, backend_name, tmp_path)
    h.set_processing_time(0)
    h.process_element("k", 1)
    fired_before = h.backend.timer_service("window-timers", None).num_processing_time_timers()
    h.set_processing_time(200)   # the last fire at the window end re-registers its own time: cleanup must delete it
    assert list(trigger.clears.values()) == [1]
    h.set_processing_time(400)
    assert list(trigger.clears.values()) == [1]
    assert h.num_entries() == 0 and fired_before > 0
    assert h.backend.timer_service("window-timers", None).num_processing_time_timers() == 0


def test_continuous_event_trigger_clears_once(backend_name, tmp_path):
    trigger = CountingContinuousEvent(7)
    op = WindowOperator(TumblingEventTimeWindows.of(20), function=add, trigger=trigger, allowed_lateness=3)
    h = make_harness(op, backend_name, tmp_path)
    h.process_element("k", 1, 2)
    h.process_watermark(30)
    h.process_watermark(60)
    assert list(trigger.clears.values()) == [1]
    assert h.num_entries() == 0


def test_emitted_results_do_not_change_when_the_window_fires_again(backend_name, tmp_path):
    """An accumulator mutated in place and returned as the result: the first firing's result must stay as it
    was emitted when a late-but-allowed element updates the window and it fires again."""
    from statekit.testing.contract import AppendInPlace

    op = WindowOperator(TumblingEventTimeWindows.of(100), function=AppendInPlace(), allowed_lateness=50)
    h = make_harness(op, backend_name, tmp_path)
    h.process_batch([("k", 1, 10), ("k", 2, 20)])
    h.process_watermark(120)
    first = h.output()
    assert first == [([1, 2], 99)]
    h.process_element("k", 3, 30)   # late but allowed: the window fires again
    again = h.output()
    assert again == [([1, 2, 3], 99)]
    assert first == [([1, 2], 99)]
