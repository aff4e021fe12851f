"""State schema evolution through a checkpoint store, on each backend's native snapshots (heap
changelog chains, RocksDB incremental files) and across a rescale: every stored value is migrated
once, the migration is committed at the new version, and a later restore does not migrate again."""

from __future__ import annotations

import pytest

from checkpoint_workload import ALL, MAX_PAR, config
from statekit import (ListStateDescriptor, MapStateDescriptor, StateMigrationError, ValueStateDescriptor,
                      key_groups_for_partition)
from statekit.checkpoint import CheckpointStore
from statekit.checkpoint.inspect import format_report, inspect_checkpoint

KEYS = [f"k{i}" for i in range(60)]


def bang(version: int, value):
    assert version == 1, version
    return value + "!"


def states(backend, version: int = 1, migration=bang):
    def d(desc):
        return desc.with_version(version, migration) if version > 1 else desc
    return (backend.get_state(d(ValueStateDescriptor("v"))), backend.get_state(d(ListStateDescriptor("l"))),
            backend.get_state(d(MapStateDescriptor("m"))))


def content(backend, keys, version: int = 1) -> dict:
    v, l, m = states(backend, version)
    out = {}
    for k in keys:
        backend.set_current_key(k)
        out[k] = (v.value(), l.get(), dict(m.items()))
    return out


def test_native_restore_migrates_once_and_commits_the_new_version(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=10, full_every=10, max_changelog_fraction=100)
    b = store.restore("op", config(backend_name, tmp_path, "a"), ALL).backend
    v, l, m = states(b)
    for e in range(3):  # a full snapshot and deltas (heap) / incremental files (RocksDB)
        for k in KEYS[e * 20:(e + 1) * 20]:
            b.set_current_key(k)
            v.update(f"{k}-{e}")
            l.add(f"{k}-x")
            m.put("a", f"{k}-m")
        store.commit("op", e, b)
    b.close()

    r = store.restore("op", config(backend_name, tmp_path, "b"), ALL)
    assert content(r.backend, KEYS, version=2) == {k: (f"{k}-{i // 20}!", [f"{k}-x!"], {"a": f"{k}-m!"})
                                                   for i, k in enumerate(KEYS)}
    v2, l2, _ = states(r.backend, 2)
    r.backend.set_current_key("k0")
    v2.update("new")  # written at version 2: must not be migrated again
    l2.add("more")
    committed = store.commit("op", 3, r.backend)
    assert committed.manifest.stats["versions"] == {"v": 2, "l": 2, "m": 2}
    r.backend.close()
    text = format_report(inspect_checkpoint(str(tmp_path / "ckpt")))
    assert "state v (version 1)" in text and "state v (version 2)" in text  # epochs 0-2, then 3

    again = store.restore("op", config(backend_name, tmp_path, "c"), ALL)
    got = content(again.backend, KEYS, version=2)
    assert got["k0"] == ("new", ["k0-x!", "more"], {"a": "k0-m!"})
    assert got["k59"] == ("k59-2!", ["k59-x!"], {"a": "k59-m!"})
    again.backend.close()

    unmigrated = store.restore("op", config(backend_name, tmp_path, "d"), ALL, epoch=2)
    with pytest.raises(StateMigrationError, match=r"state 'v' is stored at version 1.*version 2 without a migration"):
        states(unmigrated.backend, 2, migration=None)
    unmigrated.backend.close()


def test_rescaled_restore_migrates(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    for p in range(2):
        kgs = key_groups_for_partition(p, 2, MAX_PAR)
        b = store.restore("op", config(backend_name, tmp_path, f"p{p}"), kgs).backend
        v, _, _ = states(b)
        for k in KEYS:
            if b.key_group_of(k) in kgs:
                b.set_current_key(k)
                v.update(k)
        store.commit("op", 0, b)
        b.close()
    for p in range(3):
        kgs = key_groups_for_partition(p, 3, MAX_PAR)
        r = store.restore("op", config(backend_name, tmp_path, f"q{p}"), kgs)
        mine = [k for k in KEYS if r.backend.key_group_of(k) in kgs]
        assert mine and {k: c[0] for k, c in content(r.backend, mine, version=2).items()} == {k: k + "!" for k in mine}
        r.backend.close()


FRESH = """
import json
from statekit import StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore, format_report, inspect_checkpoint
store = CheckpointStore({root!r})
b = store.restore("op", StateConfig(backend={name!r}, max_parallelism={mp}, local_dir={local!r})).backend
v = b.get_state(ValueStateDescriptor("v").with_version(2, lambda version, old: old + "!"))
b.set_current_key("k1")
got = v.value()
store.commit("op", 1, b)
b.close()
print(json.dumps({{"value": got, "report": format_report(inspect_checkpoint({root!r}))}}))
"""


def test_migration_and_inspect_in_a_fresh_interpreter(backend_name, tmp_path):
    import json
    import subprocess
    import sys

    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = store.restore("op", config(backend_name, tmp_path, "a"), ALL).backend
    b.set_current_key("k1")
    b.get_state(ValueStateDescriptor("v")).update("k1")
    store.commit("op", 0, b)
    b.close()
    code = FRESH.format(root=str(tmp_path / "ckpt"), name=backend_name, mp=MAX_PAR, local=str(tmp_path / "b"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["value"] == "k1!"
    assert "epoch 0:" in out["report"] and "state v (version 1)" in out["report"]
    assert "epoch 1:" in out["report"] and "state v (version 2)" in out["report"]
