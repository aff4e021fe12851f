"""MergingWindowSet (after Flink's MergingWindowSetTest) on a real map state of every backend."""

from __future__ import annotations

import pytest

import random

from statekit import ValueStateDescriptor
from statekit.operators import DynamicEventTimeSessionWindows, EventTimeSessionWindows, MergingWindowSet, TimeWindow

W = TimeWindow


class RecordingMerge:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, result, merged, state_window, merged_state_windows):
        self.calls.append((result, list(merged), state_window, list(merged_state_windows)))

    def take(self) -> list[tuple]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def state(backend):
    backend.set_current_key("k")
    return backend.get_state(ValueStateDescriptor("merging-window-set"))


def test_incremental_merging(state):
    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    merge = RecordingMerge()
    assert mws.add_window(W(0, 4), merge) == W(0, 4) and merge.take() == []
    assert mws.get_state_window(W(0, 4)) == W(0, 4)
    assert mws.add_window(W(0, 4), merge) == W(0, 4) and merge.take() == []
    assert mws.add_window(W(3, 5), merge) == W(0, 5)
    assert merge.take() == [(W(0, 5), [W(0, 4)], W(0, 4), [])]
    assert mws.add_window(W(4, 6), merge) == W(0, 6)
    assert merge.take() == [(W(0, 6), [W(0, 5)], W(0, 4), [])]
    assert mws.get_state_window(W(0, 6)) == W(0, 4)
    for inside in (W(1, 4), W(0, 4), W(3, 5), W(4, 6)):
        assert mws.add_window(inside, merge) == W(0, 6)
    assert merge.take() == []
    assert mws.add_window(W(11, 14), merge) == W(11, 14) and merge.take() == []
    assert mws.get_state_window(W(0, 6)) == W(0, 4)
    assert mws.get_state_window(W(11, 14)) == W(11, 14)
    assert mws.add_window(W(10, 13), merge) == W(10, 14)
    assert merge.take() == [(W(10, 14), [W(11, 14)], W(11, 14), [])]
    assert mws.add_window(W(12, 15), merge) == W(10, 15)
    assert merge.take() == [(W(10, 15), [W(10, 14)], W(11, 14), [])]
    assert mws.add_window(W(11, 14), merge) == W(10, 15) and merge.take() == []
    assert mws.mapping == {W(0, 6): W(0, 4), W(10, 15): W(11, 14)}
    mws.retire_window(W(0, 6))
    assert mws.get_state_window(W(0, 6)) is None
    assert mws.get_state_window(W(10, 15)) == W(11, 14)
    with pytest.raises(KeyError):
        mws.retire_window(W(0, 6))


def test_late_merging_bridges_windows(state):
    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    merge = RecordingMerge()
    for w in (W(0, 3), W(5, 8), W(10, 13)):
        assert mws.add_window(w, merge) == w
    assert merge.take() == []
    assert mws.add_window(W(8, 10), merge) == W(5, 13)
    # merged windows in (start, end) order; the first one's state window is the target
    assert merge.take() == [(W(5, 13), [W(5, 8), W(10, 13)], W(5, 8), [W(10, 13)])]
    assert mws.get_state_window(W(0, 3)) == W(0, 3)
    for w in (W(5, 8), W(8, 10), W(10, 13)):
        assert mws.add_window(w, merge) == W(5, 13)
    assert merge.take() == []
    assert mws.add_window(W(3, 5), merge) == W(0, 13)
    assert merge.take() == [(W(0, 13), [W(0, 3), W(5, 13)], W(0, 3), [W(5, 8)])]
    assert mws.mapping == {W(0, 13): W(0, 3)}


def test_large_window_covering_single_and_multiple_windows(state):
    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    merge = RecordingMerge()
    mws.add_window(W(1, 2), merge)
    assert mws.add_window(W(0, 3), merge) == W(0, 3)
    assert merge.take() == [(W(0, 3), [W(1, 2)], W(1, 2), [])]
    assert mws.get_state_window(W(0, 3)) == W(1, 2)

    mws.retire_window(W(0, 3))
    for w in (W(1, 3), W(5, 8), W(10, 13)):
        mws.add_window(w, merge)
    assert mws.add_window(W(0, 13), merge) == W(0, 13)
    assert merge.take() == [(W(0, 13), [W(1, 3), W(5, 8), W(10, 13)], W(1, 3), [W(5, 8), W(10, 13)])]
    assert mws.mapping == {W(0, 13): W(1, 3)}


def test_identical_window_keeps_its_state_window(state):
    # with dynamic gaps a new window can equal a merged one exactly; its state window must survive
    mws = MergingWindowSet(DynamicEventTimeSessionWindows.with_dynamic_gap(lambda v: v), state)
    merge = RecordingMerge()
    mws.add_window(W(5, 15), merge)
    assert mws.add_window(W(0, 10), merge) == W(0, 15)
    merge.take()
    assert mws.add_window(W(0, 15), merge) == W(0, 15)
    assert merge.take() == []
    assert mws.mapping == {W(0, 15): W(5, 15)}


def test_persist_writes_changes_and_reloads(backend, state):
    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    merge = RecordingMerge()
    for w in (W(0, 3), W(10, 13), W(2, 5)):
        mws.add_window(w, merge)
    assert state.value() is None            # nothing written before persist
    mws.persist()
    again = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    assert again.mapping == {W(0, 5): W(0, 3), W(10, 13): W(10, 13)}
    backend.set_current_key("other")
    assert MergingWindowSet(EventTimeSessionWindows.with_gap(3), state).mapping == {}
    backend.set_current_key("k")
    again.retire_window(W(0, 5))
    again.retire_window(W(10, 13))
    again.persist()
    assert backend.num_entries() == 0       # the last window gone: no map entry left behind


def test_mapping_survives_snapshot_into_other_backends(backend, state, new_factory, backend_name):
    import statekit

    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(3), state)
    merge = RecordingMerge()
    for w in (W(0, 3), W(10, 13), W(2, 5), W(20, 23)):
        mws.add_window(w, merge)
    mws.persist()
    snap = backend.snapshot_logical()
    for other in statekit.available_backends():
        restored = new_factory(other)()
        restored.restore_logical(snap)
        restored.set_current_key("k")
        st = restored.get_state(ValueStateDescriptor("merging-window-set"))
        assert MergingWindowSet(EventTimeSessionWindows.with_gap(3), st).mapping == {
            W(0, 5): W(0, 3), W(10, 13): W(10, 13), W(20, 23): W(20, 23)}


class GenericSessions(EventTimeSessionWindows):
    """The same merges through the generic ``merge_windows`` path of MergingWindowSet."""

    merges_intersecting_time_windows = False


@pytest.mark.parametrize("seed", range(5))
def test_direct_time_window_merging_equals_generic_grouping(backend, seed):
    backend.set_current_key("k")
    direct = MergingWindowSet(EventTimeSessionWindows.with_gap(5), backend.get_state(ValueStateDescriptor("a")))
    generic = MergingWindowSet(GenericSessions.with_gap(5), backend.get_state(ValueStateDescriptor("b")))
    rnd = random.Random(seed)
    for _ in range(300):
        if direct.mapping and rnd.random() < 0.1:
            w = rnd.choice(sorted(direct.mapping))
            direct.retire_window(w)
            generic.retire_window(w)
            continue
        start = rnd.randrange(200)
        w = W(start, start + rnd.randint(1, 12))
        a, b = RecordingMerge(), RecordingMerge()
        assert direct.add_window(w, a) == generic.add_window(w, b)
        assert a.take() == b.take()
        assert direct.mapping == generic.mapping
