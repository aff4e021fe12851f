"""The `statekit` command: demo, sessionize, bench, inspect and checkpoint (rollback)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from .config import DEFAULT_JOB_BACKEND
from .errors import StateError
from .help_format import HelpFormatter
from .jobs.aggregates import agg_help
from .registry import available_backends

if TYPE_CHECKING:
    from .spark import RunSummary

EXIT_INVALID = 3
"""``statekit sessionize``'s exit status when every record of its run was invalid, or more than
``--max-invalid-fraction`` of them: what was committed stays committed."""
SESSIONIZE_EXITS = (f"exit status: 0 done; 2 a mistake in the flags, the input or the output (most are found before "
                    f"Spark starts); "
                    f"{EXIT_INVALID} every record of the run was invalid, or more than --max-invalid-fraction of "
                    f"them (the epochs committed stay committed); 130 stopped by Ctrl-C")

TOP_REASONS = 3
"""How many kinds of invalid records the closing line of ``statekit sessionize`` names."""


def _sessionize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default=None,
                   help="a file, a directory of files of one format, or a glob of a directory's files ('clicks/*.csv'); "
                        "a stream takes them oldest modification time first, which must be name order: files whose "
                        "times tie or are out of name order are refused before the first epoch (or --topic)")
    kafka = p.add_argument_group("Kafka (docs/kafka.md; pip install 'statekit[kafka]')")
    kafka.add_argument("--topic", default=None, help="read this Kafka topic instead of --input")
    kafka.add_argument("--kafka-bootstrap-servers", default=None, metavar="HOST:PORT[,...]",
                       help="the Kafka cluster of --topic and of --sink-topic")
    kafka.add_argument("--starting-offsets", default="earliest",
                       help="where a new run starts reading: earliest (default), latest, or Spark's JSON of offsets "
                            "per partition; a rerun goes on from its checkpoint")
    kafka.add_argument("--value-schema", default=None, metavar="DDL",
                       help="the columns of the messages' values, 'user_id STRING, ts_ms LONG, value DOUBLE' "
                            "(default for --format json: inferred from the first messages; csv needs it)")
    kafka.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an option of Spark's Kafka source (maxOffsetsPerTrigger=N, kafka.security.protocol=...)")
    kafka.add_argument("--sink-topic", default=None,
                       help="also write each epoch's sessions into this topic as JSON, exactly once (Kafka "
                            "transactions sent by Spark tasks: read it with isolation.level=read_committed)")
    kafka.add_argument("--sink-late-topic", default=None,
                       help="the late records into this topic, in the same transactions")
    kafka.add_argument("--sink-invalid-topic", default=None,
                       help="the invalid records into this topic, in the same transactions")
    kafka.add_argument("--sink-partitions", type=int, default=None, metavar="N",
                       help="the sink's transactions (and tasks) per epoch, the records split by key (default 4); "
                            "a job keeps the count it started with")
    p.add_argument("--output", required=True,
                   help="output: a directory of parquet part files per epoch, or with --output-format delta a Delta table")
    p.add_argument("--output-format", choices=["parquet", "delta"], default="parquet",
                   help="parquet (default) or delta: each epoch one Delta transaction, idempotent per epoch")
    p.add_argument("--spark-checkpoint", default=None,
                   help="Spark's own streaming checkpoint, anywhere Hadoop can write (default <checkpoint>/_spark)")
    p.add_argument("--key", required=True, help="key column")
    p.add_argument("--time", required=True,
                   help="event-time column: TIMESTAMP, TIMESTAMP_NTZ, ISO-8601 text or epoch numbers (--time-unit)")
    p.add_argument("--time-unit", choices=["s", "ms", "us"], default=None,
                   help="unit of epoch-number times (default ms; without this flag, numbers that all look like "
                        "another unit's are refused before Spark starts)")
    p.add_argument("--time-format", default=None,
                   help="text times by a Spark datetime pattern, e.g. 'yyyy-MM-dd HH:mm:ss' (default: ISO-8601)")
    p.add_argument("--time-zone", default="UTC", help="zone of text times that name none (Europe/Berlin, +01:00)")
    p.add_argument("--gap", default="30s", help="session gap, with a unit: 30s, 500ms, 5m, 1h30m")
    p.add_argument("--watermark-delay", default="0",
                   help="how far behind the max event time the watermark trails, with a unit (10s, 2m)")
    p.add_argument("--agg", action="append", default=None, help=agg_help())
    p.add_argument("--backend", choices=available_backends(), default=None, help=f"state backend (default {DEFAULT_JOB_BACKEND})")
    p.add_argument("--state-layout", choices=["table", "cells"], default=None,
                   help="table: every key's sessions as columns, the faster one; on rocksdb it moves to cells past "
                        "its share of the memory budget. cells: a stored value per key from the start. Default: the "
                        "checkpoint's layout; for a new one table")
    p.add_argument("--checkpoint", default=None, help="checkpoint path or URI (default <output>/_checkpoint)")
    p.add_argument("--partitions", type=int, default=None, help="state partitions (default: Spark's parallelism)")
    spark = p.add_mutually_exclusive_group()
    spark.add_argument("--master", default=None, help="Spark master (default local[*,4])")
    spark.add_argument("--remote", default=None, metavar="URL",
                       help="a Spark Connect session instead: sc://host:port, or local[N] for a server started here "
                            "(default: pyspark's SPARK_REMOTE environment variable, if set)")
    p.add_argument("--format", dest="fmt", choices=["csv", "parquet", "json"], default=None,
                   help="input format (default: from the file extension; for --topic the values' format, json or csv, "
                        "default json)")
    p.add_argument("--schema", default=None, metavar="DDL",
                   help="csv or json input: its columns, every one in the files' order, 'user_id STRING, ts_ms LONG, "
                        "value DOUBLE' (default: typed from the first file's first 20,000 lines; a record that does "
                        "not fit goes to _invalid)")
    p.add_argument("--mode", choices=["stream", "batch"], default="stream",
                   help="stream: one epoch per input file; batch: the whole input as one epoch, then the final one")
    p.add_argument("--trigger", choices=["available-now", "continuous"], default="available-now",
                   help="available-now: process the files there and stop; continuous: watch for new ones until Ctrl-C")
    p.add_argument("--final", action="store_true", help="the input is complete: fire and clean every window at the end")
    p.add_argument("--initial-state", default=None, metavar="TABLE",
                   help="start a new checkpoint from this table of open sessions (parquet, csv, json or Delta; the "
                        "output's columns, avg as avg_COL_sum and avg_COL_count), as if the job had sessionized the "
                        "history that made them; a row that is not such a session is refused before anything is written")
    p.add_argument("--initial-state-format", choices=["csv", "parquet", "json", "delta"], default=None,
                   help="the --initial-state table's format (default: a Delta table's _delta_log, else the file extension)")
    p.add_argument("--migrate-state", action="store_true",
                   help="aggregates added or removed since the checkpoint's last run: migrate its open sessions "
                        "(an added aggregate counts their records from this run on) instead of refusing the run")
    p.add_argument("--max-ahead", default="default",
                   help="refuse event times further ahead of the clock, a duration with a unit (to _invalid/; "
                        "default 7d; none: no limit)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    p.add_argument("--max-invalid-fraction", type=float, default=1.0, metavar="F",
                   help=f"exit {EXIT_INVALID} after the run when more than this fraction of its records was invalid "
                        f"(1.0: only when every record was)")
    p.add_argument("--verbose", action="store_true", help="Spark's warnings too (by default it logs errors only)")


def _conf(pairs: list[str], flag: str = "--conf") -> dict[str, str]:
    """``KEY=VALUE`` pairs of a repeatable ``flag`` as a dict."""
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise ValueError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def run_sessionize(args: Any) -> int:
    """``statekit sessionize``: the mistakes found before Spark starts, progress per epoch, then a one-line
    summary; ``EXIT_INVALID`` when too many of the run's records were invalid."""
    from tqdm import tqdm

    from .jobs import sessionize
    from .jobs.preflight import preflight_sessionize
    from .spark.interrupts import CtrlC
    from .spark.event_time import TimeSpec
    from .spark.session import command_session, remote_url, starts_jvm
    from .spark.session_kind import job_canceller

    if not 0 <= args.max_invalid_fraction <= 1:
        raise ValueError(f"--max-invalid-fraction must be between 0 and 1, got {args.max_invalid_fraction}")
    conf = _conf(args.conf)
    kafka, sink = _kafka_input(args), _kafka_sink(args)
    if kafka is not None and args.schema is not None:
        raise ValueError("--schema is the columns of --input files; a topic's messages take --value-schema")
    if kafka is not None:
        from .spark.kafka import kafka_conf

        conf = kafka_conf(conf)
    url = remote_url(args.master, args.remote)
    preflight_sessionize(input=args.input, output=args.output, key=args.key, time=args.time, aggs=args.agg or ["count"],
                         gap=args.gap, watermark_delay=args.watermark_delay, fmt=args.fmt, max_ahead=args.max_ahead,
                         partitions=args.partitions, checkpoint=args.checkpoint, output_format=args.output_format,
                         connect_server=not starts_jvm(url), mode=args.mode,
                         spark_checkpoint=args.spark_checkpoint or conf.get("spark.statekit.spark_checkpoint"),
                         conf=conf, time_spec=TimeSpec(args.time_unit or "ms", args.time_format, args.time_zone),
                         unit_given=args.time_unit is not None, initial_state=args.initial_state, kafka=kafka)
    with command_session(args.master, conf, app_name="statekit sessionize", quiet=not args.verbose, remote=url) as spark, \
            CtrlC(None, job_canceller(spark)) as ctrl_c, tqdm(desc="epochs", unit="epoch", file=sys.stderr) as bar:
        def progress(m: dict) -> None:
            bar.update(1)
            bar.set_postfix(epoch=m["epoch"], records=m["records_in"], sessions=m["results"], late=m["late"],
                            invalid=m["invalid"], future=m["future"], state=m["state_entries"], snap_kb=m["snapshot_bytes"] // 1024,
                            state_mb=m["state_bytes"] >> 20)

        summary = sessionize(spark, input=args.input, output=args.output, key=args.key, time=args.time, gap=args.gap,
                             watermark_delay=args.watermark_delay, aggs=args.agg or ["count"], backend=args.backend,
                             checkpoint=args.checkpoint, partitions=args.partitions, fmt=args.fmt, mode=args.mode,
                             trigger=args.trigger, final=args.final, migrate_state=args.migrate_state, max_ahead=args.max_ahead,
                             output_format=args.output_format, spark_checkpoint=args.spark_checkpoint,
                             state_layout=args.state_layout, progress=progress, time_unit=args.time_unit or "ms",
                             time_format=args.time_format, time_zone=args.time_zone, kafka=kafka, sink=sink,
                             initial_state=args.initial_state, initial_state_format=args.initial_state_format,
                             input_schema=args.schema)
    records = summary.total("records_in")
    if (summary.stopped or ctrl_c.requested) and args.trigger == "available-now":
        last = summary.epochs[-1]["epoch"] if summary.epochs else None
        done = f"epoch {last} committed" if last is not None else "no epoch committed"
        print(f"sessionize: stopped by Ctrl-C ({len(summary.epochs)} epochs this run, {done}); the rest of the "
              f"input is left for the next run: rerun the same command to go on", file=sys.stderr)
        return 130
    warnings = [m["memory_warning"] for m in summary.epochs if m["memory_warning"]]
    if warnings:
        print(f"sessionize: warning: {warnings[-1]}", file=sys.stderr)
    restored = summary.total("restored")
    if restored:
        print(f"sessionize: started from {restored:,} open sessions of {args.initial_state}")
    print(f"sessionize: {len(summary.epochs)} epochs, {records:,} records, {summary.total('results'):,} sessions, "
          f"{_side_outputs(summary)}, {records / summary.seconds if summary.seconds else 0:,.0f} records/s; "
          f"output {summary.output}, checkpoint {summary.checkpoint}")
    return _invalid_exit(summary, args.max_invalid_fraction)


