"""A second `statekit sessionize` on a checkpoint another run holds is refused before Spark starts, with the message
the run gives when it takes the lease: in a real CLI process, with no pyspark imported. No Spark here."""

from __future__ import annotations

from pathlib import Path

from statekit.checkpoint import CheckpointLease
from tests.test_cli_preflight import cli, sessionize_argv


def test_a_checkpoint_in_use_is_refused_before_spark_starts(tmp_path: Path) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "part-00000.csv").write_text("user_id,ts_ms,value\nu1,1000,1\n")
    checkpoint = tmp_path / "out" / "_checkpoint"
    with CheckpointLease(str(checkpoint)).held("a run of this test") as lease:
        r, _ = cli(*sessionize_argv(inp, tmp_path / "out", **{"--gap": "30s"}))
        holder = lease.newest().holder()  # type: ignore[union-attr]
    assert r.returncode == 2, r.stderr
    assert f"statekit sessionize: error: checkpoint {checkpoint} is in use by another run: {holder}, last heartbeat" \
        in r.stderr
    assert "One run at a time may write a checkpoint: wait for that run to end, or stop it" in r.stderr
    assert r.stderr.rstrip().endswith("no pyspark"), r.stderr  # refused before any JVM could start
