"""Shared helpers of the reliability suite: a session-window job run per epoch through the
CheckpointStore (as the Spark glue will run it), an independent session model that also predicts
late records, and fault injectors (flaky filesystem, byte flips).

A job's result is ``{epoch: (sorted windows, sorted late records)}``: the sink is idempotent by
epoch, so a re-run epoch replaces its earlier, uncommitted output.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from statekit.operators import EventTimeSessionWindows, Output, WindowOperator
from operators_support import KeyedWindowResult, SumCount
from statekit import MAX_TIMESTAMP, StateConfig, key_group_for, key_groups_for_partition
from statekit.checkpoint import CheckpointStore, RetryPolicy

MAX_PAR = 16
GAP = 10
OP = "sessions"
Record = tuple[Any, int, int]          # (key, record id, timestamp)
Window = tuple[Any, int, int, int, int]  # (key, start, end, sum of ids, count)


def session_operator(invalid_output_tag: str | None = None) -> WindowOperator:
    """Event-time sessions (gap GAP) with sum+count of record ids, results as (key, start, end, (sum, count))."""
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), function=SumCount(),
                          window_function=KeyedWindowResult(fold=True), invalid_output_tag=invalid_output_tag)


def windows_of(output: list) -> list[Window]:
    """Operator results as sorted (key, start, end, sum, count) rows."""
    return sorted(((k, s, e, acc[0], acc[1]) for (k, s, e, acc), _ in output), key=repr)


def fast_retry() -> RetryPolicy:
    """Three attempts that never really sleep (tests must not wait on backoff)."""
    return RetryPolicy(attempts=3, backoff_ms=10, sleep=lambda _: None)


# -- the reference model ---------------------------------------------------------------------------
class SessionModel:
    """Flink's event-time sessions with allowed lateness 0, in plain Python: per key the open
    sessions; a record whose own window [ts, ts+GAP) ends at or before the watermark and touches
    no open session is late; a watermark fires every session with end - 1 <= watermark."""

    def __init__(self) -> None:
        self.open: dict[Any, list[list[int]]] = {}
        self.watermark = -(1 << 63)

    def epoch(self, records: list[Record], watermark: int) -> tuple[list[Window], list[tuple[int, int]]]:
        late = []
        for key, rid, ts in records:
            start, end, total, count = ts, ts + GAP, rid, 1
            keep = []
            for s in self.open.get(key, []):
                if s[0] <= end and s[1] >= start:
                    start, end, total, count = min(start, s[0]), max(end, s[1]), total + s[2], count + s[3]
                else:
                    keep.append(s)
            if end - 1 <= self.watermark:
                late.append((rid, ts))
                continue
            self.open[key] = keep + [[start, end, total, count]]
        self.watermark = max(self.watermark, watermark)
        fired = []
        for key, sessions in self.open.items():
            fired += [(key, *s) for s in sessions if s[1] - 1 <= self.watermark]
            sessions[:] = [s for s in sessions if s[1] - 1 > self.watermark]
        return sorted(fired, key=repr), sorted(late)


def model_run(epochs: list[tuple[list[Record], int]]) -> dict[int, tuple[list, list]]:
    model = SessionModel()
    return {e: model.epoch(records, wm) for e, (records, wm) in enumerate(epochs)}


# -- the job ---------------------------------------------------------------------------------------
@dataclass
class Job:
    """Runs the session operator per epoch and partition: restore (keeping backends between epochs
    when possible), process the partition's records, advance the watermark, commit."""

    store: CheckpointStore
    backend: str
    root: Path
    partitions: int = 1
    kept: dict[range, Any] = field(default_factory=dict)
    committed: int | None = None
    results: dict[int, tuple[list, list]] = field(default_factory=dict)
    _dirs: Any = field(default_factory=itertools.count)

    def ranges(self) -> list[range]:
        return [key_groups_for_partition(p, self.partitions, MAX_PAR) for p in range(self.partitions)]

    def config(self, backend: str | None = None) -> StateConfig:
        return StateConfig(backend=backend or self.backend, max_parallelism=MAX_PAR,
                           local_dir=str(self.root / f"local-{next(self._dirs)}"))

    def run_epoch(self, epoch: int, records: list[Record], watermark: int) -> None:
        """One epoch on every partition; its output counts once every partition committed."""
        windows, late = [], []
        for kgs in self.ranges():
            out = self._run_partition(epoch, kgs, [r for r in records if key_group_for(r[0], MAX_PAR) in kgs], watermark)
            windows += windows_of(out.records)
            late += out.side_outputs.get("late", [])
        self.committed = epoch
        self.results[epoch] = (sorted(windows, key=repr), sorted(late))

    def _run_partition(self, epoch: int, kgs: range, records: list[Record], watermark: int) -> Output:
        r = self.store.restore(OP, self.config(), kgs, epoch=self.committed, backend=self.kept.pop(kgs, None))
        self.kept[kgs] = r.backend
        op, out = session_operator(), Output()
        op.open(r.backend, out)
        if r.sources:
            wm = max(m["watermark"] for m in r.metadata)
            op.restore_metadata({"watermark": wm, "processing_time": r.metadata[0]["processing_time"]})
        op.process_batch(records)
        op.process_watermark(watermark)
        self.store.commit(OP, epoch, r.backend, op.snapshot_metadata())
        return out

    def restart(self, partitions: int | None = None, backend: str | None = None) -> None:
        """A new worker: nothing kept (and optionally another partitioning or backend)."""
        self.close()
        self.partitions = partitions or self.partitions
        self.backend = backend or self.backend

    def close(self) -> None:
        for b in self.kept.values():
            b.close()
        self.kept.clear()


