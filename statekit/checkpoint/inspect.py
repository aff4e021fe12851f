"""Offline inspection of a checkpoint location: what is committed, how big, and the state itself.

``inspect_checkpoint(path)`` lists operators, partitions and retained epochs with backend, kind,
per-state entry counts (and serialized bytes where the backend reports them), timer counts and
snapshot sizes (total vs written by that epoch), and the recorded types this process cannot decode.
``read_state`` returns one state's cells as rows. ``main_inspect(argv)`` is ``statekit inspect
CHECKPOINT [--json]``, with the key of a signed checkpoint from ``STATEKIT_CHECKPOINT_KEY``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.fs as pafs

from ..help_format import HelpFormatter
from ..logical_snapshot import StateMeta, read_logical
from ..serialization import unknown_types
from ..timers import MAX_TIMESTAMP, MIN_TIMESTAMP
from .errors import CheckpointError, NoCheckpointError
from .job import JobRecord
from .manifest import Manifest, partition_name, shared_dir
from .signing import KEY_ENV, key_from_env
from .store import CheckpointStore


@dataclass
class EpochInfo:
    """One committed (partition, epoch) snapshot."""

    epoch: int
    backend: str
    kind: str
    incremental: bool
    files: int
    bytes_total: int
    bytes_written: int
    states: dict[str, dict[str, Any]]
    timers: dict[str, dict[str, int]]
    metadata: dict[str, Any]
    created_ms: int
    seconds: float | None
    unknown_types: dict[str, str] = field(default_factory=dict)
    """Recorded types (code -> ``module:qualname``) that this process neither registers nor has declared: reading
    the state that holds them needs them registered (``statekit.register_type``) or declared (``statekit.types``)."""


@dataclass
class PartitionInfo:
    key_groups: tuple[int, int]
    epochs: list[EpochInfo]
    shared_files: int
    stored_bytes: int


@dataclass
class OperatorInfo:
    name: str
    partitions: list[PartitionInfo]


@dataclass
class CheckpointInfo:
    location: str
    operators: list[OperatorInfo] = field(default_factory=list)
    job: dict[str, Any] | None = None
    """The description of the job that wrote the checkpoint (``JobRecord``), when one was recorded."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _epoch_info(m: Manifest) -> EpochInfo:
    state_bytes = m.snapshot.get("state_bytes", {})
    estimated = m.stats.get("states_estimated", False)
    versions = m.stats.get("versions", {})
    states = {name: {"entries": n, "estimated": estimated, "bytes": state_bytes.get(name),
                     "version": versions.get(name, 1)}
              for name, n in m.stats.get("states", {}).items()}
    return EpochInfo(m.epoch, m.backend, m.kind, bool(m.snapshot.get("incremental")), len(m.files), m.total_bytes(),
                     m.written_bytes(), states, m.stats.get("timers", {}), m.metadata, m.created_ms,
                     m.stats.get("seconds"), {str(c): name for c, name in unknown_types(m.types).items()})


def inspect_checkpoint(path: str, key: bytes | None = None) -> CheckpointInfo:
    """Structured description of every retained snapshot at ``path`` (a path or URI); ``key``: the
    checkpoint's, when its manifests are signed."""
    store = CheckpointStore(path, key=key)
    if store.storage.fs.get_file_info(store.storage.root).type != pafs.FileType.Directory:
        raise NoCheckpointError(f"no checkpoint at {path}: the directory does not exist")
    info = CheckpointInfo(path, job=JobRecord(path).read())
    for op in store.operators():
        parts = []
        for kgs in store.partitions(op):
            epochs = [_epoch_info(store.manifest(op, kgs, e)) for e in store.epochs(op, kgs)]
            files = store.storage.list_files(f"{op}/{partition_name(kgs)}")
            shared = [f for f in files if f.path.startswith(shared_dir(op, kgs) + "/")]
            parts.append(PartitionInfo((kgs.start, kgs.stop - 1), epochs, len(shared), sum(f.size for f in files)))
        info.operators.append(OperatorInfo(op, parts))
    return info


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def watermark_text(value: Any) -> Any:
    """A watermark or another time as shown: ``none`` for the unset ones (the minimum timestamp before any time,
    the maximum after a final epoch), else the value."""
    return "none" if value in (MIN_TIMESTAMP, MAX_TIMESTAMP) else value


def _shown(value: Any) -> Any:
    """``value`` (a JSON document) with every unset time in it (a watermark, an operator's processing time: the
    minimum or maximum timestamp, which nothing else reaches) as ``watermark_text`` shows it."""
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return watermark_text(value) if isinstance(value, int) and not isinstance(value, bool) else value


