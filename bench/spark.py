"""End to end on Spark (local[2]): statekit next to Spark's native streaming ``session_window`` and the same
sessionization written with ``transformWithStateInPandas``. statekit runs, on each backend (heap, rocksdb),
its built-in ``sessionize`` and a user's own logic through ``run_keyed`` (``user_logic``: a plain Python
``AggregateFunction`` and ``ProcessWindowFunction``, and the same vectorized: a numpy ``VectorAggregate`` and
an Arrow ``WindowBatchFunction``); ``VARIANTS`` lists them, ``--variants`` picks some.

One generated clickstream per user count, written as 10 parquet or csv files (quick: 2; one file per epoch
/ micro-batch, ``maxFilesPerTrigger=1``, ``availableNow``), the same Spark settings for every run
(``local[2]``, ``spark.sql.shuffle.partitions`` = statekit partitions, RocksDB state store provider,
10 s watermark delay, 30 s gap, sum+count per session). Each run is a fresh process with its own
JVM; events/s is the input size over the query's wall time (from building its input DataFrame, as a
statekit run does from its input's path, to the last session written; Spark's startup excluded); peak
RSS is sampled per role: driver Python, driver JVM, Python workers. Every run's sessions are checked
against the sort-and-scan reference, read once its process ended (so the check is not in the run's peak
RSS). A Spark baseline still running after ``BUDGET_S`` is stopped and rated on the micro-batches it
finished (so the full run stays well under an hour); its sessions are then not compared.

On Spark Connect (``--remote``): the same runs, each on a Connect session. ``--remote local[2]`` starts
a Connect server in each run's process (its JVM and Python workers are then in the sampled process tree,
as for a classic run); ``--remote sc://host:port`` connects to a running server, whose memory is not
sampled. The server's Python workers need statekit: a server started elsewhere needs ``PYSPARK_PYTHON``
set to an interpreter that has it.

The floor (``floor``, in the default scale's runs): the same files read as a stream and shuffled by key,
every row handed to one Python stage that keeps no state and writes only a row count per batch: what any
engine running Python in Spark's micro-batches pays at least, so it bounds the speedup such an engine can
show over Spark's own.

From a topic (``--source kafka``, ``kafka_source``): the same runs, each reading a topic of the same events
through statekit's Kafka input instead of the files. ``--source files,kafka`` (``sources``): both, each variant
run from the files then from the topic, one after the other (so the two speedups over Spark's ``session_window``
come from runs made close in time), their figures tagged with the source, and per statekit variant a row dividing
the topic's speedup by the files' (issue 48: within 10%).

Closing the last sessions: statekit runs ``--final`` (a last epoch with the maximum watermark).
Spark's streaming operators have no such end-of-input flush, so their input gets one extra file
holding a single sentinel event far in the future: its batch moves the watermark past every
session, and Spark's no-data batch emits them (the sentinel's own session is ignored).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from statekit.clickstream import Click, sessionize_reference

from . import kafka_source, sources
from .common import (CLICKS_SEED, DISORDER_MS, GAP_MS, HOSTS, JVM, PYTHON, WORKERS, PeakRSS, check_names, clicks,
                     count_tag, progress, rate, run_isolated)
from .report import BenchReport
from .spark_runs import (BACKENDS, BUDGET_S, DELAY_MS, FLOOR, INPUT_SCHEMA, MASTER, NATIVE, PARTITIONS, SENTINEL, TWS,
                         RunSpec, counted_rows, java_version, run_builtin, run_floor, run_native, run_plain,
                         run_tws, run_vectorized, tws_unavailable, written_sessions)

ROLES = {JVM: "driver JVM", WORKERS: "Python workers", HOSTS: "state hosts", PYTHON: "driver Python"}


@dataclass(frozen=True)
class Variant:
    """A kind of run: its runner (module level: each run is a fresh process) and whether it is statekit's
    (one run per backend, on the input files, closed by ``final``) or a Spark baseline (on the files
    with the sentinel); ``sessions``: whether it writes sessions (checked against the reference) or, as
    the floor, counts its input (every event checked to be counted)."""

    title: str
    runner: Callable[[RunSpec], dict]
    statekit: bool
    sessions: bool = True


VARIANTS = {
    "builtin": Variant("statekit sessionize (built-in sum and count)", run_builtin, statekit=True),
    "plain": Variant("statekit run_keyed, a plain Python AggregateFunction + ProcessWindowFunction", run_plain,
                     statekit=True),
    "vectorized": Variant("statekit run_keyed, the same logic as a numpy VectorAggregate + an Arrow "
                          "WindowBatchFunction", run_vectorized, statekit=True),
    "native": Variant(NATIVE, run_native, statekit=False),
    "tws": Variant(TWS, run_tws, statekit=False),
    "floor": Variant(FLOOR, run_floor, statekit=False, sessions=False),
}
"""``--variants`` names, in the order a run goes. A new variant is a runner taking a ``RunSpec`` (as
``run_plain``), a line here and its goal in ``GOALS``."""
GOALS = {("builtin", "native"): 2.0, ("plain", "native"): 1.5, ("vectorized", "native"): 2.0,
         ("builtin", "tws"): 10.0}
"""Each statekit variant's speedup goal over a Spark baseline, at every user count (issue 39; TWS: issue 6)."""


