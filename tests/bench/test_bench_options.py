"""`statekit bench spark`, `open-sessions` and `bootstrap` options: --users, --format, --variants and --source reach
the spark part, --open-sessions, --epoch-records, --runs and --memory-budget the open-sessions part,
--bootstrap-sessions and --history-clicks the bootstrap part; a bad value is refused before anything runs (exit 2,
naming it and the valid ones), an option given to another part too is refused, and the spark report's name tells
what was run. With --source files,kafka the report puts each statekit variant's speedup from the topic next to the
one from the files (synthetic runs here: no Spark)."""

from __future__ import annotations

import pytest

from statekit.bench import runner
from statekit.bench import spark as spark_part
from statekit.bench.common import MIB, PeakRSS
from statekit.bench.kafka_source import check
from statekit.bench.report import BenchReport
from statekit.bench.spark import DIFFERS, _median_run, _report, report_name
from statekit.bench.spark_runs import NATIVE


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
    (["spark", "--repeat", "0"], "argument --repeat: runs per variant must be positive, got 0"),
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
    [(parts, quick, _out, scale, layout, remote, users, fmt, variants, seed, *open_sessions, source, servers,
      repeat)] = no_run
    assert (parts, quick, scale, remote) == (["spark"], False, "default", None)
    assert (users, fmt, variants, seed) == ([10_000, 400_000, 1_000_000], "csv", ["plain", "native"], None)
    assert open_sessions == [None] * 6  # the open-sessions part's four, the bootstrap part's two
    assert (source, servers, repeat) == ("files", None, 1)
    no_run.clear()
    runner.main(["spark", "--seed", "11", "--source", "kafka", "--kafka-bootstrap-servers", "localhost:9092",
                 "--repeat", "3"])
    assert no_run[0][9] == 11
    assert no_run[0][-3:] == ("kafka", "localhost:9092", 3)
    no_run.clear()
    runner.main(["spark", "--source", "files,kafka", "--kafka-bootstrap-servers", "localhost:9092"])
    assert no_run[0][-3:] == ("files,kafka", "localhost:9092", 1)


def test_both_sources_reach_the_spark_parts_run(monkeypatch, tmp_path):
    calls: list[dict] = []
    monkeypatch.setattr(spark_part, "run", lambda **kwargs: calls.append(kwargs) or BenchReport("spark-files-kafka"))
    runner.run_parts(["spark"], True, tmp_path, source="files,kafka", kafka_bootstrap_servers="localhost:9092")
    assert calls == [{"quick": True, "source": "files,kafka", "kafka_bootstrap_servers": "localhost:9092"}]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"source": "kafka", "fmt": "csv"}, "--format csv applies to --source files only: the topic's messages are JSON"),
    ({"source": "kafka", "remote": "sc://h:1"}, "--source kafka runs on classic sessions only"),
    ({"source": "files,kafka", "fmt": "csv"},
     "--format csv applies to --source files only: the topic's messages are JSON"),
    ({"source": "files,kafka", "remote": "sc://h:1"}, "--source files,kafka runs on classic sessions only"),
    ({"kafka_bootstrap_servers": "localhost:9092"},
     r"--kafka-bootstrap-servers applies to --source kafka \(or files,kafka\) only"),
])
def test_a_kafka_source_option_that_does_not_fit_is_refused_before_anything_runs(tmp_path, kwargs, message):
    with pytest.raises(SystemExit, match=message):
        runner.run_parts(["spark"], True, tmp_path, **kwargs)


def test_a_broker_is_taken_with_either_source_that_reads_a_topic():
    for source in ("kafka", "files,kafka"):
        check(source, "localhost:9092", "parquet", None)
    with pytest.raises(SystemExit, match="unknown --source 'kafka,files'; valid: 'files', 'kafka', 'files,kafka'"):
        check("kafka,files", None, "parquet", None)


