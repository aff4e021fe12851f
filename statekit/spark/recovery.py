"""The start-up check of a run: do the driver's epoch records, the output, the state and Spark's checkpoint
agree on which epochs committed? Each epoch writes, in order: every partition's state manifest, the
published ``<output>/epoch=<e>`` (and side outputs), its line in ``_metrics.jsonl``, the driver's record
``_driver/epoch=<e>.json``, then Spark's ``commits/<batch>``. So, before anything runs:

- metrics of an epoch after the newest record, with every partition's manifest and the epoch published:
  the record was lost after the epoch completed; it is rebuilt from the metrics line (logged);
- Spark committed a batch after the newest record's: that epoch's record and metrics are both lost, and the
  run would skip the batch's input as consumed: refused;
- the newest record's epoch lacks a partition's manifest or its metrics line (state or output deleted,
  another output): refused; so is Spark's checkpoint without the newest record's batch (deleted, or
  another one), and a checkpoint whose rollback was interrupted;
- manifests ahead of the newest record without its metrics (a crash after the state commit): fine,
  Spark replays that batch.

Refusals name the checkpoint, the epoch and what is missing, and ``statekit checkpoint rollback`` where it helps.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..checkpoint import CheckpointError, CheckpointStore, CorruptCheckpointError, JobRecord, partition_name
from ..keygroups import key_groups_for_partition
from ..timers import MIN_TIMESTAMP
from .epochs import DRIVER_DIR, EpochLog, EpochRecord
from .plan import JobPlan
from .output_dir import METRICS_FILE, OutputDir
from .spark_checkpoint import COMMITS, SparkCheckpoint

ROLLBACK_MARK = "_rollback.json"
"""Written at a checkpoint while a rollback runs (``rollback``), removed when it is done."""

_log = logging.getLogger("statekit")


class EpochMismatchError(CheckpointError):
    """The driver's epoch records, the output, the state and Spark's checkpoint disagree: a run would lose or
    repeat input."""


def rollback_command(checkpoint: str, epoch: int | str) -> str:
    """The command that rolls ``checkpoint`` back to ``epoch``."""
    return f"statekit checkpoint rollback {checkpoint} --to-epoch {epoch}"


def record_of(log: EpochLog, epoch: int) -> EpochRecord:
    """The driver's record of ``epoch``, checked to be one."""
    rel = f"{DRIVER_DIR}/epoch={epoch}.json"
    try:
        record = EpochRecord(**json.loads(log.storage.read(rel)))
    except (ValueError, TypeError) as e:
        raise CorruptCheckpointError(f"epoch record {log.storage.full_path(rel)} is not one: {e}") from None
    if record.epoch != epoch or not isinstance(record.partitions, int) or record.partitions < 1:
        raise CorruptCheckpointError(f"epoch record {log.storage.full_path(rel)} is not epoch {epoch}'s")
    return record


def interrupted_rollback(store: CheckpointStore) -> int | str | None:
    """The epoch a rollback that did not finish was rolling back to (``<epoch>`` when its mark is unreadable)."""
    try:
        mark = json.loads(store.storage.read(ROLLBACK_MARK))
    except FileNotFoundError:
        return None
    except ValueError:
        return "<epoch>"
    to = mark.get("to_epoch") if isinstance(mark, dict) else None
    return to if isinstance(to, int) else "<epoch>"


def recorded_max_parallelism(job: dict[str, Any] | None, default: int) -> int:
    """The max parallelism a checkpoint's recorded ``job`` names (its partitions' key-group ranges), else ``default``."""
    value = (job or {}).get("max_parallelism")
    return value if isinstance(value, int) and value > 0 else default


