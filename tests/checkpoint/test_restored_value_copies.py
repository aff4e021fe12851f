"""A value state restored from a checkpoint in a fresh interpreter hands out copies of its mutable values
(the heap's value state hands immutable scalars out as stored, and must tell the two apart after a restore)."""

from __future__ import annotations

import json
import textwrap

import pytest

from statekit import StateConfig, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointStore
from statekit.testing import BACKENDS
from tests.checkpoint_support import run_python

READ = """
import json
from statekit import StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore
b = CheckpointStore({root!r}).restore("op", StateConfig(backend={backend!r}, local_dir={local!r})).backend
v = b.get_state(ValueStateDescriptor("v"))
seen = {{}}
for key in ("n", "l", "d"):
    b.set_current_key(key)
    got = v.value()
    if isinstance(got, list):
        got.append("mutated")
    elif isinstance(got, dict):
        got["mutated"] = 1
    seen[key] = v.value()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("incremental", [False, True])
def test_restored_mutable_values_are_copied_in_a_fresh_interpreter(tmp_path, backend, incremental):
    """A scalar, a list and a dict restored (a full snapshot, or a full one and a delta that changed the list):
    values read and mutated in the restoring process leave its state."""
    root = str(tmp_path / "ckpt")
    store = CheckpointStore(root)
    b = create_backend(StateConfig(backend=backend, local_dir=str(tmp_path / "w")))
    v = b.get_state(ValueStateDescriptor("v"))
    for key, value in (("n", 5), ("l", [1, 2]), ("d", {"a": 1})):
        b.set_current_key(key)
        v.update(value)
    store.commit("op", 0, b)
    want = {"n": 5, "l": [1, 2], "d": {"a": 1}}
    if incremental:
        b.set_current_key("l")
        v.update([3])
        want["l"] = [3]
        assert store.commit("op", 1, b).manifest.snapshot["incremental"]
    b.close()
    out = run_python(textwrap.dedent(READ).format(root=root, backend=backend, local=str(tmp_path / "r")), tmp_path)
    assert json.loads(out) == want
