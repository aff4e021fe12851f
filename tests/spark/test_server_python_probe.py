"""A Spark Connect server's Python is asked for statekit once per run, in the background while the run reads its
input and plans (``probe_server_python``), and the run's check takes that answer (``check_server_python``); without
a probe started the check asks itself. The real server's refusal: tests/spark/test_connect.py."""

from __future__ import annotations

import threading

import pytest

from statekit.spark.server_python import ServerPythonError, check_server_python, probe_server_python


class _Probe:
    """The probe's job on a fake Connect session: counts the tasks, answers once ``release`` is set."""

    def __init__(self, session: "ConnectSession") -> None:
        self.session = session

    def mapInArrow(self, fn, schema):  # noqa: N802 -- pyspark's name
        return self

    def collect(self):
        self.session.asked += 1
        self.session.threads.add(threading.current_thread().name)
        assert self.session.release.wait(10)
        return [("/srv/python3", self.session.failure)]


class ConnectSession:
    """A session of Spark Connect's type (``is_connect``) whose one-task jobs are ``_Probe``s."""

    def __init__(self, failure: str | None = None) -> None:
        self.session_id = f"session-{id(self)}"
        self.failure, self.asked, self.threads = failure, 0, set()
        self.release = threading.Event()

    def range(self, *args):
        return _Probe(self)


ConnectSession.__module__ = "pyspark.sql.connect.session"


def test_the_check_takes_the_answer_of_the_probe_started_in_the_background():
    spark = ConnectSession()
    probe_server_python(spark)
    probe_server_python(spark)  # once until a check takes the answer
    spark.release.set()
    check_server_python(spark)
    assert spark.asked == 1 and spark.threads == {"statekit-server-python"}
    check_server_python(spark)  # no probe started since: the check asks itself
    assert spark.asked == 2 and spark.threads == {"statekit-server-python", threading.current_thread().name}


def test_a_server_python_without_statekit_is_refused_by_the_check_from_the_background_answer():
    spark = ConnectSession(failure="ModuleNotFoundError: No module named 'statekit'")
    probe_server_python(spark)
    spark.release.set()
    with pytest.raises(ServerPythonError, match=r"cannot import statekit \(ModuleNotFoundError: No module named "
                                                r"'statekit'\): they run /srv/python3"):
        check_server_python(spark)
    assert spark.asked == 1


def test_nothing_is_asked_of_a_classic_session():
    class Classic:
        def range(self, *args):
            raise AssertionError("a classic session's workers are not probed")

    probe_server_python(Classic())
    check_server_python(Classic())


def test_a_background_job_that_failed_for_a_passing_reason_is_asked_again_by_the_check():
    class Interrupted(ConnectSession):
        def range(self, *args):
            if not self.asked:
                self.asked += 1
                raise RuntimeError("the operation was interrupted")  # the earlier run ended before its check
            return _Probe(self)

    Interrupted.__module__ = ConnectSession.__module__
    spark = Interrupted()
    spark.release.set()
    probe_server_python(spark)
    check_server_python(spark)  # the interrupt is not the server's answer: the check asks again
    assert spark.asked == 2


def test_the_server_refusal_from_the_background_is_not_asked_again():
    class NoWorker(ConnectSession):
        def range(self, *args):
            self.asked += 1
            raise RuntimeError("Python worker failed to connect back.")

    NoWorker.__module__ = ConnectSession.__module__
    spark = NoWorker()
    probe_server_python(spark)
    with pytest.raises(ServerPythonError, match="cannot run a task"):
        check_server_python(spark)
    assert spark.asked == 1
