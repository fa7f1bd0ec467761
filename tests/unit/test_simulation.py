"""The verdicts' stated error rates, checked by simulation with known truth.

Each case draws many runs from a model whose true quantile is known (slo/simulate.py), puts the
threshold exactly on it (or at a multiple), and counts the verdicts of the suite's own rule
(MSER-5 truncation, the dependence-aware interval, the steadiness check). At the threshold a
PASS and a FAIL are both wrong. The promise (slo/verdict.py CLAIM): at most 2.5% each on
independent requests, at most 5% on clustered ones. Monte Carlo tolerance: three binomial
standard errors. Seeds are fixed, so a run of this module is repeatable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from slo.intervals import mean_interval, rate_interval
from slo.quantile import quantile_ci
from slo.scenario import parse_objective
from slo.sequential import StopRule
from slo.simulate import (
    FAIL,
    PASS,
    TrafficModel,
    ar1,
    drift,
    iid,
    judge_quantile_runs,
    judge_sequentially,
    queue,
)
from slo.verdict import Outcome, judge
from tests.unit.builders import rec

RUNS = 800
N = 600
CONFIDENCE = 0.95
INDEPENDENT = (iid(0.39), iid(1.0))
CLUSTERED = (ar1(0.5), ar1(0.9), queue(0.3), queue(0.5), queue(0.8), queue(0.5, warmup=True))


def _bound(level: float, runs: int = RUNS) -> float:
    return level + 3 * math.sqrt(level * (1 - level) / runs)


def _cases(models: tuple[TrafficModel, ...]) -> list[tuple[TrafficModel, float]]:
    return [(m, q) for m in models for q in (0.5, 0.9, 0.99)]


@pytest.mark.parametrize(
    ("model", "q"), _cases(INDEPENDENT), ids=lambda v: getattr(v, "name", f"p{v}")
)
def test_independent_requests_keep_the_fixed_n_level(model: TrafficModel, q: float) -> None:
    rng = np.random.default_rng(101)
    v = judge_quantile_runs(model.sample(rng, RUNS, N, q), q, CONFIDENCE)
    assert np.mean(v == PASS) <= _bound(0.025)
    assert np.mean(v == FAIL) <= _bound(0.025)


@pytest.mark.parametrize(
    ("model", "q"), _cases(CLUSTERED), ids=lambda v: getattr(v, "name", f"p{v}")
)
def test_clustered_requests_stay_within_the_stated_level(model: TrafficModel, q: float) -> None:
    rng = np.random.default_rng(202)
    x = model.sample(rng, RUNS, N, q)
    v = judge_quantile_runs(x, q, CONFIDENCE)
    assert np.mean(v == PASS) <= _bound(0.05)
    assert np.mean(v == FAIL) <= _bound(0.05)


def test_the_independent_sample_rule_would_not() -> None:
    # The rule this replaced, on a queue at utilisation 0.5 with the threshold at the true p99:
    # order-statistic intervals that assume independence PASS far more often than 2.5%.
    rng = np.random.default_rng(303)
    x = queue(0.5).sample(rng, 400, N, 0.99)
    old_pass = np.mean([quantile_ci(row, 0.99, CONFIDENCE).upper <= 1.0 for row in x])
    new_pass = np.mean(judge_quantile_runs(x, 0.99, CONFIDENCE) == PASS)
    assert old_pass > 0.15 and new_pass <= _bound(0.05, 400)


def test_a_clear_margin_still_passes() -> None:
    # The price of honesty stays bounded: p50 at 0.8x its threshold on a moderately loaded queue
    # (600 requests) and p99 at 0.8x on independent requests keep most PASSes.
    rng = np.random.default_rng(404)
    p50 = judge_quantile_runs(queue(0.3).sample(rng, 400, N, 0.5) * 0.8, 0.5, CONFIDENCE)
    p99 = judge_quantile_runs(iid(0.39).sample(rng, 400, N, 0.99) * 0.8, 0.99, CONFIDENCE)
    assert np.mean(p50 == PASS) > 0.95
    assert np.mean(p99 == PASS) > 0.5


def test_a_threshold_far_in_the_tail_does_not_make_a_pass_harder() -> None:
    # p50 of a queue at utilisation 0.5 with the threshold at 1.5x-6x the truth. When the
    # threshold's own exceedance indicator counted however far out it sat, its few bursty
    # crossings set the effective n: 99% PASSed at 1.5x, 78% at 3x. (Between, at 2x-2.5x, a
    # dip to about 93% remains: there the threshold's level still counts, benchmarks/headroom.py.)
    rng = np.random.default_rng(808)
    x = queue(0.5).sample(rng, 400, N, 0.5)
    rates = [np.mean(judge_quantile_runs(x, 0.5, CONFIDENCE, m) == PASS) for m in (1.5, 3, 6)]
    assert rates[0] > 0.95
    assert rates[1] >= rates[0] - 0.02 and rates[2] >= rates[1] - 0.02, rates


def test_drift_through_the_run_prevents_a_pass_that_would_not_hold_at_its_end() -> None:
    # Truth 0.9x the threshold at mid-run, but the server slows 40% from start to end (the
    # last requests sit at 1.08x): a PASS of the run's average would not hold where it ended.
    rng = np.random.default_rng(505)
    steady = judge_quantile_runs(iid(0.39).sample(rng, 400, N, 0.5) * 0.9, 0.5, CONFIDENCE)
    drifting = drift(iid(0.39), 0.4).sample(rng, 400, N, 0.5) * 0.9
    v = judge_quantile_runs(drifting, 0.5, CONFIDENCE)
    assert np.mean(steady == PASS) > 0.95
    assert np.mean(v == PASS) < 0.05
    # A modest drift far from the threshold (truth 0.5x, +15% through the run) still PASSes.
    mild = drift(iid(0.39), 0.15).sample(rng, 400, N, 0.5) * 0.5
    assert np.mean(judge_quantile_runs(mild, 0.5, CONFIDENCE) == PASS) > 0.95


SEQUENTIAL_RUNS = 1500
"""More runs than the fixed-N cases: with 800, three standard errors let a true 7% pass."""


@pytest.mark.parametrize(
    ("model", "q"),
    [(m, q) for m in (iid(0.39), ar1(0.5), ar1(0.9), queue(0.5), queue(0.8)) for q in (0.5, 0.9)],
    ids=lambda v: getattr(v, "name", f"p{v}"),
)
def test_sequential_looks_keep_the_level(model: TrafficModel, q: float) -> None:
    # Strong clustering (AR(1) rho 0.9) is where early looks go wrong: before a look counted
    # only where the clustering estimate is trusted, p50 FAILed falsely 7.9% of the time.
    rng = np.random.default_rng(606)
    rule = StopRule.for_workload(N, CONFIDENCE, quantiles=(q,))
    x = model.sample(rng, SEQUENTIAL_RUNS, N, q)
    v, _ = judge_sequentially(x, q, rule.looks, rule.look_confidence)
    level = 0.0125 if model.name.startswith("iid") else 0.05
    assert np.mean(v == PASS) <= _bound(level, SEQUENTIAL_RUNS)
    assert np.mean(v == FAIL) <= _bound(level, SEQUENTIAL_RUNS)


def test_sequential_stops_early_on_a_clear_case() -> None:
    rng = np.random.default_rng(707)
    rule = StopRule.for_workload(N, CONFIDENCE, quantiles=(0.9,))
    x = iid(0.39).sample(rng, 400, N, 0.9)
    v, used = judge_sequentially(x * 0.7, 0.9, rule.looks, rule.look_confidence)
    assert np.mean(v == PASS) > 0.95 and np.mean(used) < 0.6 * N
    v, used = judge_sequentially(x * 1.5, 0.9, rule.looks, rule.look_confidence)
    assert np.mean(v == FAIL) > 0.95 and np.mean(used) < 0.4 * N


def test_the_vectorised_rule_is_the_verdict_code() -> None:
    # judge_quantile_runs must reach exactly what slo.verdict.judge reaches on records.
    rng = np.random.default_rng(808)
    x = np.vstack(
        [
            queue(0.5, warmup=True).sample(rng, 6, 300, 0.9),
            drift(iid(0.39), 0.5).sample(rng, 3, 300, 0.9),
        ]
    )
    objective = parse_objective("sim", "objectives.sim", "ttft p90", "<= 1s")
    codes = judge_quantile_runs(x, 0.9, CONFIDENCE)
    by_outcome = {Outcome.PASS: PASS, Outcome.FAIL: FAIL, Outcome.INCONCLUSIVE: 0}
    for row, code in zip(x, codes, strict=True):
        records = [rec(i, ttft_ms=v * 1000, e2e_ms=v * 1000 + 100) for i, v in enumerate(row)]
        verdict = judge(objective, records, confidence=CONFIDENCE, profile="sim")
        assert by_outcome[verdict.outcome] == code


def test_rate_interval_covers_a_correlated_rate() -> None:
    # Completions whose gaps follow a clustered (AR(1) lognormal) process: the batch-means
    # interval of the rate covers the true rate at about its level.
    rng = np.random.default_rng(909)
    model = ar1(0.8, sigma=0.6)
    true_mean_gap = math.exp(0.6**2 / 2)  # lognormal with median 1
    gaps = model.draw(rng, 400, N)
    covered = 0
    for row in gaps:
        t = np.cumsum(row)
        iv = rate_interval(t.tolist(), [1.0] * N, float(t[-1]), CONFIDENCE)
        covered += iv.lower <= 1 / true_mean_gap <= iv.upper
    assert covered / 400 >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 400)


def test_mean_interval_covers_under_correlation() -> None:
    rng = np.random.default_rng(1010)
    model = ar1(0.7, sigma=0.5)
    truth = math.exp(0.5**2 / 2)
    covered = sum(
        (iv := mean_interval(row, CONFIDENCE)).lower <= truth <= iv.upper
        for row in model.draw(rng, 400, N)
    )
    assert covered / 400 >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 400)
