"""Helpers shared by the bench parts: isolated runs with process-tree peak RSS, timing, progress,
the generated clickstream and the sum+count aggregate of the session benchmarks."""

from __future__ import annotations

import gc
import multiprocessing as mp
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import psutil
from tqdm import tqdm

from statekit import AggregateFunction
from statekit.clickstream import Click, generate_clickstream
from statekit.spark.runtime import HOST_NAME, SPAWNER_NAME

MIB = 1 << 20
GAP_MS = 30_000
"""Session gap of the session-window benchmarks (windows, spark)."""
DISORDER_MS = 5_000
"""Bounded disorder of the generated clickstream: events arrive up to this late."""

PYTHON, JVM, WORKERS, HOSTS, OTHER = "python", "jvm", "python workers", "state hosts", "other"
"""Roles in a process tree: the benchmark process itself, Java descendants (Spark's driver JVM),
Python descendants (Spark's Python workers, forked by the JVM's daemon), statekit's state hosts
(started by the workers) and anything else (shells)."""
STATEKIT_PYTHON = "statekit python"
"""Not a role of its own: the Python workers and state hosts of one sample summed (statekit's Python processes
on Spark: its daemon, the workers and the hosts), whose peak ``PeakRSS.by_role`` keeps beside the roles'."""


@dataclass
class PeakRSS:
    """Peak resident memory of a process tree, sampled: the whole tree and each role."""

    total: int = 0
    by_role: dict[str, int] = field(default_factory=dict)

    def mib(self, role: str | None = None) -> float:
        return (self.total if role is None else self.by_role.get(role, 0)) / MIB

    def highest(self, other: "PeakRSS") -> "PeakRSS":
        """The peaks of two runs one after the other: the larger of each figure."""
        roles = self.by_role.keys() | other.by_role.keys()
        return PeakRSS(max(self.total, other.total),
                       {r: max(self.by_role.get(r, 0), other.by_role.get(r, 0)) for r in roles})


class TreeSampler(threading.Thread):
    """Samples the memory of ``pid`` and all its descendants every ``interval`` seconds until stopped;
    keeps the peak of the sum over the tree and of each role's sum. Python workers, forked from Spark's
    daemon and sharing its pages, count their PSS (their share of shared pages), so that they are not
    counted twice, and so do state hosts forked by statekit's spawner (named ``HOST_NAME``, the spawner
    ``SPAWNER_NAME``: both forks of the daemon); every other process (the root, the JVM, hosts started
    as new interpreters) its RSS.
    PSS costs a walk of the process's page tables (~10 ms for a 1 GiB process), RSS a read of
    ``statm``: the sampler keeps its own CPU use small next to what it measures, on either side.
    A JVM's child still running the JVM itself (same command line) is the JVM starting a command:
    Java spawns with vfork, so until the child's exec it shares the JVM's memory and reads as a second
    copy of the JVM's RSS. It is not counted (counted, it added a whole JVM to a sample's sum: Spark's
    RocksDB state store spawns often, which put up to 1.3 GiB too much in native's peaks)."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = psutil.Process(pid), interval
        self.peak = PeakRSS()
        self._stop_event = threading.Event()

    def _role(self, p: psutil.Process) -> tuple[str, bool] | None:
        """``p``'s role and whether it is a fork sharing its daemon's pages (counted by PSS); None for a
        JVM's child between vfork and exec (its memory is the JVM's)."""
        if p.pid == self.root.pid:
            return PYTHON, False
        parent = p.parent()
        if parent is not None and parent.name().startswith("java") and p.cmdline() == parent.cmdline():
            return None
        name = p.name()  # read each time: a launcher shell may exec into java under the same pid
        if name in (HOST_NAME, SPAWNER_NAME):
            return HOSTS, True
        if name.startswith("python") and any("statekit.spark.runtime.host" in a for a in p.cmdline()):
            return HOSTS, False
        if name.startswith("python"):
            return WORKERS, True
        return (JVM if name.startswith("java") else OTHER), False

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        sums: dict[str, int] = {}
        for p in procs:
            try:
                found = self._role(p)
                if found is None:
                    continue
                role, forked = found
                mem = p.memory_full_info().pss if forked else p.memory_info().rss
                sums[role] = sums.get(role, 0) + mem
            except psutil.Error:  # exited between listing and reading
                continue
        self.peak.total = max(self.peak.total, sum(sums.values()))
        if WORKERS in sums or HOSTS in sums:
            sums[STATEKIT_PYTHON] = sums.get(WORKERS, 0) + sums.get(HOSTS, 0)
        for role, rss in sums.items():
            self.peak.by_role[role] = max(self.peak.by_role.get(role, 0), rss)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> PeakRSS:
        self._stop_event.set()
        self.join()
        return self.peak


def own_peak_rss() -> int:
    """This process's peak RSS (``VmHWM``: the high-water mark of its address space, which, unlike
    ``getrusage``'s maximum, does not carry over the parent's memory across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so that a state host whose
    worker exited stays in the sampled tree."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _isolated_child(conn: Any, fn: Callable, args: tuple, kwargs: dict) -> None:
    _adopt_orphans()
    try:
        result = fn(*args, **kwargs)
        conn.send(("ok", result, own_peak_rss()))
    except BaseException as e:  # report any failure to the parent instead of hanging it
        conn.send(("error", f"{type(e).__name__}: {e}", 0))
    finally:
        conn.close()


