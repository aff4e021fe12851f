"""The `statekit` command: demo, sessionize, bench, inspect and checkpoint (rollback)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import StateError


def _sessionize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="a file or a directory of files (read in name order)")
    p.add_argument("--output", required=True,
                   help="output: a directory of parquet part files per epoch, or with --output-format delta a Delta table")
    p.add_argument("--output-format", choices=["parquet", "delta"], default="parquet",
                   help="parquet (default) or delta: each epoch one Delta transaction, idempotent per epoch")
    p.add_argument("--spark-checkpoint", default=None,
                   help="Spark's own streaming checkpoint, anywhere Hadoop can write (default <checkpoint>/_spark)")
    p.add_argument("--key", required=True, help="key column")
    p.add_argument("--time", required=True, help="event-time column, integer milliseconds")
    p.add_argument("--gap", default="30s", help="session gap (30s, 5m, 1h30m, or ms)")
    p.add_argument("--watermark-delay", default="0", help="how far behind the max event time the watermark trails")
    p.add_argument("--agg", action="append", default=None, help="sum:COL, count, min:COL, max:COL, avg:COL (repeatable)")
    p.add_argument("--backend", choices=["heap", "rocksdb"], default=None, help="state backend (default rocksdb)")
    p.add_argument("--state-layout", choices=["table", "cells"], default=None,
                   help="table: every key's sessions as columns, stored per key group (for millions of keys); "
                        "cells: a stored value per key. Default: the checkpoint's layout, table for a new one")
    p.add_argument("--checkpoint", default=None, help="checkpoint path or URI (default <output>/_checkpoint)")
    p.add_argument("--partitions", type=int, default=None, help="state partitions (default: Spark's parallelism)")
    p.add_argument("--master", default=None, help="Spark master (default local[*,4])")
    p.add_argument("--format", dest="fmt", choices=["csv", "parquet", "json"], default=None,
                   help="input format (default: from the file extension)")
    p.add_argument("--mode", choices=["stream", "batch"], default="stream")
    p.add_argument("--trigger", choices=["available-now", "continuous"], default="available-now")
    p.add_argument("--final", action="store_true", help="the input is complete: fire and clean every window at the end")
    p.add_argument("--migrate-state", action="store_true",
                   help="aggregates added or removed since the checkpoint's last run: migrate its open sessions "
                        "(an added aggregate counts their records from this run on) instead of refusing the run")
    p.add_argument("--max-ahead", default="default",
                   help="refuse event times further ahead of the clock (to _invalid/; default 7d; none: no limit)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)")


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise ValueError(f"--conf {pair!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def run_sessionize(args: Any) -> int:
    """``statekit sessionize``: progress per epoch, then a one-line summary."""
    from tqdm import tqdm

    from .jobs import sessionize
    from .spark import spark_session
    from .spark.interrupts import CtrlC

    spark = spark_session(args.master, _conf(args.conf), app_name="statekit sessionize")
    with CtrlC(None, spark.sparkContext.cancelAllJobs) as ctrl_c, tqdm(desc="epochs", unit="epoch", file=sys.stderr) as bar:
        def progress(m: dict) -> None:
            bar.update(1)
            bar.set_postfix(epoch=m["epoch"], records=m["records_in"], sessions=m["results"], late=m["late"],
                            invalid=m["invalid"], future=m["future"], state=m["state_entries"], snap_kb=m["snapshot_bytes"] // 1024)

        summary = sessionize(spark, input=args.input, output=args.output, key=args.key, time=args.time, gap=args.gap,
                             watermark_delay=args.watermark_delay, aggs=args.agg or ["count"], backend=args.backend,
                             checkpoint=args.checkpoint, partitions=args.partitions, fmt=args.fmt, mode=args.mode,
                             trigger=args.trigger, final=args.final, migrate_state=args.migrate_state, max_ahead=args.max_ahead,
                             output_format=args.output_format, spark_checkpoint=args.spark_checkpoint,
                             state_layout=args.state_layout, progress=progress)
    records = summary.total("records_in")
    if (summary.stopped or ctrl_c.requested) and args.trigger == "available-now":
        last = summary.epochs[-1]["epoch"] if summary.epochs else None
        done = f"epoch {last} committed" if last is not None else "no epoch committed"
        print(f"sessionize: stopped by Ctrl-C ({len(summary.epochs)} epochs this run, {done}); the rest of the "
              f"input is left for the next run: rerun the same command to go on", file=sys.stderr)
        return 130
    print(f"sessionize: {len(summary.epochs)} epochs, {records:,} records, {summary.total('results'):,} sessions, "
          f"{summary.total('late')} late, {summary.total('invalid')} invalid, "
          f"{records / summary.seconds if summary.seconds else 0:,.0f} records/s; output {summary.output}, "
          f"checkpoint {summary.checkpoint}")
    return 0


def run_checkpoint(args: Any) -> int:
    """``statekit checkpoint rollback CHECKPOINT --to-epoch N``: roll the job back to a retained epoch, print
    what was removed and how to go on."""
    from .spark.rollback import rollback

    done = rollback(args.checkpoint, args.to_epoch, output=args.output, spark_checkpoint=args.spark_checkpoint)
    print("\n".join(done.report()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="statekit", description="Flink-grade keyed state and windows for Python on Spark.")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="generate a clickstream, sessionize it through Spark, check the result")
    demo.add_argument("--events", type=int, default=200_000)
    demo.add_argument("--keys", type=int, default=2_000)
    demo.add_argument("--files", type=int, default=10, help="input files = epochs")
    demo.add_argument("--backend", choices=["heap", "rocksdb"], default="rocksdb")
    demo.add_argument("--output", default=None, help="directory for input, output and checkpoint (default: a new temp dir)")
    demo.add_argument("--master", default=None, help="Spark master (default local[*,4])")
    _sessionize_args(sub.add_parser("sessionize", help="session windows per key over files, through Spark, exactly once"))
    sub.add_parser("bench", help="backend benchmarks (see `statekit bench --help`)", add_help=False)
    sub.add_parser("inspect", help="epochs, partitions, states and sizes of a checkpoint (see `statekit inspect --help`)",
                   add_help=False)
    checkpoint = sub.add_parser("checkpoint", help="act on a checkpoint (rollback)")
    rollback = checkpoint.add_subparsers(dest="action", required=True).add_parser(
        "rollback", help="restart a job from a retained epoch: the next run goes on after it and reads the later input again")
    rollback.add_argument("checkpoint", help="checkpoint path or URI")
    rollback.add_argument("--to-epoch", type=int, required=True, help="a retained epoch (statekit inspect lists them)")
    rollback.add_argument("--output", default=None, help="the job's output (default: the one its checkpoint recorded)")
    rollback.add_argument("--spark-checkpoint", default=None,
                          help="Spark's streaming checkpoint (default: the one recorded, else <checkpoint>/_spark)")
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
    args = ap.parse_args(argv)
    try:
        if args.command == "sessionize":
            return run_sessionize(args)
        if args.command == "checkpoint":
            return run_checkpoint(args)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(events=args.events, keys=args.keys, files=args.files, backend=args.backend,
                            directory=args.output, master=args.master)
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
