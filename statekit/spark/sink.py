"""The output directory: per-epoch part files replaced as a whole, side outputs, metrics lines.

Everything goes through Hadoop's FileSystem of the running Spark session, so ``--output`` may be
any path Spark can write (local, ``hdfs://``, ``s3a://``). An epoch is written to a temporary
directory first and then renamed over ``<output>/<sub>epoch=<e>``: a replayed epoch replaces what
an earlier attempt wrote, so each epoch's rows are there exactly once.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

METRICS_FILE = "_metrics.jsonl"


class OutputDir:
    """Epoch-idempotent writes below ``path``."""

    def __init__(self, spark: Any, path: str) -> None:
        self.spark = spark
        jvm = spark.sparkContext._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._jvm = jvm
        self.root = self._Path(path)
        self.fs = self.root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.path = self.fs.makeQualified(self.root).toString()

    def _p(self, rel: str) -> Any:
        return self._Path(self.root, rel)

    def epoch_dir(self, epoch: int, sub: str = "") -> str:
        return self._p(f"{sub}epoch={epoch}").toString()

    def write_epoch(self, df: Any, epoch: int, sub: str = "") -> str:
        """Write ``df`` as parquet part files of ``epoch`` (under ``sub``, e.g. ``_late/``), replacing any earlier attempt."""
        tmp = self._p(f"_tmp/{sub.strip('/').replace('/', '_')}epoch={epoch}-{uuid.uuid4().hex}")
        df.write.mode("error").parquet(tmp.toString())
        target = self._p(f"{sub}epoch={epoch}")
        self.fs.mkdirs(target.getParent())
        if self.fs.exists(target):
            self.fs.delete(target, True)
        if not self.fs.rename(tmp, target):
            raise OSError(f"cannot move {tmp.toString()} to {target.toString()}")
        return target.toString()

    def remove_epoch(self, epoch: int, sub: str = "") -> None:
        """Drop what an earlier attempt of ``epoch`` left under ``sub`` (this attempt has nothing there)."""
        target = self._p(f"{sub}epoch={epoch}")
        if self.fs.exists(target):
            self.fs.delete(target, True)

    def read_text(self, rel: str) -> str | None:
        p = self._p(rel)
        if not self.fs.exists(p):
            return None
        stream = self.fs.open(p)
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def replace_text(self, rel: str, text: str) -> None:
        """Write ``text`` to ``rel`` through a temporary file and a rename."""
        tmp = self._p(f"_tmp/{uuid.uuid4().hex}-{rel.replace('/', '_')}")
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()
        target = self._p(rel)
        if self.fs.exists(target):
            self.fs.delete(target, False)
        if not self.fs.rename(tmp, target):
            raise OSError(f"cannot move {tmp.toString()} to {target.toString()}")

    def record_metrics(self, metrics: dict[str, Any]) -> None:
        """Add one epoch's metrics line to ``_metrics.jsonl``, replacing a line of the same epoch."""
        text = self.read_text(METRICS_FILE) or ""
        lines = [ln for ln in text.splitlines() if ln.strip() and json.loads(ln).get("epoch") != metrics["epoch"]]
        lines.append(json.dumps(metrics, sort_keys=True))
        self.replace_text(METRICS_FILE, "\n".join(lines) + "\n")

    def metrics(self) -> list[dict[str, Any]]:
        """Every epoch's metrics recorded so far, in epoch order."""
        text = self.read_text(METRICS_FILE) or ""
        return sorted((json.loads(ln) for ln in text.splitlines() if ln.strip()), key=lambda m: m["epoch"])
