"""The pure rules of what an input is: the order a stream's files must be in (``spark.file_order``), a glob in
the input's last part, and the one format of its files (``spark.input_files``). No Spark here."""

from __future__ import annotations

import re
import subprocess

import pytest

from statekit.spark.errors import InputError
from statekit.spark.file_order import check_file_order, touch_in_name_order
from statekit.spark.input_files import file_key, input_format, split_glob


def test_modification_times_strictly_increasing_in_name_order_pass():
    check_file_order([("/d/b.csv", 2_000), ("/d/a.csv", 1_000), ("/d/c.csv", 2_001)], "/d")  # listed in any order
    check_file_order([("/d/a.csv", 5)], "/d")
    check_file_order([], "/d")


def test_a_tie_is_refused_naming_the_pair_their_times_and_both_ways_out():
    with pytest.raises(InputError) as e:
        check_file_order([("/d/a.csv", 1_000), ("/d/b.csv", 1_772_352_003_244), ("/d/c.csv", 1_772_352_003_244)], "/d")
    message = str(e.value)
    assert message.startswith("input /d: b.csv (2026-03-01 08:00:03.244 UTC) and c.csv (2026-03-01 08:00:03.244 UTC) "
                              "have the same modification time")
    assert touch_in_name_order("/d/*") in message and "or pass --mode batch" in message


def test_times_out_of_name_order_are_refused_naming_the_first_pair():
    with pytest.raises(InputError, match=r"input d/\*\.csv: b\.csv \(1970-01-01 00:00:03\.000 UTC\) and c\.csv "
                                         r"\(1970-01-01 00:00:02\.000 UTC\) have modification times out of name order"):
        check_file_order([("d/a.csv", 1_000), ("d/b.csv", 3_000), ("d/c.csv", 2_000), ("d/e.csv", 0)], "d/*.csv")


def test_files_a_resumed_stream_read_already_do_not_count_in_any_spelling():
    files = [("file:/d/a b.csv", 9_000), ("file:/d/b.csv", 1_000), ("file:/d/c.csv", 2_000)]
    check_file_order(files, "/d", read=["file:///d/a%20b.csv"])  # as Spark's file source logs it
    with pytest.raises(InputError, match="a b.csv"):
        check_file_order(files, "/d", read=["file:///d/b.csv"])
    assert file_key("s3a://bucket/d/a%20b.csv") == "s3a://bucket/d/a b.csv"


def test_remote_inputs_get_advice_in_words():
    with pytest.raises(InputError, match="write or copy them one at a time in name order") as e:
        check_file_order([("s3a://b/d/x.csv", 1), ("s3a://b/d/y.csv", 1)], "s3a://b/d")
    assert "python3" not in str(e.value)


def test_the_command_given_puts_the_files_in_name_order(tmp_path):
    d = tmp_path / "in [1]"  # a directory name glob would misread
    d.mkdir()
    for name in ("c.csv", "a.csv", "b.csv", "README.md"):
        (d / name).write_text("x\n")
    files = lambda: [(str(p), p.stat().st_mtime_ns // 1_000_000) for p in d.iterdir() if p.suffix == ".csv"]  # noqa: E731
    readme = (d / "README.md").stat().st_mtime_ns
    with pytest.raises(InputError) as e:
        check_file_order(files(), f"{d}/*.csv")
    command = re.search(r"for example: (.+)\), or pass --mode batch", str(e.value)).group(1)
    subprocess.run(command, shell=True, check=True)
    check_file_order(files(), f"{d}/*.csv")
    assert (d / "README.md").stat().st_mtime_ns == readme  # only the files of the input's glob


def test_a_glob_in_the_last_part_is_split_off():
    assert split_glob("clicks/*.csv") == ("clicks", "*.csv")
    assert split_glob("s3a://b/clicks/part-*") == ("s3a://b/clicks", "part-*")
    assert split_glob("*.csv") == (".", "*.csv")
    assert split_glob("/*.csv") == ("/", "*.csv")
    assert split_glob("clicks/") == ("clicks/", None)
    assert split_glob("clicks/part-00000.csv") == ("clicks/part-00000.csv", None)


def test_one_format_from_the_files_or_the_flag():
    assert input_format(["d/a.csv", "d/b.CSV"], None, "d") == "csv"
    assert input_format(["d/a.txt", "d/b.txt"], "json", "d") == "json"  # the flag for files of another extension
    assert input_format(["d/a.csv.gz", "d/b.csv.gz"], "csv", "d") == "csv"
    with pytest.raises(InputError, match=r"input d/a\.txt: unknown format; pass --format csv\|parquet\|json"):
        input_format(["d/a.txt", "d/b.txt"], None, "d")


@pytest.mark.parametrize("fmt", [None, "csv"])
def test_stray_files_are_named_with_a_glob_of_the_data_files_with_or_without_the_format(fmt):
    files = ["in/README.md", "in/notes", "in/p0.csv", "in/p1.csv", "in/p2.csv"]
    message = ("input in holds 3 .csv files and 2 others (README.md, notes): Spark would read every file of the input "
               "as csv; pass a glob of the data files, --input 'in/*.csv', or move them out of in")
    with pytest.raises(InputError, match=re.escape(message)):
        input_format(files, fmt, "in")


def test_without_one_extension_to_glob_the_advice_is_to_move_the_others():
    with pytest.raises(InputError, match=re.escape("input in holds 2 files without an extension and 1 other (x.md): "
                                                   "Spark would read every file of the input as csv; move it out of in")):
        input_format(["in/p0", "in/p1", "in/x.md"], "csv", "in")
