"""Helpers of the Spark tests: sample input, the output as sorted tuples, Spark's own session windows."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from statekit.clickstream import Click, generate_clickstream
from statekit.jobs import write_clickstream

COLUMNS = ["user_id", "window_start", "window_end", "sum_value", "count"]
GAP, DELAY = "30s", "10s"
FRESH_WORKERS = ["--conf", "spark.python.worker.reuse=false", "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.python.daemon.module=pyspark.daemon"]
"""Confs of a run whose Python workers start empty (statekit's daemon preloads what they import)."""


def statekit_process(*argv: str, env: dict[str, str] | None = None, timeout: float = 300,
                     cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    """``statekit ARGV`` in a new interpreter (a new Spark application), in ``env`` (default: this one's) with
    PYTHONHASHSEED fixed; its output captured."""
    return subprocess.run([sys.executable, "-m", "statekit.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**(os.environ if env is None else env), "PYTHONHASHSEED": "0"})


def succeeded(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``r``, asserted to have exited 0 (its output's tails in the message otherwise)."""
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    return r


def metrics(out: Path) -> list[dict]:
    """The lines of a run's ``_metrics.jsonl`` in ``out`` (none before its first epoch ends)."""
    try:
        return [json.loads(line) for line in (out / "_metrics.jsonl").read_text().splitlines()]
    except FileNotFoundError:
        return []


def clickstream(events: int = 3000, keys: int = 60, seed: int = 7) -> list[Click]:
    return generate_clickstream(events, keys, seed=seed, max_disorder_ms=5000)


def write_input(clicks: list[Click], directory: Path, files: int, fmt: str = "csv") -> Path:
    write_clickstream(clicks, directory, files=files, fmt=fmt)
    return directory


def read_one_csv(spark: Any, root: Path, text: str, blocked: str | None = None, time: str = "ts_ms") -> Any:
    """``read_files`` of a directory holding one csv file of ``text`` (batch, key ``user_id``), with ``blocked`` (a
    ``module.Class.method`` path, as pyspark's reader of text) made to fail: what the read must do without it."""
    from contextlib import nullcontext
    from unittest import mock

    from statekit.spark.files import read_files

    d = root / "in"
    d.mkdir()
    (d / "part-0.csv").write_text(text)
    with mock.patch(blocked, side_effect=AssertionError(f"{blocked} was called")) if blocked else nullcontext():
        return read_files(spark, str(d), fmt=None, time=time, required=[("user_id", "key")], stream=False)


def output_rows(spark: Any, output: Path | str) -> list[tuple]:
    """Every session row written under ``output`` (all epochs), sorted."""
    return sorted(tuple(r) for r in spark.read.parquet(str(output)).select(*COLUMNS).collect())


def spark_sessions(spark: Any, input_dir: Path, gap: str = "30 seconds") -> list[tuple]:
    """Spark's own batch ``session_window`` over the same files, bounds in ms: the independent reference."""
    from pyspark.sql import functions as F

    df = spark.read.option("header", "true").option("inferSchema", "true").csv(str(input_dir))
    w = F.session_window(F.timestamp_millis("ts_ms"), gap).alias("w")
    res = (df.groupBy("user_id", w).agg(F.sum("value").alias("sum_value"), F.count(F.lit(1)).alias("count"))
           .select("user_id", F.unix_millis("w.start"), F.unix_millis("w.end"), "sum_value", "count"))
    return sorted(tuple(r) for r in res.collect())


@dataclass
class StagedInput:
    """Clickstream files staged to be added to ``inp`` one at a time (a new streaming batch each), and
    Spark's reference sessions over all of them."""

    files: list[Path]
    reference: list[tuple]
    inp: Path
    out: Path

    def add(self, i: int) -> None:
        """Add file ``i``; the file source takes the oldest first, so its time follows the earlier ones'."""
        copy_in_name_order([self.files[i]], self.inp, first=i)


def copy_in_name_order(files: list[Path], directory: Path, first: int = 0) -> None:
    """Copy ``files`` into ``directory`` with modification times a second apart in name order (the ``first``-th
    second from now on): Spark's file source takes the oldest first, and statekit refuses a stream's files whose
    times tie (as files written in one loop do)."""
    now = time.time()
    for i, f in enumerate(sorted(files), start=first):
        shutil.copy(f, directory / f.name)
        os.utime(directory / f.name, (now + i, now + i))


def staged_input(spark: Any, root: Path, events: int, keys: int, seed: int, files: int) -> StagedInput:
    staged = write_input(clickstream(events, keys, seed=seed), root / "staged", files=files)
    inp = root / "in"
    inp.mkdir()
    return StagedInput(sorted(staged.iterdir()), spark_sessions(spark, staged), inp, root / "out")


@contextmanager
def code_module(code: Path, name: str) -> Iterator[ModuleType]:
    """Module ``name`` of a test's own code directory, imported here and pickled by value inside the block
    (the shared session's workers cannot import it); out of ``sys.path`` and ``sys.modules`` after it."""
    from pyspark import cloudpickle

    sys.path.insert(0, str(code))
    try:
        module = importlib.import_module(name)
        cloudpickle.register_pickle_by_value(module)
        try:
            yield module
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    finally:
        sys.path.remove(str(code))
        sys.modules.pop(name, None)
