"""Windows, assigners and durations without a backend (after Flink's assigner tests)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statekit import KEY_SERIALIZER, MAX_TIMESTAMP
from statekit.operators import (CountEvictor, CountTrigger, DynamicProcessingTimeSessionWindows, EventTimeSessionWindows,
                       EventTimeTrigger, GlobalWindow, GlobalWindows, NeverTrigger, ProcessingTimeSessionWindows,
                       ProcessingTimeTrigger, PurgingTrigger, SlidingEventTimeWindows, SlidingProcessingTimeWindows,
                       TimeWindow, TumblingEventTimeWindows, TumblingProcessingTimeWindows, count_window)

W = TimeWindow


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def get_current_processing_time(self) -> int:
        return self.now


def test_time_window_basics():
    w = W(0, 10)
    assert w.max_timestamp() == 9
    assert w.intersects(W(10, 20)) and W(10, 20).intersects(w)        # touching windows merge
    assert not w.intersects(W(11, 20))
    assert w.cover(W(5, 30)) == W(0, 30)
    assert hash(W(0, 10)) == hash(W(0, 10)) and {W(0, 10): 1}[W(0, 10)] == 1
    assert KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps(w)) == w
    assert type(KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps(w))) is TimeWindow
    assert KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps([w, GlobalWindow.get()])) == [w, GlobalWindow()]
    assert GlobalWindow() is GlobalWindow.get() and GlobalWindow().max_timestamp() == MAX_TIMESTAMP


def test_window_start_with_offset():
    assert W.get_window_start_with_offset(7, 0, 5) == 5
    assert W.get_window_start_with_offset(-1, 0, 5) == -5
    assert W.get_window_start_with_offset(7, 3, 5) == 3
    assert W.get_window_start_with_offset(2, 3, 5) == -2
    assert W.get_window_start_with_offset(-7, -3, 5) == -8


def test_merge_windows_groups_sorted_and_deduplicated():
    calls = []
    W.merge_windows([W(10, 13), W(0, 3), W(3, 5), W(20, 21), W(12, 15), W(0, 3)],
                    lambda group, result: calls.append((group, result)))
    assert calls == [([W(0, 3), W(3, 5)], W(0, 5)), ([W(10, 13), W(12, 15)], W(10, 15))]


def test_tumbling_assigners():
    a = TumblingEventTimeWindows.of(5000)
    assert a.assign_windows("x", 0, None) == [W(0, 5000)]
    assert a.assign_windows("x", 4999, None) == [W(0, 5000)]
    assert a.assign_windows("x", 5000, None) == [W(5000, 10000)]
    assert a.assign_windows("x", -1, None) == [W(-5000, 0)]
    assert TumblingEventTimeWindows.of(5000, 100).assign_windows("x", 100, None) == [W(100, 5100)]
    assert TumblingEventTimeWindows.of(5000, -100).assign_windows("x", 4899, None) == [W(-100, 4900)]
    assert a.is_event_time() and isinstance(a.get_default_trigger(), EventTimeTrigger)
    p = TumblingProcessingTimeWindows.of(timedelta(seconds=5))
    assert p.assign_windows("x", None, Clock(7000)) == [W(5000, 10000)]
    assert not p.is_event_time() and isinstance(p.get_default_trigger(), ProcessingTimeTrigger)
    for bad in ((0, 0), (10, 10), (10, -10)):
        with pytest.raises(ValueError):
            TumblingEventTimeWindows.of(*bad)


def test_sliding_assigners():
    a = SlidingEventTimeWindows.of(5000, 1000)
    assert a.assign_windows("x", 0, None) == [W(0, 5000), W(-1000, 4000), W(-2000, 3000), W(-3000, 2000),
                                              W(-4000, 1000)]
    assert a.assign_windows("x", 4999, None) == [W(4000, 9000), W(3000, 8000), W(2000, 7000), W(1000, 6000),
                                                 W(0, 5000)]
    assert SlidingEventTimeWindows.of(5000, 1000, 100).assign_windows("x", 100, None)[0] == W(100, 5100)
    assert SlidingEventTimeWindows.of(3000, 2000).assign_windows("x", 2500, None) == [W(2000, 5000), W(0, 3000)]
    p = SlidingProcessingTimeWindows.of("5s", "1s")
    assert p.assign_windows("x", None, Clock(4999))[0] == W(4000, 9000)
    for bad in ((0, 1), (10, 0), (10, 5, 5)):
        with pytest.raises(ValueError):
            SlidingEventTimeWindows.of(*bad)


def test_session_assigners():
    a = EventTimeSessionWindows.with_gap("5s")
    assert a.assign_windows("x", 100, None) == [W(100, 5100)]
    assert ProcessingTimeSessionWindows.with_gap(10).assign_windows("x", None, Clock(3)) == [W(3, 13)]
    d = DynamicProcessingTimeSessionWindows.with_dynamic_gap(lambda v: v * 2)
    assert d.assign_windows(4, None, Clock(10)) == [W(10, 18)]
    with pytest.raises(ValueError):
        EventTimeSessionWindows.with_gap(0)
    with pytest.raises(ValueError):
        d.assign_windows(0, None, Clock(1))


def test_global_and_count_window_assigners():
    g = GlobalWindows.create()
    assert g.assign_windows("x", 5, None) == [GlobalWindow()]
    assert isinstance(g.get_default_trigger(), NeverTrigger) and not g.is_event_time()
    tumbling = count_window(3)
    assert isinstance(tumbling, GlobalWindows) and tumbling.get_default_evictor() is None
    t = tumbling.get_default_trigger()
    assert isinstance(t, PurgingTrigger) and isinstance(t.nested_trigger, CountTrigger) and t.nested_trigger.count == 3
    sliding = count_window(5, slide=2)
    assert isinstance(sliding.get_default_trigger(), CountTrigger) and sliding.get_default_trigger().count == 2
    assert isinstance(sliding.get_default_evictor(), CountEvictor) and sliding.get_default_evictor().max_count == 5
