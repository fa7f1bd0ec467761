"""The run folder's files through their one owner (reports/run_files.py): shapes round-trip,
old folders still read, and a folder from a newer suite is refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reports import run_files
from reports.run_files import (
    SCHEMA_VERSION,
    ServerStart,
    read_environment,
    read_starts,
    read_summary,
    read_verdicts,
    start_to_row,
    verdict_row,
    write_environment,
    write_starts,
    write_summary,
    write_verdicts,
)
from reports.run_folder import load_run
from slo.errors import SuiteError

DATA = Path(__file__).resolve().parent / "data"


def test_what_is_written_reads_back_stamped_with_the_schema(tmp_path: Path) -> None:
    write_environment(tmp_path, {"profile": "cpu-tiny", "gpus": []})
    assert read_environment(tmp_path) == {
        "schema_version": SCHEMA_VERSION,
        "profile": "cpu-tiny",
        "gpus": [],
    }
    write_summary(tmp_path / "realtime", {"scenario": "realtime", "workload_s": 1.5})
    assert read_summary(tmp_path / "realtime")["workload_s"] == 1.5
    start = ServerStart("tiny-1", 42, 3.5, 1e9, "servers/tiny-1.log", ("vllm", "serve"))
    write_starts(tmp_path, [start])
    assert read_starts(tmp_path) == [start_to_row(start)]
    assert read_starts(tmp_path)[0]["command"] == ["vllm", "serve"]
    row = verdict_row("realtime", "t::x", "0.32", "tiny", {"outcome": "PASS", "n": 10})
    write_verdicts(tmp_path, [row])
    assert read_verdicts(tmp_path) == [row] and row["outcome"] == "PASS"


def test_absent_files_read_as_empty(tmp_path: Path) -> None:
    assert read_environment(tmp_path) == {} and read_summary(tmp_path / "x") == {}
    assert read_starts(tmp_path) == [] and read_verdicts(tmp_path) == []


@pytest.mark.parametrize("folder", ["run-sample", "run-new"])
def test_folders_written_before_the_schema_still_read(folder: str) -> None:
    env = json.loads((DATA / folder / run_files.ENVIRONMENT).read_text())
    assert "schema_version" not in env  # version 1
    run = load_run(DATA / folder)
    assert run.environment == env and run.scenarios and run.verdicts


def test_a_folder_from_a_newer_suite_is_refused_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "run-new", run)
    summary = run / "realtime" / run_files.SUMMARY
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "schema_version": 99}))
    with pytest.raises(SuiteError) as e:
        load_run(run)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"{summary}: run-folder schema version 99, this suite reads 1 to ")
    assert "render it with the suite version that wrote it" in message


def test_a_hand_edited_file_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    (tmp_path / run_files.ENVIRONMENT).write_text("[]")
    with pytest.raises(SuiteError, match="expected a JSON object, got list"):
        read_environment(tmp_path)
    (tmp_path / run_files.VERDICTS).write_text("{}")
    with pytest.raises(SuiteError, match="expected a list, got dict"):
        read_verdicts(tmp_path)
