"""A checkpoint names types, never code to run: a restore maps extension codes only to the types this process
registers or its installed packages declare (``statekit.types`` entry points). A manifest edited to name another
module (its plain checksum recomputed) gets an error naming the code and the recorded name, and its module is
never imported: each case runs in a fresh interpreter, on both backends."""

from __future__ import annotations

import json

import pytest

from statekit import StateConfig, create_backend
from statekit.checkpoint import CheckpointStore, CorruptCheckpointError
from statekit.testing import BACKENDS
from tests.checkpoint_support import USER_TYPES, edit_manifest, run_python


EVILMOD = """
from pathlib import Path
Path({marker!r}).write_text("imported")  # import-time code a checkpoint must never get run
class Thing:
    pass
"""

WRITE = """
import sys
sys.path.insert(0, {support!r})
import user_types
from statekit import StateConfig, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointStore
from statekit.operators.windows import TimeWindow

b = create_backend(StateConfig(backend={backend!r}, local_dir={local!r}))
where = b.get_state(ValueStateDescriptor("where"))
b.set_current_key("u1")
where.update(user_types.Point(3, 4))
b.set_current_key("u2")
where.set_current_namespace(TimeWindow(0, 1000))  # a namespace of a type declared by an entry point (code 10)
where.update(user_types.Point(5, 6))
print(CheckpointStore({root!r}).commit("op", 0, b).manifest.path)
"""

READ = """
import json, sys
from statekit import SerializationError, StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore, read_state
{declare}
try:
    b = CheckpointStore({root!r}).restore("op", StateConfig(backend={backend!r}, local_dir={local!r})).backend
    b.set_current_key("u1")
    got = repr(b.get_state(ValueStateDescriptor("where")).value())
    got += repr(sorted(repr(r["namespace"]) for r in read_state({root!r}, "op", "where")))  # every namespace decoded
except SerializationError as e:
    got = f"SerializationError: {{e}}"
print(json.dumps({{"got": got, "imported": [m for m in ("evilmod", "user_types") if m in sys.modules]}}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("code,declare,expected", [
    ("42", "", ["unknown msgpack extension code 42, recorded as evilmod:Thing", "register_type",
                "statekit.types"]),
    ("42", "import user_types", ["code 42", "evilmod:Thing", "user_types:Point"]),
    ("10", "import user_types", ["code 10", "evilmod:Thing", "statekit.operators.windows:TimeWindow"]),
], ids=["unknown-code", "registered-code", "declared-code"])
def test_a_manifest_naming_another_module_never_imports_it(tmp_path, backend, code, declare, expected):
    """Code 42 remapped while this process knows no 42: unknown, named with the recorded name; remapped while the
    job registered 42 (or while an entry point declares 10): an error naming both classes, not a silent decode."""
    support, evil = tmp_path / "support", tmp_path / "evil"
    support.mkdir()
    evil.mkdir()
    (support / "user_types.py").write_text(USER_TYPES)
    marker = tmp_path / "evilmod-was-imported"
    (evil / "evilmod.py").write_text(EVILMOD.format(marker=str(marker)))
    root = tmp_path / "ckpt"
    path = run_python(WRITE.format(support=str(support), backend=backend, local=str(tmp_path / "w"), root=str(root)),
                      tmp_path).strip()
    manifest = root / path
    assert json.loads(manifest.read_text())["types"][code] != "evilmod:Thing"
    edit_manifest(manifest, lambda body: body["types"].update({code: "evilmod:Thing"}))
    out = json.loads(run_python(READ.format(declare=declare, root=str(root), backend=backend,
                                            local=str(tmp_path / "r")), tmp_path, evil, support))
    assert out["got"].startswith("SerializationError: "), out
    for part in expected:
        assert part in out["got"], out
    assert not marker.exists()
    assert "evilmod" not in out["imported"]
    assert ("user_types" in out["imported"]) == bool(declare)  # nothing imported on the checkpoint's word


@pytest.mark.parametrize("types", [{"x": "evilmod:Thing"}, {"42": ["evilmod", "Thing"]}, ["42", "evilmod:Thing"]])
def test_recorded_types_of_another_shape_are_a_corrupt_manifest(tmp_path, types):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(StateConfig(backend="heap"))
    manifest = tmp_path / "ckpt" / store.commit("op", 0, b).manifest.path
    edit_manifest(manifest, lambda body: body.update(types=types))
    with pytest.raises(CorruptCheckpointError, match=f"manifest {manifest}: field types must map extension codes to "
                                                     f"'module:qualname' names"):
        store.restore("op", StateConfig(backend="heap"))


def test_a_manifest_without_a_field_is_corrupt(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    manifest = tmp_path / "ckpt" / store.commit("op", 0, create_backend(StateConfig(backend="heap"))).manifest.path
    edit_manifest(manifest, lambda body: body.pop("files"))
    with pytest.raises(CorruptCheckpointError, match=f"manifest {manifest} lacks a field or has one of the wrong shape"):
        store.restore("op", StateConfig(backend="heap"))
