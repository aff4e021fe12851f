"""The output directory: per-epoch part files published as a whole, side outputs, metrics lines.

Tasks stage their parquet files under ``_staging/epoch=<e>/`` with names unique to the attempt;
after the epoch's job succeeded, the driver publishes the files of the successful attempts to
``<output>/<sub>epoch=<e>/part-<p>.parquet``, replacing whatever an earlier attempt of the epoch
published, and drops the epoch's staging directory (``_staging/`` itself once empty). So each epoch's rows are
there exactly once. Paths
are local or pyarrow filesystem URIs (as for checkpoints); Spark's readers skip ``_`` paths.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ..checkpoint import Storage
from ..checkpoint.manifest import parse_epoch
from .errors import InputError
from .plan import INVALID_TAG, LATE_TAG

METRICS_FILE = "_metrics.jsonl"
STAGING = "_staging"


class OutputDir:
    """Epoch-idempotent writes below ``path``; picklable (tasks stage their files through it)."""

    def __init__(self, path: str) -> None:
        self.storage = Storage(path)
        self.path = path if "://" in path else self.storage.root

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])

    def stage(self, epoch: int, name: str, table: Any) -> str:
        """Write ``table`` as parquet to a staging file of ``epoch`` (executor side); its relative path."""
        with self.staging_file(epoch, name, table.schema) as staged:
            staged.write(table)
            return staged.put()

    def staging_file(self, epoch: int, name: str, schema: Any) -> "StagingFile":
        """A staging file of ``epoch`` written a table at a time (``stage``'s, in pieces)."""
        return StagingFile(self.storage, f"{self.staging_dir(epoch, name)}.parquet", schema)

    @staticmethod
    def staging_dir(epoch: int, name: str) -> str:
        """The relative path ``name`` in ``epoch``'s staging area (gone with ``drop_staging``)."""
        return f"{STAGING}/epoch={epoch}/{name}"

    def publish(self, epoch: int, files: dict[int, str], sub: str = "") -> None:
        """Make the staged ``files`` (partition -> path) the whole of ``<sub>epoch=<epoch>``."""
        target = f"{sub}epoch={epoch}"
        self.storage.delete_dir(target)
        for p, rel in sorted(files.items()):
            self.storage.move(rel, f"{target}/part-{p:05d}.parquet")

    def read(self, epoch: int, schema: Any, sub: str = "") -> Any:
        """The published rows of ``<sub>epoch=<epoch>`` as one Arrow table of ``schema``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts = [pq.read_table(pa.BufferReader(self.storage.read(f.path)), schema=schema)
                 for f in self.storage.list_files(f"{sub}epoch={epoch}") if f.path.endswith(".parquet")]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def drop_staging(self, epoch: int) -> None:
        """Forget what attempts of ``epoch`` staged (failed ones, or moved already)."""
        self.storage.delete_dir(f"{STAGING}/epoch={epoch}")

    def record_metrics(self, metrics: dict[str, Any]) -> None:
        """Add one epoch's metrics line to ``_metrics.jsonl``, replacing a line of the same epoch; the last step of
        an epoch's files, so ``_staging/`` goes here once nothing is staged (it stays only after a run that stopped
        mid-epoch, until the epoch's replay)."""
        lines = [json.dumps(m, sort_keys=True) for m in self.metrics() if m["epoch"] != metrics["epoch"]]
        lines.append(json.dumps(metrics, sort_keys=True))
        self.storage.commit(METRICS_FILE, ("\n".join(lines) + "\n").encode(), f"{STAGING}/{METRICS_FILE}.tmp")
        if not self.storage.list_files(STAGING):
            self.storage.delete_dir(STAGING)

    def metrics(self) -> list[dict[str, Any]]:
        """Every epoch's metrics recorded so far, in epoch order."""
        try:
            text = self.storage.read(METRICS_FILE).decode()
        except FileNotFoundError:
            return []
        return sorted((json.loads(ln) for ln in text.splitlines() if ln.strip()), key=lambda m: m["epoch"])

    def reasons(self, epoch: int, sub: str) -> dict[str, int]:
        """How many rows of ``<sub>epoch=<epoch>`` (a side output) have each kind of reason (``reason_kind``),
        most frequent first; only the reason column is read."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        counts: dict[str, int] = {}
        for f in self.storage.list_files(f"{sub}epoch={epoch}"):
            if f.path.endswith(".parquet"):
                column = pq.read_table(pa.BufferReader(self.storage.read(f.path)), columns=["reason"]).column(0)
                found = column.value_counts()
                for reason, n in zip(found.field("values").to_pylist(), found.field("counts").to_pylist()):
                    kind = reason_kind(reason)
                    counts[kind] = counts.get(kind, 0) + n
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


_VALUE_START = "-0123456789'\"([<{"


class StagingFile:
    """A staging parquet file written a table at a time into a local temporary file, then put in place
    whole (``put``): the writer holds one table in memory, not the file; leaving the ``with`` block
    removes the local file (and a file never put is no staged output)."""

    def __init__(self, storage: Storage, rel: str, schema: Any) -> None:
        import pyarrow.parquet as pq

        fd, self.local = tempfile.mkstemp(prefix="statekit-staging-", suffix=".parquet")
        os.close(fd)
        self.storage, self.rel = storage, rel
        self.writer = pq.ParquetWriter(self.local, schema)

    def __enter__(self) -> "StagingFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.writer.close()
        os.unlink(self.local)

    def write(self, table: Any) -> None:
        """Append ``table``'s rows (of the file's schema)."""
        if table.num_rows:
            self.writer.write_table(table)

    def put(self) -> str:
        """The file, complete, copied to its staging path; that relative path."""
        self.writer.close()
        self.storage.upload(self.local, self.rel)
        return self.rel


def reason_kind(reason: str | None) -> str:
    """A side-output reason without the values it names (``time ahead of the clock: 17 > 12`` -> ``time ahead
    of the clock``), so that reasons of one kind are counted together."""
    if reason is None:
        return "no reason"
    at = reason.find(": ")
    while at >= 0:
        if reason[at + 2:at + 3] in _VALUE_START:
            return reason[:at]
        at = reason.find(": ", at + 2)
    return reason


DEFAULT_CHECKPOINT = "_checkpoint"
"""The checkpoint's place below the output when none is given (``run_keyed``)."""
RESULTS = "results"
OUTPUTS = {RESULTS: "", LATE_TAG: "_late/", INVALID_TAG: "_invalid/"}
"""What an epoch publishes, by tag (results and the operators' side outputs), and the prefix of its epoch
directories below the output."""
SIDE_OUTPUTS = tuple(sub.rstrip("/") for sub in OUTPUTS.values() if sub)


