"""The snapshot header (``statekit.snapshot_header``): every manifest records the formats its snapshot is written
in, inside what its checksum and signature cover, and a restore checks them before reading a file. Checkpoints
written before the header (``tests/fixtures/checkpoints``, by ``tests/fixtures/make_checkpoints.py`` on that code)
restore in a fresh interpreter to the state and the resumed output their writer recorded; a header of an unknown
version, scope or mark, or of a value this code does not read, is refused naming it, the value and the file."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

from statekit import StateConfig
from statekit.checkpoint import CheckpointStore, CorruptCheckpointError
from statekit.operators.output import Output
from statekit.snapshot_header import SnapshotFormatError, check_job_formats, job_formats
from tests.checkpoint_support import edit_manifest, run_python
from tests.fixtures.make_checkpoints import (EPOCHS, FIXTURES, MAX_PARALLELISM, OPERATOR, POLICY, ROOT, WATERMARKS,
                                             feed, make_operator, readable_state)

REPO = Path(__file__).resolve().parents[2]
CORE = {"manifest": 1, "payload": "SKZ1", "snapshot": 1}

READ_BACK = """
import json
from pathlib import Path
from tests.fixtures.make_checkpoints import read_back
print(json.dumps(read_back(Path({root!r}), {name!r}, Path({local!r}))))
"""


def copied(name: str, tmp_path: Path) -> Path:
    """A copy of fixture ``name`` (a restore or commit must not touch the committed fixture)."""
    root = tmp_path / name
    shutil.copytree(ROOT / name, root)
    return root


def manifests(root: Path) -> list[Path]:
    return sorted(root.glob(f"{OPERATOR}/kg=*/epoch=*/manifest.json"))


def read_back_fresh(root: Path, name: str, tmp_path: Path) -> dict[str, Any]:
    """``make_checkpoints.read_back`` of ``root`` in a fresh interpreter running today's code."""
    code = textwrap.dedent(READ_BACK).format(root=str(root), name=name, local=str(tmp_path / "fresh"))
    return json.loads(run_python(code, tmp_path, REPO))


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_checkpoint_from_before_the_header_restores_in_a_fresh_interpreter(tmp_path, name):
    """Version 0 (no header): its state reads back as its writer read it, and the operator resumed on it emits
    what the writer's code emitted."""
    root = copied(name, tmp_path)
    assert all("header" not in json.loads(m.read_text()) for m in manifests(root))  # written before the header
    expected = json.loads((root / "expected.json").read_text())
    assert expected["resumed"] and any(s["entries"] for s in expected["state"]["states"].values())
    assert read_back_fresh(root, name, tmp_path) == expected


@pytest.mark.parametrize("name", ["heap-table", "rocksdb-cells", "heap-process"])
def test_an_old_checkpoint_continues_with_headers(tmp_path, name):
    """Resumed from a checkpoint without header, the next epoch is committed with one, self-contained (it does
    not build on files of another format), and restores in a fresh interpreter."""
    root = copied(name, tmp_path)
    backend, kind, _ = FIXTURES[name]
    store = CheckpointStore(str(root), **POLICY)
    config = StateConfig(backend=backend, max_parallelism=MAX_PARALLELISM, local_dir=str(tmp_path / "w"))
    op = make_operator(kind)
    restored = store.restore(OPERATOR, config)
    out = Output()
    op.open(restored.backend, out)
    op.restore_metadata(restored.metadata[0]["operator"])
    feed(op, [("u7", 430, 18)], 400, out)
    committed = store.commit(OPERATOR, len(EPOCHS), restored.backend, {"operator": op.snapshot_metadata()}).manifest
    op.close()
    restored.backend.close()
    assert committed.header.version == 1 and committed.header.formats["statekit"] == CORE
    assert not committed.snapshot["incremental"]
    if backend == "heap":  # no delta on a chain of another format: a new full snapshot
        assert [f.role for f in committed.files] == ["full"] and committed.files[0].epoch == len(EPOCHS)
    got = read_back_fresh(root, name, tmp_path)
    assert got["epoch"] == len(EPOCHS) and any("u7" in e for s in got["state"]["states"].values() for e in s["entries"])