def _kafka_input(args: Any) -> Any:
    """The ``KafkaInput`` of ``--topic`` (None: the input is ``--input``), its flags checked."""
    if (args.input is None) == (args.topic is None):
        raise ValueError("pass one input: --input (files) or --topic (a Kafka topic, with --kafka-bootstrap-servers)")
    if args.topic is None:
        return None
    from .spark.kafka import KafkaInput

    if not args.kafka_bootstrap_servers:
        raise ValueError(f"--topic {args.topic} needs --kafka-bootstrap-servers HOST:PORT")
    return KafkaInput(args.kafka_bootstrap_servers, args.topic, args.starting_offsets, args.fmt or "json",
                      args.value_schema, tuple(_conf(args.kafka_option, "--kafka-option").items()))


def _kafka_sink(args: Any) -> Any:
    """The ``KafkaSink`` of ``--sink-topic`` (None: none asked)."""
    if args.sink_topic is None:
        if args.sink_late_topic or args.sink_invalid_topic or args.sink_partitions is not None:
            raise ValueError("--sink-late-topic, --sink-invalid-topic and --sink-partitions go with --sink-topic")
        return None
    if not args.kafka_bootstrap_servers:
        raise ValueError(f"--sink-topic {args.sink_topic} needs --kafka-bootstrap-servers HOST:PORT")
    if args.output_format == "delta":
        raise ValueError("--sink-topic and --output-format delta: pass one sink")
    if args.sink_partitions is not None and args.sink_partitions < 1:
        raise ValueError(f"--sink-partitions {args.sink_partitions}: needs 1 or more")
    from .spark.kafka_sink import DEFAULT_SINK_PARTITIONS, KafkaSink

    return KafkaSink(args.kafka_bootstrap_servers, args.sink_topic, late_topic=args.sink_late_topic,
                     invalid_topic=args.sink_invalid_topic,
                     sink_partitions=DEFAULT_SINK_PARTITIONS if args.sink_partitions is None else args.sink_partitions)


