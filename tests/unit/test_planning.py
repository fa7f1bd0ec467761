"""How many requests a verdict needs: the INCONCLUSIVE message's figure and --slo-headroom."""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from slo.intervals import MIN_EFFECTIVE
from slo.planning import pass_chance, requests_for_pass_at, requests_needed
from slo.quantile import _ranks, min_samples_to_bound_upper
from slo.stats import summarize
from slo.verdict import Outcome, evaluate
from tests.unit.builders import obj, rec


def test_a_tail_that_never_reaches_the_threshold_needs_only_a_bounded_interval() -> None:
    assert requests_needed(0.99, 0.95, 0.0, 1.0, below=True) == min_samples_to_bound_upper(
        0.99, 0.95
    )
    # Clustering that halves the information doubles the requests.
    assert requests_needed(0.99, 0.95, 0.0, 2.0, below=True) == 2 * min_samples_to_bound_upper(
        0.99, 0.95
    )


def test_the_plan_passes_with_the_stated_probability() -> None:
    # 0.5% of requests over the threshold of a p99: the planned size PASSes with >= 90%
    # probability (independent requests), a tenth fewer requests would not reliably.
    need = requests_needed(0.99, 0.95, 0.005, 1.0, below=True)
    assert need is not None
    _, up = _ranks(need, 0.99, 0.95)
    assert up is not None
    assert binom.cdf(need - up, need, 0.005) >= 0.9
    assert need > 368
    closer = requests_needed(0.99, 0.95, 0.008, 1.0, below=True)
    assert closer is not None and closer > need


def test_a_fraction_on_the_wrong_side_cannot_be_planned() -> None:
    assert requests_needed(0.99, 0.95, 0.02, 1.0, below=True) is None
    assert requests_needed(0.99, 0.95, 0.005, 1.0, below=False) is None
    fail = requests_needed(0.99, 0.95, 0.03, 1.0, below=False)
    assert fail is not None and fail < 600


def test_headroom_rescales_the_measured_shape() -> None:
    rng = np.random.default_rng(3)
    values = tuple(rng.lognormal(0, 0.39, 600) / 20)
    p99 = obj("ttft p99", "<= 200ms")
    near = requests_for_pass_at(p99, values, 1.0, 0.95, headroom=0.95)
    far = requests_for_pass_at(p99, values, 1.0, 0.95, headroom=0.5)
    assert near is not None and far is not None and near > far >= 368
    assert (
        requests_for_pass_at(obj("output_throughput", ">= 1 tok/s"), values, 1, 0.95, 0.8) is None
    )


def test_a_plan_for_a_pass_meets_the_floor_on_trusted_clustering() -> None:
    # Where the clustering leaves fewer than MIN_EFFECTIVE effective samples (and under half the
    # run) the upper side of the interval is unbounded: a plan below that cannot PASS.
    need = requests_needed(0.9, 0.95, 0.0, 10.0, below=True)
    assert need is not None and need >= MIN_EFFECTIVE * 10
    # A VIF of 2 or less keeps half the run effective: the floor does not apply.
    assert requests_needed(0.9, 0.95, 0.0, 2.0, below=True) == 2 * min_samples_to_bound_upper(
        0.9, 0.95
    )
    # FAIL rests on the lower side, which the floor leaves alone.
    fail = requests_needed(0.9, 0.95, 0.5, 10.0, below=False)
    assert fail is not None and fail < MIN_EFFECTIVE * 10


def test_a_clustered_inconclusive_says_how_many_requests_would_decide() -> None:
    # 160 requests in waves of 32 (a closed loop): far under the floor, far under the threshold.
    rng = np.random.default_rng(5)
    waves = np.repeat(rng.lognormal(6, 0.3, 5), 32) * rng.lognormal(0, 0.02, 160)
    summary = summarize([rec(i, float(ms)) for i, ms in enumerate(waves)])
    verdict = evaluate(obj("ttft p90", "<= 5s"), summary, confidence=0.95, profile="cpu-tiny")
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "clustered" in verdict.note and "requests would decide it" in verdict.note
    need = int(verdict.note.split("about ")[1].split(" requests")[0])
    assert verdict.n_eff is not None and need >= MIN_EFFECTIVE * 160 / verdict.n_eff


def test_the_forecast_of_a_repeat_matches_how_often_verdicts_pass() -> None:
    # Known truth: independent lognormal TTFTs with 0.5% of requests over the threshold of a
    # p99 (its true p99 just under it). The suite's own verdicts over 300 runs of 600 requests
    # PASS as often as the forecast says, within Monte Carlo error.
    rng = np.random.default_rng(11)
    sigma, n, runs = 0.5, 600, 300
    threshold_ms = float(np.exp(sigma * 2.5758))  # exp(sigma * z_0.995): P(over) = 0.5%
    p99 = obj("ttft p99", f"<= {threshold_ms:.6f}ms")
    passed = 0
    for _ in range(runs):
        ms = rng.lognormal(0, sigma, n)
        summary = summarize([rec(i, float(v)) for i, v in enumerate(ms)])
        v = evaluate(p99, summary, confidence=0.95, profile="cpu-tiny")
        passed += v.outcome is Outcome.PASS
    forecast = pass_chance(0.99, 0.95, 0.005, n, n)
    se = (forecast * (1 - forecast) / runs) ** 0.5
    assert abs(passed / runs - forecast) < 3.5 * se + 0.02, (passed / runs, forecast)
    # Closer to the threshold, or fewer effective samples, forecast fewer PASSes.
    assert pass_chance(0.99, 0.95, 0.008, n, n) < forecast
    assert pass_chance(0.99, 0.95, 0.005, n, n / 3) < forecast
    # Clustered below the trusted floor: the upper side is unbounded, no PASS.
    assert pass_chance(0.9, 0.95, 0.0, 1000, MIN_EFFECTIVE - 1) == 0.0
    # A FAIL-side forecast ("interval wholly above") for a fraction well over 1 - q.
    assert pass_chance(0.99, 0.95, 0.05, n, n, below=False) > 0.99
