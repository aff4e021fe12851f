"""``release_free_memory``: what an epoch freed goes back to the system, so an idle state host or
Python worker does not sit at its last epoch's high-water mark."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import os
from statekit.spark.memory import release_free_memory

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
