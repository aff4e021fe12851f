"""The runs of ``statekit bench spark``, each in a process of its own: statekit's (``sessionize``, ``run_keyed`` with a
user's logic) and Spark's baselines (``session_window``, ``transformWithStateInPandas``, the floor), on the settings
every run shares; ``bench/spark.py`` picks them, and reports them."""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator

from statekit.spark.kafka import KafkaInput, kafka_conf

from . import kafka_source
from .common import GAP_MS, timed
from .user_logic import session_operator, vectorized_session_operator

MASTER = "local[2]"
PARTITIONS = 2
DELAY_MS = 10_000
SENTINEL = "__end_of_input__"
BACKENDS = ("heap", "rocksdb")
NATIVE, TWS = "spark session_window", "transformWithStateInPandas"
FLOOR = "spark stateless pass (shuffle by key, one Python stage, counts out)"
COLUMNS = ("user_id", "window_start", "window_end", "sum_value", "count")
INPUT_SCHEMA = "user_id string, ts_ms long, value long"
OUTPUT_SCHEMA = ", ".join(f"{c} {'string' if c == 'user_id' else 'long'}" for c in COLUMNS)
BUDGET_S = 300
"""A Spark baseline query still running after this long is stopped and rated on the batches it finished."""


SETTINGS = {
    "spark.sql.shuffle.partitions": PARTITIONS,
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
"""Spark settings of every run, classic or Connect (runtime settings: a Connect client can set them)."""


@dataclass(frozen=True)
class RunSpec:
    """What one run reads (a directory of ``fmt`` files, or a topic) and where it writes; ``backend`` and
    ``state_layout`` for statekit's runs; ``conf``: Spark settings added to ``SETTINGS``
    (``spark.statekit.memory_budget``); ``budget_s``: how long a Spark baseline's query may run before it is stopped."""

    input: str | KafkaInput
    work: str
    fmt: str
    backend: str | None = None
    state_layout: str | None = None
    """None: the backend's default layout (sessionize's)."""
    remote: str | None = None
    conf: tuple[tuple[str, str], ...] = ()
    budget_s: float = BUDGET_S
    partitions: int = PARTITIONS
    """statekit's state partitions (a resumed run may change them: a rescale)."""
    final: bool = True
    """statekit's runs: whether the run ends with ``--final`` (False: a run whose checkpoint a later one resumes)."""


def _spark(spec: RunSpec) -> Any:
    """The same session settings for every run (and the spec's ``conf``): a classic session on ``MASTER``, or with
    ``remote`` a Spark Connect session (``sc://host:port``, or ``local[2]``: a Connect server started in this process).
    A run reading a topic gets Spark's Kafka connector (``kafka_conf``)."""
    from statekit.spark import spark_session

    conf = {**SETTINGS, **dict(spec.conf)}
    return spark_session(None if spec.remote else MASTER, kafka_conf(conf) if isinstance(spec.input, KafkaInput)
                         else conf, app_name="statekit bench", remote=spec.remote)


def written_sessions(path: str) -> list[tuple]:
    """The sessions a run wrote, read with pyarrow after its process ended (so the check's memory is not
    counted in the run's peak RSS; files named ``_*`` or ``.*``, such as Spark's metadata, are skipped).
    Imported here, not with the module: a run's process imports this module, and pandas with it, which
    no run uses."""
    import pyarrow.dataset as pads

    table = pads.dataset(path, format="parquet").to_table(columns=list(COLUMNS))
    return sorted(row for row in zip(*(table.column(c).to_pylist() for c in COLUMNS)) if row[0] != SENTINEL)


def _statekit_metrics(summary: Any, seconds: float) -> dict:
    """A statekit run's wall seconds and output, and its epochs' metrics summed (``_timing`` shows them); the
    most state an epoch's processes held (``state_bytes``) and the first memory budget warning."""
    epochs = summary.epochs
    return {"seconds": seconds, "output": summary.output, "late": summary.total("late"),
            "batches": len(epochs), "snapshot_seconds": sum(m["snapshot_seconds"] for m in epochs),
            "epoch_seconds": sum(m["seconds"] for m in epochs), "process_seconds": sum(m["process_seconds"] for m in epochs),
            "setup_seconds": sum(m["setup_seconds"] for m in epochs),
            "restore_seconds": sum(m["restore_seconds"] for m in epochs),
            "fast_path": f"{sum(m['fast_path_partitions'] for m in epochs)}/{sum(m['partitions'] for m in epochs)}",
            "caught_up": f"{sum(m['caught_up_partitions'] for m in epochs)}/{sum(m['partitions'] for m in epochs)}",
            "state_bytes": max((m["state_bytes"] for m in epochs), default=0),
            "first_epoch_seconds": epochs[0]["seconds"] if epochs else 0.0,
            "first_restore_seconds": epochs[0]["restore_seconds"] if epochs else 0.0,
            "memory_warning": next((m["memory_warning"] for m in epochs if m["memory_warning"]), None)}


def run_builtin(spec: RunSpec) -> dict:
    """``statekit sessionize`` through its Python API (built-in sum and count), stream mode, ``--final`` unless the
    spec says otherwise."""
    from statekit.jobs import sessionize

    spark = _spark(spec)
    summary, seconds = timed(lambda: sessionize(
        spark, **kafka_source.sessionize_input(spec.input, spec.fmt), output=f"{spec.work}/out", key="user_id",
        time="ts_ms", gap=GAP_MS, watermark_delay=DELAY_MS, aggs=["sum:value", "count"], backend=spec.backend,
        partitions=spec.partitions, mode="stream", trigger="available-now", final=spec.final,
        state_layout=spec.state_layout))
    out = _statekit_metrics(summary, seconds)
    spark.stop()
    return out


def run_plain(spec: RunSpec) -> dict:
    """``run_keyed`` with a user's plain Python aggregate and window function (``user_logic``), read as the
    Spark baselines read the files, stream mode, ``final``."""
    return _run_user_logic(spec, session_operator)


def run_plain_cells(spec: RunSpec) -> dict:
    """``run_plain`` on ``WindowOperator``'s default layout (a stored cell per key): the plain aggregate as a user
    writes it, no layout chosen."""
    return _run_user_logic(spec, partial(session_operator, state_layout="cells"))


def run_vectorized(spec: RunSpec) -> dict:
    """``run_plain`` with the same logic vectorized (``user_logic.VectorSumAndCount``, ``SessionColumns``)."""
    return _run_user_logic(spec, vectorized_session_operator)


def _run_user_logic(spec: RunSpec, make_operator: Callable[[int], Any]) -> dict:
    """``run_keyed`` with the operator ``make_operator(gap)`` over the stream of input files."""
    from statekit.spark import run_keyed

    spark = _spark(spec)
    summary, seconds = timed(lambda: run_keyed(
        _stream(spark, spec.input, spec.fmt, "arrow"), key="user_id", time="ts_ms", columns=["value"],
        operator_factory=partial(make_operator, GAP_MS), result_schema=OUTPUT_SCHEMA, output=f"{spec.work}/out",
        watermark_delay=DELAY_MS, config={"backend": spec.backend}, partitions=spec.partitions, final=spec.final))
    out = _statekit_metrics(summary, seconds)
    spark.stop()
    return out


def _stream(spark: Any, input: str | KafkaInput, fmt: str, decode: str) -> Any:
    """The input files as a stream, one file per micro-batch, with their declared schema; or the topic's values,
    their JSON decoded as ``decode`` says (``read_topic``)."""
    if isinstance(input, KafkaInput):
        return kafka_source.stream(spark, input, decode)
    reader = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1)
    return reader.options(**({"header": "true"} if fmt == "csv" else {})).format(fmt).load(input)


