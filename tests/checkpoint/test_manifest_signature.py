"""Signed manifests: with a checkpoint key every manifest carries an HMAC-SHA256 of its body, so an edit whose plain
checksum was recomputed, another key, or a manifest without a signature is refused; a signed manifest read without
the key says where the key comes from; without a key, unsigned checkpoints read and restore as before."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from statekit import StateConfig, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointError, CheckpointStore, CorruptCheckpointError, Manifest
from tests.checkpoint_support import edit_manifest, python_process, run_python

KEY = b"a checkpoint key"


def commit_two_epochs(backend_name: str, tmp_path: Path, key: bytes | None) -> tuple[str, Path]:
    """Two epochs of one small partition; the checkpoint root and the newest manifest's path."""
    root = str(tmp_path / "ckpt")
    store = CheckpointStore(root, key=key)
    b = create_backend(StateConfig(backend=backend_name, local_dir=str(tmp_path / "w")))
    v = b.get_state(ValueStateDescriptor("v"))
    for epoch in range(2):
        for k in range(20):
            b.set_current_key(f"k{k}")
            v.update(k * 10 + epoch)
        manifest = store.commit("op", epoch, b, {"watermark": epoch}).manifest
    b.close()
    return root, Path(root) / manifest.path


def restored_values(root: str, backend_name: str, tmp_path: Path, key: bytes | None) -> dict[str, int]:
    config = StateConfig(backend=backend_name, local_dir=str(tmp_path / "r"))
    b = CheckpointStore(root, key=key).restore("op", config).backend
    v = b.get_state(ValueStateDescriptor("v"))
    values = {}
    for k in range(20):
        b.set_current_key(f"k{k}")
        values[f"k{k}"] = v.value()
    b.close()
    return values


EXPECTED = {f"k{k}": k * 10 + 1 for k in range(20)}


def test_a_signed_manifest_carries_the_hmac_of_its_body_and_round_trips(backend_name, tmp_path):
    root, path = commit_two_epochs(backend_name, tmp_path, KEY)
    body = json.loads(path.read_text())
    signature, checksum = body.pop("signature"), body.pop("checksum")
    canonical = json.dumps(body, sort_keys=True).encode()
    assert signature == hmac.new(KEY, canonical, hashlib.sha256).hexdigest()
    assert checksum == hashlib.sha256(canonical).hexdigest()  # the plain checksum stays, over the same body
    manifest = Manifest.from_bytes(path.read_bytes(), str(path), KEY)
    assert Manifest.from_bytes(manifest.to_bytes(KEY), str(path), KEY) == manifest
    assert restored_values(root, backend_name, tmp_path, KEY) == EXPECTED


def test_without_a_key_manifests_are_unsigned_and_restore_as_before(backend_name, tmp_path):
    root, path = commit_two_epochs(backend_name, tmp_path, None)
    body = json.loads(path.read_text())
    assert "signature" not in body and set(body) >= {"checksum", "types", "files"}
    assert restored_values(root, backend_name, tmp_path, None) == EXPECTED


def _edit_types(body: dict) -> None:
    body["types"]["42"] = "evilmod:Thing"


@pytest.mark.parametrize("written,read,edit,expected", [
    (KEY, KEY, _edit_types, "fails its signature (edited, or written with another key)"),
    (KEY, b"another key", None, "fails its signature (edited, or written with another key)"),
    (None, KEY, None, "fails its signature (edited, or written with another key): it carries no signature"),
], ids=["edited", "wrong-key", "unsigned"])
def test_a_manifest_that_fails_its_signature_is_refused(backend_name, tmp_path, written, read, edit, expected):
    root, path = commit_two_epochs(backend_name, tmp_path, written)
    if edit is not None:
        edit_manifest(path, edit)
        with pytest.raises(CheckpointError, match="is signed"):  # past its plain checksum: only the signature tells
            Manifest.from_bytes(path.read_bytes(), str(path))
    with pytest.raises(CorruptCheckpointError) as e:
        restored_values(root, backend_name, tmp_path, read)
    assert str(e.value) == f"manifest {path} {expected}" + ("" if written else
                                                            " (written without a key: read it without one, or start "
                                                            "a new checkpoint)")


def test_a_signed_manifest_read_without_the_key_says_where_the_key_comes_from(backend_name, tmp_path):
    root, path = commit_two_epochs(backend_name, tmp_path, KEY)
    with pytest.raises(CheckpointError) as e:
        restored_values(root, backend_name, tmp_path, None)
    assert type(e.value) is CheckpointError
    assert str(e.value).startswith(f"manifest {path} is signed: reading it needs the checkpoint's key")
    assert "spark.statekit.checkpoint_key" in str(e.value) and "STATEKIT_CHECKPOINT_KEY" in str(e.value)


@pytest.mark.parametrize("key", [b"", "text"])
def test_a_key_must_be_non_empty_bytes(tmp_path, key):
    with pytest.raises(ValueError, match="a checkpoint key must be non-empty bytes"):
        CheckpointStore(str(tmp_path / "ckpt"), key=key)


READ_SIGNED = """
import json, os, sys
from statekit import StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore, main_inspect
b = CheckpointStore({root!r}, key=os.environ["STATEKIT_CHECKPOINT_KEY"].encode()).restore(
    "op", StateConfig(backend={backend!r}, local_dir={local!r})).backend
b.set_current_key("k3")
print(json.dumps({{"k3": b.get_state(ValueStateDescriptor("v")).value()}}))
sys.stdout.flush()
sys.exit(main_inspect([{root!r}]))
"""


def test_a_signed_checkpoint_restores_and_inspects_in_a_fresh_interpreter_with_its_key(backend_name, tmp_path):
    root, path = commit_two_epochs(backend_name, tmp_path, KEY)
    out = run_python(READ_SIGNED.format(root=root, backend=backend_name, local=str(tmp_path / "r")), tmp_path,
                     env={"STATEKIT_CHECKPOINT_KEY": KEY.decode()})
    first, report = out.split("\n", 1)
    assert json.loads(first) == {"k3": 31}
    assert "operator op: 1 partition(s)" in report and "    epoch 1: " in report
    inspect = f"import sys; from statekit.checkpoint import main_inspect; sys.exit(main_inspect([{root!r}]))"
    no_key = python_process(inspect, tmp_path)
    assert no_key.returncode == 1 and not no_key.stdout
    assert no_key.stderr.startswith(f"statekit inspect: manifest {path.parent.parent}/epoch=0/manifest.json is signed: "
                                    f"reading it needs the checkpoint's key")
    assert "STATEKIT_CHECKPOINT_KEY" in no_key.stderr
