"""What the driver ships to every task: the job (constant across epochs) and the epoch to run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .map_splits import MapSplits
from .runtime import StatePlacement

LATE_TAG = "late"  # operators side-output late records under this tag; they go to <output>/_late/
INVALID_TAG = "invalid"  # records an operator refuses (objects with .value = the row and .reason) -> _invalid/


@dataclass(frozen=True)
class Fault:
    """An injected failure (tests): at ``epoch`` in ``partition``, on first attempts only unless ``always``.
    ``action``: ``raise`` an exception, ``exit`` the Python worker, ``kill-executor`` (its JVM);
    ``when``: ``before-commit`` or ``after-commit`` of the partition's snapshot. Each injection leaves
    a file under ``<checkpoint>/_faults/`` (evidence for tests)."""

    epoch: int
    partition: int
    action: str = "raise"
    when: str = "after-commit"
    always: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Fault":
        """From ``epoch=1,partition=0,action=exit,when=before-commit,always=1``."""
        try:
            kv = dict(p.split("=", 1) for p in spec.split(",") if p.strip())
            fault = cls(int(kv.pop("epoch")), int(kv.pop("partition")), kv.pop("action", "raise"),
                        kv.pop("when", "after-commit"), kv.pop("always", "0") in ("1", "true"))
        except (KeyError, ValueError) as e:
            raise ValueError(f"STATEKIT_INJECT_FAULT={spec!r}: expected epoch=E,partition=P[,action=raise|exit|"
                             f"kill-executor][,when=before-commit|after-commit][,always=1] ({e})") from None
        if kv or fault.action not in ("raise", "exit", "kill-executor") or fault.when not in ("before-commit", "after-commit"):
            raise ValueError(f"STATEKIT_INJECT_FAULT={spec!r}: unknown setting or value")
        return fault


@dataclass(frozen=True)
class JobPlan:
    """Constant for a run: operator, where its state and output live, how records are laid out.
    ``columns``: the input columns routed to the tasks, key first, then time, then the rest of
    ``row_columns``, the columns that make a record's row (in the user's order). The schemas are
    pyarrow schemas of the routed input, the results, the late side output (the row's columns and
    a ``reason``) and the invalid side output (``columns`` and a ``reason``). ``placement``: where the
    executor runtime keeps a partition's state open between epochs (``runtime.StatePlacement``)."""

    operator_id: str
    operator_factory: Callable[[], Any]
    checkpoint: str
    config: dict[str, Any]
    partitions: int
    max_parallelism: int
    columns: tuple[str, ...]
    row_columns: tuple[str, ...]
    routed_schema: Any
    result_schema: Any
    late_schema: Any
    invalid_schema: Any
    sink: Any
    retain: int = 3
    fault: Fault | None = None
    placement: StatePlacement = StatePlacement()
    lease_token: int = 0
    """The run's checkpoint lease token: a task commits only while it is the newest (0: no lease, not fenced)."""
    checkpoint_key: bytes | None = field(default=None, repr=False)
    """The key that signs and checks the checkpoint's manifests (``spark.statekit.checkpoint_key``; None: unsigned)."""

    def placed(self, placement: StatePlacement) -> JobPlan:
        """This job with its partitions' state run by ``placement`` (``runtime.PlacedJob``)."""
        return replace(self, placement=placement)

@dataclass(frozen=True)
class EpochPlan:
    """One epoch: its number, the committed epoch to start from (None: empty state), its watermark, the
    map splits whose end markers each task must receive before it commits (``MapSplits``), and whether it
    is the run's final epoch (every window fired: its state is not kept open after the commit). ``restore``:
    the epoch's rows are state, not records (a job's first epoch from an initial state: ``initial_state``),
    put into each task's operator by ``restore(operator, table)``."""

    epoch: int
    restore_epoch: int | None
    watermark: int | None
    splits: MapSplits = MapSplits(0)
    final: bool = False
    restore: Callable[[Any, Any], int] | None = None