def format_report(info: CheckpointInfo) -> str:
    """The human-readable report ``statekit inspect`` prints (the job's description as indented JSON)."""
    lines = [f"checkpoint {info.location}"]
    if info.job is not None:
        lines.append("job " + json.dumps(_shown(info.job), indent=2, sort_keys=True))
    if not info.operators:
        lines.append("  (no operators committed)")
    for op in info.operators:
        lines.append(f"operator {op.name}: {len(op.partitions)} partition(s)")
        for p in op.partitions:
            lines.append(f"  partition kg={p.key_groups[0]}-{p.key_groups[1]}: {len(p.epochs)} retained epoch(s), "
                         f"{p.shared_files} shared file(s), {_size(p.stored_bytes)} stored")
            for e in p.epochs:
                mode = "incremental" if e.incremental else "full"
                lines.append(f"    epoch {e.epoch}: {e.backend} {e.kind} {mode}, {e.files} file(s), "
                             f"total {_size(e.bytes_total)}, written {_size(e.bytes_written)}"
                             + (f", {e.seconds * 1000:.1f} ms" if e.seconds is not None else ""))
                for name, s in sorted(e.states.items()):
                    count = f"~{s['entries']} keys (estimated)" if s["estimated"] else f"{s['entries']} entries"
                    lines.append(f"      state {name} (version {s['version']}): {count}, {_size(s['bytes'])} serialized")
                for name, t in sorted(e.timers.items()):
                    lines.append(f"      timers {name}: {t['event']} event, {t['processing']} processing, "
                                 f"watermark {watermark_text(t['watermark'])}")
                if e.metadata:
                    lines.append(f"      metadata {json.dumps(_shown(e.metadata), sort_keys=True)}")
                for code, name in sorted(e.unknown_types.items(), key=lambda t: int(t[0])):
                    lines.append(f"      unknown type code {code}, recorded as {name}: its state cannot be read here "
                                 f"until it is registered (statekit.register_type) or declared (statekit.types)")
    return "\n".join(lines)


def _strip_ttl(meta: StateMeta, cell: Any) -> tuple[Any, int | None]:
    """(user value, TTL timestamp of a value-like cell) from an exported cell."""
    if not meta.ttl:
        return cell, None
    if meta.kind == "list":
        return [e[0] for e in cell], None
    if meta.kind == "map":
        return {k: e[0] for k, e in cell.items()}, None
    return cell[0], cell[1]


def read_state(path: str, operator: str, state: str, epoch: int | None = None,
               key: bytes | None = None) -> list[dict[str, Any]]:
    """Rows ``{key_group, key, namespace, value, ttl_timestamp}`` of one state at ``epoch`` (default:
    the newest epoch any partition committed), gathered from every partition of that epoch; ``key``: the
    checkpoint's, when its manifests are signed."""
    store = CheckpointStore(path, key=key)
    parts = store.partitions(operator)
    by_part = {p: store.epochs(operator, p) for p in parts}
    committed = sorted({e for es in by_part.values() for e in es})
    if not committed:
        raise NoCheckpointError(f"operator {operator!r}: nothing committed at {path}")
    if epoch is None:
        epoch = committed[-1]
    elif epoch not in committed:
        raise NoCheckpointError(f"operator {operator!r}: epoch {epoch} is not retained; retained: {committed}")
    rows: list[dict[str, Any]] = []
    found = False
    for p in parts:
        if epoch not in by_part[p]:
            continue
        snap = read_logical(store.logical_snapshot(store.manifest(operator, p, epoch)))
        s = snap.states.get(state)
        if s is None:
            continue
        found = True
        for kg, key, ns, cell in s.entries:
            value, ts = _strip_ttl(s.meta, cell)
            rows.append({"key_group": kg, "key": key, "namespace": ns, "value": value, "ttl_timestamp": ts})
    if not found:
        raise CheckpointError(f"operator {operator!r} epoch {epoch}: no state named {state!r}")
    return rows


def main_inspect(argv: list[str] | None = None) -> int:
    """``statekit inspect CHECKPOINT [--json]``: print the report; exit code 1 on a checkpoint error."""
    ap = argparse.ArgumentParser(prog="statekit inspect", description="Describe the snapshots at a checkpoint location "
                                 f"(a signed one with its key in the environment variable {KEY_ENV}).",
                                 formatter_class=HelpFormatter)
    ap.add_argument("checkpoint", help="checkpoint path or URI")
    ap.add_argument("--json", action="store_true", help="print the structured report as JSON (watermarks as numbers)")
    args = ap.parse_args(argv)
    try:
        info = inspect_checkpoint(args.checkpoint, key_from_env())
    except CheckpointError as e:
        print(f"statekit inspect: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info.to_dict(), indent=2, sort_keys=True) if args.json else format_report(info))
    return 0
