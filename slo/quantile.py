"""Percentiles and distribution-free confidence intervals for quantiles.

A p99 TTFT from a few hundred requests is noisy; the verdict compares the threshold against a
confidence interval for the true quantile, built from order statistics so it holds for any
continuous latency distribution (no normality assumption).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scipy.stats import binom


def _check_fraction(name: str, value: float, *, open_interval: bool) -> None:
    ok = 0 < value < 1 if open_interval else 0 <= value <= 1
    if not ok:
        bounds = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"{name} = {value!r} must be in {bounds}, as a fraction (0.99, not 99)")


def _sorted_checked(values: Sequence[float]) -> list[float]:
    if len(values) == 0:
        raise ValueError("no values: a percentile needs at least one sample")
    data = sorted(float(v) for v in values)
    # sorted() gives no meaningful order with NaN in it; a NaN sample is a bug upstream.
    if any(math.isnan(v) for v in data):
        raise ValueError("values contain NaN: drop failed requests before computing percentiles")
    return data


def _percentile_sorted(data: Sequence[float], q: float) -> float:
    # Same float operations as numpy.percentile(method="linear"), so results agree bit for bit.
    n = len(data)
    h = (n - 1) * (q / 100.0)
    if h >= n - 1:
        return data[-1]
    lo = math.floor(h)
    t = h - lo
    a, b = data[lo], data[lo + 1]
    # A failed request is +inf: sitting exactly on the value below it (t = 0) is that value,
    # any step towards it is +inf (numpy would compute inf * 0 = nan for the first).
    if t == 0:
        return a
    if b == math.inf:
        return math.inf
    diff = b - a
    # numpy interpolates from the nearer end, which keeps the result monotone in t.
    if t >= 0.5:
        return b - diff * (1 - t)
    return a + diff * t


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (``q`` in [0, 100]), as ``numpy.percentile`` (linear) computes it.

    Raises ``ValueError`` for empty input, NaN values or ``q`` outside [0, 100].
    """
    if not 0 <= q <= 100:
        raise ValueError(f"q = {q!r} must be in [0, 100] (a percentile, e.g. 99 for p99)")
    return _percentile_sorted(_sorted_checked(values), q)


@dataclass(frozen=True)
class QuantileCI:
    """A two-sided confidence interval for the ``q``-quantile of the sampled distribution."""

    q: float
    """The quantile as a fraction, e.g. 0.99."""
    estimate: float
    """``percentile(values, 100 * q)``."""
    lower: float
    """X(l), or the estimate if that is lower; ``-inf`` when the sample cannot bound this side."""
    upper: float
    """X(u), or the estimate if that is higher; ``inf`` when the sample cannot bound this side."""
    n: int
    confidence: float

    @property
    def lower_bounded(self) -> bool:
        return math.isfinite(self.lower)

    @property
    def upper_bounded(self) -> bool:
        return math.isfinite(self.upper)


def _smallest(n: int, guess: float, ok: Callable[[int], bool]) -> int | None:
    """Smallest k in [0, n - 1] with ok(k), for ok monotone (false...false true...true)."""
    if n <= 0 or not ok(n - 1):
        return None
    k = min(max(int(guess), 0), n - 1) if math.isfinite(guess) else n - 1
    # The guess from ppf/isf is usually exact; step from it using ok() itself so the answer
    # is consistent with the predicate rather than with the inverse function's rounding.
    while not ok(k):
        k += 1
    while k > 0 and ok(k - 1):
        k -= 1
    return k


def _largest(n: int, guess: float, ok: Callable[[int], bool]) -> int | None:
    """Largest k in [0, n - 1] with ok(k), for ok monotone (true...true false...false)."""
    if n <= 0 or not ok(0):
        return None
    k = min(max(int(guess), 0), n - 1) if math.isfinite(guess) else 0
    while not ok(k):
        k -= 1
    while k < n - 1 and ok(k + 1):
        k += 1
    return k


