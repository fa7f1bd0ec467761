"""The regression gate against a stored baseline, and pytest-benchmark's compare on stored JSON."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.baseline import load_baseline
from slo.compare import Change, compare_intervals
from slo.errors import BaselineError, RegressionLimitError
from slo.regression import Machine, machine_differences, parse_limit, point_estimate

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "run-sample"
NEW = DATA / "run-new"
ROOT = Path(__file__).resolve().parents[2]


def _change(
    candidate: float, baseline: float, *, spread: float = 0.02, lower: bool = True
) -> Change:
    """Two runs whose own 95% intervals are +-spread around their estimates."""
    return compare_intervals(
        "x",
        (baseline * (1 - spread), baseline, baseline * (1 + spread)),
        (candidate * (1 - spread), candidate, candidate * (1 + spread)),
        baseline_confidence=0.95,
        candidate_confidence=0.95,
        lower_is_better=lower,
        margin=0.10,
        confidence=0.95,
    ).change


def test_parse_limit() -> None:
    assert parse_limit("10%") == pytest.approx(0.10)
    assert parse_limit("2.5%") == pytest.approx(0.025)
    for bad in ("0%", "ten", "10 ms"):
        with pytest.raises(RegressionLimitError, match="percentage"):
            parse_limit(bad)


def test_stored_baseline_verdict_is_on_the_interval_not_the_point() -> None:
    assert _change(0.150, 0.100) is Change.REGRESSION  # 50% slower, tight intervals
    assert _change(0.100, 0.100) is Change.NO_CHANGE
    assert _change(0.050, 0.100) is Change.IMPROVEMENT
    # 11% slower by the point estimate, but the intervals reach inside the margin: the old
    # rule called it a regression, the interval cannot.
    assert _change(0.111, 0.100) is Change.INCONCLUSIVE
    assert _change(0.111, 0.100, spread=0.2) is Change.INCONCLUSIVE
    # Throughput: lower is worse.
    assert _change(70.0, 100.0, lower=False) is Change.REGRESSION
    assert _change(130.0, 100.0, lower=False) is Change.IMPROVEMENT
    # Failed requests make a percentile infinite: no log-scale interval, undecided.
    assert _change(math.inf, 0.1) is Change.INCONCLUSIVE


def test_point_estimate_keeps_failures() -> None:
    values = [0.01 * i for i in range(1, 101)]
    assert point_estimate(values, "p50") == pytest.approx(0.505)
    assert point_estimate([*values[:99], math.inf], "max") == math.inf
    assert point_estimate(values, "mean") == pytest.approx(0.505)
    assert point_estimate([], "p50") is None


def test_machine_differences_ignore_what_was_not_recorded() -> None:
    a = Machine("Xeon A", ("NVIDIA H200",), "0.26.0")
    assert machine_differences(a, a) == []
    diff = machine_differences(a, Machine("Xeon B", ("NVIDIA H100",), "0.25.0"))
    assert [d.split()[0] for d in diff] == ["CPU", "GPUs", "vLLM"]
    assert machine_differences(a, Machine("not recorded", None, "not recorded")) == []


def test_baseline_from_a_run_folder_uses_its_verdicts_then_its_records() -> None:
    base = load_baseline(NEW)
    verdicts = json.loads((NEW / "verdicts.json").read_text())
    p50 = next(v for v in verdicts if v["objective"].startswith("ttft p50"))
    assert base.value("realtime", "ttft", "p50", None) == p50["estimate"]
    # Not an objective of that run: recomputed from the stored records (42 measured).
    rows = [json.loads(line) for line in (NEW / "realtime" / "records.jsonl").open()]
    e2e = sorted(
        # E2E ends at the last chunk that carried text (vLLM bench serve's definition).
        (r["chunk_ns"][-1] - r["sent_ns"]) / 1e9
        for r in rows
        if not r["warmup"] and r["error"] is None
    )
    assert len(e2e) == 42
    assert base.value("realtime", "e2e", "max", None) == pytest.approx(e2e[-1])
    assert base.value("batch", "ttft", "p50", None) is None
    assert base.machine.vllm_version == "0.32.0"


def test_baseline_from_pytest_benchmark_json() -> None:
    base = load_baseline(NEW / "benchmark.json")
    data = json.loads((NEW / "benchmark.json").read_text())
    ttft = next(b for b in data["benchmarks"] if b["name"] == "realtime[ttft]")
    assert base.value("realtime", "ttft", "p50", None) == pytest.approx(
        statistics.median(ttft["stats"]["data"])
    )
    assert base.value("realtime", "output_throughput", None, None) == pytest.approx(
        ttft["extra_info"]["output_throughput"]
    )
    assert base.kind == "pytest-benchmark JSON" and base.machine.gpus is None


def test_a_bad_baseline_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="does not exist"):
        load_baseline(tmp_path / "nothing")
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(BaselineError, match="not a pytest-benchmark JSON"):
        load_baseline(bad)


def _replay(tmp_path: Path, baseline: Path, limit: str) -> tuple[str, dict[str, ET.Element]]:
    """Judge the stored run-new again (no server) against ``baseline``; the JUnit's cases."""
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rootdir",
            str(ROOT),
            "-c",
            str(ROOT / "pyproject.toml"),
            "-p",
            "no:cacheprovider",
            "--benchmark-disable",
            str(ROOT / "suites" / "test_realtime.py"),
            f"--slo-replay={NEW}",
            f"--slo-baseline={baseline}",
            f"--slo-regression={limit}",
            f"--slo-report-dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    # pytest's and pytest-benchmark's files were renamed into place, none left half-named.
    assert (run_dir / "benchmark.json").exists()
    assert list(run_dir.glob(".*.partial")) == []
    cases = {
        tc.get("name", ""): tc
        for tc in ET.parse(run_dir / "junit.xml").iter("testcase")
        if tc.get("name", "").startswith("test_regression")
    }
    return proc.stdout + proc.stderr, cases


