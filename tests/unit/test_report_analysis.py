"""The sign-off report's figures: in-flight counts, TTFT decomposition, comparisons, ticks."""

from __future__ import annotations

import dataclasses

import pytest

from reports.analysis import compare, overall, timeline
from reports.charts import nice_ticks
from reports.run_folder import JunitCase, ScenarioRun, load_run
from reports.ttft_decomposition import decomposition
from slo.verdict import Outcome
from tests.unit.report_runs import NEW, SAMPLE, rec


def test_in_flight_counts_requests_sent_and_not_finished() -> None:
    recs = (
        rec(0, 0, 2, 10),  # 0-10 ms
        rec(1, 5, 2, 10),  # 5-15 ms: two in flight
        rec(2, 12, 2, 8),  # 12-20 ms: two in flight again, never three
        rec(3, 100, 2, 10),  # alone
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
