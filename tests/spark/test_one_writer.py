"""One writer per checkpoint through Spark: a second run on a checkpoint in use is refused at once naming the
holder, and a run whose lease another run took over commits nothing more; the job then finishes exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statekit.checkpoint.lease import LEASE_DIR
from statekit.cli import main
from statekit.clickstream import sessionize_reference
from statekit.jobs import write_clickstream
from tests.spark_support import clickstream, metrics, output_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
CLI = "import sys; from statekit.cli import main; sys.exit(main())"


def _wait(proc: subprocess.Popen, ready, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _continuous(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLI, *args, "--trigger", "continuous", "--master", "local[2]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _job(tmp_path: Path, files: int) -> tuple[list, list[Path], Path, Path, list[str]]:
    clicks = clickstream(400 * files, 25, seed=23)
    staged = write_clickstream(clicks, tmp_path / "staged", files=files)
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    args = ["sessionize", "--input", str(src), "--output", str(out), "--key", "user_id", "--time", "ts_ms",
            "--gap", "30s", "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--format", "csv"]
    return clicks, staged, src, out, args


def test_a_second_run_on_a_checkpoint_in_use_is_refused_naming_the_holder(spark, tmp_path):
    clicks, staged, src, out, args = _job(tmp_path, 2)
    os.link(staged[0], src / staged[0].name)
    first = _continuous(args)
    try:
        _wait(first, lambda: len(metrics(out)) >= 1)
        second = subprocess.run([sys.executable, "-c", CLI, *args, "--master", "local[1]"], capture_output=True,
                                text=True, timeout=120)
        assert second.returncode == 2, second.stderr[-3000:]
        assert f"checkpoint {out / '_checkpoint'} is in use by another run" in second.stderr
        assert f"pid {first.pid}" in second.stderr and "operator 'sessionize'" in second.stderr
        assert [m["epoch"] for m in metrics(out)] == [0]  # the second run wrote nothing
        os.link(staged[1], src / staged[1].name)  # the first goes on undisturbed
        _wait(first, lambda: len(metrics(out)) >= 2)
    finally:
        stdout, stderr = _stop(first)
    assert first.returncode == 0, stderr[-3000:]
    assert main([*args, "--final"]) == 0  # its lease was released: the next run takes it
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)


def test_a_run_whose_lease_was_taken_over_commits_nothing_more(spark, tmp_path):
    clicks, staged, src, out, args = _job(tmp_path, 3)
    os.link(staged[0], src / staged[0].name)
    first = _continuous(args)
    lease_dir = out / "_checkpoint" / LEASE_DIR
    try:
        _wait(first, lambda: len(metrics(out)) >= 1)
        held = sorted(lease_dir.glob("lease-*.json"))[-1]
        record = json.loads(held.read_text())
        # another run took the lease over (as after a stall past the timeout): a newer token
        taker = {**record, "token": record["token"] + 1, "pid": 1, "purpose": "the run that took over",
                 "host": "elsewhere", "heartbeat_ms": int(time.time() * 1000)}
        (lease_dir / f"lease-{taker['token']:020d}.json").write_text(json.dumps(taker))
        os.link(staged[1], src / staged[1].name)
        first.wait(timeout=120)
    finally:
        stdout, stderr = _stop(first)
    assert first.returncode == 2, stderr[-3000:]
    assert "was taken over by the run that took over" in stderr
    assert [m["epoch"] for m in metrics(out)] == [0]  # epoch 1 neither published nor recorded
    assert not list(out.glob("epoch=1"))
    (lease_dir / f"lease-{taker['token']:020d}.json").unlink()  # the taker went away: its lease ends
    os.link(staged[2], src / staged[2].name)
    assert main([*args, "--final"]) == 0
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)