def test_regression_tests_one_per_objective_in_junit(tmp_path: Path) -> None:
    # Against its own samples: ratio 1, never a REGRESSION (42 requests cannot show NO CHANGE
    # at a 1% margin: INCONCLUSIVE, which the cpu-tiny profile counts as not passed).
    out, cases = _replay(tmp_path / "same", NEW / "benchmark.json", "1%")
    assert set(cases) == {
        "test_regression[ttft p50]",
        "test_regression[ttft p99]",
        "test_regression[tpot p99]",
        "test_regression[output_throughput]",
        "test_regression[goodput]",  # pytest-benchmark's JSON has no goodput: skipped
    }
    assert cases["test_regression[goodput]"].find("skipped") is not None
    # Throughput is one number per run: no interval, so no comparison of two stored runs.
    skipped = cases["test_regression[output_throughput]"].find("skipped")
    assert skipped is not None and "A/B mode" in (skipped.get("message") or "")
    props = {
        p.get("name"): p.get("value") for p in cases["test_regression[ttft p50]"].iter("property")
    }
    assert float(props["slo.regression.ratio"] or "nan") == 1.0, out
    assert props["slo.regression.change"] in ("NO CHANGE", "INCONCLUSIVE")
    # 42 clustered requests may leave the p50's own interval unbounded: then no ratio interval
    # exists and the comparison is INCONCLUSIVE; where one exists it contains 1.
    lower = float(props.get("slo.regression.ratio_lower") or "nan")
    if math.isnan(lower):
        assert props["slo.regression.change"] == "INCONCLUSIVE"
    else:
        assert lower < 1.0
    assert "cannot tell drift" in (props["slo.regression.note"] or "")
    # 42 requests give tpot p99 no upper bound: undecided, said why.
    props = {
        p.get("name"): p.get("value") for p in cases["test_regression[tpot p99]"].iter("property")
    }
    assert props["slo.regression.change"] == "INCONCLUSIVE"
    assert "infinite" in (props["slo.regression.note"] or "")

    # Against the older, faster run on another (recorded) CPU: TTFT got worse.
    older = tmp_path / "older"
    shutil.copytree(SAMPLE, older)
    env = json.loads((older / "environment.json").read_text())
    (older / "environment.json").write_text(json.dumps({**env, "cpu": "Some Other CPU"}))
    out, cases = _replay(tmp_path / "worse", older, "10%")
    failure = cases["test_regression[ttft p50]"].find("failure")
    # The newer run has 42 requests: clustered as they are, its p50 may have no upper bound,
    # and then the worse ratio (x1.8) cannot be called a REGRESSION, only INCONCLUSIVE.
    message = failure.get("message") or "" if failure is not None else ""
    assert re.search(r"x1\.\d+ .*(REGRESSION|INCONCLUSIVE) at margin 10%", message), message
    assert "SloBaselineMismatchWarning" in out and "Some Other CPU" in out
    # The sign-off page lists them first, with their figures, apart from the other tests.
    md = (tmp_path / "worse" / "run" / "signoff.md").read_text()
    assert md.index("## What changed") < md.index("## Objectives")
    assert re.search(
        r"^\| ttft p50 \| (REGRESSION|INCONCLUSIVE) \| [\d.]+ ms \| [\d.]+ ms \| "
        r"x[\d.]+( \[[\d.]+, [\d.]+\])? \| 10% \|",  # no interval where a side is unbounded
        md,
        re.M,
    )
    assert "Tests without a verdict" not in md
    page = (tmp_path / "worse" / "run" / "signoff.html").read_text()
    changed = page[page.index("<section id='what-changed'>") : page.index("id='verdicts'")]
    assert "<svg" in changed and changed.count("<circle") >= 2  # the forest plot, one per ratio


def test_pytest_benchmark_compare_reads_the_stored_json(tmp_path: Path) -> None:
    files = [SAMPLE / "benchmark.json", NEW / "benchmark.json"]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pytest_benchmark.cli import main; main()",
            "compare",
            *map(str, files),
            f"--csv={tmp_path / 'compare'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert sum("realtime[ttft] (" in line for line in proc.stdout.splitlines()) == 2
    with (tmp_path / "compare.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["param:metric"] == "ttft"]
    stored = sorted(
        statistics.median(
            next(b for b in json.loads(p.read_text())["benchmarks"] if b["param"] == "ttft")[
                "stats"
            ]["data"]
        )
        for p in files
    )
    assert sorted(float(r["median"]) for r in rows) == pytest.approx(stored)
