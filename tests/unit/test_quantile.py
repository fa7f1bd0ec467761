"""Tests for slo.quantile: numpy-compatible percentiles and order-statistic quantile CIs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slo.quantile import (
    QuantileCI,
    min_samples_to_bound_lower,
    min_samples_to_bound_upper,
    order_statistic_ranks,
    percentile,
    quantile_ci,
)

# Bounded so b - a cannot overflow to inf inside the interpolation.
finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)


# Round percentiles put the virtual index on .5 for small n, where numpy's choice of which end
# to interpolate from changes the last bit.
percents = st.one_of(
    st.floats(min_value=0.0, max_value=100.0), st.sampled_from([0.0, 25.0, 50.0, 75.0, 100.0])
)


@given(st.lists(finite, min_size=1, max_size=60), percents)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == float(np.percentile(values, q))


def test_percentile_midpoint_matches_numpy_bit_for_bit() -> None:
    # a + d/2 and b - d/2 differ here; numpy takes b - d/2 at exactly t = 0.5.
    values = [0.00020572181640094665, 2.4771216024907883]
    assert percentile(values, 50) == float(np.percentile(values, 50)) == 1.2386636621535947


@pytest.mark.parametrize("q", [0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0])
def test_percentile_matches_numpy_on_latencies(q: float) -> None:
    values = np.random.default_rng(7).lognormal(mean=-1.0, sigma=0.8, size=1001).tolist()
    assert percentile(values, q) == float(np.percentile(values, q))


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="NaN"):
        percentile([1.0, math.nan], 50)
    for q in (-0.1, 100.1, math.nan):
        with pytest.raises(ValueError, match="must be in"):
            percentile([1.0], q)


def _reference_ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """(l, u) from exact binomial sums in integer arithmetic, scanning every candidate rank.

    The two sides are independent conditions, so scanning all l and all u is the same as
    scanning all (l, u) pairs.
    """
    num, den = Fraction(q).as_integer_ratio()
    # 1 - alpha/2, exactly, as target_num / target_den.
    target_num, target_den = ((1 + Fraction(confidence)) / 2).as_integer_ratio()
    # P(B = k) * den**n for B ~ Binomial(n, q): integers, so every sum below is exact.
    num_pow = [1]
    rest_pow = [1]
    for _ in range(n):
        num_pow.append(num_pow[-1] * num)
        rest_pow.append(rest_pow[-1] * (den - num))
    weights = [math.comb(n, k) * num_pow[k] * rest_pow[n - k] for k in range(n + 1)]
    total: int = den**n
    head = [0, *itertools.accumulate(weights)]  # head[r] = sum(weights[:r])

    def at_least_target(weight_sum: int) -> bool:
        return weight_sum * target_den >= target_num * total

    lower = None
    for rank in range(1, n + 1):  # P(X(rank) <= xi_q) = P(B >= rank)
        if at_least_target(total - head[rank]):
            lower = rank  # keep the largest
    upper = None
    for rank in range(n, 0, -1):  # P(X(rank) >= xi_q) = P(B <= rank - 1)
        if at_least_target(head[rank]):
            upper = rank  # keep the smallest
    return lower, upper


CASES = [
    (0.5, 0.95),
    (0.9, 0.95),
    (0.99, 0.95),
    (0.99, 0.9),
    (0.95, 0.99),
    (0.1, 0.95),
    (0.999, 0.5),
    (0.25, 0.8),
]


@pytest.mark.parametrize(("q", "confidence"), CASES)
def test_ranks_match_brute_force(q: float, confidence: float) -> None:
    for n in range(1, 201):
        expected = _reference_ranks(n, q, confidence)
        assert order_statistic_ranks(n, q, confidence) == expected, n


@pytest.mark.parametrize(("q", "confidence"), CASES)
def test_quantile_ci_uses_the_brute_force_order_statistics(q: float, confidence: float) -> None:
    for n in (1, 2, 3, 5, 10, 37, 100, 200):
        lower_rank, upper_rank = _reference_ranks(n, q, confidence)
        values = [float(k) for k in range(n, 0, -1)]  # X(k) == k once sorted
        ci = quantile_ci(values, q, confidence)
        estimate = percentile(values, 100 * q)
        # Widened to the estimate where interpolation lands outside the order statistics.
        lower = -math.inf if lower_rank is None else min(float(lower_rank), estimate)
        upper = math.inf if upper_rank is None else max(float(upper_rank), estimate)
        assert ci == QuantileCI(q, estimate, lower, upper, n, confidence), n


def _reference_min_samples(q: float, confidence: float, side: int) -> int:
    """Smallest n at which the full brute force bounds ``side`` (0 lower, 1 upper)."""
    # Scan n with the extreme rank alone (X(n) for the upper side, X(1) for the lower): by
    # monotonicity a side is bounded iff its extreme rank qualifies. Exact integers throughout.
    num, den = Fraction(q).as_integer_ratio()
    target_num, target_den = ((1 + Fraction(confidence)) / 2).as_integer_ratio()
    miss = num if side == 1 else den - num  # P(B <= n - 1) = 1 - q**n; P(B >= 1) = 1 - (1-q)**n
    n = 1
    while (den**n - miss**n) * target_den < target_num * den**n:
        n += 1
    # Cross-check the shortcut against the full scan of every rank on both sides of n.
    assert _reference_ranks(n, q, confidence)[side] is not None
    if n > 1:
        assert _reference_ranks(n - 1, q, confidence)[side] is None
    return n


def test_min_samples_to_bound_upper_p99() -> None:
    expected = _reference_min_samples(0.99, 0.95, side=1)
    assert expected == 368  # ceil(log(0.025) / log(0.99))
    assert min_samples_to_bound_upper(0.99, 0.95) == expected
    assert quantile_ci([1.0] * (expected - 1), 0.99).upper == math.inf
    assert quantile_ci([1.0] * expected, 0.99).upper == 1.0


@pytest.mark.parametrize(("q", "confidence"), [(0.9, 0.95), (0.5, 0.99), (0.01, 0.95)])
def test_min_samples_match_brute_force(q: float, confidence: float) -> None:
    assert min_samples_to_bound_upper(q, confidence) == _reference_min_samples(q, confidence, 1)
    assert min_samples_to_bound_lower(q, confidence) == _reference_min_samples(q, confidence, 0)


def test_min_samples_reject_degenerate_q() -> None:
    for q in (0.0, 1.0):
        with pytest.raises(ValueError, match="q ="):
            min_samples_to_bound_upper(q, 0.95)


@settings(deadline=None)
@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=300),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.5, max_value=0.999),
)
def test_interval_contains_estimate(values: list[float], q: float, confidence: float) -> None:
    ci = quantile_ci(values, q, confidence)
    assert ci.lower <= ci.estimate <= ci.upper
    assert ci.estimate == percentile(values, 100 * q)
    assert ci.n == len(values)
    for end in (ci.lower, ci.upper):  # an order statistic, the estimate, or unbounded
        assert end in values or end == ci.estimate or math.isinf(end)


def test_quantile_ci_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no values"):
        quantile_ci([], 0.99)
    with pytest.raises(ValueError, match="fraction"):
        quantile_ci([1.0], 99)  # a percent where a fraction belongs
    with pytest.raises(ValueError, match="confidence"):
        quantile_ci([1.0], 0.99, confidence=1.0)


TRIALS = 2000
# Three binomial standard errors of a 2000-trial estimate of a 95% (2.5% per tail) rate.
SLACK = 3 * math.sqrt(0.05 * 0.95 / TRIALS)
TAIL_SLACK = 3 * math.sqrt(0.025 * 0.975 / TRIALS)


@pytest.mark.parametrize(
    ("q", "n", "distribution"),
    [(0.99, 400, "exponential"), (0.5, 51, "normal"), (0.9, 120, "exponential")],
)
def test_coverage_by_simulation(q: float, n: int, distribution: str) -> None:
    confidence = 0.95
    rng = np.random.default_rng(20240611)
    if distribution == "exponential":
        samples = rng.exponential(scale=1.0, size=(TRIALS, n))
        true_quantile = -math.log(1 - q)  # inverse CDF of Exp(1)
    else:
        samples = rng.normal(size=(TRIALS, n))
        assert q == 0.5
        true_quantile = 0.0
    below = above = 0  # true quantile below the lower end / above the upper end
    for row in samples:
        ci = quantile_ci(row.tolist(), q, confidence)
        below += true_quantile < ci.lower
        above += true_quantile > ci.upper
    alpha = 1 - confidence
    assert (TRIALS - below - above) / TRIALS >= confidence - SLACK
    # Equal tails: neither side may spend much more than alpha / 2.
    assert below / TRIALS <= alpha / 2 + TAIL_SLACK
    assert above / TRIALS <= alpha / 2 + TAIL_SLACK
