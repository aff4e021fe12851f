"""The `statekit` command: demo, bench and inspect."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="statekit", description="Flink-grade keyed state and windows for Python on Spark.")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="sessionize a generated clickstream on both backends and check the result")
    demo.add_argument("--events", type=int, default=200_000)
    demo.add_argument("--keys", type=int, default=2_000)
    demo.add_argument("--backend", choices=["heap", "rocksdb", "both"], default="both")
    sub.add_parser("bench", help="backend benchmarks (see `statekit bench --help`)", add_help=False)
    sub.add_parser("inspect", help="epochs, partitions, states and sizes of a checkpoint (see `statekit inspect --help`)",
                   add_help=False)
    if argv[:1] == ["bench"]:
        from bench.runner import main as bench_main

        bench_main(argv[1:])
        return 0
    if argv[:1] == ["inspect"]:
        from .checkpoint import main_inspect

        return main_inspect(argv[1:])
    args = ap.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        backends = ("heap", "rocksdb") if args.backend == "both" else (args.backend,)
        return run_demo(events=args.events, keys=args.keys, backends=backends)
    return 2


if __name__ == "__main__":
    sys.exit(main())
