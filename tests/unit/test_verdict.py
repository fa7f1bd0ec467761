"""Statistics and verdicts on synthetic records: formulas, errors, PASS/FAIL/INCONCLUSIVE."""

from __future__ import annotations

import random

import pytest

from slo.records import RequestRecord, from_row, to_row
from slo.scenario import Validity
from slo.stats import summarize
from slo.verdict import Outcome, check_validity, evaluate
from tests.unit.builders import obj, rec

MS = 1_000_000


def test_metric_formulas() -> None:
    r = rec(0, ttft_ms=50, e2e_ms=370, tokens=33)
    assert r.ttft_s == pytest.approx(0.050)
    assert r.e2e_s == pytest.approx(0.370)
    assert r.tpot_s == pytest.approx((0.370 - 0.050) / 32)  # (E2E - TTFT) / (N - 1)
    assert len(r.itl_s) == 32
    assert sum(r.itl_s) == pytest.approx(0.320, abs=1e-6)


def test_summary_excludes_warmup_and_keeps_failures_in_denominators() -> None:
    records = [rec(0, 10, 100, warmup=True)] + [rec(i, 10, 100) for i in range(1, 9)]
    records.append(rec(9, 0, 100, error="HTTP 503: overloaded"))
    s = summarize(records)
    assert s.n == 9 and s.n_ok == 8 and s.n_errors == 1
    assert s.errors_by_kind == {"HTTP 503": 1}
    assert s.error_rate == pytest.approx(1 / 9)
    assert len(s.ttft) == 9 and max(s.ttft) == float("inf")  # the failure is slowest, not gone
    assert s.output_tokens == 8 * 33
    assert s.window_s == pytest.approx((9 * 100 + 100 - 100) / 1000)


def test_rows_round_trip_exactly() -> None:
    r = rec(3, 12.5, 99.25, lag_ms=0.7)
    back = from_row(to_row(r, t0_ns=r.intended_send_ns - 5))
    assert back.ttft_s == r.ttft_s and back.tpot_s == r.tpot_s
    assert back.schedule_lag_s == r.schedule_lag_s and back.itl_s == r.itl_s


def _many(n: int, ttft_ms: float, spread: float = 5.0, seed: int = 1) -> list[RequestRecord]:
    rng = random.Random(seed)
    return [rec(i, ttft_ms + rng.uniform(0, spread), 400) for i in range(n)]


def test_pass_fail_and_message() -> None:
    s = summarize(_many(600, 100))
    passed = evaluate(obj("ttft p99", "<= 200ms"), s, confidence=0.95, profile="cpu-tiny")
    failed = evaluate(obj("ttft p99", "<= 50ms"), s, confidence=0.95, profile="cpu-tiny")
    assert passed.outcome is Outcome.PASS and failed.outcome is Outcome.FAIL
    assert failed.message.startswith("ttft p99 = 105 ms > 50 ms (n=600, profile cpu-tiny; 95% CI ")
    assert passed.lower <= passed.estimate <= passed.upper <= 0.2


def test_too_few_samples_for_p99_is_inconclusive_with_the_minimum() -> None:
    s = summarize(_many(50, 100))
    v = evaluate(obj("ttft p99", "<= 10s"), s, confidence=0.95, profile="cpu-tiny")
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "p99 needs at least 368 samples to PASS at 95% confidence, got 50" in v.message
    # A clear miss is still a FAIL with few samples: the lower bound is finite.
    assert (
        evaluate(obj("ttft p99", "<= 1ms"), s, confidence=0.95, profile="p").outcome is Outcome.FAIL
    )


def test_errors_push_latency_percentiles_to_fail() -> None:
    records = _many(400, 100) + [rec(400 + i, 0, 100, error="Timeout: x") for i in range(20)]
    v = evaluate(obj("ttft p99", "<= 1s"), summarize(records), confidence=0.95, profile="p")
    assert v.outcome is Outcome.FAIL and v.estimate == float("inf")


def test_throughput_and_error_rate_objectives() -> None:
    s = summarize(_many(100, 10))
    assert (
        evaluate(obj("output_throughput", ">= 100 tok/s"), s, confidence=0.95, profile="p").outcome
        is Outcome.PASS
    )
    low = evaluate(obj("output_throughput", ">= 1000 tok/s"), s, confidence=0.95, profile="p")
    assert low.outcome is Outcome.FAIL and " < 1000 tok/s" in low.message
    assert (
        evaluate(obj("error_rate", "<= 5%"), s, confidence=0.95, profile="p").outcome
        is Outcome.PASS
    )


def test_mean_and_max() -> None:
    s = summarize(_many(200, 100, spread=2))
    assert (
        evaluate(obj("ttft mean", "<= 110ms"), s, confidence=0.95, profile="p").outcome
        is Outcome.PASS
    )
    assert (
        evaluate(obj("ttft max", "<= 101ms"), s, confidence=0.95, profile="p").outcome
        is Outcome.FAIL
    )


def test_tightened_objective() -> None:
    assert obj("ttft p99", "<= 800ms").tightened(10).threshold == pytest.approx(0.08)
    assert obj("output_throughput", ">= 100 tok/s").tightened(10).threshold == pytest.approx(1000)


def test_validity_schedule_lag_and_errors() -> None:
    lagging = [rec(i, 10, 100, lag_ms=30 if i % 10 == 0 else 0.1) for i in range(100)]
    reasons = check_validity(
        summarize(lagging), Validity(schedule_lag_p99_s=0.010, error_rate=0.01)
    )
    assert len(reasons) == 1 and reasons[0].startswith("schedule lag p99 = 30 ms > 10 ms")
    failing = _many(90, 10) + [rec(90 + i, 0, 10, error="HTTP 500: x") for i in range(10)]
    reasons = check_validity(summarize(failing), Validity())
    assert reasons == ["error rate = 10.00% > 1.00% (10 of 100 requests failed: HTTP 500 x10)"]
    assert check_validity(summarize(_many(100, 10)), Validity()) == []


def test_validity_bounds_only_the_lag_it_is_given() -> None:
    # Closed-loop requests have ~0 lag by construction; they must not dilute a late schedule.
    s = summarize([rec(i, 10, 100, lag_ms=0.0) for i in range(100)])
    late_open_loop = [0.001] * 95 + [0.300] * 5
    reasons = check_validity(s, Validity(schedule_lag_p99_s=0.020), late_open_loop)
    assert len(reasons) == 1 and reasons[0].startswith("schedule lag p99 = 300 ms > 20 ms")
    assert check_validity(s, Validity(schedule_lag_p99_s=0.020), []) == []


def test_goodput_counts_requests_meeting_every_bound() -> None:
    fast = [rec(i, 10, 100) for i in range(60)]  # ttft 10 ms, tpot ~2.8 ms
    slow_first = [rec(60 + i, 300, 400) for i in range(30)]  # ttft 300 ms
    failed = [rec(90 + i, 0, 100, error="HTTP 503: x") for i in range(10)]
    s = summarize(fast + slow_first + failed, goodput_limits={"ttft": 0.2, "tpot": 0.02})
    assert s.n_good == 60
    assert s.goodput == pytest.approx(60 / s.window_s)
    v = evaluate(obj("goodput", ">= 1 req/s"), s, confidence=0.95, profile="p")
    assert v.outcome is Outcome.PASS and v.estimate == pytest.approx(s.goodput)
    assert summarize(fast).goodput is None  # no bounds, no goodput
