"""Ctrl-C stops a run cleanly after the epoch in progress (or before an epoch that has not started: its batch
is left for the next run), under ``--trigger continuous`` (which watches the input directory until then) and
``available-now``; a later run on the same checkpoint finishes the job with the reference's sessions,
nothing read twice."""

from __future__ import annotations

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
from tests.spark_support import clickstream, metrics, output_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
CLI = "import sys; from statekit.cli import main; sys.exit(main())"
PER_FILE = 600


def _wait(proc: subprocess.Popen, what: str, ready, timeout: float = 60, poll: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(poll)


def _ctrl_c_run(spark, tmp_path: Path, files: int, interrupt_when_planned: bool) -> None:
    """Feed ``files`` files one by one to a continuous CLI run, Ctrl-C it (after the last epoch committed,
    or as soon as Spark has planned the last file's batch), then finish with a bounded ``--final`` rerun."""
    clicks = clickstream(PER_FILE * files, 25, seed=13)
    staged = write_clickstream(clicks, tmp_path / "staged", files=files)
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    args = ["sessionize", "--input", str(src), "--output", str(out), "--key", "user_id", "--time", "ts_ms",
            "--gap", "30s", "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--format", "csv"]
    os.link(staged[0], src / staged[0].name)
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args, "--trigger", "continuous", "--master", "local[2]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for i in range(1, files + 1):
            if interrupt_when_planned and i == files:  # the last batch is planned: its epoch is starting or running
                _wait(proc, f"batch {i - 1} planned",
                      lambda: (out / "_checkpoint" / "_spark" / "offsets" / str(i - 1)).exists(), poll=0.02)
                break
            _wait(proc, f"epoch {i - 1}", lambda: len(metrics(out)) >= i)
            if i < files:
                os.link(staged[i], src / staged[i].name)  # a file arriving while the query watches
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole process group
        t0 = time.monotonic()
        stdout, stderr = proc.communicate(timeout=45)
        stop_seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert stop_seconds < 30
    done = [m["epoch"] for m in metrics(out)]
    # the epoch in progress completed, or (not started yet) was left whole for the next run: never half-published
    assert done == list(range(files)) or (interrupt_when_planned and done == list(range(files - 1))), done
    assert f"sessionize: {len(done)} epochs, {PER_FILE * len(done):,} records" in stdout, stdout
    assert sum(m["records_in"] for m in metrics(out)) == PER_FILE * len(done)
    published = {int(p.name.split("=", 1)[1]) for p in out.glob("epoch=*")}
    assert published <= set(done) and not list(out.glob("_staging/epoch=*"))
    # the open sessions wait in the checkpoint; a bounded rerun closes them, nothing read twice or skipped
    assert main([*args, "--final"]) == 0
    lines = metrics(out)
    # a Ctrl-C after Spark's file source logged its next file but before that batch's offsets were written
    # leaves the file seen: the rerun's first batch then takes two files (one epoch fewer, nothing skipped)
    assert [m["epoch"] for m in lines] == list(range(len(lines))) and lines[-1]["final"], lines
    assert files <= len(lines) <= files + 1
    assert sum(m["records_in"] for m in lines) == len(clicks)
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)
    _assert_quiet(stderr)


def _assert_quiet(stderr: str) -> None:
    """A quiet stop: no error logged, no stack trace (a batch Spark planned and the run refused included)."""
    noise = [x for x in stderr.splitlines() if " ERROR " in x or "Traceback" in x or "StopRequested" in x
             or x.lstrip().startswith("at ")]
    assert not noise, "\n".join(noise)[:3000]


def test_ctrl_c_stops_a_continuous_run_cleanly_and_a_rerun_finishes(spark, tmp_path):
    _ctrl_c_run(spark, tmp_path, files=2, interrupt_when_planned=False)


def test_ctrl_c_as_an_epoch_starts_stops_cleanly_and_a_rerun_finishes(spark, tmp_path):
    """Ctrl-C right after Spark planned a batch: if the epoch had not started, it is refused (StopRequested)
    and left for the next run, never half-published, with nothing logged; the rerun is exact."""
    _ctrl_c_run(spark, tmp_path, files=2, interrupt_when_planned=True)


def test_ctrl_c_stops_an_available_now_run_cleanly_and_a_rerun_finishes(spark, tmp_path):
    """Ctrl-C during an available-now run over many files: one line, exit 130, no stack trace; the epochs
    committed are whole and contiguous, and a rerun of the same command finishes exactly."""
    files = 10
    clicks = clickstream(300 * files, 25, seed=17)
    write_clickstream(clicks, tmp_path / "in", files=files)
    out = tmp_path / "out"
    args = ["sessionize", "--input", str(tmp_path / "in"), "--output", str(out), "--key", "user_id", "--time",
            "ts_ms", "--gap", "30s", "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--format", "csv"]
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args, "--master", "local[2]"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait(proc, "epoch 1", lambda: len(metrics(out)) >= 2, poll=0.05)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=45)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    done = [m["epoch"] for m in metrics(out)]
    assert done == list(range(len(done))) and 2 <= len(done) < files, done
    assert proc.returncode == 130, stderr[-3000:]
    assert f"sessionize: stopped by Ctrl-C ({len(done)} epochs this run, epoch {done[-1]} committed)" in stderr
    _assert_quiet(stderr)
    assert {int(p.name.split("=", 1)[1]) for p in out.glob("epoch=*")} == set(done)
    assert main([*args, "--final"]) == 0
    lines = metrics(out)
    # a Ctrl-C after Spark's file source logged its next file but before that batch's offsets were written
    # leaves the file seen: the rerun's first batch then takes two files (one epoch fewer, nothing skipped)
    assert [m["epoch"] for m in lines] == list(range(len(lines))) and lines[-1]["final"], lines
    assert files <= len(lines) <= files + 1
    assert sum(m["records_in"] for m in lines) == len(clicks)
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)