class Manifests:
    """Which epochs each partition of an operator committed, listed once per partition."""

    def __init__(self, store: CheckpointStore, operator_id: str, max_parallelism: int) -> None:
        self.store, self.operator_id, self.max_parallelism = store, operator_id, max_parallelism
        self._epochs: dict[range, list[int]] = {}

    def epochs(self, key_groups: range) -> list[int]:
        """The committed epochs of one partition (``CheckpointStore.epochs``)."""
        if key_groups not in self._epochs:
            self._epochs[key_groups] = self.store.epochs(self.operator_id, key_groups)
        return self._epochs[key_groups]

    def missing(self, epoch: int, partitions: int) -> list[str]:
        """The partitions of ``partitions`` without a committed manifest at ``epoch``, each with what it retains."""
        ranges = [key_groups_for_partition(p, partitions, self.max_parallelism) for p in range(partitions)]
        return [f"partition {p} ({self.operator_id}/{partition_name(kgs)}, retained epochs {self.epochs(kgs)})"
                for p, kgs in enumerate(ranges) if epoch not in self.epochs(kgs)]

    def restart_points(self, log: EpochLog) -> list[int]:
        """Epochs a rollback can restart from: recorded by the driver, with every partition's manifest."""
        return [e for e in log.epochs() if not self.missing(e, record_of(log, e).partitions)]


def check_epochs(log: EpochLog, job: JobPlan, spark_checkpoint: str | None) -> None:
    """Cross-check the epochs at ``job``'s checkpoint and output, and Spark's checkpoint (``spark_checkpoint``,
    stream mode; None: batch mode) before a run; rebuild a record lost after its epoch completed; raise
    ``EpochMismatchError`` where a run would lose or repeat input."""
    checkpoint, output = job.checkpoint, job.sink
    store = CheckpointStore(checkpoint, key=job.checkpoint_key)
    to = interrupted_rollback(store)
    if to is not None:
        raise EpochMismatchError(f"checkpoint {checkpoint}: a rollback to epoch {to} was interrupted; finish it "
                                 f"before a run: {rollback_command(checkpoint, to)}")
    manifests = Manifests(store, job.operator_id, recorded_max_parallelism(JobRecord(checkpoint).read(), job.max_parallelism))
    last = log.last()
    metrics = output.metrics()
    ahead = [m for m in metrics if last is None or m["epoch"] > last.epoch]
    if ahead:
        last = _rebuild(log, output, manifests, last, metrics, ahead[-1]) or last
    if last is not None:
        _check_newest(log, output, manifests, last, metrics)
    if spark_checkpoint is not None:
        spark = SparkCheckpoint.readable(spark_checkpoint)
        if spark is not None:
            _check_spark(log, output, manifests, last, spark)


def _rebuild(log: EpochLog, output: OutputDir, manifests: Manifests, last: EpochRecord | None,
             metrics: list[dict[str, Any]], line: dict[str, Any]) -> EpochRecord | None:
    """The record of the newest epoch the output's metrics hold beyond ``last``, rebuilt from its line and
    committed when its state and output are whole; None when none of its state is at this checkpoint (then
    the output is another checkpoint's: the runner refuses it, naming both)."""
    checkpoint = log.storage.uri
    epoch, partitions = _metric(line, "epoch", int), _metric(line, "partitions", int)
    missing = manifests.missing(epoch, partitions)
    if len(missing) == partitions:
        return None
    published = f"epoch={epoch}" in output.storage.list_dirs("")
    if missing or not published:
        lacks = "; ".join(missing) if missing else f"its published output {output.path}/epoch={epoch}"
        points = manifests.restart_points(log)
        raise EpochMismatchError(
            f"checkpoint {checkpoint}: output {output.path} recorded the metrics of epoch {epoch}, which has no driver "
            f"record, and the epoch is not whole: it lacks {lacks}. Ways out: {_rollback_way(checkpoint, points)}")
    upto = [m for m in metrics if m["epoch"] <= epoch]
    batches = [b for b in (_metric(m, "batch_id", int, optional=True) for m in upto) if b is not None]
    watermark = _metric(line, "watermark", int, optional=True)
    record = EpochRecord(epoch, MIN_TIMESTAMP if watermark is None else watermark, _metric(line, "max_ts", int, optional=True),
                         max([-1 if last is None else last.last_batch_id, *batches]),
                         (last is not None and last.final) or any(_metric(m, "final", bool) for m in upto),
                         partitions, manifests.operator_id)
    log.commit(record)
    _log.warning("statekit: checkpoint %s: the driver's record of epoch %d was lost after the epoch completed (its "
                 "state, output and metrics line are there): rebuilt it from %s/%s", checkpoint, epoch, output.path,
                 METRICS_FILE)
    return record


