"""``statekit bench spark --source``: the inputs of one user count for each source the runs read (files, a topic,
or both: ``files,kafka``, the same clickstream in each), how the report tags a source's figures, and, with both,
the row that puts a statekit variant's speedup over Spark's ``session_window`` read from the topic next to the same
speedup read from the files (issue 48: the topic's within 10% of the files')."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from statekit.clickstream import Click
from statekit.spark.kafka import KafkaInput

from .kafka_source import Topics
from .report import BenchReport

FROM = {"files": "from files", "kafka": "from a topic"}
"""How a both-run's figures and plot lines name the source they were read from."""
Inputs = dict[str, tuple[str | KafkaInput, str | KafkaInput]]
"""Per source, what statekit's runs read and what Spark's baselines read (the sentinel last)."""
WITHIN = 0.9
"""The topic's speedup meets "within 10%" at this share of the files' speedup or more (above the files' too)."""


def sources_of(source: str) -> list[str]:
    """``--source``'s sources in the order each variant runs on them (``files,kafka``: both)."""
    return source.split(",")


def tag(source: str, both: bool, text: str) -> str:
    """A figure's tag: in a both-run, the source it was read from first; a single source's as ``text``."""
    return f"{FROM[source]}, {text}" if both else text


def line(source: str, both: bool, label: str) -> str:
    """A run's plot line: in a both-run, tagged with its source (a line per run and source)."""
    return f"{label} ({FROM[source]})" if both else label


def prepare(root: Path, data: list[Click], sentinel: Click, sources: list[str], files: int, fmt: str,
            topics: Topics | None, schema: str) -> Inputs:
    """Per source, what statekit's runs read and what Spark's baselines read: ``files`` of ``data`` in ``fmt``
    under ``root`` and a copy with the ``sentinel`` file after them; ``kafka`` one topic on ``topics``, the
    sentinel its last message, for every run."""
    out: Inputs = {}
    if "files" in sources:
        out["files"] = _files(root, data, sentinel, files, fmt)
    if "kafka" in sources:
        topic = topics.load(root.name, [*data, sentinel], files, schema)
        out["kafka"] = (topic, topic)
    return out


def _files(root: Path, data: list[Click], sentinel: Click, files: int, fmt: str) -> tuple[str, str]:
    """``root/input``: the events as ``files`` files; ``root/input-with-sentinel``: the same (linked) and a last
    file, newer than the others, holding only the sentinel."""
    from statekit.jobs import write_clickstream

    paths = write_clickstream(data, root / "input", files=files, fmt=fmt)
    spark_dir = root / "input-with-sentinel"
    spark_dir.mkdir()
    for p in paths:
        os.link(p, spark_dir / p.name)
    [written] = write_clickstream([sentinel], root / "sentinel", files=1, fmt=fmt)
    last = spark_dir / f"part-{files:05d}.{fmt}"
    written.rename(last)
    mtime = paths[-1].stat().st_mtime + 1
    os.utime(last, (mtime, mtime))
    return str(root / "input"), str(spark_dir)


def params(topics: Topics) -> dict[str, Any]:
    """What a both-run's report says of its sources (the topic's as a single-source run says it)."""
    return {"sources": "files, then a topic of the same events, for each variant in turn",
            "topic": topics.params(),
            "kafka_vs_files": f"per statekit variant and backend: its speedup over Spark's session_window from the "
                              f"topic / the same from the files; within 10% when >= {WITHIN:g}"}


def compare(rep: BenchReport, figure_tag: str, speedups: dict[str, dict[str, float]], baseline: str) -> None:
    """One row: per backend, the speedup over ``baseline`` read from the topic divided by the same read from the
    files (``speedups[source][backend]``), and whether it is within 10% (a verdict, not a failure: both runs'
    answers are checked on their own rows)."""
    files, topic = speedups["files"], speedups["kafka"]
    ratio = {b: topic[b] / files[b] for b in files if b in topic}
    shown = "; ".join(f"{FROM[s]}: " + ", ".join(f"{b} {x:.2f}x" for b, x in speedups[s].items())
                      for s in ("kafka", "files"))
    verdicts = ", ".join(f"{b} {'met' if x >= WITHIN else 'MISSED'}" for b, x in ratio.items())
    rep.add(f"speedup over {baseline}, from a topic / from files {figure_tag}", "x", **ratio,
            notes=f"speedup {shown}; within 10% (from a topic >= {WITHIN:g} x from files): {verdicts}")
