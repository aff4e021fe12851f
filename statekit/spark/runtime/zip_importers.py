"""Zip archives on a worker's path, read once per daemon instead of once per task.

Spark puts ``pyspark.zip`` and py4j's zip on its Python workers' path, and pyspark's worker calls
``importlib.invalidate_caches()`` at the start of every task. On Python 3.11 that makes every
``zipimporter`` read its archive's directory again (one for each package loaded from pyspark.zip):
time at every task, and new Python objects in each worker where the daemon's copy was shared
(docs/bench/runtime.md). Installed files do not change while an executor runs, so
the daemon swaps its importers for ``StableZipImporter``, which reads an archive again only when its
file did change (a user's ``--py-files`` zip replaced in place is still seen).
"""

from __future__ import annotations

import os
import sys
import zipimport


def _stamp(path: str) -> tuple[int, int] | None:
    """What tells a rewritten archive from the one read: its modification time and size (None: gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class StableZipImporter(zipimport.zipimporter):
    """A ``zipimporter`` whose ``invalidate_caches`` reads the archive's directory again only when the
    archive's file changed since this importer was made (at the daemon's start, just after its imports
    read the directory)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._read_stamp = _stamp(self.archive)

    def invalidate_caches(self) -> None:
        stamp = _stamp(self.archive)
        if stamp != self._read_stamp:
            super().invalidate_caches()
            self._read_stamp = stamp


def stabilize_zip_importers() -> int:
    """Swap every plain ``zipimporter`` in ``sys.path_importer_cache`` for a ``StableZipImporter`` of the
    same path (its directory taken from zipimport's cache, not read again); returns how many."""
    swapped = 0
    for path, finder in list(sys.path_importer_cache.items()):
        if type(finder) is not zipimport.zipimporter:
            continue
        try:
            sys.path_importer_cache[path] = StableZipImporter(path)
        except zipimport.ZipImportError:  # its archive is gone: the plain importer stays, as Python left it
            continue
        swapped += 1
    return swapped