def _reasons(summary: RunSummary) -> dict[str, int]:
    """The run's invalid records by kind of reason (the epochs' ``invalid_reasons``), most frequent first."""
    counts: Counter[str] = Counter()
    for m in summary.epochs:
        counts.update(m["invalid_reasons"])
    return dict(counts.most_common())


def _side_outputs(summary: RunSummary) -> str:
    """How many records were late and invalid (those ahead of the clock among them), the top reasons, and where
    they went."""
    late, invalid = summary.total("late"), summary.total("invalid")
    text = f"{late:,} late" + (f" (in {summary.output}/_late)" if late else "") + f", {invalid:,} invalid"
    if invalid:
        reasons = list(_reasons(summary).items())
        top = ", ".join(f"{reason} {n:,}" for reason, n in reasons[:TOP_REASONS])
        text += f" ({top}{', ...' if len(reasons) > TOP_REASONS else ''}; in {summary.output}/_invalid)"
    return text


def _invalid_exit(summary: RunSummary, limit: float) -> int:
    """0, or ``EXIT_INVALID`` with a line saying why, when every record of the run was invalid or more than
    ``limit`` of them."""
    records, invalid = summary.total("records_in"), summary.total("invalid")
    if not records or (invalid < records and invalid / records <= limit):
        return 0
    what = ("every record of this run was invalid" if invalid == records else
            f"{invalid:,} of {records:,} records were invalid ({invalid / records:.1%}), more than "
            f"--max-invalid-fraction {limit}")
    top = next(iter(_reasons(summary).items()), None)
    if top is not None:
        what += f" (most often: {top[0]}, {top[1]:,} records)"
    print(f"sessionize: error: {what}; they are in {summary.output}/_invalid "
          f"with their reasons. The {len(summary.epochs)} epochs of this run stay committed: fix the input or the "
          f"flags (--key, --time), then run again with a new --output", file=sys.stderr)
    return EXIT_INVALID