def make_job(tmp_path: Path, backend: str, name: str = "job", partitions: int = 1, retain: int = 3,
             retry: RetryPolicy | None = None, **policy: Any) -> Job:
    store = CheckpointStore(str(tmp_path / name / "ckpt"), retain=retain, retry=retry or fast_retry(), **policy)
    return Job(store, backend, tmp_path / name, partitions)


def uninterrupted(tmp_path: Path, backend: str, epochs: list[tuple[list[Record], int]]) -> dict:
    job = make_job(tmp_path, backend, "uninterrupted")
    for e, (records, wm) in enumerate(epochs):
        job.run_epoch(e, records, wm)
    job.close()
    return job.results


# -- streams ---------------------------------------------------------------------------------------
def random_epochs(rng: random.Random, n_epochs: int, per_epoch: int, keys: list, disorder: int,
                  delay: int, span: int = 40) -> list[tuple[list[Record], int]]:
    """Epochs of (key, id, ts) records moving forward by ``span`` per epoch with up to ``disorder``
    out of order; watermark = max timestamp seen minus ``delay`` (Spark's rule, so records arriving
    more than ``delay`` behind are late); a final epoch with the maximum watermark flushes all."""
    ids = itertools.count(1)
    out, high = [], -(1 << 62)
    for e in range(n_epochs):
        recs = [(rng.choice(keys), next(ids), e * span + rng.randrange(span) - rng.randrange(disorder + 1))
                for _ in range(rng.randrange(per_epoch + 1))]
        high = max([high] + [ts for _, _, ts in recs])
        out.append((recs, high - delay))
    out.append(([], MAX_TIMESTAMP))
    return out


# -- fault injection -------------------------------------------------------------------------------
def flaky_filesystem(operations: set[str], failures: int) -> pafs.PyFileSystem:
    """A local filesystem that raises OSError on the next ``failures`` calls of ``operations``
    (info, list, read, write, move); ``.handler.injected`` counts the injected failures."""
    return pafs.PyFileSystem(_FlakyHandler(pafs.LocalFileSystem(), operations, failures))


class _FlakyHandler(pafs.FileSystemHandler):
    def __init__(self, fs: pafs.FileSystem, operations: set[str], failures: int) -> None:
        self.fs, self.operations, self.failures, self.injected = fs, operations, failures, 0

    def _maybe_fail(self, op: str, path: str) -> None:
        if op in self.operations and self.failures > 0:
            self.failures -= 1
            self.injected += 1
            raise OSError(f"injected: {op} {path} unavailable")

    def get_type_name(self) -> str:
        return "flaky"

    def equals(self, other: Any) -> bool:
        return self is other

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list:
        for p in paths:
            self._maybe_fail("info", p)
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list:
        self._maybe_fail("list", selector.base_dir)
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("refusing to delete the root")

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._maybe_fail("move", dest)
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        self._maybe_fail("read", path)
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self._maybe_fail("read", path)
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        self._maybe_fail("write", path)
        return self.fs.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        self._maybe_fail("write", path)
        return self.fs.open_append_stream(path)


def use_filesystem(store: CheckpointStore, fs: pafs.FileSystem) -> None:
    """Point a store's storage at ``fs`` (same root): the flaky filesystem stands in for a remote one."""
    store.storage.fs = fs


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))

