"""Reading run folders: old ones (verdicts from junit.xml), new ones, and bad ones."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from reports.__main__ import main
from reports.run_folder import load_run, read_junit, verdicts_from_junit
from slo.errors import SuiteError
from slo.verdict import Outcome
from tests.unit.report_runs import NEW, SAMPLE, SAMPLE_OBJECTIVES


def test_old_run_folder_rebuilds_verdicts_from_junit() -> None:
    run = load_run(SAMPLE)
    assert run.verdicts_source == "junit.xml"
    assert {v.objective: v.outcome.value for v in run.verdicts} == SAMPLE_OBJECTIVES
    p50 = run.verdicts[0]
    assert (p50.scenario, p50.metric, p50.statistic, p50.request_class) == (
        "realtime",
        "ttft",
        "p50",
        None,
    )
    assert p50.test == "suites/test_realtime.py::test_objective[ttft p50]"
    assert p50.estimate == pytest.approx(0.0172638015) and p50.n == 600
    assert run.vllm_version == "0.32.0" and run.model == "tiny-llama"
    # Old environment.json has no CPU or commit: both come from pytest-benchmark's record.
    assert run.cpu_model == "Intel(R) Xeon(R) Processor (2 cores)"
    assert run.suite_commit == "db5f18a"
    assert run.other_tests == ()
    assert len(run.scenarios) == 1 and len(run.scenarios[0].records) == 50


def test_old_junit_names_the_scenario_by_its_module(tmp_path: Path) -> None:
    props = "".join(
        f'<property name="slo.{k}" value="{v}"/>'
        for k, v in {
            "outcome": "PASS",
            "objective": "ttft p50 &lt;= 1 s",
            "metric": "ttft",
            "statistic": "p50",
            "comparison": "&lt;=",
            "threshold": "1",
            "n": "9",
            "estimate": "0.5",
            "ci_lower": "0.4",
            "ci_upper": "0.6",
        }.items()
    )
    xml = (
        '<testsuites><testsuite name="pytest">'
        + "".join(
            f'<testcase classname="suites.{m}" name="test_objective[ttft p50]">'
            f"<properties>{props}</properties></testcase>"
            for m in ("test_mixed", "test_custom")
        )
        + "</testsuite></testsuites>"
    )
    (tmp_path / "junit.xml").write_text(xml)
    junit = read_junit(tmp_path / "junit.xml")
    rows = verdicts_from_junit(junit, ("mixed", "mixed[fcfs]"), "junit.xml")
    assert [v.scenario for v in rows] == ["mixed", "custom"]
    assert verdicts_from_junit(junit, ("only",), "j")[1].scenario == "only"


def test_a_cut_short_junit_is_one_error_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text('<testsuites><testsuite name="pytest"><testcase')
    with pytest.raises(SuiteError) as e:
        read_junit(tmp_path / "junit.xml")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'junit.xml'}: not well-formed XML")
    assert "\n" not in msg and "render the run from verdicts.json by moving junit.xml away" in msg


def test_new_run_folder_reads_verdicts_json_and_histograms() -> None:
    run = load_run(NEW)
    assert run.verdicts_source == "verdicts.json"
    p99 = next(v for v in run.verdicts if v.name == "ttft p99")
    assert p99.outcome is Outcome.INCONCLUSIVE
    assert p99.ci_upper == math.inf  # written as null: no upper bound from 120 samples
    hist = run.scenarios[0].server_metrics["vllm:time_to_first_token_seconds"]
    assert hist.count == 120 and hist.buckets[-1][0] == math.inf
    est, lo, hi = hist.quantile(0.5) or (0.0, 0.0, 0.0)
    assert lo <= est <= hi and (lo, hi) == (0.02, 0.04)
    assert run.suite_commit == "c79595c"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p / "missing", ["does not exist", "pass a run folder"]),
        (lambda p: p, ["is not a run folder", "no verdicts.json", "no junit.xml", "Pass"]),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", ["a file, not a folder"]),
    ],
)
def test_a_folder_that_is_no_run_folder_is_a_clear_error(
    tmp_path: Path, make: Any, expected: list[str]
) -> None:
    path = make(tmp_path)
    with pytest.raises(SuiteError) as e:
        load_run(path)
    assert str(path) in str(e.value)
    for text in expected:
        assert text in str(e.value)


def test_cli_reports_a_bad_folder_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "nope") in err


def test_damaged_verdicts_json_names_the_file_and_the_fix(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(NEW, run)
    (run / "verdicts.json").write_text('[{"scenario": "realtime"')
    with pytest.raises(SuiteError, match=r"verdicts\.json: not valid JSON .*delete the file"):
        load_run(run)