@pytest.mark.parametrize(("kwargs", "flags"), [
    ({"users": [10_000, 400_000]}, "--users 10000,400000"), ({"fmt": "csv"}, "--format csv"),
    ({"variants": ["native", "plain"]}, "--variants native,plain"), ({"seed": 11}, "--seed 11"),
    ({"source": "kafka"}, "--source kafka"), ({"source": "files,kafka"}, "--source files,kafka"),
    ({"repeat": 3}, "--repeat 3"),
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
    (("default", "parquet", [10_000], ["builtin", "native"], None, None, 7, "files,kafka"),
     "spark-files-kafka-users-10k-builtin-native"),
    (("default", "parquet", [10_000], ["builtin", "native"], None, "local[2]", 7, "files", 3),
     "spark-users-10k-builtin-native-connect-repeat-3"),
])
def test_the_report_name_tells_format_users_and_variants(args, name):
    assert report_name(*args) == name


def test_open_sessions_options_reach_the_part(no_run):
    runner.main(["open-sessions", "--open-sessions", "1000000,10000000", "--epoch-records", "1000000",
                 "--runs", "native, rocksdb", "--memory-budget", "2g"])
    [args] = no_run
    assert args[:2] == (["open-sessions"], False)
    assert args[10:16] == ([1_000_000, 10_000_000], 1_000_000, ["native", "rocksdb"], "2g", None, None)


def test_bootstrap_sessions_reach_the_part(no_run):
    runner.main(["bootstrap", "--bootstrap-sessions", "1000000,10000000", "--history-clicks", "10"])
    [args] = no_run
    assert args[:2] == (["bootstrap"], False) and args[14:16] == ([1_000_000, 10_000_000], 10)


def test_bootstrap_sessions_apply_to_that_part_only(tmp_path):
    with pytest.raises(SystemExit, match="^--bootstrap-sessions 1000 applies to the bootstrap part only: "
                                         "statekit bench bootstrap --bootstrap-sessions 1000$"):
        runner.run_parts(["open-sessions"], True, tmp_path, bootstrap_sessions=[1000])


def test_open_sessions_options_apply_to_that_part_only(tmp_path):
    with pytest.raises(SystemExit, match="^--runs native applies to the open-sessions part only: "
                                         "statekit bench open-sessions --runs native$"):
        runner.run_parts(["open-sessions", "spark"], True, tmp_path, runs=["native"])


SIZES = "1,000 events, 500 users"
REFERENCE = [("u1", 0, 30_000, 3, 1)]
SECONDS = {"files": {NATIVE: 10.0, "statekit heap": 5.0, "statekit rocksdb": 4.0},
           "kafka": {NATIVE: 20.0, "statekit heap": 11.0, "statekit rocksdb": 12.0}}
"""Speedups over session_window: from files heap 2x, rocksdb 2.5x; from the topic heap 1.82x, rocksdb 1.67x."""


def _results(sources: list[str]) -> dict[tuple[str, int, str], tuple[dict, PeakRSS]]:
    """Synthetic runs of builtin and native on ``sources``, every one writing the reference sessions."""
    return {(source, 500, label): _run(s) for source in sources for label, s in SECONDS[source].items()}


def _run(seconds: float, agree: str = "identical to reference", mib: int = 100) -> tuple[dict, PeakRSS]:
    """A synthetic run as ``spark.run`` keeps it: its seconds, its comparison with the reference, its peak RSS."""
    return ({"seconds": seconds, "batches": 2, "late": 0, "agree": agree, "session_count": len(REFERENCE)},
            PeakRSS(mib * MIB))


def _figures(sources: list[str], results: dict | None = None) -> tuple[BenchReport, dict[str, dict]]:
    rep = BenchReport("spark")
    _report(rep, 1_000, [500], ["builtin", "native"], sources, results or _results(sources), {500: len(REFERENCE)})
    names = [f.name for f in rep.figures]
    assert len(names) == len(set(names)), "figures of one name"
    return rep, {f["name"]: f for f in rep.to_json()["figures"]}


