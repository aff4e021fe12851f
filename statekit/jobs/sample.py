"""Sample input files: a generated clickstream split in arrival order into numbered files."""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..clickstream import Click

COLUMNS = ("user_id", "ts_ms", "value")


def write_clickstream(clicks: list[Click], directory: str | Path, files: int = 10, fmt: str = "csv") -> list[Path]:
    """Write ``clicks`` as ``part-00000.<fmt>`` ... (csv with a header, or parquet), equal slices in
    arrival order. Modification times increase with the name, so Spark's file source (which takes
    new files oldest first) reads them in name order."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"fmt must be csv or parquet, got {fmt!r}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    size = -(-len(clicks) // files) if clicks else 1
    base = time.time() - files - 1
    paths = []
    for i in range(files):
        chunk = clicks[i * size:(i + 1) * size]
        path = d / f"part-{i:05d}.{fmt}"
        if fmt == "csv":
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(COLUMNS)
                w.writerows(chunk)
        else:
            table = pa.table({"user_id": pa.array([c.user_id for c in chunk], pa.string()),
                              "ts_ms": pa.array([c.ts_ms for c in chunk], pa.int64()),
                              "value": pa.array([c.value for c in chunk], pa.int64())})
            pq.write_table(table, path)
        os.utime(path, (base + i, base + i))
        paths.append(path)
    return paths
