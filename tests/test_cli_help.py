"""The command's help and printed output: every option's default in every ``--help`` as typed, none for an off
flag (bench's without the bench extra), backend choices from the installed backends, ``statekit inspect``'s
indented job and unset watermarks shown as ``none``. No Spark here."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from statekit import StateConfig, create_backend, key_groups_for_partition
from statekit.checkpoint import CheckpointStore, JobRecord, main_inspect
from statekit.cli import main, parser
from statekit.registry import _registered
from statekit.timers import MAX_TIMESTAMP, MIN_TIMESTAMP


def parsers(ap: argparse.ArgumentParser, name: str = "statekit") -> list[tuple[str, argparse.ArgumentParser]]:
    """``ap`` and every subcommand's parser below it, by command name."""
    found = [(name, ap)]
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                found += parsers(p, f"{name} {sub}")
    return found


def shown_defaults(ap: argparse.ArgumentParser) -> list[tuple[str, object]]:
    """The options of ``ap`` whose default means something to show (not None, an off flag or an empty list)."""
    return [(a.option_strings[0], a.default) for a in ap._actions if a.option_strings and a.default is not None
            and a.default is not False and a.default != [] and a.default != argparse.SUPPRESS]


def test_every_option_with_a_default_shows_it_in_help():
    checked = set()
    for name, ap in parsers(parser()):
        text = " ".join(ap.format_help().split())
        for option, default in shown_defaults(ap):
            help_text = " ".join(next(a.help for a in ap._actions if option in a.option_strings).split())
            assert f"(default: {default})" in text or "default" in help_text, f"{name} {option}"
            checked.add(f"{name} {option}")
    assert {"statekit demo --events", "statekit demo --backend", "statekit sessionize --gap",
            "statekit sessionize --watermark-delay", "statekit sessionize --max-invalid-fraction"} <= checked
    text = " ".join(subprocess.run([sys.executable, "-m", "statekit.cli", "sessionize", "--help"], capture_output=True,
                                   text=True, timeout=60).stdout.split())
    for shown in ("--gap GAP session gap, with a unit: 30s, 500ms, 5m, 1h30m (default: 30s)", "(default: 0)",
                  "(default: 1.0)", "exit status: 0 done; 2 a mistake", "3 every record of the run was invalid"):
        assert shown in text


def test_inspect_help_shows_no_default_of_an_off_flag(capsys):
    with pytest.raises(SystemExit) as done:
        main(["inspect", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--json print the structured report as JSON (watermarks as numbers) " in text + " "
    assert "(default: False)" not in text


def test_bench_help_works_without_the_bench_extra():
    code = ("import sys; sys.modules['psutil'] = None; sys.modules['matplotlib'] = None\n"
            "from statekit.cli import main; main(['bench', '--help'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "usage: statekit bench" in text and "(default: parquet)" in text and "pip install 'statekit[bench]'" in text
    assert "or all (default: all)" in text  # as typed: not a Python list
    assert "['all']" not in text and "(default: False)" not in text


def test_backend_choices_are_the_installed_backends(monkeypatch):
    monkeypatch.setitem(_registered, "my-backend", object)
    for name, ap in parsers(parser()):
        if name in ("statekit sessionize", "statekit demo"):
            [backend] = [a for a in ap._actions if "--backend" in a.option_strings]
            assert backend.choices == ["heap", "my-backend", "rocksdb"]


def test_inspect_indents_the_job_and_shows_unset_watermarks_as_none(tmp_path, capsys):
    root = str(tmp_path / "ckpt")
    store = CheckpointStore(root)
    backend = create_backend(StateConfig(backend="heap", max_parallelism=8), key_groups_for_partition(0, 1, 8))
    backend.timer_service("window-timers", None)  # never advanced: its watermark is the minimum
    store.commit("sessionize", 0, backend, {"watermark": MIN_TIMESTAMP, "final_watermark": MAX_TIMESTAMP, "other": 5})
    JobRecord(root).write({"operator_id": "sessionize", "key": {"column": "user_id", "type": "string"},
                           "watermark_delay_ms": 0})
    assert main_inspect([root]) == 0
    out = capsys.readouterr().out
    assert str(MIN_TIMESTAMP) not in out and str(MAX_TIMESTAMP) not in out
    assert "timers window-timers: 0 event, 0 processing, watermark none" in out
    assert 'metadata {"final_watermark": "none", "other": 5, "watermark": "none"}' in out
    assert 'job {\n  "key": {\n    "column": "user_id",' in out and '\n  "watermark_delay_ms": 0\n}' in out
    backend.close()