def _check_newest(log: EpochLog, output: OutputDir, manifests: Manifests, last: EpochRecord,
                  metrics: list[dict[str, Any]]) -> None:
    """Refuse when the newest recorded epoch lacks a partition's manifest or its metrics line."""
    checkpoint = log.storage.uri
    missing = manifests.missing(last.epoch, last.partitions)
    if missing:
        points = [e for e in manifests.restart_points(log) if e < last.epoch]
        raise EpochMismatchError(
            f"checkpoint {checkpoint}: the state of epoch {last.epoch}, the newest the driver recorded, has no "
            f"committed manifest for {'; '.join(missing)}: its state was deleted. Ways out: "
            f"{_rollback_way(checkpoint, points)}")
    if not any(m["epoch"] == last.epoch for m in metrics):
        held = f"epochs {metrics[0]['epoch']} to {metrics[-1]['epoch']}" if metrics else "no epoch"
        raise EpochMismatchError(
            f"checkpoint {checkpoint} recorded epoch {last.epoch}, but output {output.path} has no metrics line of "
            f"it in {METRICS_FILE} (it holds {held}): the output was deleted or is another job's. Ways out: run "
            f"with the output this checkpoint was written with; or start over with a new checkpoint and output")


def _check_spark(log: EpochLog, output: OutputDir, manifests: Manifests, last: EpochRecord | None,
                 spark: SparkCheckpoint) -> None:
    """Refuse when Spark committed a batch after the newest record's, or lacks the newest record's batch."""
    checkpoint = log.storage.uri
    batch = -1 if last is None else last.last_batch_id
    committed = spark.batches(COMMITS)
    if committed and committed[-1] > batch:
        lost = 0 if last is None else last.epoch + 1
        points = manifests.restart_points(log)
        raise EpochMismatchError(
            f"checkpoint {checkpoint}: Spark's checkpoint {spark.location} committed batch {committed[-1]}, but the "
            f"driver's newest record is " + ("none" if last is None else f"epoch {last.epoch} (batch {batch})")
            + f": the record of epoch {lost} ({DRIVER_DIR}/epoch={lost}.json) and its metrics line in "
            f"{output.path}/{METRICS_FILE} are both lost, and a run would skip the input of batches {batch + 1} to "
            f"{committed[-1]} as consumed. Ways out: {_rollback_way(checkpoint, points)}, so that Spark reads the "
            f"batches after it again; or put the lost files back from a backup")
    if (held := spark.lacks(batch)) is not None:
        raise EpochMismatchError(
            f"checkpoint {checkpoint}: epoch {last.epoch} consumed Spark batch {batch}, but Spark's checkpoint "
            f"{spark.location} holds no such batch ({held}): it was deleted "
            f"or is another one, and a run would skip input as consumed. Ways out: run with the Spark checkpoint this "
            f"checkpoint was run with (--spark-checkpoint); or start over with a new checkpoint and output")


def _rollback_way(checkpoint: str, points: list[int]) -> str:
    if not points:
        return "no epoch is retained whole to roll back to: start over with a new checkpoint and output"
    return (f"roll back to epoch {points[-1]}, the newest one retained whole ({rollback_command(checkpoint, points[-1])}; "
            f"epochs a rollback can restart from: {points}), then rerun")


def _metric(line: dict[str, Any], name: str, kind: type, optional: bool = False) -> Any:
    """Field ``name`` of a metrics line, checked to be a ``kind`` (or None when ``optional``)."""
    value = line.get(name)
    if (value is None and optional) or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
        return value
    raise CorruptCheckpointError(f"metrics line of epoch {line.get('epoch')!r}: {name} is {value!r}, not a {kind.__name__}")
