"""`statekit demo`: generate a clickstream as files, sessionize it through Spark (local, rocksdb,
one file per epoch, then the final epoch), verify the sessions against a plain sort-and-scan
reference and print a summary with where the files are."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .clickstream import generate_clickstream, sessionize_reference
from .config import DEFAULT_JOB_BACKEND


def run_demo(events: int = 200_000, keys: int = 2_000, files: int = 10, backend: str = DEFAULT_JOB_BACKEND,
             directory: str | None = None, master: str | None = None, gap: str = "30s",
             delay: str = "10s", quiet: bool = True) -> int:
    """Returns a process exit code: 0 when Spark's output equals the reference, 1 otherwise; ``quiet``: Spark
    logs errors only."""
    from tqdm import tqdm

    from .durations import to_millis
    from .jobs import sessionize, write_clickstream
    from .spark.session import command_session

    root = Path(directory or tempfile.mkdtemp(prefix="statekit-demo-"))
    clicks = generate_clickstream(events, keys, max_disorder_ms=to_millis(delay) // 2)
    write_clickstream(clicks, root / "input", files=files)
    print(f"statekit demo: {events:,} clicks of {keys:,} users in {files} csv files, session gap {gap}, "
          f"watermark delay {delay}, {backend} state")
    with command_session(master, app_name="statekit demo", quiet=quiet) as spark:
        with tqdm(total=files + 1, desc="epochs", unit="epoch") as bar:
            summary = sessionize(spark, input=str(root / "input"), output=str(root / "output"), key="user_id",
                                 time="ts_ms", gap=gap, watermark_delay=delay, aggs=["sum:value", "count"],
                                 backend=backend, final=True, progress=lambda m: bar.update(1))
        rows = (spark.read.parquet(summary.output)
                .select("user_id", "window_start", "window_end", "sum_value", "count").collect())
    got = sorted(tuple(r) for r in rows)
    expected = sessionize_reference(clicks, to_millis(gap))
    ok = got == expected
    print(f"  {len(got):,} sessions, {events / summary.seconds:,.0f} events/s through Spark "
          f"({summary.seconds:.1f}s, {len(summary.epochs)} epochs), late {summary.total('late')}, "
          f"{'identical to the sort-and-scan reference' if ok else 'DIFFERS from the reference'}")
    longest = max(expected, key=lambda s: s[4])
    print(f"  longest session: {longest[0]} with {longest[4]} clicks over {(longest[2] - longest[1]) / 1000:.0f}s")
    print(f"  input {root / 'input'}\n  output {summary.output} (spark.read.parquet), metrics {summary.output}/_metrics.jsonl"
          f"\n  checkpoint {summary.checkpoint} (statekit inspect {summary.checkpoint})")
    return 0 if ok else 1
