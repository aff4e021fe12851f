"""Arrow tables between a task's worker and its state host, as Arrow IPC streams, not pickles.

A pickled table is copied into the pickle and out of it on both sides, and the receiving side grows a
buffer chunk by chunk as the message arrives: at 1M users the host's peak held three to four copies of
an epoch's records. Here the sender writes the IPC stream into a buffer of its exact size (measured by a
mock write first) and the receiver reads it, after its size, straight into one buffer that the table's
columns then point into: one copy on each side.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

import numpy as np
import pyarrow as pa


def _stream(table: pa.Table, sink: pa.NativeFile) -> None:
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def send_table(conn: Connection, table: pa.Table) -> None:
    """Send ``table`` over ``conn`` (its size as a message, then the IPC stream's bytes on the socket)."""
    mock = pa.MockOutputStream()
    _stream(table, mock)
    buf = pa.allocate_buffer(mock.size())
    _stream(table, pa.FixedSizeBufferWriter(buf))
    conn.send(buf.size)
    view, fd = memoryview(buf), conn.fileno()
    while len(view):
        view = view[os.write(fd, view):]


def recv_table(conn: Connection) -> pa.Table:
    """The table ``send_table`` sent over ``conn``; EOFError when the sender went away before its end."""
    size = conn.recv()
    data = np.empty(size, np.uint8)
    view, fd, got = memoryview(data), conn.fileno(), 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError(f"the connection ended after {got} of a table's {size} bytes")
        got += n
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
