"""The worker warm-up: in a new application, one background job per application leaves the Python
workers with the epoch tasks' modules imported (a fresh interpreter: the test session's workers have
imported everything already; Spark's own daemon: statekit's forks workers with them loaded)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

SCRIPT = '''
import json, os, sys
from statekit.spark import spark_session, warm_up_workers

spark = spark_session("local[1]", {"spark.python.worker.reuse": "true",
                               "spark.python.daemon.module": "pyspark.daemon"})  # Spark's: workers start empty
first = warm_up_workers(spark)
first.join(300)
again = warm_up_workers(spark)


def probe(batches):
    import pyarrow as pa
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"loaded": ["statekit.spark.tasks" in sys.modules, "statekit.spark.records" in sys.modules]})


loaded = [r.loaded for r in spark.range(0, 1, 1, 1).mapInArrow(probe, "loaded boolean").collect()]
print(json.dumps({"started": first is not None, "finished": not first.is_alive(), "again": again is not None,
                  "loaded": loaded}))
spark.stop()
'''


@pytest.mark.slow  # a Spark application of its own
def test_warm_up_runs_once_per_application_and_leaves_workers_with_the_task_modules():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["started"] and got["finished"] and not got["again"]
    assert got["loaded"] == [True, True]  # the one worker of local[1], reused after the warm-up's task
