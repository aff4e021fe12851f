"""A restored slot's operator is made before its backend is restored: making it imports the job's modules, which
register the types its state holds, so a user type decodes in a fresh worker although the checkpoint only names it.
Each epoch runs ``slots.acquire`` in a fresh interpreter whose factory imports the job's module only when called
(as a Spark worker's unpickled factory does)."""

from __future__ import annotations

import json

import pytest

from statekit.testing import BACKENDS
from tests.checkpoint_support import USER_TYPES, run_python

POINT_OPS = USER_TYPES + """
from statekit import ValueStateDescriptor
from statekit.operators import KeyedProcessFunction, KeyedProcessOperator


class Track(KeyedProcessFunction):
    def open(self, ctx):
        self.where = ctx.get_state(ValueStateDescriptor("where"))

    def process_element(self, value, ctx):
        p = self.where.value() or Point(0, 0)
        self.where.update(Point(p.x + value, p.y + 1))
        yield ctx.get_current_key(), p.x + value, p.y + 1


def make_operator():
    return KeyedProcessOperator(Track())
"""

POINT_JOB = """
class Factory:
    def __call__(self):
        from point_ops import make_operator  # the job's module, which registers Point (code 42)
        return make_operator()
"""

EPOCH = """
import json, sys
from statekit.checkpoint import CheckpointStore
from statekit.spark.plan import EpochPlan, JobPlan
from statekit.spark.slots import acquire
from point_job import Factory

job = JobPlan("op", Factory(), {root!r}, {{"backend": {backend!r}, "local_dir": {local!r}}}, 1, 128, (), (),
              None, None, None, None, None)
store = CheckpointStore({root!r})
assert "point_ops" not in sys.modules
slot, fast, _ = acquire(job, EpochPlan({epoch}, {epoch} - 1 if {epoch} else None, None), store, range(128))
slot.operator.process_batch([("u1", {value}, 1000 + {epoch})])
store.commit("op", {epoch}, slot.backend, metadata={{"operator": slot.operator.snapshot_metadata()}})
print(json.dumps({{"fast": fast, "out": [list(v) for v, _ in slot.output.drain()]}}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_type_registered_by_the_operators_module_restores_in_a_fresh_worker(tmp_path, backend):
    code = tmp_path / "code"
    code.mkdir()
    (code / "point_ops.py").write_text(POINT_OPS)
    (code / "point_job.py").write_text(POINT_JOB)
    root = str(tmp_path / "ckpt")
    got = [json.loads(run_python(EPOCH.format(root=root, backend=backend, local=str(tmp_path / f"w{epoch}"),
                                              epoch=epoch, value=value), tmp_path, code))
           for epoch, value in enumerate((5, 7, 1))]
    assert got == [{"fast": False, "out": [["u1", 5, 1]]}, {"fast": False, "out": [["u1", 12, 2]]},
                   {"fast": False, "out": [["u1", 13, 3]]}]