def check_output_is_own(path: str, checkpoint: str | None = None) -> None:
    """Refuse an output directory holding an entry statekit does not write there, naming it: statekit writes
    only ``epoch=<e>/``, ``_late/``, ``_invalid/``, ``_staging/``, ``_metrics.jsonl``, ``_checkpoint/`` and
    ``checkpoint`` when that is directly below; hidden ``.`` entries are left alone. Results beside other
    files would not read as one table, and statekit never touches what it did not write. No directory yet
    is fine."""
    import pyarrow.fs as pafs

    storage = Storage(path)
    shown = path.rstrip("/")
    kind = storage.fs.get_file_info(storage.root).type
    if kind == pafs.FileType.File:
        raise InputError(f"output {shown} is a file, not a directory: pass a directory for statekit's output")
    if kind != pafs.FileType.Directory:
        return
    own = {*SIDE_OUTPUTS, STAGING, METRICS_FILE, DEFAULT_CHECKPOINT}
    if checkpoint is not None:
        parent, _, name = Storage(checkpoint).root.rpartition("/")
        own.update([name] if parent == storage.root else [])
    names = sorted(fi.base_name for fi in storage.fs.get_file_info(pafs.FileSelector(storage.root)))
    foreign = [n for n in names if not (n in own or n.startswith(".") or parse_epoch(n) is not None)]
    if foreign:
        raise InputError(f"output {shown} holds {foreign[0]!r}, which statekit did not write: an output directory "
                         f"is statekit's alone (epoch=N/, _late/, _invalid/, _metrics.jsonl, _checkpoint/); pass a "
                         f"new or empty directory, or move {foreign[0]!r} elsewhere")
