"""`statekit bench spark --quick --source kafka` on the module's broker (conftest.py): every variant reads the topic
the bench loaded and writes the reference sessions (the floor counts every message), with times and peak RSS like
the file runs; the bench deletes its topic from a broker it was given. With `--source files,kafka` each variant runs
on both, every run exact, and the report divides the topic's speedup by the files'. No timing asserts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.bench.spark import QUICK, VARIANTS
from statekit.bench.spark_runs import FLOOR, NATIVE, TWS, tws_unavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SIZES = f"{QUICK['events']:,} events, {QUICK['users'][0]:,} users"


def _bench(broker: str, out: Path, source: str, report: str, *flags: str) -> dict:
    """``statekit bench spark --quick --source SOURCE`` on ``broker``: its JSON report, once it exited 0."""
    script = Path(sys.executable).with_name("statekit")  # the venv's console script
    cmd = [str(script), "bench"] if script.exists() else [sys.executable, "-m", "bench"]
    done = subprocess.run([*cmd, "spark", "--quick", "--source", source, "--kafka-bootstrap-servers", broker, *flags,
                           "--out", str(out)], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((out / f"{report}.json").read_text())


def test_bench_spark_from_a_topic_every_variant_exact(broker: str, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    data = _bench(broker, tmp_path, "kafka", "spark-kafka")
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


def test_bench_spark_from_files_and_a_topic_compares_the_speedups(broker: str, tmp_path: Path) -> None:
    data = _bench(broker, tmp_path, "files,kafka", "spark-files-kafka-builtin-native", "--variants", "builtin,native")
    assert data["params"]["topic"]["broker"] == f"given, {broker}; not in the sampled process trees"
    figures = {f["name"]: f for f in data["figures"]}
    for source in ("from files", "from a topic"):
        sessions = figures[f"sessions vs {NATIVE} ({source}, {SIZES})"]
        assert sessions["notes"].count("identical to reference") == 3, sessions["notes"]
        assert sessions["heap"] == sessions["rocksdb"] == sessions["baseline"] > 0
    row = figures[f"speedup over {NATIVE}, from a topic / from files ({SIZES})"]
    assert all(isinstance(row[b], float) and math.isfinite(row[b]) and row[b] > 0 for b in ("heap", "rocksdb")), row
    assert "within 10% (from a topic >= 0.9 x from files): heap " in row["notes"], row["notes"]
    assert not data["failures"]
    assert len(data["figures"]) == len(figures)  # no two figures of one name
