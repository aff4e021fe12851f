"""Ctrl-C as ``spark.interrupts.CtrlC`` takes it: the first asks every run inside to stop, a second cancels
Spark's jobs from another thread and ends the outermost block with ``Interrupted``; the handler before is back."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from statekit.spark.interrupts import CtrlC, Interrupted


class Run:
    stop_requested = False


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # the handler runs on the main thread between bytecodes


def test_a_first_ctrl_c_asks_nested_runs_to_stop_and_a_second_cancels_and_interrupts():
    before = signal.getsignal(signal.SIGINT)
    cancelled = threading.Event()
    run = Run()
    with pytest.raises(Interrupted, match="not committed"):
        with CtrlC(None, cancelled.set) as outer:  # the CLI's, around the whole command
            _ctrl_c()  # while Spark starts: no run yet
            assert outer.requested and not cancelled.is_set()
            with CtrlC(run, lambda: None):  # run_keyed's: joins the request already made
                assert run.stop_requested
                _ctrl_c()
                assert cancelled.wait(5)
                raise RuntimeError("the cancelled epoch's job failed")
    assert signal.getsignal(signal.SIGINT) is before


def test_a_single_ctrl_c_ends_nothing_by_itself():
    run = Run()
    with CtrlC(run, lambda: pytest.fail("cancelled on the first Ctrl-C")) as ctrl_c:
        _ctrl_c()
    assert run.stop_requested and ctrl_c.requested and not ctrl_c.aborted
