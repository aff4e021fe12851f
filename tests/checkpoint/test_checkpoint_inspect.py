"""Offline inspection: ``inspect_checkpoint``, ``read_state`` and ``statekit inspect``."""

from __future__ import annotations

import json

import pytest

from checkpoint_workload import MAX_PAR, Job, keys_for
from statekit import StateConfig, StateTtlConfig, ValueStateDescriptor, create_backend, key_group_for, key_groups_for_partition
from statekit.checkpoint import CheckpointError, CheckpointStore, NoCheckpointError, inspect_checkpoint, main_inspect, read_state
from statekit.timers import MAX_TIMESTAMP, MIN_TIMESTAMP


def build(backend_name, tmp_path):
    root = str(tmp_path / "ckpt")
    store = CheckpointStore(root, retain=2, max_changelog_fraction=2.0)
    backends = []
    for p in range(2):
        kgs = key_groups_for_partition(p, 2, MAX_PAR)
        b = create_backend(StateConfig(backend=backend_name, max_parallelism=MAX_PAR,
                                       local_dir=str(tmp_path / f"l{p}")), kgs)
        job = Job(b, [])
        for e in range(3):
            job.run_epoch(e, rate=1.0 if e == 0 else 0.05)
            store.commit("sessions", e, b, {"watermark": e * 10})
        backends.append(b)
    return root, backends


def test_inspect_reports_epochs_partitions_counts_and_sizes(backend_name, tmp_path, capsys):
    root, backends = build(backend_name, tmp_path)
    info = inspect_checkpoint(root)
    [op] = info.operators
    assert op.name == "sessions" and [p.key_groups for p in op.partitions] == [(0, 15), (16, 31)]
    for p, b in zip(op.partitions, backends):
        assert [e.epoch for e in p.epochs] == [1, 2]
        last = p.epochs[-1]
        assert last.backend == backend_name and last.metadata == {"watermark": 20}
        counts = {n: s["entries"] for n, s in last.states.items()}
        if any(s["estimated"] for s in last.states.values()):  # RocksDB: key estimates, counting would scan
            assert set(counts) == set(b.state_entry_counts()) and all(n > 0 for n in counts.values())
        else:
            assert counts == b.state_entry_counts()
        svc = b.timer_service("job", None)
        assert last.timers["job"] == {"event": svc.num_event_time_timers(),
                                      "processing": svc.num_processing_time_timers(), "watermark": 20}
        assert last.incremental and 0 < last.bytes_written < last.bytes_total
    assert main_inspect([root]) == 0
    text = capsys.readouterr().out
    assert "operator sessions: 2 partition(s)" in text and "epoch 2:" in text and "state count (version 1):" in text
    assert main_inspect([root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["operators"][0]["name"] == "sessions"
    for b in backends:
        b.close()


def test_read_state_rows_from_every_partition(backend_name, tmp_path):
    root, backends = build(backend_name, tmp_path)
    rows = read_state(root, "sessions", "count")
    expected = []
    for b in backends:
        snap = b.snapshot_logical()
        expected += [(kg, repr(k), repr(ns), c) for kg, k, ns, c in snap["states"]["count"]["entries"]]
    assert sorted((r["key_group"], repr(r["key"]), repr(r["namespace"]), r["value"]) for r in rows) == sorted(expected)
    older = read_state(root, "sessions", "count", epoch=1)
    assert older != rows
    with pytest.raises(NoCheckpointError, match="epoch 0 is not retained"):
        read_state(root, "sessions", "count", epoch=0)
    with pytest.raises(CheckpointError, match="no state named 'nope'"):
        read_state(root, "sessions", "nope")
    for b in backends:
        b.close()


def test_read_state_strips_ttl(backend_name, tmp_path, clock):
    root = str(tmp_path / "ckpt")
    b = create_backend(StateConfig(backend=backend_name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / "l")),
                       time_provider=clock)
    v = b.get_state(ValueStateDescriptor("v").enable_time_to_live(StateTtlConfig(10_000)))
    key = keys_for(range(MAX_PAR))[0]
    b.set_current_key(key)
    v.update({"a": 1})
    CheckpointStore(root).commit("op", 0, b)
    assert read_state(root, "op", "v") == [{"key_group": key_group_for(key, MAX_PAR), "key": key, "namespace": None,
                                            "value": {"a": 1}, "ttl_timestamp": clock()}]
    b.close()


def test_inspect_empty_and_bad_locations(tmp_path, capsys):
    assert inspect_checkpoint(str(tmp_path)).operators == []
    assert main_inspect([str(tmp_path)]) == 0
    assert "no operators committed" in capsys.readouterr().out
    assert main_inspect(["unknownscheme://x/y"]) == 1
    assert "cannot be opened" in capsys.readouterr().err


def test_inspect_missing_checkpoint_is_an_error_naming_the_path(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    assert main_inspect([missing]) == 1
    err = capsys.readouterr().err
    assert "no checkpoint at" in err and missing in err


def test_inspect_shows_unset_times_as_words(tmp_path, capsys):
    """An operator's processing time before any (the minimum timestamp) and a watermark after a final epoch (the
    maximum) are words in the report, wherever they sit in the metadata; counts and times stay numbers."""
    root = str(tmp_path / "ckpt")
    backend = create_backend(StateConfig(backend="heap", max_parallelism=MAX_PAR), key_groups_for_partition(0, 1, MAX_PAR))
    metadata = {"max_ts": 1_700_000_000_000, "operator": {"processing_time": MIN_TIMESTAMP, "watermark": MAX_TIMESTAMP}}
    CheckpointStore(root).commit("sessions", 0, backend, metadata)
    backend.close()
    assert main_inspect([root]) == 0
    text = capsys.readouterr().out
    assert str(MIN_TIMESTAMP)[1:] not in text and str(MAX_TIMESTAMP) not in text, text
    assert ('metadata {"max_ts": 1700000000000, "operator": {"processing_time": "none", "watermark": "none"}}'
            in text), text
