"""Input files the driver can read itself: a local file's path, and the first lines of a text file as Spark's text
source gives them. A read here spares the run's start a Spark job (and the JVM its first use of a file source)
where the driver only needs a file's head; anything else is left to Spark."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".br", ".xz", ".lzo", ".lzo_deflate")
"""File name endings Hadoop reads through a compression codec: such a file's lines are left to Spark."""
_LINE_END = re.compile(rb"\r\n|\r|\n")
"""Where Spark's text source (Hadoop's line reader, no ``lineSep``) ends a line."""
_BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark: Hadoop's line reader drops it at a file's start."""
_CHUNK = 1 << 20


def local_path(uri: str) -> str | None:
    """The local path of a ``file:`` URI or a plain path, if it is a file here; None for any other location."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    path = unquote(parsed.path) if parsed.scheme else uri
    return path if os.path.isfile(path) else None


def first_lines(uri: str, n: int) -> list[str] | None:
    """The first ``n`` lines of the text file ``uri`` as ``spark.read.text(uri).limit(n)`` gives them (ended by
    ``\\n``, ``\\r\\n`` or ``\\r``, none after the last; UTF-8 without a leading byte order mark, a byte that is
    not read as U+FFFD), read here; None where Spark must read it (not a local file, or compressed)."""
    path = local_path(uri)
    if path is None or path.lower().endswith(COMPRESSED):
        return None
    head, ends = bytearray(), 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            joined = chunk[:1] == b"\n" and head[-1:] == b"\r"  # a "\r\n" cut between two reads
            head += chunk
            ends += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n") - joined  # line ends read
            if chunk and ends < n:  # fewer than n line ends yet: split once, when they are there (not per chunk)
                continue
            lines = _LINE_END.split(bytes(head[len(_BOM):] if head.startswith(_BOM) else head))
            if not chunk:  # the whole file: a line end at its end ends its last line
                if lines[-1] == b"":
                    lines.pop()
                break
            if len(lines) > n:  # n line ends read: the pieces before the last are whole lines
                break
    return [line.decode("utf-8", "replace") for line in lines[:n]]
