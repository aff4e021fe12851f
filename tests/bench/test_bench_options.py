"""`statekit bench spark`, `open-sessions` and `bootstrap` options: --users, --format, --variants and --source reach
the spark part, --open-sessions, --epoch-records, --runs and --memory-budget the open-sessions part,
--bootstrap-sessions and --history-clicks the bootstrap part; a bad value is refused before anything runs (exit 2,
naming it and the valid ones), an option given to another part too is refused, and the spark report's name tells
what was run."""

from __future__ import annotations

import pytest

from statekit.bench import runner
from statekit.bench.spark import report_name


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """``runner.run_parts`` replaced: the calls main makes, nothing run."""
    calls: list[tuple] = []
    monkeypatch.setattr(runner, "run_parts", lambda *args: calls.append(args))
    return calls


@pytest.mark.parametrize(("argv", "message"), [
    (["spark", "--format", "json"], "argument --format: invalid choice: 'json' (choose from 'csv', 'parquet')"),
    (["spark", "--variants", "native,fancy"],
     "argument --variants: unknown variant(s) 'fancy'; valid: builtin, plain, vectorized, native, tws, floor"),
    (["spark", "--variants", ","], "unknown variant(s) (none given)"),
    (["spark", "--users", "10000,10k"], "argument --users: '10k' is not a whole number"),
    (["spark", "--users", "0"], "user counts must be positive, got 0"),
    (["open-sessions", "--runs", "rocksdb,fancy"],
     "argument --runs: unknown run(s) 'fancy'; valid: rocksdb, cells, heap, native"),
    (["open-sessions", "--open-sessions", "1e6"], "argument --open-sessions: '1e6' is not a whole number"),
    (["open-sessions", "--epoch-records", "0"], "argument --epoch-records: records per epoch must be positive, got 0"),
    (["bootstrap", "--bootstrap-sessions", "1m"], "argument --bootstrap-sessions: '1m' is not a whole number"),
    (["bootstrap", "--history-clicks", "0"], "argument --history-clicks: clicks per user must be positive, got 0"),
])
def test_a_bad_part_option_exits_2_naming_it(no_run, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        runner.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
    assert not no_run


def test_spark_options_reach_the_spark_part(no_run):
    runner.main(["spark", "--users", "10000,400000,1000000", "--format", "csv", "--variants", "plain, native"])
    [(parts, quick, _out, scale, layout, remote, users, fmt, variants, seed, *open_sessions, source, servers)] = no_run
    assert (parts, quick, scale, remote) == (["spark"], False, "default", None)
    assert (users, fmt, variants, seed) == ([10_000, 400_000, 1_000_000], "csv", ["plain", "native"], None)
    assert open_sessions == [None] * 6  # the open-sessions part's four, the bootstrap part's two
    assert (source, servers) == ("files", None)
    no_run.clear()
    runner.main(["spark", "--seed", "11", "--source", "kafka", "--kafka-bootstrap-servers", "localhost:9092"])
    assert no_run[0][9] == 11
    assert no_run[0][-2:] == ("kafka", "localhost:9092")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"source": "kafka", "fmt": "csv"}, "--format csv applies to --source files only: the topic's messages are JSON"),
    ({"source": "kafka", "remote": "sc://h:1"}, "--source kafka runs on classic sessions only"),
    ({"kafka_bootstrap_servers": "localhost:9092"}, "--kafka-bootstrap-servers applies to --source kafka only"),
])
def test_a_kafka_source_option_that_does_not_fit_is_refused_before_anything_runs(tmp_path, kwargs, message):
    with pytest.raises(SystemExit, match=message):
        runner.run_parts(["spark"], True, tmp_path, **kwargs)


@pytest.mark.parametrize(("kwargs", "flags"), [
    ({"users": [10_000, 400_000]}, "--users 10000,400000"), ({"fmt": "csv"}, "--format csv"),
    ({"variants": ["native", "plain"]}, "--variants native,plain"), ({"seed": 11}, "--seed 11"),
    ({"source": "kafka"}, "--source kafka"),
])
def test_spark_options_apply_to_the_spark_part_only(tmp_path, kwargs, flags):
    with pytest.raises(SystemExit, match=f"^{flags} applies to the spark part only: statekit bench spark {flags}$"):
        runner.run_parts(["windows"], True, tmp_path, **kwargs)


@pytest.mark.parametrize(("args", "name"), [
    (("default", "parquet", None, None, None, None), "spark"),
    (("default", "parquet", None, None, "table", None), "spark-table"),
    (("medium", "parquet", None, None, "cells", "sc://h:1"), "spark-medium-cells-connect"),
    (("default", "csv", [10_000, 400_000, 1_000_000], None, None, None), "spark-csv-users-10k-400k-1m"),
    (("large", "parquet", [2_500], ["native", "plain"], None, None), "spark-large-users-2500-native-plain"),
    (("medium", "parquet", None, ["builtin"], None, None, 11), "spark-medium-builtin-seed-11"),
    (("default", "parquet", [10_000], ["builtin", "native"], None, None, 7, "kafka"),
     "spark-kafka-users-10k-builtin-native"),
])
def test_the_report_name_tells_format_users_and_variants(args, name):
    assert report_name(*args) == name


def test_open_sessions_options_reach_the_part(no_run):
    runner.main(["open-sessions", "--open-sessions", "1000000,10000000", "--epoch-records", "1000000",
                 "--runs", "native, rocksdb", "--memory-budget", "2g"])
    [args] = no_run
    assert args[:2] == (["open-sessions"], False)
    assert args[-8:-2] == ([1_000_000, 10_000_000], 1_000_000, ["native", "rocksdb"], "2g", None, None)


def test_bootstrap_sessions_reach_the_part(no_run):
    runner.main(["bootstrap", "--bootstrap-sessions", "1000000,10000000", "--history-clicks", "10"])
    [args] = no_run
    assert args[:2] == (["bootstrap"], False) and args[-4:-2] == ([1_000_000, 10_000_000], 10)


def test_bootstrap_sessions_apply_to_that_part_only(tmp_path):
    with pytest.raises(SystemExit, match="^--bootstrap-sessions 1000 applies to the bootstrap part only: "
                                         "statekit bench bootstrap --bootstrap-sessions 1000$"):
        runner.run_parts(["open-sessions"], True, tmp_path, bootstrap_sessions=[1000])


def test_open_sessions_options_apply_to_that_part_only(tmp_path):
    with pytest.raises(SystemExit, match="^--runs native applies to the open-sessions part only: "
                                         "statekit bench open-sessions --runs native$"):
        runner.run_parts(["open-sessions", "spark"], True, tmp_path, runs=["native"])