def order_statistic_ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics that bound the ``q``-quantile.

    l is the largest rank with P(X(l) <= xi_q) >= 1 - alpha/2 and u the smallest with
    P(X(u) >= xi_q) >= 1 - alpha/2; None where no rank in 1..n qualifies (that side is
    unbounded). Raises ``ValueError`` for n < 1 or q, confidence out of range.
    """
    if n < 1:
        raise ValueError(f"n = {n!r} must be >= 1")
    _check_fraction("q", q, open_interval=False)
    _check_fraction("confidence", confidence, open_interval=True)
    return _ranks(n, q, confidence)


@functools.lru_cache(maxsize=1024)
def _ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    # B ~ Binomial(n, q) counts the samples below the true quantile xi_q (continuous
    # distribution), so P(X(l) <= xi_q) = P(B >= l) = sf(l - 1) and
    # P(X(u) >= xi_q) = P(B <= u - 1) = cdf(u - 1). Each side gets alpha / 2, so the
    # two-sided coverage is at least ``confidence``. Cached: verdicts ask for the same n often.
    target = 1 - (1 - confidence) / 2

    def lower_ok(k: int) -> bool:  # k = l - 1; true for small k
        return float(binom.sf(k, n, q)) >= target

    def upper_ok(k: int) -> bool:  # k = u - 1; true for large k
        return float(binom.cdf(k, n, q)) >= target

    k_low = _largest(n, float(binom.isf(target, n, q)), lower_ok)
    k_up = _smallest(n, float(binom.ppf(target, n, q)), upper_ok)
    return (
        None if k_low is None else k_low + 1,
        None if k_up is None else k_up + 1,
    )


def quantile_ci(values: Sequence[float], q: float, confidence: float = 0.95) -> QuantileCI:
    """Distribution-free equal-tailed confidence interval for the ``q``-quantile (a fraction).

    The ends are the order statistics X(l), X(u) from ``order_statistic_ranks``; a side the
    sample is too small to bound is infinite (see ``min_samples_to_bound_upper``). Ties in the
    data make the interval conservative, never too narrow.

    For extreme q and tiny samples the interpolated estimate can fall outside [X(l), X(u)]
    (p99 of 2 samples: X(2) is a valid lower bound, the estimate is just below it); the
    interval is then widened to reach the estimate, which only adds coverage.
    """
    _check_fraction("q", q, open_interval=False)
    _check_fraction("confidence", confidence, open_interval=True)
    data = _sorted_checked(values)
    n = len(data)
    l_rank, u_rank = _ranks(n, q, confidence)
    estimate = _percentile_sorted(data, 100 * q)
    lower = -math.inf if l_rank is None else data[l_rank - 1]
    upper = math.inf if u_rank is None else data[u_rank - 1]
    return QuantileCI(
        q=q,
        estimate=estimate,
        lower=min(lower, estimate),
        upper=max(upper, estimate),
        n=n,
        confidence=confidence,
    )


def _min_samples(q: float, confidence: float, side: int) -> int:
    _check_fraction("q", q, open_interval=True)
    _check_fraction("confidence", confidence, open_interval=True)
    # The side is bounded once the extreme order statistic suffices: X(n) needs
    # 1 - q**n >= target, X(1) needs 1 - (1 - q)**n >= target. Start from the closed form,
    # then settle on exactly what quantile_ci uses so the two never disagree.
    tail = (1 - confidence) / 2
    p = q if side > 0 else 1 - q
    n = max(1, math.ceil(math.log(tail) / math.log(p)))

    def bounded(m: int) -> bool:
        return _ranks(m, q, confidence)[1 if side > 0 else 0] is not None

    while not bounded(n):
        n += 1
    while n > 1 and bounded(n - 1):
        n -= 1
    return n


def min_samples_to_bound_upper(q: float, confidence: float) -> int:
    """Smallest sample size whose ``quantile_ci(..., q, confidence).upper`` is finite."""
    return _min_samples(q, confidence, side=1)


def min_samples_to_bound_lower(q: float, confidence: float) -> int:
    """Smallest sample size whose ``quantile_ci(..., q, confidence).lower`` is finite."""
    return _min_samples(q, confidence, side=-1)
