"""``--trigger continuous`` watches the input directory until Ctrl-C, which stops cleanly after the
epoch in progress; a later run on the same checkpoint finishes the job with the reference's sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statekit.cli import main
from statekit.clickstream import sessionize_reference
from statekit.jobs import write_clickstream
from tests.spark_support import clickstream, output_rows

pytestmark = pytest.mark.spark
CLI = "import sys; from statekit.cli import main; sys.exit(main())"


def _epochs(out: Path) -> list[int]:
    try:
        return [json.loads(x)["epoch"] for x in (out / "_metrics.jsonl").read_text().splitlines()]
    except FileNotFoundError:
        return []


def _wait(proc: subprocess.Popen, out: Path, epochs: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(_epochs(out)) < epochs:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no epoch {epochs - 1} after {timeout} s"
        time.sleep(0.3)


def test_ctrl_c_stops_a_continuous_run_cleanly_and_a_rerun_finishes(spark, tmp_path):
    clicks = clickstream(1200, 25, seed=13)
    staged = write_clickstream(clicks, tmp_path / "staged", files=2)
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    os.link(staged[0], src / staged[0].name)
    args = ["sessionize", "--input", str(src), "--output", str(out), "--key", "user_id", "--time", "ts_ms",
            "--gap", "30s", "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--format", "csv"]
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args, "--trigger", "continuous", "--master", "local[2]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait(proc, out, 1)
        os.link(staged[1], src / staged[1].name)  # a file arriving while the query watches
        _wait(proc, out, 2)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole process group
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    assert "sessionize: 2 epochs, 1,200 records" in stdout
    assert _epochs(out) == [0, 1]
    # the open sessions wait in the checkpoint; a bounded rerun closes them, nothing read twice
    assert main([*args, "--final"]) == 0
    assert _epochs(out) == [0, 1, 2]
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)
