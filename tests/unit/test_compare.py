"""The A/B comparison's error rates by simulation (known truth), and its edge cases.

Bounds are the target plus Monte Carlo tolerance: with 400 experiments a true rate of 5% reads
above 8.5% with probability under 0.2%.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from slo.compare import (
    Change,
    SequentialPlan,
    blocks_needed,
    classify,
    compare_blocks,
    compare_counts,
    compare_intervals,
    requests_per_arm_quantile,
    statistic_of,
)

RUNS = 400
K, B = 8, 60


def _experiments(
    truth: float, rho: float, seed: int, stat: str = "p99", drift: float = 1.0
) -> list[Change]:
    """RUNS interleaved experiments; B's latencies are truth x A's; AR(1) latent with rho."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(RUNS):
        a_stats, b_stats = [], []
        for j in range(K):
            eps = rng.standard_normal((2, B))
            x = np.empty_like(eps)
            x[:, 0] = eps[:, 0]
            for i in range(1, B):
                x[:, i] = rho * x[:, i - 1] + math.sqrt(1 - rho**2) * eps[:, i]
            lat = np.exp(0.39 * x) * drift ** (j / K)
            a_stats.append(statistic_of(lat[0].tolist(), stat))
            b_stats.append(statistic_of((truth * lat[1]).tolist(), stat))
        c = compare_blocks(
            "ttft " + stat,
            a_stats,
            b_stats,
            lower_is_better=True,
            margin=0.10,
            confidence=0.95,
        )
        out.append(c.change)
    return out


@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_identical_arms_rarely_called_regression(rho: float) -> None:
    changes = _experiments(1.0, rho, seed=11, drift=1.3)
    false_alarm = changes.count(Change.REGRESSION) / RUNS
    assert false_alarm <= 0.05 + 0.035, false_alarm
    assert changes.count(Change.IMPROVEMENT) / RUNS <= 0.085


def test_large_regression_is_found() -> None:
    changes = _experiments(1.6, 0.5, seed=12)
    assert changes.count(Change.REGRESSION) / RUNS >= 0.90


def test_identical_arms_usually_no_change_at_p50() -> None:
    # Expected about 60% here (8 pairs of 60, sigma 0.39); never a REGRESSION.
    changes = _experiments(1.0, 0.0, seed=13, stat="p50")
    assert changes.count(Change.NO_CHANGE) / RUNS >= 0.45
    assert changes.count(Change.REGRESSION) / RUNS <= 0.085


def test_classify_three_ways_and_direction() -> None:
    assert classify(1.12, 1.3, 0.1, lower_is_better=True) is Change.REGRESSION
    assert classify(1.12, 1.3, 0.1, lower_is_better=False) is Change.IMPROVEMENT
    assert classify(0.7, 0.85, 0.1, lower_is_better=False) is Change.REGRESSION
    assert classify(0.95, 1.05, 0.1, lower_is_better=True) is Change.NO_CHANGE
    assert classify(0.95, 1.15, 0.1, lower_is_better=True) is Change.INCONCLUSIVE
    assert classify(math.nan, 1.0, 0.1, lower_is_better=True) is Change.INCONCLUSIVE


def test_error_rate_regression_from_a_zero_error_baseline() -> None:
    c = compare_counts("error_rate", 0, 600, 12, 600, margin=0.1, confidence=0.95)
    assert c.change is Change.REGRESSION and c.lower > 1.1
    same = compare_counts("error_rate", 3, 600, 4, 600, margin=0.1, confidence=0.95)
    assert same.change is Change.INCONCLUSIVE
    none = compare_counts("error_rate", 0, 600, 0, 600, margin=0.1, confidence=0.95)
    assert none.change is Change.NO_CHANGE and "no request failed" in none.note


def test_infinite_or_few_blocks_are_inconclusive() -> None:
    c = compare_blocks("p99", [1, 1, 1], [1, math.inf, 1], lower_is_better=True, margin=0.1,
                       confidence=0.95)  # fmt: skip
    assert c.change is Change.INCONCLUSIVE and "infinite" in c.note
    one = compare_blocks("p99", [1.0], [2.0], lower_is_better=True, margin=0.1, confidence=0.95)
    assert one.change is Change.INCONCLUSIVE


def test_two_runs_intervals_combine_and_say_they_cannot_see_drift() -> None:
    c = compare_intervals(
        "ttft p99",
        (0.9, 1.0, 1.1),
        (1.9, 2.0, 2.1),
        baseline_confidence=0.95,
        candidate_confidence=0.95,
        lower_is_better=True,
        margin=0.1,
        confidence=0.95,
    )
    assert c.change is Change.REGRESSION and math.isclose(c.ratio, 2.0)
    assert c.lower < 2.0 < c.upper and "drift" in c.note
    point = compare_intervals(
        "output_throughput", (5.0, 5.0, 5.0), (9.0, 9.0, 9.0), baseline_confidence=0.95,
        candidate_confidence=0.95, lower_is_better=False, margin=0.1, confidence=0.95,
    )  # fmt: skip
    assert point.change is Change.INCONCLUSIVE


def test_sequential_plan_splits_the_error_and_stops_when_decided() -> None:
    plan = SequentialPlan(4, 12, 0.95)
    assert plan.looks == 9 and math.isclose(plan.look_confidence, 1 - 0.05 / 9)
    decided = compare_blocks("x", [1.0] * 4, [2.0, 2.1, 1.9, 2.0], lower_is_better=True,
                             margin=0.1, confidence=plan.look_confidence)  # fmt: skip
    assert not plan.should_stop([decided], 3)
    assert plan.should_stop([decided], 4)
    assert plan.should_stop([], 12)
    three = SequentialPlan(4, 12, 0.95, every=4)
    assert three.looks == 3 and [k for k in range(13) if three.is_look(k)] == [4, 8, 12]
    assert not three.should_stop([decided], 5)


def test_planning_matches_the_known_sampling_cost() -> None:
    # STATISTICS: ~2,900 per arm for a 10% p99 change at sigma 0.39, 80% power, one-sided 5%.
    assert 2800 <= requests_per_arm_quantile(0.39, 0.99, 0.10) <= 3000
    assert blocks_needed(0.2, 0.10) > blocks_needed(0.1, 0.10) > blocks_needed(0.1, 0.25)
