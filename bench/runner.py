"""Run bench parts and write their reports: ``python -m bench`` and ``statekit bench``. A part's module is
imported when the part runs, and one that needs a package of the bench extra says what to install."""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

from statekit.help_format import HelpFormatter

from . import PARTS


def run_parts(parts: list[str], quick: bool, out_dir: Path, scale: str = "default",
              state_layout: str | None = None, remote: str | None = None, users: list[int] | None = None,
              fmt: str = "parquet", variants: list[str] | None = None, seed: int | None = None,
              open_sessions: list[int] | None = None, epoch_records: int | None = None, runs: list[str] | None = None,
              memory_budget: str | None = None, bootstrap_sessions: list[int] | None = None,
              history_clicks: int | None = None, source: str = "files",
              kafka_bootstrap_servers: str | None = None, repeat: int = 1) -> dict[str, dict]:
    """Run each part, write DIR/<part>.json/.md/.png, and return the paths written per part; exit non-zero
    after writing them when a part's report lists failures (a run that got its answer wrong)."""
    only = {"spark": {**({"scale": scale} if scale != "default" else {}),
                      **({"state_layout": state_layout} if state_layout else {}),
                      **({"remote": remote} if remote else {}), **({"users": users} if users else {}),
                      **({"fmt": fmt} if fmt != "parquet" else {}), **({"variants": variants} if variants else {}),
                      **({"seed": seed} if seed is not None else {}),
                      **({"source": source} if source != "files" else {}),
                      **({"kafka_bootstrap_servers": kafka_bootstrap_servers} if kafka_bootstrap_servers else {}),
                      **({"repeat": repeat} if repeat != 1 else {})},
            OPEN_SESSIONS: {**({"open_sessions": open_sessions} if open_sessions else {}),
                            **({"epoch_records": epoch_records} if epoch_records else {}),
                            **({"runs": runs} if runs else {}),
                            **({"memory_budget": memory_budget} if memory_budget else {})},
            BOOTSTRAP: {**({"bootstrap_sessions": bootstrap_sessions} if bootstrap_sessions else {}),
                        **({"history_clicks": history_clicks} if history_clicks else {})}}
    for part, options in only.items():
        if options and parts != [part]:
            flags = " ".join(f"--{_FLAGS.get(k, k.replace('_', '-'))} {_text(v)}" for k, v in options.items())
            raise SystemExit(f"{flags} applies to the {part} part only: statekit bench {part} {flags}")
    written, failures = {}, []
    for part in parts:
        if part not in PARTS:
            raise SystemExit(f"unknown bench part {part!r}; valid: {', '.join(PARTS)}, all")
        t0 = time.perf_counter()
        module = _part_module(part)
        extra = {"data_dir": out_dir / f"{part}-data"} if part in (OPEN_SESSIONS, BOOTSTRAP) else {}
        report = module.run(quick=quick, **only.get(part, {}), **extra)
        paths = report.write(out_dir)
        print(f"[{part}] {time.perf_counter() - t0:.1f}s -> {', '.join(str(p) for p in paths.values())}")
        print(report.to_markdown())
        written[part] = paths
        failures += [f"[{report.part}] {f}" for f in report.failures]
    if failures:
        raise SystemExit("bench runs got wrong answers (written to their reports):\n" + "\n".join(failures))
    return written


OPEN_SESSIONS, BOOTSTRAP = "open-sessions", "bootstrap"
"""The parts that keep their generated input files in the output directory (``<out>/<part>-data``)."""
_FLAGS = {"fmt": "format"}
"""run_parts' part-only arguments whose flag is not their name."""


def _text(value: object) -> str:
    """An argument as its flag takes it (a list comma-separated)."""
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _part_module(part: str) -> ModuleType:
    """The part's module; a package of the bench extra missing says what to install."""
    try:
        return importlib.import_module(PARTS[part])
    except ImportError as e:
        raise SystemExit(f"statekit bench {part} needs the bench extra ({e.name} is not installed): "
                         f"pip install 'statekit[bench]'") from None


def _whole(item: str, what: str, example: str) -> int:
    """``item`` as a positive whole number, else an argument error naming it and ``what`` to pass (as ``example``)."""
    try:
        n = int(item)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a whole number; pass {what}, {example}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{what} must be positive, got {n}")
    return n


def _counts(what: str, example: str) -> Callable[[str], list[int]]:
    """A parser of ``what`` (``--users 10000,400000``): positive whole numbers, comma-separated."""
    return lambda text: [_whole(item, what, f"comma-separated, e.g. {example}") for item in text.split(",")]


def _epoch_records(text: str) -> int:
    """``--epoch-records 250000``: a positive whole number."""
    return _whole(text, "records per epoch", "e.g. 250000")


def _history_clicks(text: str) -> int:
    """``--history-clicks 10``: a positive whole number."""
    return _whole(text, "clicks per user", "e.g. 10")


def _repeat(text: str) -> int:
    """``--repeat 3``: a positive whole number."""
    return _whole(text, "runs per variant", "e.g. 3")


