"""How much serial correlation shrinks a run's information: effective sample sizes.

Requests of one run are not independent draws. Queueing makes slow requests come in runs (a
burst, a long prefill, a wave of a closed loop), so k requests over a threshold carry less
evidence than k independent ones. The standard measure is the long-run variance of a series:
for a stationary series with variance s^2 and autocorrelations r_k, the mean of n values has
variance (s^2 / n) * (1 + 2 * sum_k r_k); the factor in brackets is the variance inflation
factor (VIF), and n / VIF is the effective sample size.

Estimator: Bartlett-kernel (Newey-West) long-run variance with Andrews' (1991) AR(1) plug-in
bandwidth, the textbook heteroskedasticity-and-autocorrelation-consistent (HAC) estimator
(arch.covariance.kernel.Bartlett computes the same sum; tests/unit/test_dependence.py checks the
two agree at a given bandwidth). It is written here on arrays of many series at once because
the verdict rules are checked by simulating thousands of runs (slo/simulate.py), where one
library call per series would take minutes.

The series here is usually an exceedance indicator (1 where a request is over a level), the
quantity a quantile verdict rests on: its VIF says how clustered the slow requests are.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

MAX_AR1 = 0.98
"""Clip of the AR(1) coefficient in the bandwidth rule: at 1 the rule's bandwidth is infinite."""
MAX_LAG_FRACTION = 0.25
"""The kernel never reaches past a quarter of the series: longer lags are pure noise."""


def _autocovariances(d: Array, max_lag: int) -> Array:
    """Sample autocovariances (divisor n) of each row of ``d`` (already centred), lags 0..L."""
    n = d.shape[-1]
    size = 1 << (2 * n - 1).bit_length()  # zero-padded: no circular wrap-around
    f = np.fft.rfft(d, size, axis=-1)
    acov = np.fft.irfft(f * np.conj(f), size, axis=-1)[..., : max_lag + 1]
    return np.asarray(acov / n, dtype=np.float64)


def andrews_bandwidth(rho: Array | float, n: int) -> Array:
    """Andrews (1991) plug-in bandwidth of the Bartlett kernel for an AR(1) with coefficient rho:
    1.1447 * (alpha * n) ** (1/3), alpha = 4 rho^2 / ((1 - rho)^2 (1 + rho)^2)."""
    r = np.clip(np.asarray(rho, dtype=np.float64), -MAX_AR1, MAX_AR1)
    alpha = 4 * r**2 / ((1 - r) ** 2 * (1 + r) ** 2)
    return np.asarray(1.1447 * (alpha * n) ** (1 / 3), dtype=np.float64)


def long_run_variance_with_bandwidth(
    x: npt.ArrayLike, bandwidth: float | None = None, bandwidth_factor: float = 1.0
) -> tuple[Array, Array]:
    """(long-run variance, bandwidth) of each row of ``x`` (shape (..., n)): the Bartlett sum
    gamma_0 + 2 sum_k (1 - k / (B + 1)) gamma_k over k <= B, with B ``bandwidth_factor`` times
    ``andrews_bandwidth`` unless given. The variance is NaN where a row is constant.
    """
    a = np.asarray(x, dtype=np.float64)
    n = a.shape[-1]
    if n < 2:
        nan = np.full(a.shape[:-1], np.nan)
        return nan, nan
    d = a - a.mean(axis=-1, keepdims=True)
    cap = max(1, int(MAX_LAG_FRACTION * n))
    acov = _autocovariances(d, cap)
    g0 = acov[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        rho1 = acov[..., 1] / g0
        if bandwidth is None:
            b = np.minimum(bandwidth_factor * andrews_bandwidth(np.nan_to_num(rho1), n), cap)
        else:
            b = np.full(g0.shape, min(float(bandwidth), cap))
        lags = np.arange(1, cap + 1, dtype=np.float64)
        # Bartlett weights on lags up to the bandwidth (arch's convention: k <= B).
        weights = np.where(lags <= b[..., None], 1 - lags / (b[..., None] + 1), 0.0)
        lrv = g0 + 2 * np.sum(weights * acov[..., 1:], axis=-1)
    return np.where(g0 > 0, lrv, np.nan), b


def long_run_variance(x: npt.ArrayLike, bandwidth: float | None = None) -> Array:
    """Bartlett long-run variance of each row (``long_run_variance_with_bandwidth``)."""
    return long_run_variance_with_bandwidth(x, bandwidth)[0]


def variance_inflation(x: npt.ArrayLike) -> Array:
    """Long-run variance over plain variance, at least 1 (NaN for a constant row).

    Below 1 (negative correlation, or noise in the estimate) counts as 1: a verdict never
    claims more evidence than the same number of independent requests would give.
    """
    a = np.asarray(x, dtype=np.float64)
    d = a - a.mean(axis=-1, keepdims=True)
    g0 = np.mean(d * d, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        vif = long_run_variance(a) / g0
    return np.where(np.isnan(vif), np.nan, np.maximum(vif, 1.0))


def grouped_sums(values: npt.ArrayLike, groups: npt.ArrayLike) -> Array:
    """Sums of ``values`` per group, groups in order of first appearance (1-D only).

    For samples that come several per request (inter-token gaps), the dependence between gaps
    of one request is accounted for by treating each request's sum as one observation.
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(groups)
    _, first, inverse = np.unique(g, return_index=True, return_inverse=True)
    sums = np.bincount(inverse, weights=v)
    return np.asarray(sums[np.argsort(np.argsort(first))], dtype=np.float64)


def lag1_autocorrelation(x: npt.ArrayLike) -> float:
    """Lag-1 autocorrelation of a 1-D series (NaN when it is constant or shorter than 3)."""
    a = np.asarray(x, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size < 3:
        return float("nan")
    d = a - a.mean()
    g0 = float(np.dot(d, d))
    return float(np.dot(d[1:], d[:-1]) / g0) if g0 > 0 else float("nan")
