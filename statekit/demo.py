"""`statekit demo`: sessionize a generated clickstream with the window operator on both backends,
verify the sessions against a plain sort-and-scan reference, and print a summary."""

from __future__ import annotations

import tempfile
import time

from tqdm import tqdm

from .clickstream import epochs, generate_clickstream, sessionize_reference
from .config import StateConfig
from .descriptors import AggregateFunction
from .timers import MAX_TIMESTAMP


class SumCount(AggregateFunction):
    """Sum and count of click values: the demo's per-session aggregate."""

    def create_accumulator(self):
        return [0, 0]

    def add(self, value, accumulator):
        accumulator[0] += value
        accumulator[1] += 1
        return accumulator

    def merge(self, acc_a, acc_b):
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]

    def get_result(self, accumulator):
        return (accumulator[0], accumulator[1])


class SessionRow:
    """Window function turning (key, window, (sum, count)) into an output row."""

    def process(self, key, context, elements):
        for total, count in elements:
            yield (key, context.window.start, context.window.end, total, count)


def sessionize(clicks, backend: str, gap_ms: int, delay_ms: int, epoch_size: int, local_dir: str | None = None):
    """Run session windows over ``clicks`` in epochs; returns (sorted sessions, late count, seconds)."""
    from operators import EventTimeSessionWindows, ProcessWindowFunction, WindowOperator
    from operators.testing import OperatorHarness

    class Rows(SessionRow, ProcessWindowFunction):
        pass

    op = WindowOperator(EventTimeSessionWindows.with_gap(gap_ms), function=SumCount(), window_function=Rows(),
                        late_output_tag="late")
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=local_dir))
    h.open()
    out, late, max_ts = [], 0, None
    t0 = time.perf_counter()
    for batch in tqdm(list(epochs(clicks, epoch_size)), desc=f"{backend} epochs", leave=False):
        h.process_batch([(c.user_id, c.value, c.ts_ms) for c in batch])
        batch_max = max(c.ts_ms for c in batch)
        max_ts = batch_max if max_ts is None else max(max_ts, batch_max)
        h.process_watermark(max_ts - delay_ms)
        out.extend(v for v, _ in h.output())
        late += len(h.side_output("late"))
    h.process_watermark(MAX_TIMESTAMP)
    out.extend(v for v, _ in h.output())
    seconds = time.perf_counter() - t0
    h.close()
    return sorted(out), late, seconds


def run_demo(events: int = 200_000, keys: int = 2_000, gap_ms: int = 30_000, delay_ms: int = 10_000,
             epoch_size: int = 20_000, backends: tuple[str, ...] = ("heap", "rocksdb")) -> int:
    """Print what each backend did; returns a process exit code (1 when a backend disagrees with the reference)."""
    clicks = generate_clickstream(events, keys, max_disorder_ms=delay_ms // 2)
    expected = sessionize_reference(clicks, gap_ms)
    print(f"statekit demo: {events:,} clicks of {keys:,} users, session gap {gap_ms / 1000:g}s, "
          f"watermark delay {delay_ms / 1000:g}s, epochs of {epoch_size:,}")
    status = 0
    with tempfile.TemporaryDirectory(prefix="statekit-demo-") as tmp:
        for backend in backends:
            sessions, late, seconds = sessionize(clicks, backend, gap_ms, delay_ms, epoch_size, local_dir=tmp + "/" + backend)
            ok = sessions == expected and late == 0
            status |= 0 if ok else 1
            print(f"  {backend:8s} {len(sessions):,} sessions, {events / seconds:,.0f} events/s, late {late}, "
                  f"{'identical to the sort-and-scan reference' if ok else 'DIFFERS from the reference'}")
    longest = max(expected, key=lambda s: s[4])
    print(f"  longest session: {longest[0]} with {longest[4]} clicks over {(longest[2] - longest[1]) / 1000:.0f}s")
    return status