def _runs(text: str) -> list[str]:
    """``--runs rocksdb,native``: names of the open-sessions part's runs (checked by the part itself)."""
    try:
        return _part_module(OPEN_SESSIONS).check_runs([n.strip() for n in text.split(",") if n.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _variants(text: str) -> list[str]:
    """``--variants native,plain``: names of the spark part's variants (checked by the part itself)."""
    try:
        return _part_module("spark").check_variants([n.strip() for n in text.split(",") if n.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="statekit bench", description="Backend benchmarks: tables, JSON and plots "
                                 "(the parts need the bench extra: pip install 'statekit[bench]').",
                                 formatter_class=HelpFormatter)
    ap.add_argument("parts", nargs="*", default=["all"], help=f"parts to run: {', '.join(PARTS)} or all")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run (all: a few minutes, most of it Spark starting a JVM per run)")
    ap.add_argument("--out", default="bench-out", help="directory for <part>.json/.md/.png")
    ap.add_argument("--scale", choices=["default", "medium", "large"], default="default",
                    help="spark only: medium = 2M events of 400k users, large = 5M events of 1M users; every "
                         "variant but tws and floor (spark-medium.*, spark-large.*)")
    ap.add_argument("--state-layout", choices=["table", "cells"], default=None,
                    help="spark only: statekit's state layout on every backend (sessionize --state-layout; default: "
                         "table, which on rocksdb moves to cells past its share of the memory budget; a named one writes "
                         "spark-*-<layout>.*)")
    ap.add_argument("--remote", default=None, metavar="URL",
                    help="spark only: the same runs on Spark Connect sessions: sc://host:port (a running server, "
                         "whose Python workers have statekit) or local[2] (a server started per run); writes "
                         "spark-*-connect.*")
    ap.add_argument("--users", type=_counts("user counts", "10000,400000,1000000"), default=None, metavar="N,N,...",
                    help="spark only: user counts, comma-separated (e.g. 10000,400000,1000000), instead of the "
                         "scale's (writes spark-*-users-10k-400k-1m.*)")
    ap.add_argument("--format", dest="fmt", choices=["csv", "parquet"], default="parquet",
                    help="spark only: the input files' format, read by every variant (csv writes spark-*-csv.*)")
    ap.add_argument("--variants", type=_variants, default=None, metavar="NAME,...",
                    help="spark only: the runs to make, comma-separated, of builtin (statekit sessionize), plain "
                         "(run_keyed with a plain Python AggregateFunction), vectorized (the same as a numpy VectorAggregate), native (Spark's session_window), "
                         "tws (transformWithStateInPandas) and floor (a stateless pass through one Python stage: "
                         "the bound on any engine's speedup with Python in Spark's micro-batches); default: all "
                         "(medium and large: all but tws and floor); a subset "
                         "writes spark-*-<variants>.*")
    ap.add_argument("--seed", type=int, default=None, metavar="N",
                    help="spark only: draw the clickstream with another seed, data no tuning has seen (writes "
                         "spark-*-seed-N.*)")
    ap.add_argument("--source", choices=["files", "kafka", "files,kafka"], default="files",
                    metavar="files|kafka|files,kafka",
                    help="spark only: kafka = every variant reads a topic (4 partitions) of the same events through "
                         "statekit's Kafka input, on a broker started for the run (tools/kafka/broker.py) unless "
                         "--kafka-bootstrap-servers names one (writes spark-kafka-*); files,kafka = both, each variant "
                         "from the files then from the topic, and per statekit variant its speedup over Spark's "
                         "session_window from the topic / from the files, met when >= 0.9 (writes spark-files-kafka-*)")
    ap.add_argument("--kafka-bootstrap-servers", default=None, metavar="HOST:PORT",
                    help="spark --source kafka or files,kafka only: a running broker to load the topics into (the "
                         "bench deletes them at the end)")
    ap.add_argument("--repeat", type=_repeat, default=1, metavar="N",
                    help="spark only: make every run N times, round after round (so the host's drift reaches every "
                         "variant alike), and rate each variant on its run of median time, every run checked against "
                         "the reference (writes spark-*-repeat-N.*)")
    ap.add_argument("--open-sessions", type=_counts("open session counts", "1000000,10000000"), default=None,
                    metavar="N,N,...", help="open-sessions only: how many users (one open session each) per size, "
                    "instead of 10^6, 10^7 and 3 x 10^7 (quick: 2 x 10^4)")
    ap.add_argument("--epoch-records", type=_epoch_records, default=None, metavar="N",
                    help="open-sessions only: records per input file, so per epoch (default 250000; quick 10000)")
    ap.add_argument("--runs", type=_runs, default=None, metavar="NAME,...",
                    help="open-sessions only: the runs to make, comma-separated, of rocksdb (sessionize --backend "
                         "rocksdb, its default layout: cells), table (the same, --state-layout table), heap (--backend "
                         "heap, its default: table), native (Spark's session_window, RocksDB state store), plain (run_keyed "
                         "with a plain Python AggregateFunction on rocksdb, WindowOperator's default layout), restart "
                         "and rescale (rocksdb, a new application on 2 or 3 partitions after half the files); default: "
                         "rocksdb,table,heap,native (quick: rocksdb,native)")
    ap.add_argument("--memory-budget", default=None, metavar="SIZE",
                    help="open-sessions only: spark.statekit.memory_budget of statekit's runs (e.g. 2g; default: "
                         "statekit's own)")
    ap.add_argument("--bootstrap-sessions", type=_counts("open session counts", "1000000,10000000"), default=None,
                    metavar="N,N,...", help="bootstrap only: how many open sessions (users) per size, instead of "
                    "10^6 and 10^7 (quick: 2 x 10^4)")
    ap.add_argument("--history-clicks", type=_history_clicks, default=None,
                    metavar="N", help="bootstrap only: clicks per user in the history the replay runs over (default 2)")
    args = ap.parse_args(argv)
    parts = list(PARTS) if "all" in args.parts else args.parts
    run_parts(parts, args.quick, Path(args.out), args.scale, args.state_layout, args.remote, args.users, args.fmt,
              args.variants, args.seed, args.open_sessions, args.epoch_records, args.runs, args.memory_budget,
              args.bootstrap_sessions, args.history_clicks, args.source, args.kafka_bootstrap_servers, args.repeat)