def test_both_sources_divide_the_topics_speedup_by_the_files():
    rep, figures = _figures(["files", "kafka"])
    row = figures[f"speedup over {NATIVE}, from a topic / from files ({SIZES})"]
    assert row["unit"] == "x" and row["baseline"] is None
    assert row["heap"] == pytest.approx((20 / 11) / 2.0)  # 0.91: within 10%
    assert row["rocksdb"] == pytest.approx((20 / 12) / 2.5)  # 0.67
    assert "heap met, rocksdb MISSED" in row["notes"], row["notes"]
    assert row["notes"].startswith("speedup from a topic: heap 1.82x, rocksdb 1.67x; from files: heap 2.00x, "
                                   "rocksdb 2.50x; within 10% (from a topic >= 0.9 x from files)"), row["notes"]
    assert not rep.failures  # a verdict, not a wrong answer
    for source, native in (("files", 100.0), ("a topic", 50.0)):
        events = figures[f"events/s vs {NATIVE} (from {source}, {SIZES})"]
        assert events["baseline"] == native
        sessions = figures[f"sessions vs {NATIVE} (from {source}, {SIZES})"]
        assert sessions["notes"].count("identical to reference") == 3
    speedup = next(s for s in rep.series_list if s.title == f"speedup over {NATIVE}")
    assert speedup.lines == {"statekit heap (from files)": [(500, 2.0)], "statekit rocksdb (from files)": [(500, 2.5)],
                             "statekit heap (from a topic)": [(500, pytest.approx(20 / 11))],
                             "statekit rocksdb (from a topic)": [(500, pytest.approx(20 / 12))]}


def test_one_source_keeps_its_figures_names_and_has_no_comparison():
    rep, figures = _figures(["kafka"])
    assert figures[f"events/s vs {NATIVE} ({SIZES})"]["baseline"] == 50.0
    assert not [name for name in figures if "from" in name]
    assert set(next(s for s in rep.series_list if s.title == f"speedup over {NATIVE}").lines) == {
        "statekit heap", "statekit rocksdb"}


def test_repeats_rate_each_variant_on_its_run_of_median_time():
    runs = {NATIVE: [_run(12.0, mib=300), _run(10.0, mib=200), _run(30.0, mib=250)],
            "statekit heap": [_run(6.0), _run(4.0, mib=90), _run(5.0, mib=120), _run(7.0)],
            "statekit rocksdb": [_run(4.0)]}
    rep, figures = _figures(["files"], {("files", 500, label): _median_run(made) for label, made in runs.items()})
    events = figures[f"events/s vs {NATIVE} ({SIZES})"]
    assert (events["heap"], events["rocksdb"], events["baseline"]) == (200.0, 250.0, pytest.approx(1_000 / 12))
    assert "speedup heap 2.40x, rocksdb 3.00x" in events["notes"], events["notes"]
    assert f"{NATIVE} 12.0 s, 2 batches (the median of 3 runs: 10.0-30.0 s, peak RSS 200-300 MiB)" in events["notes"]
    assert "statekit heap 5.0 s, 2 batches (the median of 4 runs: 4.0-7.0 s, peak RSS 90-120 MiB)" in events["notes"]
    assert "statekit rocksdb 4.0 s, 2 batches (epochs" not in events["notes"] and "the median of 1" not in events["notes"]
    rss = figures[f"peak RSS whole process tree vs {NATIVE} ({SIZES})"]
    assert (rss["heap"], rss["baseline"]) == (120.0, 300.0)  # the median runs' own
    assert not rep.failures


def test_one_repeat_that_differs_from_the_reference_is_the_reports_failure():
    wrong = f"{DIFFERS}: 0 sessions, 0 not in reference, 0 late"
    heap = _median_run([_run(5.0), _run(9.0, agree=wrong), _run(4.0)])
    assert heap[0]["seconds"] == 5.0 and heap[0]["agree"] == wrong
    native = _median_run([_run(10.0), _run(300.0, agree="not compared: stopped after 300 s, rated on its 3 finished "
                                                        "batches")])
    assert native[0]["seconds"] == 10.0 and native[0]["agree"].startswith("not compared")
    rep, _ = _figures(["files"], {("files", 500, NATIVE): native, ("files", 500, "statekit heap"): heap,
                                  ("files", 500, "statekit rocksdb"): _run(4.0)})
    assert rep.failures == [f"statekit heap ({SIZES}): {wrong}"]
