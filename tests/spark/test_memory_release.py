"""``release_free_memory``: what an epoch freed goes back to the system, so an idle state host or
Python worker does not sit at its last epoch's high-water mark; and ``peak_grown_bytes``: the memory budget's
check sees an epoch's peak, so a final watermark that takes a multiple of the state for a moment and frees it
before the commit is still counted."""

from __future__ import annotations

import subprocess
import sys

from statekit.spark.runtime import peak_grown_bytes, release_free_memory, reset_peak, take_peak
from statekit.spark.runtime.memory import ALLOCATOR_ENV, allocator_environment, grown_bytes

MIB = 1 << 20

CODE = """
import os
from statekit.spark.runtime.memory import release_free_memory

def rss():
    return int(open(f"/proc/{os.getpid()}/status").read().split("VmRSS:")[1].split()[0]) // 1024

blocks = [bytes(4000) for _ in range(50_000)]  # ~200 MiB in malloc's heap (past pymalloc's small objects)
keep = bytes(4000)                             # allocated after them: the heap's top stays in use
del blocks
before = rss()
release_free_memory()
print(before, rss())
"""


def test_memory_freed_in_the_heap_goes_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=True)
    before, after = map(int, out.stdout.split())
    assert before - after > 150, (before, after)


def test_a_host_environment_purges_arrow_pages_unless_the_user_set_it():
    assert allocator_environment({"PATH": "/bin"}) == {"PATH": "/bin", **ALLOCATOR_ENV}
    assert allocator_environment({"MIMALLOC_PURGE_DELAY": "50"})["MIMALLOC_PURGE_DELAY"] == "50"


def test_the_peak_counts_memory_freed_before_the_check_and_starts_anew_at_reset():
    release_free_memory()
    reset_peak()
    before = peak_grown_bytes()
    burst = bytearray(256 * MIB)
    burst[::4096] = b"x" * len(range(0, len(burst), 4096))  # every page touched: resident
    del burst
    release_free_memory()
    peak, now = peak_grown_bytes(), grown_bytes()
    assert peak >= before + 250 * MIB  # the burst, though freed
    assert now < peak - 200 * MIB  # what a check of the memory now would have seen
    reset_peak()
    assert peak_grown_bytes() < peak - 200 * MIB  # the next epoch's peak starts from now


def test_each_check_sees_the_peak_since_the_one_before_it():
    """``take_peak`` (the budget's check at a commit): memory taken and freed after one check (the snapshot a
    commit writes after its check) counts at the next, and only there."""
    release_free_memory()
    first = take_peak()
    burst = bytearray(256 * MIB)  # after the check: the commit's snapshot
    burst[::4096] = b"x" * len(range(0, len(burst), 4096))
    del burst
    release_free_memory()
    second = take_peak()
    assert second >= 250 * MIB and second >= first  # the next epoch's check sees it
    assert take_peak() < second - 200 * MIB  # and the one after that no longer does
