"""The runtime's accelerators turn off when the PySpark or pyarrow internal they lean on is not what
``statekit.spark.runtime.pyspark_internals`` expects, or the session has no JVM (Spark Connect): the same
results without them, and one log line per process naming what is off and why."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from statekit.spark.runtime import daemon, host, pyspark_internals, warmup
from statekit.spark.slots import LocalRun
from tests.spark.test_executor_security import _job, _run_all, temp  # noqa: F401 (temp: a fixture)

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def unreported(monkeypatch):
    """Each test starts in a process that has said nothing yet (lines are once per process)."""
    monkeypatch.setattr(pyspark_internals, "_reported", set())


def _off_lines(caplog, what: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"statekit: {what} off")]


@pytest.mark.parametrize("breakage", ["another release line", "no manager"])
def test_a_pyspark_daemon_of_another_shape_runs_sparks_own_daemon_unchanged(breakage, monkeypatch, caplog):
    import pyspark.daemon

    ran = []
    monkeypatch.setitem(sys.modules, "pyspark.daemon", pyspark.daemon)  # back after the fallback drops it
    if breakage == "another release line":
        monkeypatch.setattr("pyspark.__version__", "5.0.0")
    else:
        monkeypatch.delattr("pyspark.daemon.manager")
    monkeypatch.setattr(daemon, "preload_task_modules", lambda: ran.append("preload"))
    monkeypatch.setattr("statekit.spark.runtime.spawner.start_spawner", lambda directory, main: ran.append("spawner"))
    monkeypatch.setattr(daemon.runpy, "run_module", lambda name, **kw: ran.append((name, kw["run_name"])))
    with caplog.at_level(logging.WARNING, "statekit"):
        daemon.main()
    assert ran == [("pyspark.daemon", "__main__")]  # Spark's daemon as Spark runs it; nothing of statekit's
    assert "pyspark.daemon" not in sys.modules  # run afresh, not found imported already
    [line] = _off_lines(caplog, "statekit's Python daemon")
    assert ("pyspark 5.0.0 is not a 4.x release" if breakage == "another release line"
            else "has no pyspark.daemon.manager()") in line


def test_without_pysparks_cloudpickle_the_state_stays_in_the_worker_with_equal_results(temp, monkeypatch,  # noqa: F811
                                                                                      caplog):
    hosted_kinds, hosted = _run_all(_job(temp / "hosted", os.urandom(32)))
    monkeypatch.delattr("pyspark.cloudpickle.dumps")
    with caplog.at_level(logging.WARNING, "statekit"):
        kinds, local = _run_all(_job(temp / "local", os.urandom(32)))
    assert hosted_kinds == [host.HostedRun] * 3 and kinds == [LocalRun] * 3
    assert local == hosted and len(hosted) > 10
    [line] = _off_lines(caplog, "state hosts")
    assert "pyspark.cloudpickle has no dumps()" in line


class ConnectSession:
    """A session of Spark Connect's type: asking it for its SparkContext fails as Connect's does."""

    @property
    def sparkContext(self):
        raise AssertionError("a classic-only API was reached on a Spark Connect session")


ConnectSession.__module__ = "pyspark.sql.connect.session"


def test_on_a_spark_connect_session_the_warm_up_is_off_and_never_reaches_for_a_sparkcontext(caplog):
    with caplog.at_level(logging.WARNING, "statekit"):
        assert warmup.warm_up_workers(ConnectSession()) is None
        assert warmup.warm_up_workers(ConnectSession()) is None
    [line] = _off_lines(caplog, "worker warm-up")
    assert "Spark Connect session has no SparkContext" in line


def _proc_entry(root, pid: int, comm: str, parent: int) -> None:
    (root / str(pid)).mkdir()
    (root / str(pid) / "comm").write_text(comm + "\n")
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {parent} 1 1")


def test_the_executor_lookup_finds_the_jvm_above_the_worker_and_without_a_proc_table_says_it_is_off(tmp_path,
                                                                                                    caplog):
    (tmp_path / "self").mkdir()
    _proc_entry(tmp_path, os.getppid(), "python3", 4242)  # the worker's daemon, forked by ...
    _proc_entry(tmp_path, 4242, "java", 1)  # ... the executor's JVM
    with caplog.at_level(logging.WARNING, "statekit"):
        assert pyspark_internals.executor_pid(str(tmp_path)) == 4242
        assert not _off_lines(caplog, "the executor lookup")
        assert pyspark_internals.executor_pid(str(tmp_path / "none")) == os.getppid()
        assert pyspark_internals.executor_pid(str(tmp_path / "none")) == os.getppid()
    [line] = _off_lines(caplog, "the executor lookup")
    assert f"no process table at {tmp_path / 'none'}" in line


PANDAS_WORK = """
import json, sys
import pyarrow as pa, pyarrow.lib
if SHAPE == "another":  # a pyarrow whose shim the adapter does not know (it answers pyarrow's own uses the same)
    class Shim:
        def __init__(self, shim):
            self.shim = shim

        def __getattr__(self, name):
            return getattr(self.shim, name)

    pyarrow.lib._pandas_api = Shim(pyarrow.lib._pandas_api)
from statekit.spark.runtime.lazy_pandas import defer_pandas
defer_pandas()
defer_pandas()
out = {"loaded_after_arrow_work": (pa.array([1, 2]), "pandas" in sys.modules)[1]}
import pandas as pd
out["nulls"] = pa.array(pd.Series([1.0, None])).null_count
out["frame"] = list(pa.table({"a": [1, None]}).to_pandas()["a"].isna())
print(json.dumps(out))
"""


@pytest.mark.parametrize("shape", ["known", "another"])
def test_a_pyarrow_pandas_check_of_another_shape_leaves_pandas_alone_with_equal_conversions(shape):
    done = subprocess.run([sys.executable, "-c", f"SHAPE = {shape!r}\n" + PANDAS_WORK], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert {k: v for k, v in got.items() if k != "loaded_after_arrow_work"} == {"nulls": 1, "frame": [False, True]}
    said = [line for line in done.stderr.splitlines() if "deferred pandas off" in line]
    if shape == "known":
        assert got["loaded_after_arrow_work"] is False and said == []  # deferred: Arrow work left pandas unloaded
    else:
        assert got["loaded_after_arrow_work"] is True  # not deferred: pyarrow loaded pandas as it always does
        assert len(said) == 1 and "pyarrow.lib._pandas_api.have_pandas" in said[0]