def commit_table(tmp_path: Path, backend: str = "heap", key: bytes | None = None) -> tuple[Path, Path]:
    """Two epochs of the sessionize operator's table layout; the checkpoint root and the newest manifest."""
    root = tmp_path / "ckpt"
    store = CheckpointStore(str(root), key=key, **POLICY)
    config = StateConfig(backend=backend, max_parallelism=MAX_PARALLELISM, local_dir=str(tmp_path / "w"))
    restored = store.restore(OPERATOR, config)
    op, out = make_operator("table"), Output()
    op.open(restored.backend, out)
    for epoch in range(2):
        feed(op, EPOCHS[epoch], WATERMARKS[epoch], out)
        manifest = store.commit(OPERATOR, epoch, restored.backend, {"operator": op.snapshot_metadata()}).manifest
    op.close()
    restored.backend.close()
    return root, root / manifest.path


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_manifest_records_every_format_mark(tmp_path, backend):
    _, path = commit_table(tmp_path, backend)
    header = json.loads(path.read_text())["header"]
    layout = {"heap": "columns", "rocksdb": 1}[backend]
    assert header == {"version": 1, "formats": {"statekit": CORE, f"backend:{backend}": {"layout": layout},
                                                "state:session-table": {"page": 1, "moved": 1}}}
    assert "format" not in json.loads(path.read_text())  # the manifest's format is a mark of the header


def test_the_job_description_records_the_same_formats():
    """``job_formats`` (what ``run_keyed`` records as ``state_formats``) holds the core marks and every declared
    state's; ``check_job_formats`` reads what jobs recorded before the header and refuses what it cannot read."""
    assert job_formats() == {"version": 1, "formats": {"statekit": CORE, "state:session-table": {"page": 1, "moved": 1}}}
    for readable in (job_formats(), {"snapshot": 1}, None):
        check_job_formats(readable, "job.json")
    future_page = {"version": 1, "formats": {"statekit": CORE, "state:session-table": {"page": 2}}}
    with pytest.raises(SnapshotFormatError, match="job.json: format mark 'page' of state:session-table is 2"):
        check_job_formats(future_page, "job.json")
    with pytest.raises(SnapshotFormatError, match="job.json: snapshot header version 2"):
        check_job_formats({**job_formats(), "version": 2}, "job.json")
    with pytest.raises(SnapshotFormatError, match="records formats of backend:heap .* does not have"):
        check_job_formats({"version": 1, "formats": {"statekit": CORE, "backend:heap": {"layout": "columns"}}}, "job")


def restore_error(root: Path, tmp_path: Path, key: bytes | None = None) -> str:
    config = StateConfig(backend="heap", max_parallelism=MAX_PARALLELISM, local_dir=str(tmp_path / "r"))
    with pytest.raises((SnapshotFormatError, CorruptCheckpointError)) as e:
        CheckpointStore(str(root), key=key).restore(OPERATOR, config)
    return str(e.value)


def header_edit(change: Callable[[dict], None]) -> Callable[[dict], None]:
    return lambda body: change(body["header"])