def check_variants(names: list[str]) -> list[str]:
    """``names`` if each is one of ``VARIANTS``; else a ValueError naming the unknown ones and the valid ones."""
    return check_names(names, VARIANTS, "variant", "native,plain,builtin")


def run_label(name: str, backend: str | None) -> str:
    """How the report names one run: ``statekit heap`` (built-in), ``statekit plain heap``, or the baseline's title."""
    if not VARIANTS[name].statekit:
        return VARIANTS[name].title
    return f"statekit {backend}" if name == "builtin" else f"statekit {name} {backend}"


def backends_of(name: str) -> tuple[str | None, ...]:
    """The backends a variant runs on: both for statekit's, none for a Spark baseline."""
    return BACKENDS if VARIANTS[name].statekit else (None,)


def _inputs(root: Path, n_events: int, n_users: int, seed: int, chosen: list[str], files: int, fmt: str,
            topics: kafka_source.Topics | None) -> tuple[sources.Inputs, list[tuple]]:
    """One clickstream's inputs for each source (``sources.prepare``; the sentinel far past its last event) and its
    reference sessions."""
    data = clicks(n_events, n_users, seed)
    sentinel = Click(SENTINEL, max(c.ts_ms for c in data) + 100 * (GAP_MS + DELAY_MS), 0)
    return (sources.prepare(root, data, sentinel, chosen, files, fmt, topics, INPUT_SCHEMA),
            sessionize_reference(data, GAP_MS))


SCALES = {
    "default": {"events": 1_000_000, "users": [10_000, 100_000], "files": 10, "optional": ("tws", "floor")},
    "medium": {"events": 2_000_000, "users": [400_000], "files": 10, "optional": ()},
    "large": {"events": 5_000_000, "users": [1_000_000], "files": 10, "optional": ()},
}
"""Sizes of ``statekit bench spark`` (``--scale medium``/``large``: the large-state cases of issue 13,
without the much slower transformWithStateInPandas and the floor unless ``--variants`` names them: the
``optional`` variants a scale runs by default); ``--users`` replaces a scale's user counts; ``--quick``
shrinks any to a smoke run (``QUICK``)."""
OPTIONAL = ("tws", "floor")
"""Variants a scale runs only when its ``optional`` names them or ``--variants`` does."""
QUICK = {"events": 5_000, "users": [500], "files": 2}
"""``--quick``'s sizes, whatever the scale (``--users`` still replaces the user counts): a smoke run, each
run's cost mostly its JVM's start and its micro-batches, so two files (sessions still span epochs) of a
few thousand events."""


