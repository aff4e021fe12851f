"""bench spark's check of what each run wrote: a run that differs from the reference is a failure of the report
(the bench exits non-zero after writing it), not only a note."""

from __future__ import annotations

from statekit.bench.spark import _written, differing

REFERENCE = [("a", 0, 30_000, 1, 1), ("b", 5, 30_005, 2, 1)]


def test_runs_that_differ_from_the_reference_are_the_reports_failures():
    agree = {"builtin-heap": _written({"sessions": list(REFERENCE), "late": 0}, REFERENCE, 2),
             "builtin-rocksdb": _written({"sessions": REFERENCE[:1], "late": 1}, REFERENCE, 2),
             "floor": _written({"rows": 3}, REFERENCE, 2),
             "floor-short": _written({"rows": 2}, REFERENCE, 2),
             "native": "not compared: stopped after 600 s, rated on its 3 finished batches"}
    failures = differing(agree, "2 events, 2 users")
    assert failures == ["builtin-rocksdb (2 events, 2 users): DIFFERS: 1 sessions, 0 not in reference, 1 late",
                        "floor-short (2 events, 2 users): DIFFERS: 2 rows counted of 3 read"]
