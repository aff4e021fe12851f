"""Randomized runs against the session model: random keys, out-of-order timestamps and watermarks
(late records included), epochs committed through the CheckpointStore, with restarts, backend
switches heap<->rocksdb at restore and rescaling between epochs. The soak mode (``pytest -m soak``,
``STATEKIT_SOAK_SECONDS``, default 180) adds injected faults and reports its counts."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.testing import BACKENDS
from reliability_support import OP, flaky_filesystem, flip_byte, make_job, model_run, random_epochs, use_filesystem
from statekit.checkpoint import CorruptCheckpointError

KEYS = ["a", "b", "c", ("t", 1), 7, 8, "user_9"]


def run_with_actions(job, epochs: list, actions: list[tuple[str, int]]) -> dict:
    """Run every epoch; before epoch e apply actions[e]: keep, restart, switch, rescale."""
    for e, (records, wm) in enumerate(epochs):
        kind, n = actions[e % len(actions)]
        if kind == "restart":
            job.restart()
        elif kind == "switch":
            job.restart(backend=BACKENDS[(BACKENDS.index(job.backend) + 1) % len(BACKENDS)])
        elif kind == "rescale":
            job.restart(partitions=n)
        job.run_epoch(e, records, wm)
    job.close()
    return job.results


action = st.tuples(st.sampled_from(["keep", "restart", "switch", "rescale"]), st.integers(1, 4))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 32), n_epochs=st.integers(1, 7), disorder=st.integers(0, 60),
       delay=st.integers(0, 30), start=st.sampled_from(BACKENDS), partitions=st.integers(1, 3),
       actions=st.lists(action, min_size=1, max_size=6))
def test_random_streams_match_the_session_model(tmp_path_factory, seed, n_epochs, disorder, delay, start,
                                                partitions, actions):
    epochs = random_epochs(random.Random(seed), n_epochs, 25, KEYS, disorder, delay)
    job = make_job(tmp_path_factory.mktemp("rand"), start, partitions=partitions, retain=2)
    assert run_with_actions(job, epochs, actions) == model_run(epochs)


def _soak_fault(rng: random.Random, job, e: int, epochs: list, counts: dict) -> None:
    """Run epoch e with a random fault injected, recovering as a runtime would."""
    records, wm = epochs[e]
    fault = rng.choice(["none", "restart", "switch", "rescale", "flaky", "corrupt"])
    if fault == "restart":
        job.restart()
    elif fault == "switch":
        job.restart(backend=rng.choice(BACKENDS))
    elif fault == "rescale":
        job.restart(partitions=rng.randint(1, 4))
    elif fault == "flaky":
        use_filesystem(job.store, flaky_filesystem({"info", "list", "read", "write", "move"}, rng.randint(1, 2)))
    elif fault == "corrupt" and job.committed is not None and job.committed > 0:
        m = job.store.manifest(OP, job.ranges()[0], job.committed)
        own = [f for f in m.files if f.epoch == job.committed]  # older files may serve the epoch restored
        if not own:
            return _soak_fault(rng, job, e, epochs, counts)
        flip_byte(Path(job.store.storage.full_path(max(own, key=lambda f: f.size).path)))
        job.restart()
        try:
            job.run_epoch(e, records, wm)
            raise AssertionError("a corrupt snapshot was restored")
        except CorruptCheckpointError:
            back = job.committed - 1
            job.store.rollback(OP, back)
            job.restart()
            job.committed = back
            counts["faults"] += 1
            _replay(job, back + 1, e, epochs)
            return
    counts["faults"] += fault != "none"
    job.run_epoch(e, records, wm)


def _replay(job, first: int, stop: int, epochs: list) -> None:
    for e in range(first, stop + 1):
        job.run_epoch(e, *epochs[e])


@pytest.mark.soak
def test_soak(tmp_path: Path) -> None:
    seconds = float(os.environ.get("STATEKIT_SOAK_SECONDS", "180"))
    counts = {"runs": 0, "records": 0, "epochs": 0, "faults": 0, "differences": 0}
    rng = random.Random(int(os.environ.get("STATEKIT_SOAK_SEED", "8")))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        epochs = random_epochs(rng, rng.randint(4, 12), 200, [f"k{i}" for i in range(40)] + KEYS,
                               rng.randint(0, 80), rng.randint(0, 30))
        job = make_job(tmp_path, rng.choice(BACKENDS), f"soak-{counts['runs']}", partitions=rng.randint(1, 3))
        for e in range(len(epochs)):
            _soak_fault(rng, job, e, epochs, counts)
        job.close()
        expected = model_run(epochs)
        counts["differences"] += sum(job.results[e] != expected[e] for e in expected)
        counts["runs"] += 1
        counts["records"] += sum(len(r) for r, _ in epochs)
        counts["epochs"] += len(epochs)
    print(f"\nsoak: {counts}")
    assert counts["runs"] > 0 and counts["differences"] == 0
