#!/usr/bin/env python3
"""A one-node Apache Kafka broker (KRaft: broker and controller in one JVM) for trying statekit's Kafka source and
sink and for its tests, from the official jars on Maven Central.

    python tools/kafka/broker.py start [--dir DIR] [--port N]   # prints the bootstrap servers, returns when ready
    python tools/kafka/broker.py stop [--dir DIR]
    python tools/kafka/broker.py jars                           # only fetch the jars

The jars (``pom.xml`` beside this file: ``kafka_2.13`` and its runtime dependencies) are copied by Maven into
``$STATEKIT_KAFKA_CACHE`` (default ``~/.cache/statekit-kafka``)``/<version>/`` once; the broker's storage is
formatted on its first start in ``DIR`` (default ``~/.cache/statekit-kafka/broker``), which also holds its
configuration, log, and ``broker.json`` (its process id and ports, for ``stop``). Standard library only: the
tests import it (``tests/kafka_support.py``).
"""

from __future__ import annotations

import argparse
import base64
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
CACHE = Path(os.environ.get("STATEKIT_KAFKA_CACHE", Path.home() / ".cache" / "statekit-kafka"))
STATE_FILE = "broker.json"
READY = "Kafka Server started"
"""The line the broker logs once it serves clients."""
START_SECONDS = 90
JAVA_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
"""A small broker for a laptop or CI machine: a serial collector and the client compiler start faster on few cores."""
_LOG4J = """status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
"""


def kafka_version() -> str:
    """The Kafka version ``pom.xml`` pins."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if found is None:
        raise SystemExit(f"{POM}: no <kafka.version> property")
    return found.group(1)


def jars() -> Path:
    """The directory of the broker's jars, fetched by Maven on first use (a partial fetch is never used)."""
    target = CACHE / kafka_version()
    if (target / ".complete").exists():
        return target
    if shutil.which("mvn") is None:
        raise SystemExit("the Kafka broker's jars come from Maven Central through Maven: no 'mvn' on PATH")
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
                    f"-DoutputDirectory={partial}"], check=True)
    (partial / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Broker:
    """A broker process started by ``start`` (or found by ``Broker.of`` in its directory)."""

    directory: Path
    port: int
    controller_port: int
    pid: int

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    @classmethod
    def of(cls, directory: Path) -> "Broker | None":
        """The broker ``broker.json`` in ``directory`` names, if its process still runs."""
        try:
            data = json.loads((directory / STATE_FILE).read_text())
            broker = cls(directory, int(data["port"]), int(data["controller_port"]), int(data["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return broker if _alive(broker.pid) else None

    def stop(self, timeout: float = 30) -> None:
        """Stop the broker (SIGTERM: a clean shutdown, then SIGKILL after ``timeout``) and wait for its process."""
        _signal(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(self.pid):
            _signal(self.pid, signal.SIGKILL)
            while _alive(self.pid):
                time.sleep(0.1)
        (self.directory / STATE_FILE).unlink(missing_ok=True)


def cluster_id() -> str:
    """A new KRaft cluster id: a random UUID in URL-safe base64, as Kafka's own, never starting with ``-`` (which
    the storage tool would read as an option: Kafka's ``Uuid.randomUuid`` draws again too)."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster


def start(directory: Path, port: int | None = None) -> Broker:
    """Start the broker of ``directory`` (formatting its storage first if new) on ``port`` (default: the one it used
    before, else a free one) and return once it serves clients; one running there already is returned as is."""
    directory = directory.resolve()
    running = Broker.of(directory)
    if running is not None:
        return running
    directory.mkdir(parents=True, exist_ok=True)
    previous = _previous_ports(directory)
    port = port or (previous[0] if previous else free_port())
    controller_port = previous[1] if previous else free_port()
    classpath = f"{jars()}/*"
    config = directory / "server.properties"
    config.write_text(_properties(directory, port, controller_port))
    log4j = directory / "log4j2.properties"
    log = directory / "broker.log"
    log4j.write_text(_LOG4J.format(log=log))
    java = [shutil.which("java") or "java", *JAVA_OPTIONS, f"-Dlog4j2.configurationFile={log4j.as_uri()}", "-cp",
            classpath]
    if not (directory / "data" / "meta.properties").exists():
        subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config)], check=True,
                       stdout=subprocess.DEVNULL)
    offset = log.stat().st_size if log.exists() else 0
    with open(directory / "broker.out", "ab") as out:
        process = subprocess.Popen([*java, "kafka.Kafka", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own process group: a Ctrl-C here leaves it alone
    broker = Broker(directory, port, controller_port, process.pid)
    (directory / "ports.json").write_text(json.dumps([port, controller_port]))
    deadline = time.monotonic() + START_SECONDS
    while READY not in _tail(log, offset):
        if process.poll() is not None:
            raise SystemExit(f"the Kafka broker exited with status {process.returncode} while starting; see {log} "
                             f"and {directory / 'broker.out'}")
        if time.monotonic() > deadline:
            broker.stop()
            raise SystemExit(f"the Kafka broker did not start in {START_SECONDS}s; see {log}")
        time.sleep(0.2)
    (directory / STATE_FILE).write_text(json.dumps({"pid": process.pid, "port": port,
                                                    "controller_port": controller_port}))
    return broker


def _properties(directory: Path, port: int, controller_port: int) -> str:
    settings = {
        "process.roles": "broker,controller", "node.id": 1,
        "controller.quorum.voters": f"1@localhost:{controller_port}",
        "listeners": f"PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://localhost:{port}", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "log.dirs": directory / "data",
        # one node: every internal topic has one replica; few partitions start fast
        "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1, "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1, "group.initial.rebalance.delay.ms": 0,
        "num.partitions": 1, "auto.create.topics.enable": "false", "num.network.threads": 2, "num.io.threads": 2,
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def _previous_ports(directory: Path) -> list[int] | None:
    try:
        ports = json.loads((directory / "ports.json").read_text())
    except (OSError, ValueError):
        return None
    return ports if isinstance(ports, list) and len(ports) == 2 and all(isinstance(p, int) for p in ports) else None


def _tail(log: Path, offset: int) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a child of this process that ended (a zombie) is reaped here and does not."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
    except ChildProcessError:  # not this process's child
        pass
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM  # another user's process; ESRCH: none
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/kafka/broker.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["start", "stop", "jars"])
    ap.add_argument("--dir", type=Path, default=CACHE / "broker", help="the broker's storage, config and log")
    ap.add_argument("--port", type=int, default=None, help="its client port (default: as before, else a free one)")
    args = ap.parse_args(argv)
    if args.action == "jars":
        print(jars())
    elif args.action == "start":
        broker = start(args.dir, args.port)
        print(broker.bootstrap)
    else:
        broker = Broker.of(args.dir.resolve())
        if broker is None:
            print(f"no broker runs from {args.dir}", file=sys.stderr)
            return 1
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
