"""The A/B fixture's pieces without a server (blocks, per-objective comparisons), and the claims'
interval comparison, on synthetic records."""

from __future__ import annotations

import random

import pytest

from fixtures.ab import arm_result, compare, objectives_compared, split_blocks
from fixtures.claims import assert_claim, claim_comparison, claim_sentence
from fixtures.result import ScenarioResult
from fixtures.selection import select
from fixtures.settings import programmatic
from fixtures.targets import ServerInfo
from fixtures.workload import PlannedRequest, WorkloadPlan
from slo.compare import Change
from slo.records import RequestRecord
from slo.stats import summarize
from tests.unit.builders import rec


def _block(
    seed: int, scale: float, n: int = 60, errors: int = 0, cls: str = "default"
) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = [rec(i, scale * rng.lognormvariate(3.0, 0.4), cls=cls) for i in range(n)]
    for i in range(errors):
        out[i] = rec(i, 0, error="APIStatusError: 500", cls=cls)
    return out


def test_split_blocks_rebases_offsets_and_keeps_every_request() -> None:
    reqs = tuple(
        PlannedRequest(i, "c", 0.25 * i, "p", 1, None, 1, None, warmup=i < 2) for i in range(22)
    )
    plan = WorkloadPlan("chat", 10.0, reqs)
    blocks = split_blocks(plan, 4)
    assert [len(b.requests) for b in blocks] == [5, 5, 5, 5]
    assert all(b.requests[0].offset_s == 0.0 for b in blocks)
    assert sorted(r.index for b in blocks for r in b.requests) == list(range(2, 22))
    with pytest.raises(Exception, match="fewer than 2 per block"):
        split_blocks(plan, 11)


def test_compare_finds_a_slower_candidate_and_new_errors() -> None:
    sel = select("realtime", programmatic("cpu-tiny"))
    names = [o.name for o in objectives_compared(sel)]
    assert "error_rate" in names and "ttft p50" in names
    per_block = {
        "baseline": [_block(j, 1.0) for j in range(6)],
        "candidate": [_block(100 + j, 1.5, errors=2 if j == 3 else 0) for j in range(6)],
    }
    got = compare(sel, per_block, margin=0.10, confidence=0.95)
    assert got["ttft p50"].change is Change.REGRESSION
    assert got["ttft p50"].n_blocks == 6 and got["ttft p50"].lower > 1.1
    # No error in 360 baseline requests, 2 in the candidate's: not enough to call it.
    assert got["error_rate"].change is Change.INCONCLUSIVE
    per_block["candidate"] = [_block(100 + j, 1.0, errors=3) for j in range(6)]
    got = compare(sel, per_block, margin=0.10, confidence=0.95)
    assert got["error_rate"].change is Change.REGRESSION


def _result(scale: float, variant: str, seed: int) -> ScenarioResult:
    s = programmatic("cpu-tiny")
    sel = select("mixed", s).with_engine_args(variant)
    records = tuple(_block(seed, scale, n=400, cls="realtime"))
    summary = summarize(records)
    server = ServerInfo("http://x", "tiny", "0", False, None)
    return ScenarioResult(sel, server, records, summary, (), 1.0, s)


def test_a_claim_is_a_comparison_with_its_interval() -> None:
    fcfs, priority = _result(3.0, "fcfs", 1), _result(1.0, "priority", 2)
    c = claim_comparison(fcfs, priority, "ttft", "p90", "realtime")
    assert c.change is Change.IMPROVEMENT and c.upper < 1
    sentence = claim_sentence(c, "priority", "realtime TTFT p90")
    assert sentence.startswith("priority lowers realtime TTFT p90 by 6")
    assert_claim(c, sentence, expect="lower")
    with pytest.raises(pytest.fail.Exception, match="claim not shown"):
        assert_claim(c, sentence, expect="higher")
    same = claim_comparison(fcfs, _result(3.0, "fcfs2", 3), "ttft", "p90", "realtime")
    with pytest.raises(pytest.fail.Exception, match="undecided"):
        assert_claim(same, "x", expect="lower")


def test_goodput_falling_to_zero_is_a_regression() -> None:
    sel = select("realtime", programmatic("cpu-tiny"))
    assert sel.scenario.goodput["ttft"] == 0.2
    per_block = {  # TTFT about 20 ms (all good) against about 4 s (none good)
        "baseline": [_block(j, 1.0) for j in range(6)],
        "candidate": [_block(50 + j, 200.0) for j in range(6)],
    }
    got = compare(sel, per_block, margin=0.10, confidence=0.95)
    assert got["goodput"].change is Change.REGRESSION


def test_an_arm_whose_server_fails_requests_fails_its_objectives() -> None:
    # The candidate arm's result is what the objective tests judge: a 5% error rate (bound 1%)
    # must FAIL every objective as in a plain run, not be judged on the requests that worked.
    s = programmatic("cpu-tiny")
    sel = select("realtime", s)
    server = ServerInfo("http://x", "tiny", "0", False, None)
    plan = WorkloadPlan("chat", 10.0, ())
    healthy = arm_result(sel, server, _block(1, 1.0, n=200), s, 1.0, plan)
    assert healthy.server_failures == ()
    failing = arm_result(sel, server, _block(1, 1.0, n=200, errors=10), s, 1.0, plan)
    assert failing.server_failures and "error rate" in failing.server_failures[0]
    ttft_p50 = next(o for o in sel.objectives if o.name == "ttft p50")
    verdict = failing.evidence.judge(ttft_p50)
    assert verdict.outcome.name == "FAIL" and "the server failed" in verdict.message