def run_checkpoint(args: Any) -> int:
    """``statekit checkpoint rollback CHECKPOINT --to-epoch N``: roll the job back to a retained epoch, print
    what was removed and how to go on."""
    from .spark.rollback import rollback

    done = rollback(args.checkpoint, args.to_epoch, output=args.output, spark_checkpoint=args.spark_checkpoint)
    print("\n".join(done.report()))
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``statekit`` command line (``bench`` and ``inspect`` parse their own arguments)."""
    ap = argparse.ArgumentParser(prog="statekit", description="Flink-grade keyed state and windows for Python on Spark.",
                                 formatter_class=HelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="generate a clickstream, sessionize it through Spark, check the result",
                          formatter_class=HelpFormatter)
    demo.add_argument("--events", type=int, default=200_000, help="clicks generated")
    demo.add_argument("--keys", type=int, default=2_000, help="users clicking")
    demo.add_argument("--files", type=int, default=10, help="input files = epochs")
    demo.add_argument("--backend", choices=available_backends(), default=DEFAULT_JOB_BACKEND, help="state backend")
    demo.add_argument("--output", default=None, help="directory for input, output and checkpoint (default: a new temp dir)")
    demo.add_argument("--master", default=None, help="Spark master (default local[*,4])")
    demo.add_argument("--verbose", action="store_true", help="Spark's warnings too (by default it logs errors only)")
    _sessionize_args(sub.add_parser("sessionize", help="session windows per key over files, through Spark, exactly once",
                                    formatter_class=HelpFormatter, epilog=SESSIONIZE_EXITS))
    sub.add_parser("bench", help="backend benchmarks (see `statekit bench --help`)", add_help=False)
    sub.add_parser("inspect", help="epochs, partitions, states and sizes of a checkpoint (see `statekit inspect --help`)",
                   add_help=False)
    checkpoint = sub.add_parser("checkpoint", help="act on a checkpoint (rollback)", formatter_class=HelpFormatter)
    rollback = checkpoint.add_subparsers(dest="action", required=True).add_parser(
        "rollback", help="restart a job from a retained epoch: the next run goes on after it and reads the later input again",
        formatter_class=HelpFormatter)
    rollback.add_argument("checkpoint", help="checkpoint path or URI")
    rollback.add_argument("--to-epoch", type=int, required=True, help="a retained epoch (statekit inspect lists them)")
    rollback.add_argument("--output", default=None, help="the job's output (default: the one its checkpoint recorded)")
    rollback.add_argument("--spark-checkpoint", default=None,
                          help="Spark's streaming checkpoint (default: the one recorded, else <checkpoint>/_spark)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        try:
            from statekit.bench.runner import main as bench_main
        except ImportError as e:
            raise SystemExit(f"statekit bench needs the bench extra ({e.name} is not installed): "
                             f"pip install 'statekit[bench]'") from None

        bench_main(argv[1:])
        return 0
    if argv[:1] == ["inspect"]:
        from .checkpoint import main_inspect

        return main_inspect(argv[1:])
    args = parser().parse_args(argv)
    try:
        if args.command == "sessionize":
            return run_sessionize(args)
        if args.command == "checkpoint":
            return run_checkpoint(args)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(events=args.events, keys=args.keys, files=args.files, backend=args.backend,
                            directory=args.output, master=args.master, quiet=not args.verbose)
    except (StateError, ValueError, ImportError) as e:
        print(f"statekit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # a second Ctrl-C (``spark.interrupts``), or one before the epochs start
        print(f"statekit {args.command}: {e or 'interrupted'}; every epoch committed before stays committed: rerun "
              f"the same command to go on", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
