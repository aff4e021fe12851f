"""What an ``--input`` names, as Spark's file readers take it: a file, a directory, or a glob in its last part
(``clicks/*.csv``, ``clicks/part-*``: the directory's files whose names match, as Spark's ``pathGlobFilter``
matches them); its data files (names not starting with ``_`` or ``.``) and their one format. Pure: shared by the
check before Spark starts (``jobs.preflight``, local files) and the reader (``files.read_files``)."""

from __future__ import annotations

import os
import shlex
from collections import Counter
from typing import Sequence
from urllib.parse import unquote, urlparse

from .errors import InputError

FORMATS = ("csv", "parquet", "json")


def local_as_absolute(path: str) -> str:
    """A local ``path`` made absolute here: a Spark Connect server resolves a relative one in its own directory."""
    return path if "://" in path else os.path.abspath(path)


def is_glob(path: str) -> bool:
    """Whether ``path`` holds a glob character Hadoop's globs take (``* ? [ {``)."""
    return any(c in path for c in "*?[{")


def split_glob(path: str) -> tuple[str, str | None]:
    """``(directory, name pattern)`` of an input whose last part is a glob, else ``(path, None)``."""
    head, sep, name = path.rstrip("/").rpartition("/")
    if not is_glob(name):
        return path, None
    return head or ("/" if sep else "."), name


def name_glob(name: str) -> str:
    """A glob matching file name ``name`` alone: its glob characters escaped, and its last one in brackets (or
    escaped), so that Hadoop reads it as a glob (a stream's file source lists a glob, never a file)."""
    escaped = "".join("\\" + c if c in _GLOB_CHARS else c for c in name[:-1])
    last = name[-1]
    return escaped + (f"[{last}]" if last.isalnum() else "\\" + last)


_GLOB_CHARS = frozenset("\\*?[]{},")


def refuse_written_inside(directory: str, written: Sequence[tuple[str, str | None]]) -> None:
    """``InputError`` when a location the run writes (``(flag, location)`` pairs: its output, its checkpoint)
    lies inside input ``directory``, whose files Spark's readers list at every depth: the run would read what it
    writes. (A glob of the directory's files lists that level only.)"""
    inside = directory.rstrip("/") + "/"
    for flag, location in written:
        if location is not None and (location.rstrip("/") + "/").startswith(inside):
            raise InputError(f"{flag} {location} is inside the input directory {directory}, whose files Spark reads "
                             f"at every depth: the run would read what it writes. Put it elsewhere, or pass the "
                             f"input as a glob of its files ('{inside}*.csv')")


def is_data_file(name: str) -> bool:
    """Whether a directory's file ``name`` is input: Spark's readers skip names starting with ``_`` or ``.``."""
    return not name.startswith(("_", "."))


def missing(path: str, directory: str, pattern: str | None) -> InputError:
    """The error of an input that does not exist (or the directory of its glob ``pattern``)."""
    if pattern is None:
        return InputError(f"input {path} does not exist")
    return InputError(f"input {path}: directory {directory} does not exist")


def nothing_found(path: str, pattern: str | None) -> InputError:
    """The error of an input with no data file (of a directory, or none its glob ``pattern`` matches)."""
    if pattern is None:
        return InputError(f"input directory {path} has no data files")
    return InputError(f"input {path}: no data file (a name not starting with _ or .) matches {pattern!r}")


def input_format(files: Sequence[str], fmt: str | None, input: str) -> str:
    """The format of the input's data ``files`` (paths, in name order): ``fmt`` or their extension. Refused
    (``InputError``) where the files are not all of one extension (naming the others, and a glob of the rest
    to pass instead: Spark would read every file as the one format), or the format is unknown."""
    kinds = [_extension(f) for f in files]
    counts = Counter(kinds)
    known = [k for k in counts if k in FORMATS]
    main = fmt if fmt in counts else max(known or counts, key=lambda k: counts[k])
    stray = [f for f, k in zip(files, kinds) if k != main]
    if stray:
        directory = files[0].rpartition("/")[0] or "."
        names = ", ".join(f.rpartition("/")[2] for f in stray[:3])
        names += f" and {len(stray) - 3} more" if len(stray) > 3 else ""
        them = "it" if len(stray) == 1 else "them"
        kept = f".{main} files" if main else "files without an extension"
        glob = f"pass a glob of the data files, --input {shlex.quote(f'{file_key(directory)}/*.{main}')}, or " if main else ""
        raise InputError(
            f"input {input} holds {len(files) - len(stray)} {kept} and {len(stray)} other{'s' if len(stray) > 1 else ''} "
            f"({names}): Spark would read every file of the input as {fmt or main or 'one format'}; {glob}move "
            f"{them} out of {file_key(directory)}")
    found = fmt or main
    if found not in FORMATS:
        raise InputError(f"input {files[0]}: unknown format; pass --format {'|'.join(FORMATS)}")
    return found


def _extension(path: str) -> str:
    """A file's extension, lower case ('' for none)."""
    name = path.rpartition("/")[2]
    return name.rpartition(".")[2].lower() if "." in name else ""


def file_key(path: str) -> str:
    """``path`` (a local path, or a URI as Hadoop lists it or Spark's file source logs it) in one spelling,
    so that the same file compares equal and a local one reads as typed: ``file:/a b``, ``file:///a%20b``
    and ``/a b`` are ``/a b``."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
