"""Roll a job back to a retained epoch on purpose (``statekit checkpoint rollback``), as Flink restarts a job
from a retained checkpoint: the next run goes on after that epoch and Spark reads the input of the batches
after it again.

Refused unless the epoch has a driver record and every partition of its partitioning a committed manifest
(the error names the epochs that have). Then, under the checkpoint's lease and with a mark at the checkpoint
that refuses runs until it is done: Spark's checkpoint is rewound to the epoch's batch
(``SparkCheckpoint.rewind``), the output forgets later epochs (their directories and metrics lines), the
state forgets later manifests (``CheckpointStore.rollback``), the driver later records and intents. Each
step is idempotent: an interrupted rollback is finished by running it again. A sink outside the output (a
Delta table, a ``foreachBatch`` function) is not rewound: it gets the re-run epochs again, by their ids.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field

from ..checkpoint import (JOB_PATH, CheckpointError, CheckpointLease, CheckpointStore, ExclusiveCreateUnsupported,
                          JobRecord, NoCheckpointError)
from ..checkpoint.signing import key_from_env
from ..checkpoint.manifest import MANIFEST_NAME, parse_epoch
from ..keygroups import DEFAULT_MAX_PARALLELISM
from .epochs import DRIVER_DIR, EpochLog
from .recovery import ROLLBACK_MARK, Manifests, record_of, recorded_max_parallelism
from .output_dir import METRICS_FILE, SIDE_OUTPUTS, STAGING, OutputDir
from .spark_checkpoint import BELOW_CHECKPOINT, Rewound, SparkCheckpoint

_INTENT = re.compile(r"^intent=(\d+)\.json$")
_log = logging.getLogger("statekit")


@dataclass
class RolledBack:
    """What a rollback removed, by place."""

    checkpoint: str
    epoch: int
    batch: int
    output: str
    spark_checkpoint: str
    spark: Rewound = field(default_factory=Rewound)
    output_dirs: int = 0
    metrics_lines: int = 0
    manifests: int = 0
    state_files: int = 0
    records: int = 0
    intents: int = 0

    def report(self) -> list[str]:
        """The lines ``statekit checkpoint rollback`` prints: the counts, then how to go on."""
        s = self.spark
        return [
            f"checkpoint {self.checkpoint} rolled back to epoch {self.epoch} (Spark batch {self.batch}):",
            f"  Spark checkpoint {self.spark_checkpoint}: {s.offsets} offsets and {s.commits} commits removed, "
            f"{s.source_files} file-source log files removed, {s.rewritten} written back from a compact file",
            f"  output {self.output}: {self.output_dirs} epoch directories and {self.metrics_lines} metrics lines removed",
            f"  state: {self.manifests} manifests and {self.state_files} other files removed",
            f"  driver: {self.records} epoch records and {self.intents} intents removed",
            f"rerun the job with the same command (checkpoint {self.checkpoint}, output {self.output}): it goes on "
            f"from epoch {self.epoch + 1}, reading the input after Spark batch {self.batch} again",
        ]


def rollback(checkpoint: str, epoch: int, *, output: str | None = None,
             spark_checkpoint: str | None = None) -> RolledBack:
    """Roll the job at ``checkpoint`` back to its retained ``epoch`` (see the module doc). ``output`` and
    ``spark_checkpoint`` default to the locations the job recorded (Spark's: ``<checkpoint>/_spark``)."""
    if "://" not in checkpoint:
        checkpoint = os.path.abspath(checkpoint)
    job = JobRecord(checkpoint).read()
    if job is None:
        raise NoCheckpointError(f"checkpoint {checkpoint}: no job recorded ({JOB_PATH}): nothing to roll back")
    output = output or job.get("output")
    if not isinstance(output, str):
        raise CheckpointError(f"checkpoint {checkpoint} does not record its output (a run before statekit recorded "
                              f"it): pass --output")
    location = spark_checkpoint or job.get("spark_checkpoint") or f"{checkpoint.rstrip('/')}/{BELOW_CHECKPOINT}"
    if "://" not in location:
        location = os.path.abspath(location)
    lease = CheckpointLease(checkpoint)
    try:
        lease.held(f"a rollback to epoch {epoch}")
    except ExclusiveCreateUnsupported as e:
        _log.warning("statekit: %s: a run at the same time is not refused there", e)
    try:
        return _rollback(checkpoint, epoch, job, OutputDir(output), location)
    finally:
        lease.release()


def _rollback(checkpoint: str, epoch: int, job: dict, output: OutputDir, location: str) -> RolledBack:
    store = CheckpointStore(checkpoint, key=key_from_env())  # a signed checkpoint: its manifests are read
    log = EpochLog(checkpoint)
    operator_id = job.get("operator_id")
    manifests = Manifests(store, operator_id, recorded_max_parallelism(job, DEFAULT_MAX_PARALLELISM))
    points = manifests.restart_points(log)
    if epoch not in points:
        why = ("the driver holds no record of it" if epoch not in log.epochs()
               else "its state lacks " + "; ".join(manifests.missing(epoch, record_of(log, epoch).partitions)))
        raise NoCheckpointError(f"checkpoint {checkpoint}: epoch {epoch} cannot be restarted from: {why}; epochs a "
                                f"rollback can restart from: {points or 'none'}")
    batch = record_of(log, epoch).last_batch_id
    try:
        spark = SparkCheckpoint(location)
    except CheckpointError as e:
        raise CheckpointError(f"Spark's checkpoint {location} cannot be rewound from here ({e}); pass "
                              f"--spark-checkpoint with a location pyarrow can write") from None
    if (held := spark.lacks(batch)) is not None:
        raise NoCheckpointError(
            f"checkpoint {checkpoint}: epoch {epoch} ends at Spark batch {batch}, which Spark's checkpoint {location} "
            f"no longer holds ({held}; Spark keeps the last "
            f"spark.sql.streaming.minBatchesToRetain): pass the job's Spark checkpoint with --spark-checkpoint, or "
            f"roll back to a later epoch")
    store.storage.commit(ROLLBACK_MARK, json.dumps({"to_epoch": epoch}).encode(), f"_tmp-{ROLLBACK_MARK}")
    done = RolledBack(checkpoint, epoch, batch, output.path, location, spark.rewind(batch))
    done.output_dirs, done.metrics_lines = _forget_output(output, epoch)
    deleted = store.rollback(operator_id, epoch)
    done.manifests = sum(1 for p in deleted if p.endswith(f"/{MANIFEST_NAME}"))
    done.state_files = len(deleted) - done.manifests
    for e in sorted((e for e in log.epochs() if e > epoch), reverse=True):
        log.storage.delete(f"{DRIVER_DIR}/epoch={e}.json")
        done.records += 1
    for f in log.storage.list_files(DRIVER_DIR):
        m = _INTENT.match(f.path.rsplit("/", 1)[-1])
        if m and int(m.group(1)) > epoch:
            log.storage.delete(f.path)
            done.intents += 1
    store.storage.delete(ROLLBACK_MARK)
    return done


def _forget_output(output: OutputDir, epoch: int) -> tuple[int, int]:
    """Delete the output's epoch directories (results, side outputs, staging) and metrics lines after ``epoch``;
    how many of each."""
    dirs = 0
    for sub in ("", *SIDE_OUTPUTS, STAGING):
        for name in output.storage.list_dirs(sub):
            e = parse_epoch(name)
            if e is not None and e > epoch:
                output.storage.delete_dir(f"{sub}/{name}" if sub else name)
                dirs += 1
    metrics = output.metrics()
    kept = [m for m in metrics if m["epoch"] <= epoch]
    if len(kept) < len(metrics):
        output.storage.commit(METRICS_FILE, "".join(json.dumps(m, sort_keys=True) + "\n" for m in kept).encode(),
                              f"{STAGING}/{METRICS_FILE}.tmp")
    return dirs, len(metrics) - len(kept)
