"""Spark's own streaming checkpoint, as the start-up check reads it and a rollback rewinds it.

Spark writes per micro-batch ``offsets/<b>`` (what batch ``b`` reads: a ``v1`` line, the batch's metadata,
then one line per source, ``{"logOffset": n}`` for a file source, ``-`` for a source without one) before
the batch runs, and ``commits/<b>`` after it. A file source logs the files of each of its own batches under
``sources/<i>/``: a plain file ``<n>`` per batch, and every tenth batch a ``<n>.compact`` holding the entries
of every batch up to ``n``; each file is a ``v1`` line, then one JSON entry per line with its ``batchId``.
Spark drops plain files a compact file covers once they are older than its clean-up delay. A Kafka source's line
is its offsets, ``{"<topic>": {"<partition>": <next offset>, ...}}``, and its ``sources/<i>/0`` the offsets its
query started from (a zero byte, then ``v1``). Hadoop's local
filesystem keeps a ``.<name>.crc`` next to each file: it goes with its file. Everything read is checked
before it is trusted: a malformed file is an error naming it.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from ..checkpoint import CheckpointError, CorruptCheckpointError, Storage

OFFSETS, COMMITS, SOURCES = "offsets", "commits", "sources"
BELOW_CHECKPOINT = "_spark"
"""Spark's checkpoint's place below statekit's checkpoint when none is given."""
HEADER = "v1"
COMPACT = ".compact"

_log = logging.getLogger("statekit")


@dataclass
class Rewound:
    """What a rewind removed: batches of the offset and commit logs, and file-source log files (``rewritten``:
    plain files written back from a compact file that had to go)."""

    offsets: int = 0
    commits: int = 0
    source_files: int = 0
    rewritten: int = 0


