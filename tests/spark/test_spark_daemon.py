"""statekit's Python daemon: workers forked from it find the task modules loaded before any task ran
(a fresh interpreter and application: the test session's workers have imported everything already),
and zip importers that do not read pyspark.zip again at every task;
Spark's own daemon, set by the user, still runs them; a failed preload leaves the daemon running."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

from statekit.spark.runtime import daemon, host
from statekit.spark.session import DAEMON_MODULE

SCRIPT = '''
import json, sys
from statekit.spark import spark_session

MODULES = ("statekit.spark.tasks", "statekit.spark.records", "statekit.operators.engines.session_table", "numpy.ma",
           "pyarrow.parquet")


def probe(batches):
    import os
    import pyarrow as pa
    import zipimport
    loaded = [m in sys.modules for m in MODULES]  # before this task imports anything of statekit
    zips = [type(f).__name__ for f in sys.path_importer_cache.values() if isinstance(f, zipimport.zipimporter)]
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\\0", b" ").decode()
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"loaded": [all(loaded)], "parent": [parent], "zips": [sorted(set(zips))]})


got = {}
for name, conf in (("statekit", {}), ("spark", {"spark.python.daemon.module": "pyspark.daemon"})):
    spark = spark_session("local[1]", conf)
    row = spark.range(0, 1, 1, 1).mapInArrow(probe, "loaded boolean, parent string, zips array<string>").collect()[0]
    got[name] = {"loaded": row.loaded, "parent": row.parent, "zips": row.zips}
    spark.stop()
print(json.dumps(got))
'''


@pytest.mark.slow
@pytest.mark.spark
def test_workers_fork_with_the_task_modules_loaded_unless_the_user_names_another_daemon():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "found in sys.modules" not in r.stderr  # run as __main__ without being imported first
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["statekit"]["loaded"] and DAEMON_MODULE in got["statekit"]["parent"]
    assert not got["spark"]["loaded"] and "pyspark.daemon" in got["spark"]["parent"]
    # pyspark.zip on the workers' path: statekit's daemon hands its workers importers that keep its directory
    assert got["statekit"]["zips"] == ["StableZipImporter"] and got["spark"]["zips"] == ["zipimporter"]


@pytest.fixture
def freezes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """``gc.freeze`` calls recorded, not made: unfreezing after ``daemon.main`` ran in this process would also
    unfreeze what every earlier test froze (``gc_paused``), and one full collection then freed it all at once,
    each py4j object among it a round trip to the JVM (tens of seconds in the suite)."""
    calls: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(True))
    return calls


def test_a_failed_preload_is_reported_and_the_daemon_runs_with_its_spawner(monkeypatch, capsys, freezes):
    ran = []

    def broken() -> None:
        raise ImportError("no module named 'users_lib'")

    monkeypatch.setattr(daemon, "preload_task_modules", broken)
    monkeypatch.setattr("statekit.spark.runtime.spawner.start_spawner", lambda directory, main: ran.append((directory, main)))
    monkeypatch.setattr("pyspark.daemon.manager", lambda: ran.append(True))
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "unset below")  # restored (unset) after the test
    monkeypatch.delenv("MIMALLOC_PURGE_DELAY")
    daemon.main()
    assert freezes == [True]  # the preloaded objects frozen before the workers fork
    assert ran == [(host.runtime_dir(), host.main), True]  # the spawner forked before Spark's daemon serves
    assert daemon.os.environ["MIMALLOC_PURGE_DELAY"] == "0"  # workers' Arrow pool returns freed pages at once
    assert "preloading task modules failed: ImportError: no module named 'users_lib'" in capsys.readouterr().err


def test_a_failed_spawner_is_reported_and_the_daemon_runs(monkeypatch, capsys, freezes):
    ran = []

    def broken(directory: str, main: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(daemon, "preload_task_modules", lambda: None)
    monkeypatch.setattr("statekit.spark.runtime.spawner.start_spawner", broken)
    monkeypatch.setattr("pyspark.daemon.manager", lambda: ran.append(True))
    daemon.main()
    assert freezes == [True]
    assert ran == [True]
    assert "no host spawner: OSError: No space left on device" in capsys.readouterr().err


def test_the_daemon_keeps_a_users_allocator_setting(monkeypatch, freezes):
    monkeypatch.setattr("statekit.spark.runtime.spawner.start_spawner", lambda directory, main: None)
    monkeypatch.setattr(daemon, "preload_task_modules", lambda: None)
    monkeypatch.setattr("pyspark.daemon.manager", lambda: None)
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "250")
    daemon.main()
    assert daemon.os.environ["MIMALLOC_PURGE_DELAY"] == "250"
