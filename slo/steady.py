"""Is the run in a steady state? Warm-up truncation (MSER-5) and a drift check.

A verdict speaks for the server's steady state. Two things break that:
- A warm-up transient: the first requests meet an idle server (a queue that starts empty reads
  its p99 7-48% low in simulation) or a cold one (first compilations, caches). MSER-5 (White
  1997; Law, "Simulation Modeling and Analysis", 9.5) finds the truncation point that minimises
  the standard error of the remaining mean, on batch means of 5; it is applied to log TTFT in
  send order (the log keeps one slow request from looking like a transient). The point is
  searched in the first half only; a minimum at the edge of that half means the run never
  settled, and the run is not steady. Only a start faster than the rest is dropped (see
  ``mser5``): dropping a slow one would bias verdicts towards PASS.
- Drift: the server got slower (or faster) through the run. The two halves' mean logs (their
  geometric means) of the series an objective judges (TTFT, TPOT, ...) are compared with the
  variance inflated for serial correlation (slo/dependence.py). Drift is flagged when the
  difference is significant at 1% and the typical value changed by at least
  ``DRIFT_MIN_CHANGE`` (with thousands of requests a tiny, harmless difference is
  significant). A drifting run PASSes only if its interval, made worse by the change, still
  meets the threshold (slo/verdict.py). Each series is checked apart: decode can slow while
  prefill does not, and the simulations that show the level hold measure drift on the series
  they judge.

Both work on arrays of many runs at once (slo/simulate.py checks them), and on one run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from slo.dependence import variance_inflation

Array = npt.NDArray[np.float64]

MSER_BATCH = 5
DRIFT_LEVEL = 0.01
DRIFT_MIN_CHANGE = 0.10
"""Smallest relative change between the halves' medians that counts as drift."""
MIN_REQUESTS = 20
"""Below this many requests neither check says anything."""


@dataclass(frozen=True)
class SteadyState:
    """What the checks found on one run's series (send order)."""

    truncated: int
    """Leading requests dropped as warm-up (a multiple of 5)."""
    settled: bool
    """False when MSER's minimum lies at the end of its search range: no steady state found."""
    drift: float | None
    """Relative change of the typical value from the first half to the second, when it is drift."""
    metric: str = "ttft"
    """The series ``drift`` was measured on (warm-up is always found on TTFT)."""

    @property
    def steady(self) -> bool:
        return self.settled and self.drift is None

    @property
    def reason(self) -> str:
        """Why the run is not steady, in words (empty when it is)."""
        if not self.settled:
            return (
                "no steady state: the warm-up search (MSER-5) found the run still changing at "
                "its midpoint; run longer or add warm-up requests"
            )
        if self.drift is not None:
            return (
                f"drift: typical {self.metric} {'rose' if self.drift > 0 else 'fell'} "
                f"{abs(self.drift):.0%} from the first half of the run to the second"
            )
        return ""


def _finite_log(x: Array) -> Array:
    """log of each row, failed requests (+inf) set to the row's largest finite value."""
    finite = np.where(np.isfinite(x), x, np.nan)
    top = np.nanmax(finite, axis=-1, keepdims=True)
    filled = np.where(np.isfinite(x), x, top)
    return np.asarray(np.log(np.maximum(filled, 1e-12)), dtype=np.float64)


def mser5(x: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """(requests to truncate, settled) per row of ``x`` (runs x requests, send order)."""
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    runs, n = a.shape
    k = n // MSER_BATCH
    if n < MIN_REQUESTS or k < 4:
        return np.zeros(runs, dtype=np.int64), np.ones(runs, dtype=bool)
    z = _finite_log(a)[:, : k * MSER_BATCH].reshape(runs, k, MSER_BATCH).mean(axis=-1)
    # Sums over the tail z[d:], for every d at once (reverse cumulative sums).
    s1 = np.cumsum(z[:, ::-1], axis=-1)[:, ::-1]
    s2 = np.cumsum((z * z)[:, ::-1], axis=-1)[:, ::-1]
    m = np.arange(k, 0, -1, dtype=np.float64)  # k - d
    sse = s2 - s1 * s1 / m
    half = k // 2
    stat = sse[:, : half + 1] / m[: half + 1] ** 2
    d = np.argmin(stat, axis=-1)
    # Only a leading stretch faster than the rest is dropped (a queue that starts empty): on a
    # steady run MSER also "finds" a slow start by chance, and dropping it would bias every
    # verdict towards PASS. A slow start (a cold server) is kept: it can only make a PASS
    # harder, and the scenario's warmup_requests are the place for it.
    rows = np.arange(runs)
    head = np.cumsum(z, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        head_mean = np.where(d > 0, head[rows, np.maximum(d - 1, 0)] / np.maximum(d, 1), 0.0)
        tail_mean = s1[rows, d] / m[d]
    d = np.where(head_mean < tail_mean, d, 0)
    return d * MSER_BATCH, stat.argmin(axis=-1) < half


def drift(x: npt.ArrayLike) -> Array:
    """Relative change of the typical value (geometric mean) from the first half to the second
    per row, NaN where it is not significant drift (see the module docstring)."""
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    runs, n = a.shape
    out = np.full(runs, np.nan)
    if n < MIN_REQUESTS:
        return out
    h = n // 2
    logs = _finite_log(a)
    vif = np.nan_to_num(variance_inflation(logs), nan=1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = logs[:, h:].mean(axis=-1) - logs[:, :h].mean(axis=-1)
        se = np.sqrt(vif * logs.var(axis=-1, ddof=1) * (1 / h + 1 / (n - h)))
        z = np.abs(diff) / se
    change = np.expm1(diff)
    critical = NormalDist().inv_cdf(1 - DRIFT_LEVEL / 2)
    flagged = (z > critical) & (np.abs(change) >= DRIFT_MIN_CHANGE)
    out[flagged] = change[flagged]
    return out


def warmup(ttft: npt.ArrayLike) -> SteadyState:
    """The warm-up check on one run's TTFTs in send order (failed requests as +inf): what to
    drop and whether the run settled. Drift is left to ``with_drift``, on the series each
    objective judges."""
    cut, settled = mser5(np.asarray(ttft, dtype=np.float64))
    return SteadyState(truncated=int(cut[0]), settled=bool(settled[0]), drift=None)


def with_drift(state: SteadyState, series: npt.ArrayLike, metric: str) -> SteadyState:
    """``state`` with the drift of ``series``: one metric's values in send order after the
    warm-up truncation (failed requests as +inf)."""
    x = np.asarray(series, dtype=np.float64)
    change = drift(x)[0] if x.size else np.nan
    return replace(state, drift=None if np.isnan(change) else float(change), metric=metric)
