"""The output directory: per-epoch part files published as a whole, side outputs, metrics lines.

Tasks stage their parquet files under ``_staging/epoch=<e>/`` with names unique to the attempt;
after the epoch's job succeeded, the driver publishes the files of the successful attempts to
``<output>/<sub>epoch=<e>/part-<p>.parquet``, replacing whatever an earlier attempt of the epoch
published, and drops the staging directory. So each epoch's rows are there exactly once. Paths
are local or pyarrow filesystem URIs (as for checkpoints); Spark's readers skip ``_`` paths.
"""

from __future__ import annotations

import json
from typing import Any

from ..checkpoint import Storage

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
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        rel = f"{STAGING}/epoch={epoch}/{name}.parquet"
        self.storage.write(rel, sink.getvalue().to_pybytes())
        return rel

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
        """Add one epoch's metrics line to ``_metrics.jsonl``, replacing a line of the same epoch."""
        lines = [json.dumps(m, sort_keys=True) for m in self.metrics() if m["epoch"] != metrics["epoch"]]
        lines.append(json.dumps(metrics, sort_keys=True))
        self.storage.commit(METRICS_FILE, ("\n".join(lines) + "\n").encode(), f"{STAGING}/{METRICS_FILE}.tmp")

    def metrics(self) -> list[dict[str, Any]]:
        """Every epoch's metrics recorded so far, in epoch order."""
        try:
            text = self.storage.read(METRICS_FILE).decode()
        except FileNotFoundError:
            return []
        return sorted((json.loads(ln) for ln in text.splitlines() if ln.strip()), key=lambda m: m["epoch"])