def _source(spark: Any, input: str | KafkaInput, fmt: str) -> Any:
    from pyspark.sql import functions as F

    return (_stream(spark, input, fmt, "spark").withColumn("ts", F.timestamp_millis("ts_ms"))
            .withWatermark("ts", f"{DELAY_MS} milliseconds"))


def _run_query(spark: Any, build: Callable[[], Any], work: str, budget_s: float) -> dict:
    """Write the DataFrame ``build()`` makes (append mode) to parquet with availableNow; wall seconds, from
    building it (as a statekit run's time starts where it builds its input), and what it wrote. A query
    still running after ``budget_s`` is stopped: its rate is then the rows of the batches it finished
    over their time, and its sessions are not compared."""
    def go() -> tuple[Any, bool]:
        q = (build().writeStream.format("parquet").outputMode("append").option("checkpointLocation", f"{work}/ckpt")
             .trigger(availableNow=True).start(f"{work}/out"))
        done = q.awaitTermination(budget_s)
        if not done:
            q.stop()
        elif q.exception() is not None:
            raise RuntimeError(f"streaming query failed: {q.exception()}")
        return q, done

    (q, done), seconds = timed(go)
    batches = q.recentProgress
    out = {"seconds": seconds, "late": sum(op.numRowsDroppedByWatermark for p in batches for op in p.stateOperators),
           "batches": len(batches), "complete": done}
    if done:
        out["output"] = f"{work}/out"
    else:
        out["events"] = sum(p.numInputRows for p in batches)
        out["seconds"] = sum(p.durationMs.get("triggerExecution", 0) for p in batches) / 1000
    spark.stop()
    return out