def report_name(scale: str, fmt: str, users: list[int] | None, variants: list[str] | None, state_layout: str | None,
                remote: str | None, seed: int = CLICKS_SEED, source: str = "files", repeat: int = 1) -> str:
    """``spark`` and what differs from a default run:
    ``spark-medium-csv-users-10k-1m-native-plain-cells-connect-seed-11-repeat-3``, ``spark-kafka-users-10k``,
    ``spark-files-kafka-users-10k`` (both sources)."""
    tags = [scale if scale != "default" else "", source.replace(",", "-") if source != "files" else "",
            fmt if fmt != "parquet" else "",
            "users-" + "-".join(count_tag(u) for u in users) if users else "", "-".join(variants or ()),
            state_layout or "", "connect" if remote else "",
            f"seed-{seed}" if seed != CLICKS_SEED else "", f"repeat-{repeat}" if repeat != 1 else ""]
    return "-".join(["spark", *filter(None, tags)])


def run(quick: bool = False, scale: str = "default", state_layout: str | None = None,
        remote: str | None = None, users: list[int] | None = None, fmt: str = "parquet",
        variants: list[str] | None = None, seed: int = CLICKS_SEED, source: str = "files",
        kafka_bootstrap_servers: str | None = None, repeat: int = 1) -> BenchReport:
    """The ``variants`` (default: every one the scale runs) per user count on ``fmt`` input files of the
    clickstream drawn with ``seed``, or (``source`` kafka) on a topic of it (``bench/kafka_source.py``: on the broker
    at ``kafka_bootstrap_servers``, else one started for the run), or (``files,kafka``) on both, compared
    (``bench/sources.py``); with ``remote`` on Spark Connect sessions (see the module's notes). ``repeat``: every
    run made that many times, round after round, each variant rated on its run of median time (``_median_run``)."""
    kafka_source.check(source, kafka_bootstrap_servers, fmt, remote)
    size = {**SCALES[scale], **(QUICK if quick else {})}
    n_events, files, user_counts = size["events"], size["files"], users or size["users"]
    names = ([n for n in VARIANTS if n in check_variants(variants)] if variants
             else [n for n in VARIANTS if n not in OPTIONAL or n in size["optional"]])
    session = (f"Spark Connect, remote {remote}" + (" (a server per run, in its process)" if remote.startswith("local")
               else " (a running server: its memory is not sampled)") if remote else "classic")
    rep = BenchReport(report_name(scale, fmt, users, variants and names, state_layout, remote, seed, source, repeat), params={
        "state_layout": state_layout or "each backend's default (sessionize's)", "session": session,
        "events": n_events, "users": user_counts, "files": files, "java": java_version(), "master": remote or MASTER, "partitions": PARTITIONS,
        "seed": seed, "gap_ms": GAP_MS, "watermark_delay_ms": DELAY_MS, "max_disorder_ms": DISORDER_MS, "format": fmt,
        "aggregate": "sum(value), count per session", "state_store": "RocksDBStateStoreProvider",
        "trigger": "availableNow, maxFilesPerTrigger=1", "spark_query_budget_s": BUDGET_S,
        "variants": {n: VARIANTS[n].title for n in names},
        "goals": {f"{n} vs {VARIANTS[b].title}": f">= {g:g}x" for (n, b), g in GOALS.items() if n in names and b in names},
        "statekit": "builtin: sessionize --mode stream --final; plain and vectorized: run_keyed(final=True) with "
                    "statekit.bench.user_logic, state layout table; state_layout applies to builtin",
        "spark_end_of_input": "sentinel event file (see notes)",
        "runs_per_variant": f"{repeat}, round after round; each variant rated on its run of median time" if repeat > 1 else 1})
    missing = tws_unavailable() if "tws" in names else None
    if missing:
        rep.params["skipped"] = {TWS: missing}
    chosen = sources.sources_of(source)
    runs = [(u, n, b, s) for u in user_counts for n in names for b in backends_of(n) for s in chosen
            if not (n == "tws" and missing)]
    made: dict[tuple[str, int, str], list[tuple[dict, PeakRSS]]] = {}
    with tempfile.TemporaryDirectory(prefix="statekit-bench-spark-") as tmp, (
            kafka_source.topics(kafka_bootstrap_servers, Path(tmp)) if "kafka" in chosen else nullcontext()) as topics:
        inputs, references = {}, {}
        for u in user_counts:
            root = Path(tmp, f"users-{u}")
            root.mkdir()
            inputs[u], references[u] = _inputs(root, n_events, u, seed, chosen, files, fmt, topics)
        if topics is not None:
            rep.params.update(topics.params() if chosen == ["kafka"] else sources.params(topics))
        rounds = [run for _ in range(repeat) for run in runs]
        for u, name, backend, src in progress(rounds, total=len(rounds), desc="spark"):
            plain, with_sentinel = inputs[u][src]
            label = run_label(name, backend)
            work = Path(tmp, f"users-{u}", src, label.replace(" ", "-"))
            work.mkdir(parents=True)
            variant = VARIANTS[name]
            spec = RunSpec(plain if variant.statekit else with_sentinel, str(work), fmt, backend, state_layout, remote)
            res, peak = run_isolated(variant.runner, spec)
            if "output" not in res:
                res["agree"] = f"not compared: stopped after {BUDGET_S} s, rated on its {res['batches']} finished batches"
            elif variant.sessions:
                sessions = written_sessions(res.pop("output"))
                res.update(agree=_written({**res, "sessions": sessions}, references[u], n_events),
                           session_count=len(sessions))
            else:
                res["rows"] = counted_rows(res.pop("output"))
                res["agree"] = _written(res, references[u], n_events)
            made.setdefault((src, u, label), []).append((res, peak))
            shutil.rmtree(work, ignore_errors=True)
    _report(rep, n_events, user_counts, names, chosen, {key: _median_run(runs) for key, runs in made.items()},
            {u: len(ref) for u, ref in references.items()})
    return rep


