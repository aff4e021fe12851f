"""Timer register/fire throughput and peak memory, heap next to rocksdb, 10^5..10^7 timers.

Each (backend, size) runs in a fresh process (``run_isolated``), so peak RSS is that run's
alone. Timers: random timestamps over 10,000 keys, registered in random order, then fired by
advancing the watermark in ten steps (the callback does nothing). Goal: rocksdb's peak RSS
stays flat (within 100 MiB) from the smallest to the largest size.
"""

from __future__ import annotations

import random

from statekit import StateConfig, TimerTarget, create_backend

from .common import progress, rate, run_isolated, timed
from .report import BenchReport

KEYS = 10_000
FLAT_GOAL_MIB = 100


class _Count(TimerTarget):
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def on_event_time(self, timer) -> None:
        self.n += 1

    def on_processing_time(self, timer) -> None:
        self.n += 1


def register_and_fire(backend_name: str, n: int) -> dict:
    """Register ``n`` event-time timers, then fire them all; rates in timers/s."""
    b = create_backend(StateConfig(backend=backend_name))
    try:
        target = _Count()
        svc = b.timer_service("bench", target)
        rng = random.Random(n)
        keys = [f"user-{i}" for i in range(KEYS)]
        set_key, reg = b.set_current_key, svc.register_event_time_timer

        def register() -> int:
            for i in range(n):
                set_key(keys[i % KEYS])
                reg(None, rng.randrange(n))
            return svc.num_event_time_timers()

        def fire() -> None:
            for step in range(1, 11):
                svc.advance_watermark(n * step // 10)

        registered, t_reg = timed(register)
        _, t_fire = timed(fire)
        if target.n != registered:
            raise RuntimeError(f"{backend_name}: fired {target.n} of {registered} timers")
        return {"register": rate(n, t_reg), "fire": rate(registered, t_fire), "timers": registered}
    finally:
        b.close()


def run(quick: bool = False) -> BenchReport:
    sizes = [10_000, 100_000] if quick else [100_000, 1_000_000, 10_000_000]
    backends = ("heap", "rocksdb")
    rep = BenchReport("timers", params={"sizes": sizes, "keys": KEYS, "quick": quick,
                                        "rocksdb.timer_cache_size": "default (128)"})
    rss = {b: [] for b in backends}
    reg = {b: [] for b in backends}
    fire = {b: [] for b in backends}
    runs = [(b, n) for n in sizes for b in backends]
    for backend_name, n in progress(runs, total=len(runs), desc="timers"):
        res, peak = run_isolated(register_and_fire, backend_name, n)
        rss[backend_name].append((n, peak.mib()))
        reg[backend_name].append((n, res["register"]))
        fire[backend_name].append((n, res["fire"]))
    for i, n in enumerate(sizes):
        rep.add(f"register {n:,} timers", unit="timers/s", heap=reg["heap"][i][1], rocksdb=reg["rocksdb"][i][1])
        rep.add(f"fire {n:,} timers", unit="timers/s", heap=fire["heap"][i][1], rocksdb=fire["rocksdb"][i][1])
        rep.add(f"peak RSS, {n:,} timers", unit="MiB", heap=rss["heap"][i][1], rocksdb=rss["rocksdb"][i][1])
    growth = rss["rocksdb"][-1][1] - rss["rocksdb"][0][1]
    rep.add(f"rocksdb RSS growth {sizes[0]:,} -> {sizes[-1]:,} timers", unit="MiB", rocksdb=growth,
            baseline=FLAT_GOAL_MIB, baseline_name="goal: flat within 100 MiB",
            notes="peak RSS of the largest run minus the smallest")
    rep.series("peak RSS vs timers", x_label="timers", y_label="MiB", lines=rss, log_x=True)
    rep.series("register rate", x_label="timers", y_label="timers/s", lines=reg, log_x=True)
    rep.series("fire rate", x_label="timers", y_label="timers/s", lines=fire, log_x=True)
    return rep
