"""The benchmarks' memory sampler (``TreeSampler``): each process of a tree counted once in its role; a
JVM's child caught between vfork and exec (it shares the JVM's memory) not counted at all, while a
command it spawned and a JVM it started count as themselves; forks of statekit's daemon (workers, the
spawner and the hosts it forks) count their PSS, a host started as a new interpreter its RSS."""

from __future__ import annotations

import os
from types import SimpleNamespace

from statekit.bench.common import HOSTS, JVM, OTHER, PYTHON, STATEKIT_PYTHON, WORKERS, TreeSampler
from statekit.spark.runtime import HOST_NAME, SPAWNER_NAME

MIB = 1 << 20


class Proc:
    """A stand-in for ``psutil.Process`` with fixed answers."""

    def __init__(self, pid: int, name: str, cmdline: list[str], parent: "Proc | None", mib: int) -> None:
        self.pid, self._name, self._cmdline, self._parent, self._mib = pid, name, cmdline, parent, mib
        self.kids: list[Proc] = []
        if parent is not None:
            parent.kids.append(self)

    def name(self) -> str:
        return self._name

    def cmdline(self) -> list[str]:
        return self._cmdline

    def parent(self) -> "Proc | None":
        return self._parent

    def children(self, recursive: bool = False) -> list["Proc"]:
        return [d for k in self.kids for d in (k, *(k.children(True) if recursive else ()))]

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=self._mib * MIB)

    def memory_full_info(self) -> SimpleNamespace:
        return SimpleNamespace(pss=self._mib * MIB // 2, rss=self._mib * MIB)


def test_a_jvm_mid_spawn_is_not_a_second_jvm():
    java = ["/usr/bin/java", "-cp", "jars/*", "org.apache.spark.deploy.SparkSubmit"]
    root = Proc(1, "python", ["python", "bench"], None, 100)
    jvm = Proc(2, "java", java, root, 1000)
    Proc(3, "Executor task l", java, jvm, 1000)  # vfork'ed: the JVM's memory, not its own
    Proc(4, "jspawnhelper", ["/usr/lib/jvm/lib/jspawnhelper", "17"], jvm, 2)
    executor = Proc(5, "java", ["/usr/bin/java", "-cp", "jars/*", "CoarseGrainedExecutorBackend"], jvm, 500)
    daemon = Proc(6, "python3", ["python3", "-m", "pyspark.daemon"], executor, 40)
    Proc(7, "python3", ["python3", "-m", "pyspark.daemon"], daemon, 80)
    Proc(8, "python3", ["python3", "-c", "from statekit.spark.runtime.host import main"], executor, 300)
    spawned = Proc(9, SPAWNER_NAME, ["python3", "-m", "statekit.spark.runtime.daemon"], daemon, 40)
    Proc(10, HOST_NAME, ["python3", "-m", "statekit.spark.runtime.daemon"], spawned, 200)

    sampler = TreeSampler(os.getpid())
    sampler.root = root
    assert [sampler._role(p) for p in [root, *root.children(True)]] == [
        (PYTHON, False), (JVM, False), None, (OTHER, False), (JVM, False), (WORKERS, True), (WORKERS, True),
        (HOSTS, True), (HOSTS, True), (HOSTS, False)]
    sampler.sample()
    assert sampler.peak.by_role == {PYTHON: 100 * MIB, JVM: 1500 * MIB, OTHER: 2 * MIB, WORKERS: 60 * MIB,
                                    HOSTS: 420 * MIB, STATEKIT_PYTHON: 480 * MIB}  # forks: their PSS
    assert sampler.peak.total == 2082 * MIB
