"""Rescaling: restore key-group ranges that differ from the snapshotted ones, 2 -> 3 -> 1 partitions."""

from __future__ import annotations

import pytest

from checkpoint_workload import MAX_PAR, Job, normalized
from statekit.testing import BACKENDS
from statekit import StateConfig, key_group_for, key_groups_for_partition
from statekit.checkpoint import CheckpointStore, NoCheckpointError

ALL = range(MAX_PAR)


def run_reference(name, tmp_path, epochs):
    from statekit import create_backend
    b = create_backend(StateConfig(backend=name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / "ref")), ALL)
    out: list = []
    job = Job(b, out)
    for e in range(epochs):
        job.run_epoch(e)
    state = normalized(b)
    b.close()
    return state, sorted(map(repr, out))


@pytest.mark.parametrize("target", BACKENDS)
def test_rescale_2_3_1_equals_uninterrupted(backend_name, target, tmp_path):
    """Epochs 0-2 on 2 partitions (``backend_name``), 3-5 on 3, 6-7 on 1 (``target`` after the first rescale)."""
    expected_state, expected_out = run_reference(backend_name, tmp_path, 8)
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=2, full_every=2)
    out: list = []
    plan = [(0, 3, 2, backend_name), (3, 6, 3, target), (6, 8, 1, target)]
    final = []
    for start, stop, parallelism, name in plan:
        for p in range(parallelism):
            kgs = key_groups_for_partition(p, parallelism, MAX_PAR)
            cfg = StateConfig(backend=name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / f"l{start}-{p}"))
            r = store.restore("op", cfg, kgs)
            assert r.epoch == (start - 1 if start else None)
            if start:
                # the new range's keys come from every old partition it overlaps, and nothing else
                assert [(m.key_groups.start <= kgs.start < m.key_groups.stop or
                         kgs.start <= m.key_groups.start < kgs.stop) for m in r.sources] == [True] * len(r.sources)
                assert r.native == (name == "rocksdb" and all(m.backend == name for m in r.sources))
            job = Job(r.backend, out)
            snap = r.backend.snapshot_logical()
            for s in snap["states"].values():
                assert all(e[0] in kgs for e in s["entries"])
            for t in snap["timers"].values():
                assert all(key_group_for(x[1], MAX_PAR) in kgs for x in t["event"] + t["processing"])
            for e in range(start, stop):
                job.run_epoch(e)
                store.commit("op", e, r.backend, {"partition": p})
            if stop == 8:
                final.append(r.backend)
            else:
                r.backend.close()
    assert normalized(*final) == expected_state
    assert sorted(map(repr, out)) == expected_out
    # retention (2 epochs) retired the partitions of the 2- and 3-partition layouts
    assert store.partitions("op") == [ALL] and store.epochs("op", ALL) == [6, 7]
    for b in final:
        b.close()


def test_rescale_needs_a_covering_epoch(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    from statekit import create_backend
    cfg = StateConfig(backend=backend_name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / "a"))
    b = create_backend(cfg, key_groups_for_partition(0, 2, MAX_PAR))
    Job(b, []).run_epoch(0)
    store.commit("op", 0, b)
    b.close()
    # partition 1 of 2 never committed: a range spanning both has no epoch that covers it
    with pytest.raises(NoCheckpointError, match="covers every key group"):
        store.restore("op", cfg.with_options(local_dir=str(tmp_path / "b")), ALL)
    with pytest.raises(NoCheckpointError, match="epoch 0"):
        store.restore("op", cfg.with_options(local_dir=str(tmp_path / "c")), ALL, epoch=0)
