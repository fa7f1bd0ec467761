"""The per-objective JUnit file and the report command line's outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.__main__ import main
from reports.files import write_jsonl
from reports.junit_report import junit_xml, write_junit
from reports.run_folder import load_run
from reports.signoff import build_report, render_html
from slo.records import to_row
from tests.unit.report_runs import NEW, SAMPLE, SAMPLE_OBJECTIVES, rec, synthetic_run


def _junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        # The counts CI readers show must match the test cases.
        assert int(suite.get("tests", "-1")) == len(cases)
        for attr, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(suite.get(attr, "-1")) == sum(c.find(tag) is not None for c in cases)
        assert suite.get("name") and suite.get("timestamp") and suite.get("hostname")
        for c in cases:
            assert c.get("name") and c.get("classname") == suite.get("name")
            for tag in ("failure", "error", "skipped"):
                child = c.find(tag)
                assert child is None or child.get("message")
    totals = {k: sum(int(s.get(k, "0")) for s in root.iter("testsuite")) for k in ("tests",)}
    assert int(root.get("tests", "-1")) == totals["tests"]
    return root


def test_junit_one_suite_per_scenario_one_case_per_objective(tmp_path: Path) -> None:
    path = write_junit(NEW, tmp_path / "slo-junit.xml")
    root = _junit(path)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "realtime" and suite.get("failures") == "2"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["vllm.version"] == "0.32.0" and props["model"] == "tiny-llama"
    assert props["profile"] == "cpu-tiny" and props["suite.commit"] == "c79595c"
    assert props["cpu.model"] == "Intel(R) Xeon(R) Processor (2 cores)"
    assert props["engine_arg.max_num_seqs"] == "8"
    assert json.loads(props["engine_args"] or "")["scheduling_policy"] == "priority"
    verdicts = json.loads((NEW / "verdicts.json").read_text())
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == [v["objective"] for v in verdicts]
    p99 = cases["ttft p99 <= 200 ms"]
    failure = p99.find("failure")
    assert failure is not None and failure.get("message") == verdicts[1]["message"]
    out = p99.findtext("system-out") or ""
    for text in ("estimate: 97 ms", "95% CI: [79 ms, ∞]", "n: 120", "threshold: <= 200 ms"):
        assert text in out
    assert cases["ttft p50 <= 60 ms"].find("failure") is None


def test_junit_inconclusive_as_skipped_and_old_folders(tmp_path: Path) -> None:
    root = ET.fromstring(junit_xml(load_run(NEW), inconclusive="skipped"))
    (suite,) = root.findall("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "2")
    path = write_junit(SAMPLE, tmp_path / "old.xml")
    cases = _junit(path).findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == list(SAMPLE_OBJECTIVES)
    with pytest.raises(ValueError, match="inconclusive = 'warn'"):
        write_junit(SAMPLE, tmp_path / "x.xml", inconclusive="warn")  # type: ignore[arg-type]


def test_junit_keeps_a_test_that_errored_before_judging(tmp_path: Path) -> None:
    path = write_junit(synthetic_run(tmp_path / "run"))
    assert path == tmp_path / "run" / "slo-junit.xml"
    root = _junit(path)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "mixed" and suite.get("errors") == "1"
    assert suite.get("failures") == "1"  # the INVALID objective


def test_junit_of_a_run_that_judged_nothing_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_jsonl(run / "realtime" / "records.jsonl", [to_row(rec(0, 0, 5, 9, warmup=True), 0)])
    root = ET.fromstring(junit_xml(load_run(run)))
    assert root.get("errors") == "1"
    html = render_html(build_report(load_run(run)))  # renders, and says what is missing
    assert "No objective was judged" in html and "Result: NO VERDICTS" in html
    error = root.find("testsuite/testcase/error")
    assert error is not None and "judged no objective" in (error.get("message") or "")


def test_cli_writes_html_markdown_and_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(NEW), str(SAMPLE), "--out", str(tmp_path), "--junit"]) == 0
    printed = capsys.readouterr().out.split()
    names = ["signoff.html", "signoff.md", "slo-junit.xml"]
    assert printed == [str(tmp_path / n) for n in names]