def run_native(spec: RunSpec) -> dict:
    """Spark's streaming ``session_window`` aggregation, append mode, RocksDB state store."""
    from pyspark.sql import functions as F

    spark = _spark(spec)
    return _run_query(spark, lambda: (
        _source(spark, spec.input, spec.fmt).groupBy("user_id", F.session_window("ts", f"{GAP_MS} milliseconds"))
        .agg(F.sum("value").alias("sum_value"), F.count("*").alias("count"))
        .select("user_id", F.unix_millis("session_window.start").alias("window_start"),
                F.unix_millis("session_window.end").alias("window_end"), "sum_value", "count")), spec.work, spec.budget_s)


def run_floor(spec: RunSpec) -> dict:
    """The floor under any engine with Python in Spark's micro-batches: the files as a stream, shuffled by key
    into the partitions, every row handed to one Python (Arrow) stage, which keeps no state and writes only
    how many rows each batch it got held (so its output costs less than any engine's results)."""
    def count_rows(batches: Iterator[Any]) -> Iterator[Any]:  # nested: pickled by value, no import in workers
        import pyarrow as pa

        for batch in batches:
            yield pa.record_batch([pa.array([batch.num_rows], pa.int64())], names=["rows"])

    spark = _spark(spec)
    return _run_query(spark, lambda: _stream(spark, spec.input, spec.fmt, "spark").repartition(PARTITIONS, "user_id")
                      .mapInArrow(count_rows, "rows long"), spec.work, spec.budget_s)


def run_tws(spec: RunSpec) -> dict:
    """The same sessions with ``transformWithStateInPandas`` (event-time timers, RocksDB state store)."""
    spark = _spark(spec)
    processor = session_processor()(GAP_MS)
    return _run_query(spark, lambda: (
        _source(spark, spec.input, spec.fmt).groupBy("user_id")
        .transformWithStateInPandas(statefulProcessor=processor, outputStructType=OUTPUT_SCHEMA, outputMode="Append",
                                    timeMode="EventTime")), spec.work, spec.budget_s)


def merge_sessions(sessions: list[tuple], ts: Any, values: Any, gap_ms: int) -> list[tuple]:
    """Open sessions ``(start, end, sum, count)`` with the events added; touching sessions merge."""
    items = sorted([*sessions, *((int(t), int(t) + gap_ms, int(v), 1) for t, v in zip(ts, values))])
    merged = [items[0]]
    for s, e, total, n in items[1:]:
        cs, ce, ct, cn = merged[-1]
        if s <= ce:
            merged[-1] = (cs, max(ce, e), ct + total, cn + n)
        else:
            merged.append((s, e, total, n))
    return merged


def session_processor() -> type:
    """The StatefulProcessor class (pyspark imported lazily): per user a list state of open sessions and
    one event-time timer per session end; a timer emits the sessions that ended by then."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class SessionProcessor(StatefulProcessor):
        def __init__(self, gap_ms: int) -> None:
            self.gap_ms = gap_ms

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.open = handle.getListState("sessions", "start long, end long, total long, n long")

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            pdf = pd.concat(list(rows))
            before = [tuple(s) for s in self.open.get()]
            after = merge_sessions(before, pdf["ts_ms"].to_numpy(), pdf["value"].to_numpy(), self.gap_ms)
            self.open.put(after)
            old, new = {s[1] for s in before}, {s[1] for s in after}
            for end in old - new:
                self.handle.deleteTimer(end)
            for end in new - old:
                self.handle.registerTimer(end)
            return iter(())

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
            t = expiredTimerInfo.getExpiryTimeInMs()
            sessions = [tuple(s) for s in self.open.get()]
            done = [s for s in sessions if s[1] <= t]
            rest = [s for s in sessions if s[1] > t]
            if rest:
                self.open.put(rest)
            else:
                self.open.clear()
            if done:
                yield pd.DataFrame({"user_id": [key[0]] * len(done), "window_start": [s[0] for s in done],
                                    "window_end": [s[1] for s in done], "sum_value": [s[2] for s in done],
                                    "count": [s[3] for s in done]})

        def close(self) -> None:
            pass

    return SessionProcessor


def counted_rows(path: str) -> int:
    """How many rows the floor's Python stage counted (files named ``_*`` or ``.*`` skipped), read after its
    process ended."""
    import pyarrow.dataset as pads

    return pads.dataset(path, format="parquet").to_table(columns=["rows"]).column("rows").to_numpy().sum().item()


def _find(module: str) -> object | None:
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a missing parent package
        return None


def tws_unavailable() -> str | None:
    """Why transformWithStateInPandas cannot run here, or None."""
    missing = [m for m in ("pandas", "google.protobuf") if _find(m) is None]
    return f"transformWithStateInPandas needs pandas>=2.2 and protobuf; missing: {', '.join(missing)}" if missing else None


def java_version() -> str:
    from statekit.spark import find_java

    out = subprocess.run([find_java(), "-version"], capture_output=True, text=True)
    return (out.stderr or out.stdout).splitlines()[0]
