"""Report layer: run folders in, JUnit / sign-off HTML / Markdown out, and how a browser shows it.

``data/run-sample`` is a trimmed real run written before verdicts.json existed (verdicts come
from junit.xml); ``data/run-new`` one with verdicts.json and vLLM's histograms.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from reports.__main__ import main
from reports.analysis import compare, decomposition, overall, timeline, ttft_cdfs
from reports.charts import nice_ticks
from reports.files import write_json, write_jsonl
from reports.junit_report import junit_xml, write_junit
from reports.run_folder import JunitCase, ScenarioRun, load_run, read_junit, verdicts_from_junit
from reports.signoff import build_report, render_html, render_markdown, write_signoff
from reports.signoff_format import scenario_marker
from slo.errors import SuiteError
from slo.records import RequestRecord, to_row
from slo.verdict import Outcome

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "run-sample"
NEW = DATA / "run-new"
CHROMIUM = next(
    (
        p
        for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
        if p and Path(p).exists()
    ),
    None,
)
SAMPLE_OBJECTIVES = {
    "ttft p50 <= 60 ms": "PASS",
    "ttft p99 <= 200 ms": "PASS",
    "tpot p99 <= 20 ms": "PASS",
    "output_throughput >= 100 tok/s": "PASS",
}
MS = 1_000_000
SECRET = "PROMPT-TEXT-MUST-NOT-LEAK"


class _Tables(HTMLParser):
    """Rows of every table inside the element with a given id, as lists of cell texts."""

    def __init__(self, section_id: str) -> None:
        super().__init__()
        self.section_id = section_id
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self.svgs += 1
        if self.depth:
            self.depth += tag == "section"
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []
        elif tag == "section" and dict(attrs).get("id") == self.section_id:
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag == "section":
            self.depth -= 1
        if self.cell is not None and tag in ("td", "th"):
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str, section_id: str) -> tuple[list[list[str]], int]:
    parser = _Tables(section_id)
    parser.feed(html)
    return parser.rows, parser.svgs


def resource_urls(html: str) -> list[str]:
    """Anything a browser would fetch from the network."""
    patterns = (
        r"""(?:src|href|xlink:href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""",
        r"""url\(\s*["']?\s*(?:https?:)?//""",
        r"@import",
    )
    return [m.group(0) for p in patterns for m in re.finditer(p, html, re.IGNORECASE)]


# ---- reading run folders --------------------------------------------------------------------


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


# ---- analysis -------------------------------------------------------------------------------


def _rec(
    i: int,
    sent_ms: float,
    ttft_ms: float | None,
    e2e_ms: float,
    cls: str = "default",
    warmup: bool = False,
    error: str | None = None,
) -> RequestRecord:
    sent = int(sent_ms * MS)
    first = None if ttft_ms is None else sent + int(ttft_ms * MS)
    end = None if error else sent + int(e2e_ms * MS)
    chunks = () if first is None or end is None else (first, (first + end) // 2, end)
    return RequestRecord(
        index=i,
        request_class=cls,
        intended_send_ns=sent,
        sent_ns=sent,
        first_text_ns=first,
        end_ns=end,
        chunk_ns=chunks,
        prompt_tokens=64,
        output_tokens=None if error else 3,
        max_tokens=3,
        warmup=warmup,
        error=error,
    )


def test_in_flight_counts_requests_sent_and_not_finished() -> None:
    recs = (
        _rec(0, 0, 2, 10),  # 0-10 ms
        _rec(1, 5, 2, 10),  # 5-15 ms: two in flight
        _rec(2, 12, 2, 8),  # 12-20 ms: two in flight again, never three
        _rec(3, 100, 2, 10),  # alone
    )
    sc = ScenarioRun("s", recs, {"max_num_seqs": 4}, {}, (), {}, None)
    tl = timeline(sc, bins=110)
    assert tl.peak == 2 and tl.max_num_seqs == 4
    assert tl.duration_s == pytest.approx(0.110)
    # Between 20 and 100 ms nothing is in flight.
    quiet = [v for t, v in zip(tl.inflight_t, tl.inflight_max, strict=True) if 0.021 < t < 0.099]
    assert quiet and max(quiet) == 0
    assert [p.ttft_s for p in tl.points] == pytest.approx([0.002] * 4)


def test_decomposition_parts_add_up_to_the_client_mean() -> None:
    run = load_run(NEW)
    d = decomposition(run.scenarios[0])
    assert d is not None
    assert sum(c.seconds for c in d.components) == pytest.approx(d.client_mean)
    names = [c.name for c in d.components]
    assert names[0].startswith("queue") and names[1].startswith("prefill")
    assert names[-1].startswith("not attributed (outside vLLM")
    server_mean = next(c for c in d.comparisons if c.statistic == "mean").server
    assert server_mean == pytest.approx(3.4137749671936035 / 120)
    # The fixture keeps 42 of the 120 measured requests; the report says so.
    assert any("vLLM counted 120" in n for n in d.notes)
    assert decomposition(load_run(SAMPLE).scenarios[0]) is None


def test_comparison_matches_objectives_and_signs_changes() -> None:
    rows = compare(load_run(NEW), [load_run(SAMPLE)])
    by_name = {r.objective: r for r in rows}
    assert set(by_name) == {"ttft p50", "ttft p99", "tpot p99", "output_throughput"}
    p50 = by_name["ttft p50"].baselines[0]
    assert p50.change == pytest.approx(0.0285701885 / 0.0172638015 - 1)
    assert p50.worse is True and p50.overlap is False and p50.verdict_word == "worse"
    thr = by_name["output_throughput"].baselines[0]
    assert thr.change is not None and thr.change < 0 and thr.worse is True  # less is worse
    assert thr.overlap is None  # one number per run: no interval to compare


def test_overall_result_takes_the_worst_outcome() -> None:
    run = load_run(NEW)
    first, *rest = run.verdicts
    assert overall(run)[0] == "INCONCLUSIVE"
    for worst, others in ((Outcome.FAIL, Outcome.INCONCLUSIVE), (Outcome.INVALID, Outcome.FAIL)):
        verdicts = (
            dataclasses.replace(first, outcome=worst),
            *(dataclasses.replace(v, outcome=others) for v in rest),
        )
        assert overall(dataclasses.replace(run, verdicts=verdicts))[0] == worst.value
    # A failed test beside the verdicts (e.g. a regression) is named in the reason.
    failed = JunitCase(
        "suites.test_realtime", "test_regression[ttft p50]", None, 0.0, "failed", "", {}
    )
    result, reason = overall(dataclasses.replace(run, other_tests=(failed,)))
    assert result == "INCONCLUSIVE" and reason.endswith("1 other test(s) failed")


def test_nice_ticks() -> None:
    assert nice_ticks(0, 1, 4) == [0, 0.25, 0.5, 0.75, 1.0]
    assert nice_ticks(0, 1.15, 4, integer=True) == [0, 1]
    assert nice_ticks(0, 210, 8) == [0, 50, 100, 150, 200]


# ---- sign-off HTML and Markdown -------------------------------------------------------------


def test_signoff_html_of_the_sample_run(tmp_path: Path) -> None:
    files = write_signoff([SAMPLE], tmp_path)
    html = files.html.read_text()
    rows, svgs = table_rows(html, "verdicts")
    head, body = rows[0], rows[1:]
    assert head[:4] == ["scenario", "objective", "outcome", "estimate"]
    assert {"n", "lag-1", "threshold", "95% CI"} <= set(head)
    got = {(r[1], r[2]) for r in body}
    assert got == {(o.split(" <=")[0].split(" >=")[0], out) for o, out in SAMPLE_OBJECTIVES.items()}
    p50 = next(r for r in body if r[1] == "ttft p50")
    # A run folder from before the dependence handling has no lag-1 figure: the cell is empty.
    assert p50[3:8] == ["17 ms", "[17 ms, 18 ms]", "600", "", "≤ 60 ms"]
    assert "Result: PASS" in html
    assert svgs >= 2 and html.count("<polyline") >= 2  # CDF and timeline drawn
    assert resource_urls(html) == [] and "<script" not in html.lower()
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "environment.json has no 'command'" in text  # not recorded, and it says so
    assert "--slo-replay" in text and "--scheduling-policy priority" in text
    md = files.markdown.read_text()
    for objective in ("ttft p50", "ttft p99", "tpot p99", "output_throughput"):
        assert re.search(rf"^\| realtime \| {objective} \| PASS \|", md, re.MULTILINE)


@pytest.mark.parametrize(
    ("label", "marker"),
    [
        ("realtime", "realtime"),
        ("mixed.fcfs", "mixed"),
        ("mixed[fcfs]", "mixed"),
        ("long-prompts.budget-256", "long_prompts"),
    ],
)
def test_reproduce_selects_a_folder_by_its_scenarios_marker(label: str, marker: str) -> None:
    assert scenario_marker(label) == marker


def test_signoff_lists_a_claims_figures_by_variant(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(NEW, run)
    junit = run / "junit.xml"
    claim = (
        '<testcase classname="suites.test_mixed" name="test_priority_scheduling_lowers_realtime_'
        'ttft" file="suites/test_mixed.py" line="20" time="1.0"><properties>'
        '<property name="claim.priority.ttft_p90_s" value="0.171" />'
        '<property name="claim.priority.output_tok_s" value="1261.0" />'
        '<property name="claim.priority.requests" value="120.0" />'
        '<property name="claim.fcfs.ttft_p90_s" value="2.217" />'
        "</properties></testcase></testsuite>"
    )
    junit.write_text(junit.read_text().replace("</testsuite>", claim, 1))
    files = write_signoff([run], tmp_path / "out")
    rows, _ = table_rows(files.html.read_text(), "claims")
    assert rows == [
        ["variant", "output_tok_s", "requests", "ttft_p90_s"],
        ["priority", "1261 tok/s", "120", "171 ms"],
        ["fcfs", "", "", "2.22 s"],
    ]
    md = files.markdown.read_text()
    assert "## Claims measured" in md and "| fcfs |  |  | 2.22 s |" in md
    # Listed as a claim, not again among the tests that judged nothing.
    assert "test_priority_scheduling" not in md.split("## Claims measured")[0]


def test_signoff_with_a_baseline_shows_each_change(tmp_path: Path) -> None:
    files = write_signoff([NEW, SAMPLE], tmp_path)
    html = files.html.read_text()
    rows, _ = table_rows(html, "comparison")
    change = {r[1]: r[-1] for r in rows if len(r) == 5 and r[0] == "realtime"}
    assert change["ttft p50"] == "+65.5% worse"
    assert change["output_throughput"] == "-9.5% worse"
    assert "Result: INCONCLUSIVE" in html
    assert "TTFT decomposition (vLLM histograms)" in html
    assert "bucket 20 ms to 40 ms" in html
    assert "| ttft p50 |" in files.markdown.read_text()


def _synthetic_run(root: Path) -> Path:
    """A two-class run with a failed request, an INVALID verdict and a test that errored
    before judging; text fields carry markup and a prompt-like string."""
    recs = [_rec(0, 0, 30, 60, cls="batch", warmup=True)]
    recs += [_rec(i, i * 50, 10 + i % 7, 80, cls="realtime") for i in range(1, 40)]
    recs += [_rec(i, i * 50, 40 + i % 5, 400, cls="batch") for i in range(40, 70)]
    recs += [
        _rec(i, 3600 + i, None, 0, cls="batch", error=f"APIStatusError: 400 {SECRET}")
        for i in (70, 71, 72)
    ]
    rows = [{**to_row(r, 0), "prompt": SECRET} for r in recs]  # a stray field is never read
    write_jsonl(root / "mixed" / "records.jsonl", rows)
    write_json(
        root / "mixed" / "summary.json",
        {
            "engine_args": {"max_num_seqs": 16},
            "server": {"vllm_version": "9.9.9"},
            "invalid_reasons": ["error rate = 1.43% > 1.00%"],
            "workload_s": 4.0,
        },
    )
    base = {
        "scenario": "mixed",
        "vllm_version": "9.9.9",
        "model": "m<b>",
        "comparison": "<=",
        "confidence": 0.95,
        "profile": "p",
        "n": 39,
    }
    write_json(
        root / "verdicts.json",
        [
            {
                **base,
                "test": "suites/test_mixed.py::test_objective[ttft p50 class=realtime]",
                "objective": "ttft p50 class=realtime <= 1 ms",
                "metric": "ttft",
                "statistic": "p50",
                "request_class": "realtime",
                "threshold": 0.001,
                "outcome": "INVALID",
                "estimate": 0.013,
                "ci_lower": 0.012,
                "ci_upper": 0.015,
                "message": "run INVALID: <script>alert(1)</script>",
            },
        ],
    )
    (root / "junit.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
        'timestamp="2026-01-02T03:04:05+00:00" hostname="h">'
        '<testcase classname="suites.test_mixed" '
        'name="test_objective[ttft p50 class=realtime]" time="5.0"/>'
        '<testcase classname="suites.test_mixed" name="test_objective[ttft p90 class=realtime]"'
        ' time="0.1"><error message="ServerStartError: vLLM exited">tb</error></testcase>'
        "</testsuite></testsuites>"
    )
    return root


def test_signoff_of_a_multi_class_run_escapes_text_and_leaks_no_prompt(tmp_path: Path) -> None:
    run = load_run(_synthetic_run(tmp_path / "run"))
    assert [t.name for t in run.other_tests] == ["test_objective[ttft p90 class=realtime]"]
    report = build_report(run)
    assert overall(run) == ("INVALID", "1 of 1 objectives INVALID; 1 other test(s) failed")
    html, md = render_html(report), render_markdown(report)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "m&lt;b&gt;" in html
    assert SECRET not in html and SECRET not in md
    assert "3 errors (APIStatusError x3)" in html  # errors are shown by kind only
    section = report.sections[0]
    assert [c.request_class for c in section.stats] == [None, "batch", "realtime"]
    assert [c.request_class for c in section.cdfs] == ["batch", "realtime"]
    batch = section.cdfs[0]
    assert batch.failed == 3 and batch.ys[-1] == pytest.approx(30 / 33)  # failures never arrive
    ttft = dict(section.stats[0].rows[0].percentiles)
    assert ttft[99].estimate == math.inf and ttft[99].upper == math.inf  # the failure is slowest
    assert ttft[90].upper == math.inf  # its order statistic is a failed request
    # 3 failures among 33 batch requests, in a row: too clustered to bound much, but the p50
    # itself is a real figure, and no clamped stand-in for +inf is ever shown.
    assert ttft[50].estimate < 1 and not re.search(r"\d{12}", html)
    thin = ttft_cdfs(run.scenarios[0], max_points=4)[0]  # large runs: subsampled, end kept
    assert len(thin.xs) <= 5 and thin.ys[-1] == batch.ys[-1] and thin.xs[-1] == batch.xs[-1]
    assert "run INVALID: error rate" in html
    assert "Tests without a verdict" in html and "ServerStartError: vLLM exited" in html


# ---- JUnit ----------------------------------------------------------------------------------


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
    path = write_junit(_synthetic_run(tmp_path / "run"))
    assert path == tmp_path / "run" / "slo-junit.xml"
    root = _junit(path)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "mixed" and suite.get("errors") == "1"
    assert suite.get("failures") == "1"  # the INVALID objective


def test_junit_of_a_run_that_judged_nothing_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_jsonl(run / "realtime" / "records.jsonl", [to_row(_rec(0, 0, 5, 9, warmup=True), 0)])
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


# ---- in a browser ---------------------------------------------------------------------------


def _png_rows(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct scanlines) of an 8-bit RGB(A) PNG, with the standard library:
    a blank page compresses to a few distinct filtered scanlines, a rendered report to many."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = color = depth = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and color in (2, 6)
    stride = 1 + width * (3 if color == 2 else 4)
    raw = zlib.decompress(idat)
    assert len(raw) == stride * height
    return width, height, len({raw[i : i + stride] for i in range(0, len(raw), stride)})


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        return subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# What a browser measured, written into the page so --dump-dom carries it out.
_PROBE = """<script>
const t = document.querySelector('#verdicts table').getBoundingClientRect();
const p = document.createElement('pre'); p.id = 'probe';
p.textContent = JSON.stringify({top: t.top, height: t.height, width: t.width,
  rows: document.querySelectorAll('#verdicts table tbody tr').length,
  page: document.documentElement.scrollWidth, view: window.innerWidth});
document.body.appendChild(p);
</script>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH or at /usr/bin/chromium: .ci/run installs it (apt-get, as "
    "root); elsewhere run `apt-get install chromium`",
)
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    from tests.unit.test_server_series import _with_series

    files = write_signoff([_with_series(tmp_path), SAMPLE], tmp_path)
    url = files.html.as_uri()
    dom = _chromium("--dump-dom", url).stdout
    assert "vLLM SLO sign-off" in dom and dom.count("<svg") >= 4
    rows, _ = table_rows(dom, "verdicts")
    verdicts = json.loads((NEW / "verdicts.json").read_text())
    assert [(r[1], r[2]) for r in rows[1:]] == [
        (v["objective"].split(" <=")[0].split(" >=")[0], v["outcome"]) for v in verdicts
    ]
    assert "vLLM's queue over time" in unescape(dom)

    probed = tmp_path / "probed.html"
    probed.write_text(files.html.read_text().replace("</body>", _PROBE + "</body>"))
    dom = _chromium("--window-size=1400,1000", "--dump-dom", probed.as_uri()).stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom)
    assert found, dom[-2000:]
    box = json.loads(unescape(found.group(1)))
    # The verdict table is laid out, whole, in the first screenful, and nothing is wider
    # than the window (no sideways scrolling to read a verdict).
    assert box["rows"] == len(verdicts) and box["height"] > 30 * len(verdicts)
    assert 0 < box["top"] < 400 and box["width"] <= box["view"]
    assert box["page"] <= box["view"]

    shot = tmp_path / "signoff.png"
    result = _chromium(f"--screenshot={shot}", "--window-size=1400,3000", url)
    assert shot.exists(), result.stderr[-2000:]
    width, height, distinct = _png_rows(shot)
    assert (width, height) == (1400, 3000)
    assert distinct > 200, f"screenshot looks blank: {distinct} distinct rows"
