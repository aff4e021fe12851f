"""Heap changelog snapshots: when deltas are written, what they cost, and randomized chains."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from checkpoint_workload import MAX_PAR, Job, normalized
from statekit import StateConfig, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointStore

ALL = range(MAX_PAR)
HEAP = StateConfig(backend="heap", max_parallelism=MAX_PAR)


def fill(n: int):
    b = create_backend(HEAP, ALL)
    v = b.get_state(ValueStateDescriptor("v"))
    for k in range(n):
        b.set_current_key(k)
        v.update(k)
    return b, v


def test_full_every_n_epochs_and_small_deltas(tmp_path):
    store = CheckpointStore(str(tmp_path), retain=10, full_every=3, max_changelog_fraction=0.5)
    b, v = fill(2000)
    kinds, sizes = [], []
    for e in range(7):
        for k in range(e * 10, e * 10 + 10):  # 0.5% of the keys per epoch
            b.set_current_key(k)
            v.update(-k)
        m = store.commit("op", e, b).manifest
        kinds.append(m.snapshot["incremental"])
        sizes.append(m.written_bytes())
        assert m.snapshot["chain_length"] == len([f for f in m.files if f.role in ("full", "delta")])
    assert kinds == [False, True, True, False, True, True, False]
    assert max(sizes[1], sizes[2], sizes[4]) * 20 < sizes[0]
    b.close()


def test_large_changelog_forces_a_full_snapshot(tmp_path):
    store = CheckpointStore(str(tmp_path), full_every=100, max_changelog_fraction=0.25)
    b, v = fill(1000)
    store.commit("op", 0, b)
    for e, touched in ((1, 100), (2, 100), (3, 100)):  # accumulated: 10%, 20%, 30% > 25%
        for k in range(touched):
            b.set_current_key(k)
            v.update(e)
        m = store.commit("op", e, b).manifest
        assert m.snapshot["incremental"] == (e < 3)
    b.close()


def test_deletes_in_a_delta_are_applied(tmp_path):
    store = CheckpointStore(str(tmp_path))
    b, v = fill(100)
    store.commit("op", 0, b)
    for k in range(10):
        b.set_current_key(k)
        v.clear()
    m = store.commit("op", 1, b).manifest
    assert m.snapshot["incremental"]
    r = store.restore("op", HEAP, ALL)
    v2 = r.backend.get_state(ValueStateDescriptor("v"))
    assert r.backend.state_entry_counts() == {"v": 90}
    r.backend.set_current_key(5)
    assert v2.value() is None
    r.backend.set_current_key(50)
    assert v2.value() == 50


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["epoch", "restore", "restore-old"]),
                                st.floats(0.01, 1.0)), min_size=1, max_size=10),
       full_every=st.integers(1, 4), fraction=st.sampled_from([0.05, 0.5, 5.0]))
def test_random_chains_restore_the_committed_state(tmp_path_factory, steps, full_every, fraction):
    """Random epochs, restores of the latest and of an older retained epoch: always the committed state."""
    root = tmp_path_factory.mktemp("chain")
    store = CheckpointStore(str(root), retain=3, full_every=full_every, max_changelog_fraction=fraction)
    b = create_backend(HEAP, ALL)
    job = Job(b, [])
    committed: dict[int, dict] = {}
    epoch = 0
    rng = random.Random(len(steps))
    for action, rate in steps:
        if action == "epoch" or not committed:
            job.run_epoch(epoch, rate)
            store.commit("op", epoch, b)
            committed[epoch] = normalized(b)
            epoch += 1
            continue
        retained = store.epochs("op", ALL)
        want = retained[-1] if action == "restore" else rng.choice(retained)
        b.close()
        r = store.restore("op", HEAP, ALL, epoch=want)
        b = r.backend
        job = Job(b, [])
        assert normalized(b) == committed[want]
        epoch = want + 1  # the job resumes after the restored epoch; later epochs are recommitted
        for e in [e for e in committed if e > want]:
            del committed[e]
            store.storage.delete_dir(f"op/kg=0-{MAX_PAR - 1}/epoch={e}")
    b.close()


def test_first_snapshot_after_a_native_restore_is_a_delta(tmp_path):
    store = CheckpointStore(str(tmp_path))
    b, v = fill(1000)
    store.commit("op", 0, b)
    b.close()
    r = store.restore("op", HEAP, ALL)
    v2 = r.backend.get_state(ValueStateDescriptor("v"))  # imports 1000 cells: the snapshot's own content
    r.backend.set_current_key(3)
    v2.update("changed")
    m = store.commit("op", 1, r.backend).manifest
    assert m.snapshot["incremental"] and m.snapshot["chain_changes"] == 1
    r2 = store.restore("op", HEAP, ALL)
    v3 = r2.backend.get_state(ValueStateDescriptor("v"))
    r2.backend.set_current_key(3)
    assert v3.value() == "changed" and r2.backend.state_entry_counts() == {"v": 1000}


def test_full_snapshots_of_the_entry_layout_still_restore(tmp_path, monkeypatch):
    """Full snapshots are written as columns (no key groups); a checkpoint written before the snapshot header
    whose full snapshot has the earlier layout (entries with key groups, timer lists) restores, every state
    kind and both timer domains included, and the next epoch is a full snapshot of today's layout."""
    from statekit.backends.heap import HeapSnapshots
    from statekit.checkpoint.transfer import CheckpointSnapshotReader
    from statekit.payload import decode
    from tests.checkpoint_support import edit_manifest

    root = tmp_path / "legacy"
    store = CheckpointStore(str(root), full_every=10, max_changelog_fraction=5.0)
    b = create_backend(HEAP, ALL)
    job = Job(b, [])
    job.run_epoch(0, 0.6)
    with monkeypatch.context() as m:
        m.setattr(HeapSnapshots, "_full_columns", lambda self: self.snapshot_logical())
        legacy = store.commit("op", 0, b).manifest
    edit_manifest(root / legacy.path, lambda body: (body.pop("header"), body.update(format=1)))  # as written before
    committed = {0: normalized(b)}
    job.run_epoch(1, 0.3)
    new = store.commit("op", 1, b).manifest
    assert not new.snapshot["incremental"]  # a chain from before the header is never extended
    committed[1] = normalized(b)
    b.close()
    for epoch in (0, 1):
        r = store.restore("op", HEAP, ALL, epoch=epoch)
        assert normalized(r.backend) == committed[epoch]
        r.backend.close()
    legacy_full = decode(CheckpointSnapshotReader(store.storage, legacy).read(legacy.files_with_role("full")[0]))
    assert "layout" not in legacy_full and new.header.version >= 1


def test_a_delta_holds_what_a_bulk_write_set_and_cleared(tmp_path):
    """``update_internal_many`` with values and Nones (clears, of present and absent cells): the next
    delta carries every change, so a restore equals the backend."""
    store = CheckpointStore(str(tmp_path), full_every=10, max_changelog_fraction=5.0)
    b, v = fill(50)
    store.commit("op", 0, b)
    resolved, _ = b.resolve_keys(list(range(0, 60, 2)))
    v.update_internal_many(resolved, [None if i % 3 else f"new-{i}" for i in range(len(resolved))])
    assert store.commit("op", 1, b).manifest.snapshot["incremental"]
    r = store.restore("op", HEAP, ALL)
    r.backend.get_state(ValueStateDescriptor("v"))
    assert normalized(r.backend) == normalized(b) and r.backend.state_entry_counts() == b.state_entry_counts()
    r.backend.close()
    b.close()