def _median_run(runs: list[tuple[dict, PeakRSS]]) -> tuple[dict, PeakRSS]:
    """The run of median time among a variant's repeats (the faster middle one of an even count), carrying every
    repeat's seconds and peak RSS (``_timing`` gives their range); a repeat that differs from the reference, or was
    not compared, gives its comparison instead, so one wrong answer among the repeats is the report's failure."""
    res, peak = sorted(runs, key=lambda run: run[0]["seconds"])[(len(runs) - 1) // 2]
    if len(runs) == 1:
        return res, peak
    agrees = [r["agree"] for r, _ in runs]
    worst = next((a for a in agrees if a.startswith(DIFFERS)), None) or next(
        (a for a in agrees if a.startswith("not compared")), res["agree"])
    return {**res, "agree": worst, "repeats": [(r["seconds"], p.mib()) for r, p in runs]}, peak


def _report(rep: BenchReport, n_events: int, user_counts: list[int], names: list[str], chosen: list[str],
            results: dict[tuple[str, int, str], tuple[dict, PeakRSS]], reference_counts: dict[int, int]) -> None:
    """Per user count and source, each statekit variant (heap and rocksdb side by side) against each Spark
    baseline that ran: events/s with the speedup and its goal, sessions checked against the reference, peak RSS;
    with two sources, per statekit variant the topic's speedup over Spark's session_window over the files'
    (``sources.compare``); and the plots: events/s, peak RSS and the speedup over Spark's session_window per run
    (and source)."""
    both = len(chosen) > 1
    labels = [run_label(n, b) for n in names for b in backends_of(n)]
    ours = {run_label(n, b): (n, b) for n in names if VARIANTS[n].statekit for b in BACKENDS}
    rates_line: dict[str, list[tuple[float, float]]] = {sources.line(s, both, v): [] for s in chosen for v in labels}
    rss_line: dict[str, list[tuple[float, float]]] = {k: [] for k in rates_line}
    speedup_line: dict[str, list[tuple[float, float]]] = {sources.line(s, both, v): [] for s in chosen for v in ours}
    for users in user_counts:
        sizes = f"{n_events:,} events, {users:,} users"
        speedups: dict[str, dict[str, dict[str, float]]] = {}  # statekit variant -> source -> backend -> x
        for source in chosen:
            tag = sources.tag(source, both, sizes)
            got = {v: results[(source, users, v)] for v in labels if (source, users, v) in results}
            rates = {v: rate(res.get("events", n_events), res["seconds"]) for v, (res, _) in got.items()}
            for v, (res, peak) in got.items():
                rates_line[sources.line(source, both, v)].append((users, rates[v]))
                rss_line[sources.line(source, both, v)].append((users, peak.mib()))
                if v in ours and NATIVE in rates:
                    name, backend = ours[v]
                    speedups.setdefault(name, {}).setdefault(source, {})[backend] = rates[v] / rates[NATIVE]
                    speedup_line[sources.line(source, both, v)].append((users, rates[v] / rates[NATIVE]))
            agree = {v: res["agree"] for v, (res, _) in got.items()}
            rep.failures += differing(agree, tag)
            statekit = [n for n in names if VARIANTS[n].statekit] or [None]
            bases = [n for n in names if not VARIANTS[n].statekit and VARIANTS[n].title in got]
            comparison = _Comparison(rep, tag, got, rates, agree, reference_counts[users])
            for name in statekit:
                for base in [b for b in bases if VARIANTS[b].sessions] or [None]:
                    if name or base:
                        comparison.add(name, base)
            for floor in [b for b in bases if not VARIANTS[b].sessions]:
                comparison.floor(floor, statekit[0])
        for name, by_source in speedups.items():
            if len(by_source) == len(chosen) > 1:
                sources.compare(rep, _tag(name, sizes), by_source, NATIVE)
    rep.series("end to end on Spark local[2]", "users", "events/s", rates_line, log_x=True, log_y=True)
    rep.series("peak RSS, whole process tree", "users", "MiB", rss_line, log_x=True)
    if any(speedup_line.values()):
        rep.series(f"speedup over {NATIVE}", "users", "x", speedup_line, log_x=True)


def _tag(name: str | None, text: str) -> str:
    """A figure's tag: statekit variant ``name``'s (none for the built-in path) and ``text``."""
    return f"({name}, {text})" if name and name != "builtin" else f"({text})"


def differing(agree: dict[str, str], tag: str) -> list[str]:
    """The report's failures among runs' comparisons with the reference (``_written``): each that differs, so
    that the bench exits non-zero after writing its reports."""
    return [f"{variant} ({tag}): {text}" for variant, text in agree.items() if text.startswith(DIFFERS)]


DIFFERS = "DIFFERS"


def _written(res: dict, reference: list[tuple], n_events: int) -> str:
    """Whether a run wrote what it should: the reference sessions, or (the floor) a count of every event and
    the sentinel."""
    if "rows" in res:
        return (f"counted every event ({res['rows']:,} rows)" if res["rows"] == n_events + 1 else
                f"{DIFFERS}: {res['rows']:,} rows counted of {n_events + 1:,} read")
    if res["sessions"] == reference:
        return "identical to reference"
    return (f"{DIFFERS}: {len(res['sessions']):,} sessions, {len(set(res['sessions']) - set(reference)):,} not in "
            f"reference, {res['late']} late")


@dataclass
class _Comparison:
    """The figures of one user count: ``add`` puts a statekit variant's heap and rocksdb runs next to a
    baseline's (either may be None when ``--variants`` leaves it out)."""

    rep: BenchReport
    tag: str
    got: dict[str, tuple[dict, PeakRSS]]
    rates: dict[str, float]
    agree: dict[str, str]
    reference: int

    def add(self, name: str | None, base: str | None) -> None:
        heap, rocksdb = (run_label(name, b) for b in BACKENDS) if name else (None, None)
        baseline = VARIANTS[base].title if base else None
        runs = [v for v in (heap, rocksdb, baseline) if v in self.got]
        tag = _tag(name, self.tag)
        vs = f" vs {baseline}" if baseline else ""
        notes = "; ".join(_timing(v, self.got[v][0]) for v in runs)
        if name and baseline in self.rates:
            speedup = {b: self.rates[v] / self.rates[baseline] for b, v in zip(BACKENDS, (heap, rocksdb))
                       if v in self.rates}
            goal = GOALS.get((name, base))
            verdicts = "" if goal is None else (f" (goal >= {goal:g}x: " + ", ".join(
                f"{b} {'met' if x >= goal else 'MISSED'}" for b, x in speedup.items()) + ")")
            notes = "speedup " + ", ".join(f"{b} {x:.2f}x" for b, x in speedup.items()) + f"{verdicts}; {notes}"
        self._add(f"events/s{vs} {tag}", "events/s", [self.rates.get(v) for v in (heap, rocksdb, baseline)],
                  baseline, notes)
        self._add(f"sessions{vs} {tag}", "sessions", [self._count(v) for v in (heap, rocksdb, baseline)],
                  baseline, f"reference {self.reference:,}; " + "; ".join(f"{v}: {self.agree[v]}" for v in runs))
        for role, label in ROLES.items():
            self._add(f"peak RSS {label}{vs} {tag}", "MiB",
                      [self._rss(v, role) for v in (heap, rocksdb, baseline)], baseline,
                      "none: session_window runs in the JVM" if base == "native" and role in (WORKERS, HOSTS) else "")
        self._add(f"peak RSS whole process tree{vs} {tag}", "MiB",
                  [self._rss(v) for v in (heap, rocksdb, baseline)], baseline)

    def floor(self, name: str, ours: str | None) -> None:
        """The floor's rate beside statekit variant ``ours``'s runs, and the most the floor lets any engine with
        Python in the same micro-batches gain over Spark's ``session_window`` (when that ran too)."""
        title = VARIANTS[name].title
        heap, rocksdb = (run_label(ours, b) for b in BACKENDS) if ours else (None, None)
        bound = (f"with no state at all, a Python stage in these micro-batches runs at "
                 f"{self.rates[title] / self.rates[NATIVE]:.2f}x {NATIVE}; " if NATIVE in self.rates else "")
        runs = [v for v in (heap, rocksdb) if v in self.got]
        tag = _tag(ours, self.tag)
        self._add(f"events/s vs {title} {tag}", "events/s", [self.rates.get(v) for v in (heap, rocksdb, title)],
                  title, f"{bound}{title}: {self.agree[title]}; " + "; ".join(_timing(v, self.got[v][0])
                                                                          for v in [*runs, title]))

    def _add(self, name: str, unit: str, values: list[float | None], baseline: str | None, notes: str = "") -> None:
        self.rep.add(name, unit, heap=values[0], rocksdb=values[1], baseline=values[2], baseline_name=baseline or "",
                     notes=notes)

    def _count(self, variant: str | None) -> int | None:
        return self.got[variant][0].get("session_count") if variant in self.got else None

    def _rss(self, variant: str | None, role: str | None = None) -> float | None:
        return self.got[variant][1].mib(role) if variant in self.got else None


def _timing(variant: str, res: dict) -> str:
    """Seconds and batches of one run; for statekit also where its epochs' time went (the slowest task's
    set-up (Arrow input, sort, reaching its state host), restore, operator and snapshot time per epoch,
    summed; the rest is Spark's) and its local fast-path and caught-up shares."""
    text = f"{variant} {res['seconds']:.1f} s, {res['batches']} batches"
    if "repeats" in res:
        seconds, peaks = zip(*res["repeats"])
        text += (f" (the median of {len(seconds)} runs: {min(seconds):.1f}-{max(seconds):.1f} s, peak RSS "
                 f"{min(peaks):,.0f}-{max(peaks):,.0f} MiB)")
    if "fast_path" in res:
        parts = ("setup_seconds", "restore_seconds", "process_seconds", "snapshot_seconds")
        spark = res["epoch_seconds"] - sum(res[p] for p in parts)
        share = (res["restore_seconds"] + res["snapshot_seconds"]) / res["epoch_seconds"] if res["epoch_seconds"] else 0
        text += (f" (epochs {res['epoch_seconds']:.1f} s: task set-up {res['setup_seconds']:.1f} s, restores "
                 f"{res['restore_seconds']:.1f} s, operator {res['process_seconds']:.1f} s, snapshots "
                 f"{res['snapshot_seconds']:.1f} s (restores and snapshots {share:.1%}), Spark and the rest {spark:.1f} s; "
                 f"fast path {res['fast_path']}, caught up {res['caught_up']} partition-epochs)")
    return text
