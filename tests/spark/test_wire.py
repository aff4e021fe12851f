"""Tables between a worker and its state host (``statekit.spark.runtime.wire``): every table arrives equal,
whatever its size, chunking, slicing or types, and messages before and after it keep their order; a
sender that goes away mid-table is an EOFError, not a short table."""

from __future__ import annotations

import os
import threading
from multiprocessing import Pipe

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statekit.spark.runtime.wire import recv_table, send_table


def _through(table: pa.Table) -> tuple[pa.Table, str]:
    """``table`` sent between two messages from a thread (a big table fills the socket's buffer)."""
    a, b = Pipe()
    sender = threading.Thread(target=lambda: (a.send("before"), send_table(a, table), a.send("after")))
    sender.start()
    try:
        assert b.recv() == "before"
        got = recv_table(b)
        return got, b.recv()
    finally:
        sender.join()
        a.close()
        b.close()


rows = st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=30)), st.integers(-2**63, 2**63 - 1),
                          st.one_of(st.none(), st.floats(allow_nan=False))), max_size=300)


@settings(max_examples=40, deadline=None)
@given(rows, st.integers(1, 50), st.integers(0, 20))
def test_a_table_arrives_equal(values, chunk, skip):
    table = pa.table({"k": pa.array([v[0] for v in values], pa.string()), "ts": pa.array([v[1] for v in values], pa.int64()),
                      "x": pa.array([v[2] for v in values], pa.float64())})
    sent = pa.Table.from_batches(table.to_batches(max_chunksize=chunk), table.schema).slice(skip)
    got, after = _through(sent)
    assert after == "after"
    assert got.schema == sent.schema
    assert got.equals(sent)


def test_a_big_table_and_an_empty_one_arrive_equal():
    n = 1_500_000  # some MiB: many socket buffers' worth
    big = pa.table({"k": pa.array([f"user-{i % 9973}" for i in range(n)]), "ts": pa.array(range(n), pa.int64())})
    got, _ = _through(big)
    assert got.equals(big)
    empty = big.schema.empty_table()
    got, _ = _through(empty)
    assert got.num_rows == 0 and got.schema == big.schema


def test_a_sender_that_goes_away_mid_table_is_an_eof():
    a, b = Pipe()
    a.send(1000)  # a table of 1000 bytes announced, 10 sent
    os.write(a.fileno(), b"\0" * 10)
    a.close()
    with pytest.raises(EOFError, match="after 10 of a table's 1000 bytes"):
        recv_table(b)
    b.close()
