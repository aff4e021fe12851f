"""Zip importers the daemon swaps in: ``importlib.invalidate_caches()`` (called by pyspark's worker at
every task) no longer reads an unchanged archive's directory again, and still sees one rewritten in place."""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
import zipimport

from statekit.spark.runtime.zip_importers import StableZipImporter, stabilize_zip_importers


def _write(archive, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(archive, "w") as z:
        for name, source in modules.items():
            z.writestr(f"{name}.py", source)


def test_an_unchanged_archive_is_not_read_again_and_a_rewritten_one_is(tmp_path, monkeypatch):
    archive = str(tmp_path / "lib.zip")
    _write(archive, {"sk_zip_a": "VALUE = 1\n"})
    monkeypatch.syspath_prepend(archive)
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    import sk_zip_a  # noqa: F401  (its archive's importer enters the path importer cache)

    assert type(sys.path_importer_cache[archive]) is zipimport.zipimporter
    reads = []
    real = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: reads.append(path) or real(path))
    importlib.invalidate_caches()
    assert reads == [archive]  # a plain importer reads the directory at every invalidation

    assert stabilize_zip_importers() >= 1
    assert type(sys.path_importer_cache[archive]) is StableZipImporter
    reads.clear()
    importlib.invalidate_caches()
    assert reads == []  # unchanged: kept

    _write(archive, {"sk_zip_a": "VALUE = 1\n", "sk_zip_b": "VALUE = 2\n"})
    st = os.stat(archive)
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    importlib.invalidate_caches()
    assert reads == [archive]  # rewritten in place: read again, and its new module found
    assert importlib.import_module("sk_zip_b").VALUE == 2


def test_an_archive_gone_keeps_its_plain_importer(tmp_path, monkeypatch):
    archive = str(tmp_path / "gone.zip")
    _write(archive, {"sk_zip_gone": "VALUE = 3\n"})
    monkeypatch.setattr(sys, "path_importer_cache", {archive: zipimport.zipimporter(archive)})
    os.unlink(archive)
    zipimport._zip_directory_cache.pop(archive, None)
    assert stabilize_zip_importers() == 0
    assert type(sys.path_importer_cache[archive]) is zipimport.zipimporter
