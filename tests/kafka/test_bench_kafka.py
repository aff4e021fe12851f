"""`statekit bench spark --quick --source kafka` on the module's broker (conftest.py): every variant reads the topic
the bench loaded and writes the reference sessions (the floor counts every message), with times and peak RSS like
the file runs; the bench deletes its topic from a broker it was given. No timing asserts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.bench.spark import FLOOR, NATIVE, QUICK, TWS, VARIANTS, tws_unavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SIZES = f"{QUICK['events']:,} events, {QUICK['users'][0]:,} users"


def test_bench_spark_from_a_topic_every_variant_exact(broker: str, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    script = Path(sys.executable).with_name("statekit")  # the venv's console script
    cmd = [str(script), "bench"] if script.exists() else [sys.executable, "-m", "bench"]
    done = subprocess.run([*cmd, "spark", "--quick", "--source", "kafka", "--kafka-bootstrap-servers", broker,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    data = json.loads((tmp_path / "spark-kafka.json").read_text())
    assert data["params"]["broker"] == f"given, {broker}; not in the sampled process trees"
    [(topic, _)] = data["params"]["topic_load_seconds"].items()
    assert topic not in AdminClient({"bootstrap.servers": broker}).list_topics(timeout=30).topics  # deleted
    assert sorted(data["params"]["variants"]) == sorted(VARIANTS)
    figures = {f["name"]: f for f in data["figures"]}
    bases = [NATIVE] + ([] if tws_unavailable() else [TWS])
    for tag in (f"({SIZES})", f"(plain, {SIZES})", f"(vectorized, {SIZES})"):
        for base in bases:
            sessions = figures[f"sessions vs {base} {tag}"]
            assert sessions["notes"].count("identical to reference") == 3, sessions["notes"]
            assert sessions["heap"] == sessions["rocksdb"] == sessions["baseline"] > 0
            for name in (f"events/s vs {base} {tag}", f"peak RSS whole process tree vs {base} {tag}"):
                values = [figures[name][k] for k in ("heap", "rocksdb", "baseline")]
                assert all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values), (name, values)
    floor = figures[f"events/s vs {FLOOR} ({SIZES})"]
    assert f"counted every event ({QUICK['events'] + 1:,} rows)" in floor["notes"], floor["notes"]
    assert not data["failures"]
    assert (tmp_path / "spark-kafka.md").exists() and (tmp_path / "spark-kafka.png").stat().st_size > 0