def run_isolated(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, PeakRSS]:
    """Run module-level ``fn`` in a fresh process; returns its result and the peak memory of that
    process and its descendants (sampled; the process's own peak RSS, exact, is taken when larger)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_isolated_child, args=(child, fn, args, kwargs))
    proc.start()
    child.close()
    sampler = TreeSampler(proc.pid)
    sampler.start()
    try:
        status, result, own_peak = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child for {fn.__name__} died with exit code {proc.exitcode}") from None
    finally:
        peak = sampler.stop()
    proc.join()
    if status != "ok":
        raise RuntimeError(f"benchmark child for {fn.__name__} failed: {result}")
    peak.by_role[PYTHON] = max(peak.by_role.get(PYTHON, 0), own_peak)
    peak.total = max(peak.total, own_peak)
    return result, peak


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and its wall seconds, after a full garbage collection (so no side pays for another's garbage)."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def rate(count: int, seconds: float) -> float:
    """Operations per second, guarding against a zero-length timing."""
    return count / seconds if seconds > 0 else float("inf")


def progress(iterable: Iterable, total: int | None = None, desc: str = "") -> Iterable:
    """A tqdm progress bar on stderr."""
    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, mininterval=0.5)


@contextmanager
def watched(count: Callable[[], int], total: int | None, desc: str, interval: float = 1.0) -> Iterator[None]:
    """A progress bar on stderr of ``count()``, polled every ``interval`` seconds while the block runs: the
    progress of a long run in another process (read from the files it writes)."""
    bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False)
    done = threading.Event()

    def poll() -> None:
        quiet = 0
        while not done.wait(interval):
            n = count()
            quiet = 0 if n != bar.n else quiet + 1
            if quiet % 30 == 0:  # on news, else now and then: the elapsed time
                bar.n = n
                bar.refresh()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield
    finally:
        done.set()
        poller.join()
        bar.close()


def check_names(names: list[str], valid: Iterable[str], what: str, example: str) -> list[str]:
    """``names`` if each is one of ``valid``; else a ValueError naming the unknown ones and the valid ones (a
    part's ``--variants`` or ``--runs``: ``what`` they are, an ``example`` list)."""
    valid = list(valid)
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        raise ValueError(f"unknown {what}(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                         f"valid: {', '.join(valid)} (comma-separated, e.g. {example})")
    return names


def count_tag(n: int) -> str:
    """``1m``, ``400k``, ``2500``: a count in a report's name."""
    for size, suffix in ((1_000_000, "m"), (1_000, "k")):
        if n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


CLICKS_SEED = 7
"""The seed of the benchmarks' clickstream (``bench spark --seed`` draws another: held-out data)."""


def clicks(n_events: int, n_keys: int, seed: int = CLICKS_SEED) -> list[Click]:
    """The benchmarks' clickstream: ``n_events`` clicks of ``n_keys`` users, disorder up to ``DISORDER_MS``."""
    return generate_clickstream(n_events, n_keys, seed=seed, max_disorder_ms=DISORDER_MS)


class SumCount(AggregateFunction):
    """(sum, count) of the values added: the per-session aggregate of the window benchmarks."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + value, accumulator[1] + 1)

    def merge(self, acc_a: tuple[int, int], acc_b: tuple[int, int]) -> tuple[int, int]:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator
