"""Merging per-worker (or per-runner) run folders into one, on the stored sample runs."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.merge import main, merge_runs, merge_workers, worker_parts
from reports.run_folder import load_run
from reports.signoff import write_signoff
from slo.errors import ReportMergeError

DATA = Path(__file__).parent / "data"


def _two_workers(run: Path) -> tuple[Path, Path]:
    """run-new as worker gw0 (scenario realtime) and run-sample as gw1 under another label."""
    gw0, gw1 = run / "workers" / "gw0", run / "workers" / "gw1"
    shutil.copytree(DATA / "run-new", gw0)
    shutil.copytree(DATA / "run-sample", gw1)
    (gw1 / "realtime").rename(gw1 / "realtime.fcfs")
    env = json.loads((gw0 / "environment.json").read_text())
    (gw0 / "environment.json").write_text(json.dumps({**env, "cuda_visible_devices": "0,1"}))
    return gw0, gw1


def _cases(path: Path) -> list[str]:
    return [str(c.get("name")) for c in ET.parse(path).getroot().iter("testcase")]


def test_workers_merge_into_one_run_that_renders(tmp_path: Path) -> None:
    run = tmp_path / "run"
    gw0, gw1 = _two_workers(run)
    assert merge_workers(run)

    merged = load_run(run)
    assert sorted(s.label for s in merged.scenarios) == ["realtime", "realtime.fcfs"]
    assert (run / "realtime.fcfs" / "records.jsonl").read_bytes() == (
        DATA / "run-sample" / "realtime" / "records.jsonl"
    ).read_bytes()
    # Verdicts: gw0's verdicts.json (gw1 predates it), in worker order.
    assert json.loads((run / "verdicts.json").read_text()) == json.loads(
        (gw0 / "verdicts.json").read_text()
    )
    # Both workers' junit cases in one file.
    assert _cases(run / "junit.xml") == _cases(gw0 / "junit.xml") + _cases(gw1 / "junit.xml")
    # Both server starts, each pointing at its copied log; the same log name got a prefix.
    starts = json.loads((run / "servers" / "starts.json").read_text())
    assert [s["part"] for s in starts] == ["gw0", "gw1"]
    assert [Path(s["log"]).name for s in starts] == [
        "tiny-llama-1e3c30bf.log",
        "gw1-tiny-llama-1e3c30bf.log",
    ]
    assert all(Path(s["log"]).exists() for s in starts)
    bench = json.loads((run / "benchmark.json").read_text())["benchmarks"]
    per_part = [
        len(json.loads((p / "benchmark.json").read_text())["benchmarks"]) for p in (gw0, gw1)
    ]
    assert len(bench) == sum(per_part)
    env = json.loads((run / "environment.json").read_text())
    assert env["parts"][0] == {
        "part": "gw0",
        "scenarios": ["realtime"],
        "cuda_visible_devices": "0,1",
        "gpus": [],
    }
    assert env["parts"][1]["scenarios"] == ["realtime.fcfs"]
    files = write_signoff([run])
    assert "realtime.fcfs" in files.markdown.read_text()


def test_the_controllers_own_junit_is_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _two_workers(run)
    (run / "junit.xml").write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    merge_workers(run)
    assert _cases(run / "junit.xml") == []


def test_one_scenario_in_two_parts_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ReportMergeError) as e:
        merge_runs([DATA / "run-new", DATA / "run-sample"], tmp_path / "out")
    msg = str(e.value)
    assert "scenario folder 'realtime' is in both" in msg and "--dist loadscope" in msg
    assert not (tmp_path / "out").exists()


def test_a_cut_short_junit_of_a_part_is_named_with_the_fix(tmp_path: Path) -> None:
    run = tmp_path / "run"
    gw0, _ = _two_workers(run)
    text = (gw0 / "junit.xml").read_text()
    (gw0 / "junit.xml").write_text(text[: len(text) // 2])
    with pytest.raises(ReportMergeError) as e:
        merge_workers(run)
    msg = str(e.value)
    assert str(gw0 / "junit.xml") in msg and "not well-formed XML" in msg
    assert "merge the other parts, or delete this file" in msg


def test_worker_order_is_numeric(tmp_path: Path) -> None:
    for name in ("gw10", "gw2", "gw1"):
        (tmp_path / "workers" / name).mkdir(parents=True)
    assert [p.name for p in worker_parts(tmp_path)] == ["gw1", "gw2", "gw10"]
    assert not merge_workers(tmp_path / "nothing")


def test_command_merges_runs_written_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, gw1 = _two_workers(tmp_path / "parts")
    out = tmp_path / "merged"
    assert main([str(out), str(DATA / "run-new"), str(gw1)]) == 0
    assert {s.label for s in load_run(out).scenarios} == {"realtime", "realtime.fcfs"}
    assert main([str(tmp_path / "bad"), str(DATA / "run-new"), str(DATA / "run-new")]) == 2
    assert "measured twice" in capsys.readouterr().err
