"""Run bench parts and write their reports: ``python -m bench`` and ``statekit bench``. A part's module is
imported when the part runs, and one that needs a package of the bench extra says what to install."""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from statekit.jobs import DEFAULT_STATE_LAYOUT

from . import PARTS


def run_parts(parts: list[str], quick: bool, out_dir: Path, scale: str = "default",
              state_layout: str = DEFAULT_STATE_LAYOUT, remote: str | None = None) -> dict[str, dict]:
    """Run each part, write DIR/<part>.json/.md/.png, and return the paths written per part."""
    spark_only = {**({"scale": scale} if scale != "default" else {}),
                  **({"state_layout": state_layout} if state_layout != DEFAULT_STATE_LAYOUT else {}),
                  **({"remote": remote} if remote else {})}
    if spark_only and parts != ["spark"]:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in spark_only.items())
        raise SystemExit(f"{flags} applies to the spark part only: statekit bench spark {flags}")
    written = {}
    for part in parts:
        if part not in PARTS:
            raise SystemExit(f"unknown bench part {part!r}; valid: {', '.join(PARTS)}, all")
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(PARTS[part])
        except ImportError as e:
            raise SystemExit(f"statekit bench {part} needs the bench extra ({e.name} is not installed): "
                             f"pip install 'statekit[bench]'") from None
        report = module.run(quick=quick, **spark_only)
        paths = report.write(out_dir)
        print(f"[{part}] {time.perf_counter() - t0:.1f}s -> {', '.join(str(p) for p in paths.values())}")
        print(report.to_markdown())
        written[part] = paths
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="statekit bench", description="Backend benchmarks: tables, JSON and plots "
                                 "(the parts need the bench extra: pip install 'statekit[bench]').",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("parts", nargs="*", default=["all"], help=f"parts to run: {', '.join(PARTS)} or all")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of about a minute")
    ap.add_argument("--out", default="bench-out", help="directory for <part>.json/.md/.png")
    ap.add_argument("--scale", choices=["default", "medium", "large"], default="default",
                    help="spark only: medium = 2M events of 400k users, large = 5M events of 1M users; heap, "
                         "rocksdb and Spark native (spark-medium.*, spark-large.*)")
    ap.add_argument("--state-layout", choices=["table", "cells"], default=DEFAULT_STATE_LAYOUT,
                    help="spark only: statekit's state layout (sessionize --state-layout; another than the "
                         "default writes spark-*-<layout>.*)")
    ap.add_argument("--remote", default=None, metavar="URL",
                    help="spark only: the same runs on Spark Connect sessions: sc://host:port (a running server, "
                         "whose Python workers have statekit) or local[2] (a server started per run); writes "
                         "spark-*-connect.*")
    args = ap.parse_args(argv)
    parts = list(PARTS) if "all" in args.parts else args.parts
    run_parts(parts, args.quick, Path(args.out), args.scale, args.state_layout, args.remote)
