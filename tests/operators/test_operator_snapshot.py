"""Snapshot mid-stream and restore (same backend, other backend, split key-group ranges): the
output equals an uninterrupted run."""

from __future__ import annotations

import random

import pytest

import statekit
from statekit import key_group_for
from statekit.operators import KeyedProcessOperator, TumblingProcessingTimeWindows, WindowOperator
from tests.operators_support import CountWithTimer, Sum, make_harness, per_key, window_variants

VARIANTS = window_variants()


def epochs_of(seed: int, n_epochs: int = 8) -> list[tuple[list, int]]:
    """Epochs of records with bounded disorder (some late) and the watermark after each."""
    rnd = random.Random(seed)
    out, now = [], 0
    for _ in range(n_epochs):
        recs = []
        for i in range(rnd.randint(5, 25)):
            k = rnd.randrange(6)
            recs.append((f"u{k}", (f"u{k}", len(out) * 100 + i), now + rnd.randint(-20, 30)))
        now += rnd.randint(5, 25)
        out.append((recs, now))
    return out


def run(h, epochs) -> list[list]:
    outputs = []
    for recs, wm in epochs:
        h.process_batch(recs)
        h.process_watermark(wm)
        outputs.append(sorted(h.output() + [(("late",) + v, ts) for v, ts in h.side_output("late")], key=repr))
    return outputs


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("cut", [3, 6])
def test_restore_mid_stream_on_every_backend(backend_name, tmp_path, variant, cut):
    make, epochs = VARIANTS[variant], epochs_of(cut * 31 + len(variant))
    full = run(make_harness(make(), backend_name, tmp_path), epochs)
    first = make_harness(make(), backend_name, tmp_path)
    assert run(first, epochs[:cut]) == full[:cut]
    snap = first.snapshot(epoch=cut)
    assert run(first, epochs[cut:]) == full[cut:]          # taking a snapshot changes nothing
    for target in statekit.available_backends():
        restored = make_harness(make(), target, tmp_path, snapshot=snap)
        assert run(restored, epochs[cut:]) == full[cut:], f"{backend_name} -> {target}"
        assert restored.num_entries() == first.num_entries()


def test_restore_into_split_key_group_ranges(backend_name, tmp_path):
    make, epochs = VARIANTS["session-agg-lateness"], epochs_of(7, 10)
    whole = make_harness(make(), backend_name, tmp_path)
    full = run(whole, epochs)
    first = make_harness(make(), backend_name, tmp_path)
    run(first, epochs[:5])
    snap = first.snapshot(epoch=5)
    halves = [range(0, 64), range(64, 128)]
    parts = [make_harness(make(), target, tmp_path, key_groups=kg, snapshot=snap)
             for target, kg in zip(statekit.available_backends() * 2, halves)]
    merged: list[list] = [[] for _ in epochs[5:]]
    for h, kg in zip(parts, halves):
        mine = [([r for r in recs if key_group_for(r[0], 128) in kg], wm) for recs, wm in epochs[5:]]
        for i, out in enumerate(run(h, mine)):
            merged[i].extend(out)
    assert [sorted(m, key=repr) for m in merged] == full[5:]
    assert sum(h.num_entries() for h in parts) == whole.num_entries() > 0


def test_snapshot_bytes_are_isolated_from_later_changes(backend_name, tmp_path):
    h = make_harness(VARIANTS["session-agg-lateness"](), backend_name, tmp_path)
    h.process_element("k", ("k", 1), 10)
    snap = h.snapshot(epoch=1)
    copy = bytes(snap)
    h.process_element("k", ("k", 2), 12)
    h.process_watermark(100)
    assert bytes(snap) == copy
    restored = make_harness(VARIANTS["session-agg-lateness"](), backend_name, tmp_path, snapshot=snap)
    restored.process_watermark(100)
    assert restored.output() == [(("k", 10, 20, (("k", 1),)), 19)]


def test_processing_time_restore_keeps_clock_and_timers(backend_name, tmp_path):
    first = make_harness(WindowOperator(TumblingProcessingTimeWindows.of(10), function=Sum()), backend_name, tmp_path)
    first.set_processing_time(3)
    first.process_element("k", 5)
    snap = first.snapshot(epoch=1)
    for target in statekit.available_backends():
        h = make_harness(WindowOperator(TumblingProcessingTimeWindows.of(10), function=Sum()), target, tmp_path,
                         snapshot=snap)
        assert h.operator.get_current_processing_time() == 3
        h.process_element("k", 1)                    # still in [0, 10): the restored clock is used
        h.set_processing_time(10)
        assert h.output() == [(6, 9)]
        assert h.num_entries() == 0


def test_keyed_process_restore_across_backends(backend_name, tmp_path):
    first = make_harness(KeyedProcessOperator(CountWithTimer()), backend_name, tmp_path)
    first.process_batch([("a", 1, 5), ("b", 2, 7), ("a", 3, 8)])
    assert per_key(first.output()) == {"a": [(("a", 1, 1), 5), (("a", 3, 2), 8)], "b": [(("b", 2, 1), 7)]}
    snap = first.snapshot(epoch=1)
    for target in statekit.available_backends():
        h = make_harness(KeyedProcessOperator(CountWithTimer()), target, tmp_path, snapshot=snap)
        h.process_watermark(17)                      # a's timer from ts 5 fires at 15, b's at 17
        assert h.output() == [(("a", "timer", 2), 15), (("b", "timer", 1), 17)]
        h.process_watermark(18)                      # a's second timer; its count was cleared at 15
        assert h.output() == [(("a", "timer", 0), 18)]
        assert h.num_entries() == 0
