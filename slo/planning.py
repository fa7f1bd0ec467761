"""How many requests a verdict needs: for an INCONCLUSIVE message and for planning a scenario.

For a quantile objective "METRIC pQ <= T" the verdict rests on the count of requests over T.
With n_eff effective samples that count behaves like Binomial(n_eff, p), p the true fraction
over T; PASS needs it at or under n_eff - u(n_eff), u the upper order-statistic rank of the
interval. The requests needed for a PASS with probability ``power`` are the smallest n_eff where
that holds, times the run's VIF (n / n_eff). FAIL is the mirror image.

Where p comes from:
- As measured (the INCONCLUSIVE message): the run's own fraction over the threshold.
- Under a headroom h (planning): "the true quantile sits at h x the threshold". The run's values
  are rescaled so their q-quantile is h x T (a scale family: the shape as measured), and p is
  the fraction of them over T. A tail too light to reach T leaves p = 0: then only the size at
  which the interval is bounded at all counts.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from scipy.stats import binom

from slo.intervals import MIN_EFFECTIVE, Interval, clustering_trusted
from slo.quantile import _ranks
from slo.scenario import Objective
from slo.stats import RunSummary
from slo.vocabulary import POOLED_METRICS

POWER = 0.9
LIMIT = 10_000_000


def _decided(m: int, q: float, confidence: float, p: float, below: bool) -> float:
    """Probability that ``m`` effective samples give an interval wholly below (or above) the
    threshold when a fraction ``p`` of requests is over it."""
    lo_rank, up_rank = _ranks(m, q, confidence)
    if below:
        if up_rank is None:
            return 0.0
        return float(binom.cdf(m - up_rank, m, p))  # over-threshold count small enough
    if lo_rank is None:
        return 0.0
    return float(binom.sf(m - lo_rank, m, p))  # over-threshold count large enough


@cache
def _effective_needed(q: float, confidence: float, p: float, below: bool, power: float) -> int:
    """Smallest n_eff whose interval lies wholly below (or above) the threshold with
    probability >= power."""

    def chance(m: int) -> float:
        return _decided(m, q, confidence, p, below)

    hi = 16
    while chance(hi) < power:
        hi *= 2
        if hi > LIMIT:
            return LIMIT
    lo = hi // 2
    while hi - lo > max(1, lo // 100):  # 1% resolution is plenty for a plan
        mid = (lo + hi) // 2
        if chance(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def requests_needed(
    q: float,
    confidence: float,
    p_over: float,
    vif: float,
    *,
    below: bool,
    power: float = POWER,
) -> int | None:
    """Requests for an interval wholly below the threshold (``below``; PASS of a "<=" objective)
    or wholly above it, with probability ``power``, when a fraction ``p_over`` of requests is
    over the threshold and the dependence inflates the variance by ``vif``; None when that
    fraction sits on the wrong side of 1 - q (the interval cannot go that way)."""
    target = 1 - q
    if (below and p_over >= target) or (not below and p_over <= target):
        return None
    m = _effective_needed(q, confidence, round(p_over, 6), below, power)
    if below and not clustering_trusted(m * max(vif, 1.0), m):
        # An untrusted clustering estimate leaves the upper side unbounded (slo/intervals.py):
        # no PASS below MIN_EFFECTIVE effective samples.
        m = MIN_EFFECTIVE
    return min(LIMIT, math.ceil(m * max(vif, 1.0)))


def pass_chance(
    q: float, confidence: float, p_over: float, n: int, n_eff: float, *, below: bool = True
) -> float:
    """Probability that a run of ``n`` requests with ``n_eff`` effective samples PASSes a pQ
    objective (interval wholly below the threshold; ``below=False``: wholly above) when a
    fraction ``p_over`` of requests is over the threshold. The forecast of a repeat: with a
    run's own ``p_over`` plugged in, it is an estimate, as uncertain as that fraction."""
    m = int(n_eff)
    if m < 1 or (below and not clustering_trusted(n, m)):
        return 0.0  # no upper bound without a trusted clustering estimate (slo/intervals.py)
    return _decided(m, q, confidence, p_over, below)


def requests_for_pass_at(
    objective: Objective, values: tuple[float, ...], vif: float, confidence: float, headroom: float
) -> int | None:
    """Requests a PASS needs with 90% probability if the true quantile were ``headroom`` x the
    threshold, the distribution's shape as in ``values`` (a run's samples)."""
    q = objective.quantile
    if q is None or objective.comparison != "<=" or not values:
        return None
    x = np.asarray(values, dtype=np.float64)
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return None
    current = float(np.quantile(np.where(np.isfinite(x), x, finite.max() * 10), q))
    if current <= 0:
        return None
    scaled = x * (headroom * objective.threshold / current)
    p_over = float(np.mean(scaled > objective.threshold))
    return requests_needed(q, confidence, p_over, vif, below=True)


def inconclusive_note(
    objective: Objective, summary: RunSummary, iv: Interval, confidence: float
) -> str:
    """Why the interval straddles the threshold (or is unbounded: ``iv.note``), and how many
    requests would decide it."""
    base = iv.note or (
        f"the {confidence * 100:.4g}% confidence interval straddles the threshold"
        + (f" (effective n={iv.n_eff:.0f} of {iv.n})" if iv.n_eff < iv.n else "")
    )
    q = objective.quantile
    if q is None or objective.metric in POOLED_METRICS or iv.n == 0:
        return base + ": more requests would decide it"
    values = np.asarray(summary.samples(objective.metric), dtype=np.float64)
    p_over = float(np.mean(values > objective.threshold))
    below = iv.estimate <= objective.threshold
    need = requests_needed(q, confidence, p_over, iv.vif, below=below)
    if need is None:
        return base + ": the estimate sits on the threshold; no run length decides it"
    way = "PASS" if below == (objective.comparison == "<=") else "FAIL"
    return (
        base + f": about {need} requests would decide it ({way}) with {POWER:.0%} probability "
        "if the run's distribution and clustering hold; raise workload.requests"
    )
