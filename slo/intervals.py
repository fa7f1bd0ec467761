"""Confidence intervals that stay honest when requests are serially correlated.

Every interval here is the independent-sample interval with the sample size replaced by an
effective one, n_eff = n / VIF, where the variance inflation factor (VIF) comes from the
series' own long-run variance (slo/dependence.py). On independent data VIF is about 1 and the
intervals are the classic ones; on clustered data they widen as much as the clustering says.

- Quantiles: order-statistic (binomial) ranks computed for n_eff samples, read off the run's own
  sorted values at the same fractions. The VIF is that of the exceedance indicator "request over
  level x" at three levels: the estimate, the objective's threshold, and a level with at least
  30 expected exceedances (for a p99 of 600 requests: the p95), the largest of the three. The
  first two are where the verdict is decided; the third sees the clustering of the tail with
  enough events to measure it. The threshold counts only while at least a quarter as many
  requests lie above it (and below it) as would if the quantile sat on it (``NEAR``): a
  threshold far out in the tail is crossed by a few bursts whose clustering is not the
  quantile's (simulation: with it, a p50 at 3x headroom PASSed less often than at 1.5x).
  Assumption: slow requests cluster at the threshold no more than at those levels.
- The HAC estimate of the VIF is itself uncertain; where it shows positive dependence it is
  widened by (t_nu / z)^2, nu = 3n / 2B, the usual degrees of freedom of a Bartlett estimate of
  bandwidth B (where it shows none, the classic interval stands), and the bandwidth is twice
  Andrews' rule (its plug-in rule is tuned for estimation error, not for test size; a wider
  window lowers the downward bias that makes intervals too narrow).
- When the clustering leaves fewer than ``MIN_EFFECTIVE`` effective samples and less than half
  the run, the dependence estimate itself cannot be trusted (simulation: an M/G/1 queue at
  utilisation 0.8 over 600 requests): the interval's upper side is unbounded, so a latency
  objective cannot PASS (INCONCLUSIVE, with that reason); a clear miss still FAILs.
- Means: a t interval with the HAC variance. Rates (throughput, goodput): batch means over
  ``RATE_WINDOWS`` equal time windows (Law & Kelton's batch means), a t interval over them.
- Proportions (error rate): a Clopper-Pearson interval at n_eff.

The stated level holds, within Monte Carlo error, on the models in slo/simulate.py; see
tests/unit/test_simulation.py and benchmarks/verdict_errors.py for the figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats

from slo.dependence import grouped_sums, lag1_autocorrelation, long_run_variance_with_bandwidth
from slo.quantile import _ranks

Array = npt.NDArray[np.float64]

MIN_EFFECTIVE = 100
RATE_WINDOWS = 20
TAIL_EVENTS = 30
"""The third level of a quantile's VIF has at least this many expected exceedances."""
NEAR = 0.25
"""The threshold's level counts while at least this share of the requests a quantile on the
threshold would put above it (and below it) are there."""


@dataclass(frozen=True)
class Interval:
    """A two-sided interval and what the dependence handling made of the sample."""

    lower: float
    estimate: float
    upper: float
    n: int
    n_eff: float
    """Effective sample size the interval was built for (n / VIF)."""
    lag1: float
    """Lag-1 autocorrelation of the samples in send order (finite values), a diagnostic."""
    note: str = ""
    """Why the interval is unbounded, when dependence made it so."""

    @property
    def vif(self) -> float:
        return self.n / self.n_eff if self.n_eff > 0 else math.inf


def vif_rows(x: npt.ArrayLike, confidence: float) -> Array:
    """The (widened) VIF of each row, >= 1; NaN for a constant row (see the module docstring)."""
    a = np.asarray(x, dtype=np.float64)
    n = a.shape[-1]
    d = a - a.mean(axis=-1, keepdims=True)
    g0 = np.mean(d * d, axis=-1)
    lrv, bandwidth = long_run_variance_with_bandwidth(a, bandwidth_factor=2.0)
    return _widen(lrv, g0, bandwidth, n, confidence)