HOSTILE = {
    "future version": (header_edit(lambda h: h.update(version=2)),
                       ["snapshot header version 2", "reads versions up to 1"]),
    "version as text": (header_edit(lambda h: h.update(version="1")), ["snapshot header version '1'"]),
    "unknown core mark": (header_edit(lambda h: h["formats"]["statekit"].update(compression="lz4")),
                          ["unknown format mark 'compression' of statekit (value 'lz4')"]),
    "future payload codec": (header_edit(lambda h: h["formats"]["statekit"].update(payload="SKZ2")),
                             ["format mark 'payload' of statekit is 'SKZ2'; this code reads 'SKZ1'"]),
    "other heap layout": (header_edit(lambda h: h["formats"]["backend:heap"].update(layout="rows")),
                          ["format mark 'layout' of backend:heap is 'rows'; this code reads 'columns'"]),
    "future page format": (header_edit(lambda h: h["formats"]["state:session-table"].update(page=2)),
                           ["format mark 'page' of state:session-table is 2; this code reads 1"]),
    "unknown scope": (header_edit(lambda h: h["formats"].update({"backend:rocksdb": {"layout": 1}})),
                      ["records formats of backend:rocksdb ({'layout': 1}), which a snapshot of this kind and "
                       "backend does not have"]),
    "undeclared state format": (header_edit(lambda h: h["formats"].update({"state:foo": {"x": 1}})),
                                ["records formats of state:foo ({'x': 1}), which no code loaded here declares",
                                 "make the operator that stores that state before restoring"]),
    "missing mark": (header_edit(lambda h: h["formats"]["statekit"].pop("snapshot")),
                     ["lacks format mark(s) snapshot of statekit"]),
    "missing backend layout": (header_edit(lambda h: h["formats"].pop("backend:heap")),
                               ["lacks format mark(s) layout of backend:heap"]),
    "not a header": (lambda body: body.update(header=[1, {}]), ["must hold exactly 'version' and 'formats'"]),
    "old manifest format": (lambda body: (body.pop("header"), body.update(format=2)),
                            ["no snapshot header, and manifest format 2; this statekit reads 1"]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_header_this_code_cannot_read_is_refused_naming_it(tmp_path, case):
    """An edited header (its checksum recomputed, as anyone with write access can) is refused before any file is
    read, naming the mark, the value found, the values read and the manifest."""
    root, path = commit_table(tmp_path)
    change, expected = HOSTILE[case]
    edit_manifest(path, change)
    for f in path.parent.glob("*.skz"):
        f.write_bytes(b"not read")  # a refusal comes before any file is read
    error = restore_error(root, tmp_path)
    assert str(path) in error or f"{OPERATOR}/kg=0-7/epoch=1/manifest.json" in error
    for text in expected:
        assert text in error


def test_a_manifest_of_another_format_is_refused_before_its_fields_are_read(tmp_path):
    """Reading a manifest at all (listing, retention, inspection) checks the core marks first: a manifest of a
    future format whose fields changed is refused as such, not reported as corrupt."""
    root, path = commit_table(tmp_path)
    edit_manifest(path, lambda body: (body["header"]["formats"]["statekit"].update(manifest=2),
                                      body.update(key_groups={"first": 0, "last": 7})))
    with pytest.raises(SnapshotFormatError, match="format mark 'manifest' of statekit is 2; this code reads 1") as e:
        CheckpointStore(str(root)).manifest(OPERATOR, range(MAX_PARALLELISM), 1)
    assert str(path) in str(e.value)


def test_an_edited_header_of_a_signed_checkpoint_fails_its_signature(tmp_path):
    key = b"a checkpoint key"
    root, path = commit_table(tmp_path, key=key)
    edit_manifest(path, header_edit(lambda h: h["formats"]["backend:heap"].update(layout="entries")))
    assert "fails its signature" in restore_error(root, tmp_path, key)


READ_WITHOUT_OPERATOR = """
import json, sys
from statekit import StateConfig
from statekit.checkpoint import CheckpointStore, read_state
from statekit.snapshot_header import SnapshotFormatError
rows = read_state({root!r}, "op", "session-table")
try:
    CheckpointStore({root!r}).restore("op", StateConfig(backend="heap", max_parallelism=8))
    error = None
except SnapshotFormatError as e:
    error = str(e)
print(json.dumps({{"pages": len(rows), "error": error, "operators": "statekit.operators" in sys.modules}}))
"""


def test_a_state_format_no_code_here_declares_is_refused_on_restore_and_carried_by_an_export(tmp_path):
    """A fresh interpreter that did not make the operator: ``read_state`` exports the session table's pages as they
    are; a restore, whose state an operator would read, is refused with the way out."""
    root, _ = commit_table(tmp_path)
    got = json.loads(run_python(textwrap.dedent(READ_WITHOUT_OPERATOR).format(root=str(root)), tmp_path, REPO))
    assert got["operators"] is False and got["pages"] > 0
    assert "records formats of state:session-table ({'moved': 1, 'page': 1}), which no code loaded here declares" in got["error"]
    assert "make the operator that stores that state before restoring" in got["error"]


def test_the_entry_layout_of_heap_full_snapshots_restores_through_version_0(tmp_path, monkeypatch):
    """Heap full snapshots of the layout before the columns one (an entry list per state, written before the
    header: no ``layout`` field, manifest ``format`` 1) restore through header version 0."""
    from statekit.backends.heap import HeapSnapshots

    root = tmp_path / "ckpt"
    store = CheckpointStore(str(root), **POLICY)
    config = StateConfig(backend="heap", max_parallelism=MAX_PARALLELISM)
    restored = store.restore(OPERATOR, config)
    op, out = make_operator("process"), Output()
    op.open(restored.backend, out)
    feed(op, EPOCHS[0], WATERMARKS[0], out)
    with monkeypatch.context() as m:
        m.setattr(HeapSnapshots, "_full_columns", lambda self: self.snapshot_logical())
        path = root / store.commit(OPERATOR, 0, restored.backend, {"operator": op.snapshot_metadata()}).manifest.path
    edit_manifest(path, lambda body: (body.pop("header"), body.update(format=1)))  # as the code before the header
    expected = readable_state(restored.backend.snapshot_logical())
    op.close()
    restored.backend.close()
    assert expected["states"]["count"]["entries"] and expected["timers"]["user-timers"]["event"]
    code = f"""
import json
from statekit import StateConfig
from statekit.checkpoint import CheckpointStore
from tests.fixtures.make_checkpoints import readable_state
b = CheckpointStore({str(root)!r}).restore("op", StateConfig(backend="heap", max_parallelism=8)).backend
print(json.dumps(readable_state(b.snapshot_logical())))
"""
    assert json.loads(run_python(code, tmp_path, REPO)) == expected