class SparkCheckpoint:
    """Spark's streaming checkpoint at ``location`` (a path or pyarrow URI), read and rewound through pyarrow."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.storage = Storage(location)

    @classmethod
    def readable(cls, location: str) -> "SparkCheckpoint | None":
        """The checkpoint at ``location``; None, said in one log line, where pyarrow cannot open it (``hdfs://``
        without libhdfs, a scheme pyarrow lacks): then Spark's side of the start-up check is off."""
        try:
            return cls(location)
        except CheckpointError as e:
            _log.warning("statekit: Spark's streaming checkpoint %s cannot be read here (%s): the check of its "
                         "batches against statekit's epochs is off", location, e)
            return None

    def batches(self, log: str) -> list[int]:
        """The batch ids in ``offsets`` or ``commits``, ascending."""
        return sorted(int(n) for n in self._names(log) if n.isdigit())

    def lacks(self, batch: int) -> str | None:
        """None when ``offsets`` holds ``batch`` (or it is -1: no batch yet), else the newest batches it holds, to
        name in an error."""
        held = self.batches(OFFSETS)
        return None if batch < 0 or batch in held else f"offsets {held[-3:] or 'none'}"

    def source_offsets(self, batch: int) -> dict[int, int]:
        """For each file source of ``offsets/<batch>`` (by its index), the last of its own batches it read
        (-1: none yet); sources of other kinds are left out."""
        rel = f"{OFFSETS}/{batch}"
        lines = self._lines(rel)
        found = {}
        for i, line in enumerate(lines[2:]):
            if line == "-":
                found[i] = -1
                continue
            try:
                offset = json.loads(line)
            except ValueError:
                raise CorruptCheckpointError(f"{self._where(rel)}: line {i + 3} is not JSON: {line[:80]!r}") from None
            if isinstance(offset, dict) and set(offset) == {"logOffset"}:
                if not isinstance(offset["logOffset"], int) or offset["logOffset"] < -1:
                    raise CorruptCheckpointError(f"{self._where(rel)}: source {i} has logOffset {offset['logOffset']!r}")
                found[i] = offset["logOffset"]
        return found

    def source_files(self, source: int = 0) -> list[str]:
        """The paths file source ``source`` logged as read, in every batch its log holds (plain and compact files)."""
        rel = f"{SOURCES}/{source}"
        names = [n for n in self._names(rel) if n.isdigit() or (n.endswith(COMPACT) and n[:-len(COMPACT)].isdigit())]
        found = []
        for name in names:
            for line, _ in self._entries(f"{rel}/{name}"):
                path = json.loads(line).get("path")
                if not isinstance(path, str):
                    raise CorruptCheckpointError(f"{self._where(f'{rel}/{name}')}: an entry without a path: {line[:80]!r}")
                found.append(path)
        return found

    def rewind(self, batch: int) -> Rewound:
        """Make ``batch`` (-1: none) the last batch Spark ran: its offset and commit logs end there and each file
        source's log ends at what that batch read, so the batches after it are planned again from the same files.
        Another source (Kafka) keeps its ``sources/<i>/`` (its initial offsets): the kept offset log says where its
        next batch starts. Idempotent: an interrupted rewind is finished by running it again."""
        done = Rewound()
        targets = self.source_offsets(batch) if batch >= 0 else {i: -1 for i in self._file_sources()}
        later = sorted({b for log in (COMMITS, OFFSETS) for b in self.batches(log) if b > batch}, reverse=True)
        for b in later:  # newest first, each commit before its offsets: a stop midway leaves batches Spark replays
            done.commits += self._delete(f"{COMMITS}/{b}")
            done.offsets += self._delete(f"{OFFSETS}/{b}")
        for source, offset in sorted(targets.items()):
            self._trim(f"{SOURCES}/{source}", offset, done)
        return done

    def _trim(self, rel: str, offset: int, done: Rewound) -> None:
        """End the file-source log ``rel`` at its batch ``offset``: the plain files of the kept batches since the
        last kept compact file are written back from a later compact file where Spark dropped them, then every
        file of a later batch goes."""
        names = self._names(rel)
        plain = {int(n) for n in names if n.isdigit()}
        compact = {int(n[:-len(COMPACT)]) for n in names if n.endswith(COMPACT) and n[:-len(COMPACT)].isdigit()}
        base = max((k for k in compact if k <= offset), default=-1)
        missing = [b for b in range(base + 1, offset + 1) if b not in plain]
        later = sorted(k for k in compact if k > offset)
        if missing:
            if not later:
                raise CorruptCheckpointError(f"{self._where(rel)}: the file source's log lacks its batches {missing} "
                                             f"and no compact file holds them")
            entries = self._entries(f"{rel}/{later[0]}{COMPACT}")
            for b in missing:
                lines = [line for line, batch in entries if batch == b]
                if not lines:
                    raise CorruptCheckpointError(f"{self._where(rel)}: no entry of batch {b} in {later[0]}{COMPACT}")
                self.storage.delete(_crc(f"{rel}/{b}"))
                self.storage.commit(f"{rel}/{b}", "\n".join([HEADER, *lines]).encode(), f"{rel}/.{b}.{uuid.uuid4().hex}.tmp")
                done.rewritten += 1
        for name in (f"{b}" for b in sorted(plain) if b > offset):
            done.source_files += self._delete(f"{rel}/{name}")
        for k in later:
            done.source_files += self._delete(f"{rel}/{k}{COMPACT}")

    def _entries(self, rel: str) -> list[tuple[str, int]]:
        """The lines of a file-source log file with the batch id each names."""
        found = []
        for n, line in enumerate(self._lines(rel)[1:], 2):
            try:
                batch = json.loads(line)["batchId"]
            except (ValueError, TypeError, KeyError):
                batch = None
            if not isinstance(batch, int):
                raise CorruptCheckpointError(f"{self._where(rel)}: line {n} is not a file entry with a batchId: {line[:80]!r}")
            found.append((line, batch))
        return found

    def _lines(self, rel: str) -> list[str]:
        """The lines of a log file, checked to start with Spark's ``v1`` header."""
        try:
            text = self.storage.read(rel).decode()
        except UnicodeDecodeError:
            raise CorruptCheckpointError(f"{self._where(rel)}: not text") from None
        lines = text.split("\n")
        if lines[0] != HEADER:
            raise CorruptCheckpointError(f"{self._where(rel)}: expected Spark's {HEADER!r} header, got {lines[0][:40]!r}")
        return [line for line in lines if line]

    def _file_sources(self) -> list[int]:
        """The sources whose ``sources/<i>/`` is a file source's log: not a Kafka source's initial offsets (a file
        starting with a zero byte)."""
        found = []
        for i in sorted(int(d) for d in self.storage.list_dirs(SOURCES) if d.isdigit()):
            names = sorted(n for n in self._names(f"{SOURCES}/{i}") if not n.startswith("."))  # not Hadoop's .crc
            if not names or self.storage.read(f"{SOURCES}/{i}/{names[0]}")[:1] != b"\0":
                found.append(i)
        return found

    def _names(self, rel: str) -> list[str]:
        prefix = len(rel) + 1
        return [f.path[prefix:] for f in self.storage.list_files(rel) if "/" not in f.path[prefix:]]

    def _delete(self, rel: str) -> bool:
        """Delete a log file and its checksum; whether the file was there."""
        there = self.storage.info(rel) is not None
        self.storage.delete(rel)
        self.storage.delete(_crc(rel))
        return there

    def _where(self, rel: str) -> str:
        return f"Spark's checkpoint {self.location}: {rel}"


def files_read(location: str) -> list[str]:
    """The input files the stream whose Spark checkpoint is at ``location`` read already (its first file source's
    log; none for a new stream). Where pyarrow cannot open the location: none, said in one log line."""
    try:
        return SparkCheckpoint(location).source_files()
    except CorruptCheckpointError:
        raise
    except CheckpointError as e:
        _log.warning("statekit: Spark's streaming checkpoint %s cannot be read here (%s): every input file is "
                     "checked to be in name order, read already or not", location, e)
        return []


def _crc(rel: str) -> str:
    """Hadoop's checksum file of ``rel``."""
    head, _, name = rel.rpartition("/")
    return f"{head}/.{name}.crc"