def _widen(lrv: Array, g0: Array, bandwidth: Array, n: int, confidence: float) -> Array:
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    nu = 3 * n / (2 * np.maximum(bandwidth, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = lrv / g0
        # Widened only where the series shows positive dependence: on independent or negatively
        # correlated data the classic interval stands (a short run would otherwise pay the
        # small-sample t factor for dependence it does not have).
        widened = raw * (scipy_stats.t.ppf(0.5 + confidence / 2, nu) / z) ** 2
        vif = np.where(raw > 1.0, np.maximum(widened, 1.0), 1.0)
    return np.where(g0 > 0, vif, np.nan)


def quantile_bounds(
    x: npt.ArrayLike,
    q: float,
    confidence: float,
    threshold: float | None = None,
    vif: npt.ArrayLike | None = None,
) -> tuple[Array, Array, Array, Array]:
    """(lower, estimate, upper, n_eff) per row of ``x`` (runs x requests, send order, +inf for
    failed requests); ``vif`` overrides the per-row estimate (grouped samples)."""
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    runs, n = a.shape
    xs = np.sort(a, axis=-1)
    est = _linear_quantile(xs, q)
    if vif is None:
        tail_q = max(0.5, 1 - max(1 - q, TAIL_EVENTS / n)) if q > 0.5 else q
        levels = [est, _linear_quantile(xs, tail_q)]
        per_level = [vif_rows(a > lv[:, None], confidence) for lv in levels]
        if threshold is not None:
            over = a > float(threshold)
            k = np.count_nonzero(over, axis=-1)
            # The threshold's indicator stands in for the quantile's were the quantile at the
            # threshold, with n(1-q) requests above it. Far from that (under a quarter as many
            # above or below), its few crossings are rare bursts that say nothing of the
            # clustering at the quantile, and a looser threshold was harder to PASS.
            near = (k >= n * (1 - q) * NEAR) & (n - k >= n * q * NEAR)
            per_level.append(np.where(near, vif_rows(over, confidence), np.nan))
        # fmax skips NaN (a level with no exceedances says nothing) without nanmax's warning.
        v = np.fmax.reduce(np.stack(per_level), axis=0) if n > 1 else np.ones(runs)
    else:
        v = np.broadcast_to(np.asarray(vif, dtype=np.float64), (runs,))
    v = np.where(np.isnan(v), 1.0, v)
    m = np.maximum(np.floor(n / v), 1).astype(np.int64)
    trusted = clustering_trusted(n, m)
    lower = np.full(runs, -np.inf)
    upper = np.full(runs, np.inf)
    for size in np.unique(m):
        l_rank, u_rank = _ranks(int(size), q, confidence)
        rows = m == size
        # Ranks for n_eff samples, as fractions of the run: the conservative side of each. An
        # untrusted clustering estimate leaves the upper side unbounded (a PASS of a latency
        # objective rests on it); the lower side stands (false FAILs stayed within the level in
        # simulation without the floor).
        if l_rank is not None:
            lower[rows] = xs[rows, max(1, math.floor(l_rank * n / size)) - 1]
        if u_rank is not None:
            up = rows & trusted
            upper[up] = xs[up, min(n, math.ceil(u_rank * n / size)) - 1]
    # A tiny sample's interpolated estimate can fall outside its bounds (p99 of 2 values).
    return np.minimum(lower, est), est, np.maximum(upper, est), m.astype(np.float64)


def _linear_quantile(sorted_rows: Array, q: float) -> Array:
    """numpy's linear percentile on sorted rows, +inf kept as a value: interpolating towards a
    failed request gives +inf, sitting exactly on the finite value next to it does not."""
    n = sorted_rows.shape[-1]
    h = (n - 1) * q
    lo = min(math.floor(h), n - 1)
    t = h - lo
    a = sorted_rows[:, lo]
    if t == 0 or lo == n - 1:
        return np.asarray(a, dtype=np.float64)
    b = sorted_rows[:, lo + 1]
    with np.errstate(invalid="ignore"):
        mid = np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    return np.asarray(np.where(np.isinf(b), np.inf, mid), dtype=np.float64)


def clustering_trusted(n: float, n_eff: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether an estimate of the clustering can be trusted: at least ``MIN_EFFECTIVE``
    effective samples, or at least half the run (mild clustering)."""
    m = np.asarray(n_eff, dtype=np.float64)
    return np.asarray((m >= MIN_EFFECTIVE) | (m >= n / 2), dtype=np.bool_)


def _dependence_note(n: int, n_eff: float) -> str:
    if clustering_trusted(n, n_eff):
        return ""
    return (
        f"requests are so clustered that {n} of them count as {n_eff:.0f} independent ones "
        f"(fewer than {MIN_EFFECTIVE}): too few to trust the estimate of the clustering"
    )


def quantile_interval(
    values: Sequence[float],
    q: float,
    confidence: float,
    threshold: float | None = None,
    groups: Sequence[int] | None = None,
) -> Interval:
    """Interval for the q-quantile (q a fraction) of values in send order; ``groups`` names the
    request of each value when a request gives several (inter-token gaps)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0:
        return Interval(-math.inf, math.nan, math.inf, 0, 0.0, math.nan)
    vif = None if groups is None else _grouped_vif(x, groups, q, confidence, threshold)
    lo, est, hi, m = quantile_bounds(x, q, confidence, threshold, vif)
    n_eff = float(m[0])
    return Interval(
        float(lo[0]),
        float(est[0]),
        float(hi[0]),
        n,
        n_eff,
        lag1_autocorrelation(x),
        _dependence_note(n, n_eff),
    )


def _grouped_vif(
    x: Array, groups: Sequence[int], q: float, confidence: float, threshold: float | None
) -> float:
    """VIF of the exceedance indicator with each request's values summed into one observation:
    Var(p) = J * LRV(request sums) / N^2 against p (1 - p) / N for independent values."""
    est = float(np.quantile(np.where(np.isfinite(x), x, np.finfo(float).max), q))
    out = 1.0
    for level in (est, threshold):
        if level is None:
            continue
        flags = (x > level).astype(np.float64)
        p = flags.mean()
        if p in (0.0, 1.0):
            continue
        sums = grouped_sums(flags - p, groups)
        if sums.size < 2:
            continue
        lrv, bandwidth = long_run_variance_with_bandwidth(sums, bandwidth_factor=2.0)
        g0 = np.asarray([p * (1 - p) * x.size / sums.size])
        v = _widen(np.asarray([lrv[()]]), g0, np.asarray([bandwidth[()]]), sums.size, confidence)
        if np.isfinite(v[0]):
            out = max(out, float(v[0]))
    return out


def mean_interval(values: Sequence[float], confidence: float) -> Interval:
    """t interval for the mean with the HAC variance; a failed request (+inf) makes the mean
    +inf, and the interval [+inf, +inf] if any request failed."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0:
        return Interval(-math.inf, math.nan, math.inf, 0, 0.0, math.nan)
    mean = float(x.mean())
    if not math.isfinite(mean):
        return Interval(mean, mean, mean, n, float(n), math.nan)
    if n < 3:
        return Interval(-math.inf, mean, math.inf, n, float(n), math.nan)
    raw = float(vif_rows(x, confidence))
    vif = 1.0 if math.isnan(raw) else raw
    sd = float(x.std(ddof=1))
    n_eff = max(n / vif, 2.0)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n_eff - 1)) * sd / math.sqrt(n_eff)
    note = _dependence_note(n, n_eff)
    lo, hi = mean - half, (math.inf if note else mean + half)
    return Interval(lo, mean, hi, n, n_eff, lag1_autocorrelation(x), note)


def rate_interval(
    times_s: Sequence[float], amounts: Sequence[float], window_s: float, confidence: float
) -> Interval:
    """Interval for a rate (amount per second over ``window_s``): each amount counts at its
    time (seconds from the window's start); batch means over ``RATE_WINDOWS`` equal windows."""
    t = np.asarray(times_s, dtype=np.float64)
    w = np.asarray(amounts, dtype=np.float64)
    total = float(w.sum())
    estimate = total / window_s if window_s > 0 else 0.0
    windows = min(RATE_WINDOWS, t.size // 5)
    if window_s <= 0 or windows < 5:
        return Interval(-math.inf, estimate, math.inf, t.size, float(windows), math.nan)
    slot = np.minimum((t / window_s * windows).astype(np.int64), windows - 1)
    rates = np.bincount(slot, weights=w, minlength=windows) / (window_s / windows)
    sd = float(rates.std(ddof=1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, windows - 1)) * sd / math.sqrt(windows)
    return Interval(
        estimate - half,
        estimate,
        estimate + half,
        t.size,
        float(windows),
        lag1_autocorrelation(rates),
    )


def proportion_interval(flags: Sequence[bool], confidence: float) -> Interval:
    """Clopper-Pearson interval for a proportion at n_eff (flags in send order)."""
    x = np.asarray(flags, dtype=np.float64)
    n = x.size
    if n == 0:
        return Interval(0.0, 0.0, 1.0, 0, 0.0, math.nan)
    p = float(x.mean())
    raw = float(vif_rows(x, confidence)) if n > 2 else math.nan
    n_eff = n / (1.0 if math.isnan(raw) else raw)
    k = p * n_eff
    alpha = 1 - confidence
    lo = 0.0 if k <= 0 else float(scipy_stats.beta.ppf(alpha / 2, k, n_eff - k + 1))
    hi = 1.0 if k >= n_eff else float(scipy_stats.beta.ppf(1 - alpha / 2, k + 1, n_eff - k))
    return Interval(lo, p, hi, n, n_eff, lag1_autocorrelation(x))
