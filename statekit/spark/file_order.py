"""The order a stream reads its input files in, checked before the first epoch.

Spark's file source (one file per batch) takes new files oldest modification time first and breaks ties
arbitrarily (files copied with ``cp -r`` or written by a loop often share a millisecond); statekit reads
them in name order. A run whose files' modification times do not increase strictly in name order would
read them in another order than the one its user wrote them in (a later file first: the earlier one then
lands in ``_late``), so it is refused, naming the first such pair and how to give the files times in name
order. Pure: fed (path, modification time in ms) pairs, by the check before Spark starts (local files) and
by the reader (``files.read_files``, any filesystem Hadoop or a Spark Connect server lists).
"""

from __future__ import annotations

import glob
import json
import shlex
from datetime import datetime, timezone
from typing import Collection, Sequence

from .errors import InputError
from .input_files import file_key, is_glob


def check_file_order(files: Sequence[tuple[str, int]], input: str, *, read: Collection[str] = ()) -> None:
    """Refuse (``InputError``) input ``files`` (path, modification time in ms) whose times do not increase
    strictly in name order, leaving out those a resumed run's Spark checkpoint lists as ``read`` (any spelling:
    ``file_key``); ``input`` is the ``--input`` the advice names."""
    done = {file_key(p) for p in read}
    todo = sorted((p, t) for p, t in files if file_key(p) not in done)
    for (first, t1), (second, t2) in zip(todo, todo[1:]):
        if t2 > t1:
            continue
        how = "the same modification time" if t1 == t2 else "modification times out of name order"
        raise InputError(
            f"input {input}: {_name(first)} ({_shown(t1)}) and {_name(second)} ({_shown(t2)}) have {how}: "
            f"Spark's file source takes files oldest first and breaks ties arbitrarily, so a later file could be "
            f"read first and the earlier one's rows go to _late. Give the files modification times in name order "
            f"({_way_out(input, first)}), or pass --mode batch (the whole input as one epoch: order does not "
            f"matter)")


def touch_in_name_order(pattern: str) -> str:
    """A shell command giving the files ``pattern`` (a Python glob) matches modification times one second
    apart in name order, the last a second ago."""
    code = ("import glob,os,time; fs=sorted(glob.glob({p})); t=int(time.time())-len(fs); "
            "[os.utime(f,(t+i,t+i)) for i,f in enumerate(fs)]").format(p=json.dumps(pattern))
    return f"python3 -c {shlex.quote(code)}"


def _way_out(input: str, a_file: str) -> str:
    """How to give the input's files times in name order: a command for local files, else in words."""
    if "://" in input:
        return "write or copy them one at a time in name order, each after the one before"
    directory = file_key(a_file).rpartition("/")[0]
    pattern = glob.escape(directory) + "/" + (input.rpartition("/")[2] if is_glob(input) else "*")
    return f"for example: {touch_in_name_order(pattern)}"


def _name(path: str) -> str:
    return file_key(path).rpartition("/")[2]


def _shown(ms: int) -> str:
    """A modification time as UTC text to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
