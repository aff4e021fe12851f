"""statekit's Python daemon on a PySpark whose daemon is not the shape it expects, in a real application: Spark's
own daemon runs the workers, the sessions are Spark's own, and the executor's log says once what is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]

BROKEN_DAEMON = """
import pyspark.daemon
del pyspark.daemon.manager  # another PySpark's daemon, as statekit's daemon finds it
"""

SCRIPT = """
import json, sys
from pathlib import Path
from statekit.jobs import sessionize
from statekit.spark import spark_session
from tests.spark_support import DELAY, GAP, clickstream, output_rows, spark_sessions, write_input

root = Path(sys.argv[1])
spark = spark_session("local[1]")
inp = write_input(clickstream(400, 20, seed=3), root / "in", files=2)
sessionize(spark, input=str(inp), output=str(root / "out"), key="user_id", time="ts_ms", gap=GAP,
           watermark_delay=DELAY, aggs=["sum:value", "count"], backend="heap", partitions=2, final=True)
got, want = output_rows(spark, root / "out"), spark_sessions(spark, inp)
print(json.dumps({"equal": got == want, "sessions": len(want)}))
spark.stop()
"""


@pytest.mark.slow
def test_a_daemon_of_another_shape_gives_sparks_daemon_equal_sessions_and_one_line(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BROKEN_DAEMON)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "found in sys.modules" not in r.stderr  # Spark's daemon run as __main__ without being imported first
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["equal"] and got["sessions"] > 20
    said = [line for line in r.stderr.splitlines() if "statekit's Python daemon off" in line]
    assert len(said) == 1 and "has no pyspark.daemon.manager(); workers fork from Spark's own daemon" in said[0], said
