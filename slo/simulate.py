"""Latency series with a known true distribution, for checking the verdict rules.

A verdict rule's stated error rate is a claim about data like real serving traffic. These models
make such data in bulk (an array of runs x requests, requests in send order), each with a true
quantile known exactly or from a very long run, so a test or a benchmark can count how often a
rule says PASS where the truth is "just misses" and FAIL where it is "just meets".

- ``iid``: independent lognormal TTFTs (sigma 0.39: the realtime scenario's measured shape;
  sigma 1: a heavy tail).
- ``ar1``: a lognormal whose log follows an AR(1) process with coefficient rho: slow requests
  come in runs, as in a closed loop (the H200 batch run's lag-1 autocorrelation was 0.77).
- ``queue``: the sojourn time (wait + service) of an M/G/1 queue: Poisson arrivals, lognormal
  service, at a given utilisation; started in its steady state, or empty (``warmup``), which is
  how a real run starts: its first requests meet an idle server.
- ``drift``: any model with a linear rise of the scale through the run (a server slowing down).

Every model is scaled so that its true ``q``-quantile equals 1; a threshold of ``r`` then puts the
truth at 1/r of the threshold.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Generator = Callable[[np.random.Generator, int, int], Array]
"""(rng, runs, requests) -> array of shape (runs, requests), requests in send order."""


@dataclass(frozen=True)
class TrafficModel:
    name: str
    draw: Generator
    """Unscaled draws; ``sample`` divides by ``true_quantile(q)``."""
    quantile_of: Callable[[float], float]

    def sample(self, rng: np.random.Generator, runs: int, requests: int, q: float) -> Array:
        """Runs x requests, scaled so the true q-quantile is exactly 1."""
        return self.draw(rng, runs, requests) / self.quantile_of(q)


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def iid(sigma: float) -> TrafficModel:
    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        return np.exp(sigma * rng.standard_normal((runs, n)))

    return TrafficModel(f"iid lognormal sigma={sigma:g}", draw, lambda q: math.exp(sigma * _z(q)))


def _ar1_normal(rng: np.random.Generator, runs: int, n: int, rho: float) -> Array:
    """Stationary AR(1) with unit marginal variance."""
    eps = rng.standard_normal((runs, n)) * math.sqrt(1 - rho * rho)
    z = np.empty((runs, n))
    z[:, 0] = rng.standard_normal(runs)
    for t in range(1, n):
        z[:, t] = rho * z[:, t - 1] + eps[:, t]
    return z


def ar1(rho: float, sigma: float = 0.39) -> TrafficModel:
    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        return np.exp(sigma * _ar1_normal(rng, runs, n, rho))

    return TrafficModel(f"AR(1) lognormal rho={rho:g}", draw, lambda q: math.exp(sigma * _z(q)))


def _mg1(
    rng: np.random.Generator, runs: int, n: int, utilisation: float, sigma: float, burn: int
) -> Array:
    """Sojourn times of an M/G/1 queue (Lindley's recursion), mean service 1."""
    mu = -sigma * sigma / 2  # lognormal service with mean 1
    total = n + burn
    service = np.exp(mu + sigma * rng.standard_normal((runs, total)))
    gaps = rng.exponential(1 / utilisation, (runs, total))
    out = np.empty((runs, total))
    wait = np.zeros(runs)
    for t in range(total):
        out[:, t] = wait + service[:, t]
        if t + 1 < total:
            wait = np.maximum(0.0, wait + service[:, t] - gaps[:, t + 1])
    return out[:, burn:]


@functools.cache
def _queue_quantile(utilisation: float, sigma: float, q: float) -> float:
    # From one long stationary run (2 million requests, fixed seed): its sampling error is far
    # below the Monte Carlo error of any check that uses it.
    rng = np.random.default_rng(20261203)
    x = _mg1(rng, 400, 5000, utilisation, sigma, burn=5000)
    return float(np.quantile(x, q))


def queue(utilisation: float, sigma: float = 0.5, *, warmup: bool = False) -> TrafficModel:
    burn = 0 if warmup else 3000

    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        return _mg1(rng, runs, n, utilisation, sigma, burn)

    label = f"M/G/1 utilisation {utilisation:g}" + (", from empty" if warmup else "")
    return TrafficModel(label, draw, lambda q: _queue_quantile(utilisation, sigma, q))


def drift(model: TrafficModel, rise: float) -> TrafficModel:
    """The scale rises linearly by ``rise`` (0.3: +30%) from the first request to the last,
    centred so the run as a whole has the model's quantiles at mid-run."""

    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        ramp = 1 + rise * (np.arange(n) / max(n - 1, 1) - 0.5)
        return model.draw(rng, runs, n) * ramp

    return TrafficModel(f"{model.name}, drift +{rise:.0%}", draw, model.quantile_of)


def standard_models() -> tuple[TrafficModel, ...]:
    """The cases every verdict rule is checked on."""
    return (
        iid(0.39),
        iid(1.0),
        ar1(0.5),
        ar1(0.9),
        queue(0.3),
        queue(0.5),
        queue(0.8),
    )


PASS, FAIL, INCONCLUSIVE = 1, -1, 0
"""Outcome codes of ``judge_quantile_runs``."""


def judge_quantile_runs(
    x: npt.ArrayLike, q: float, confidence: float, threshold: float = 1.0
) -> npt.NDArray[np.int64]:
    """The verdict of "pQ <= threshold" for each run (``judge_quantile_runs_trusted``)."""
    return judge_quantile_runs_trusted(x, q, confidence, threshold)[0]


def judge_quantile_runs_trusted(
    x: npt.ArrayLike, q: float, confidence: float, threshold: float = 1.0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The verdict of "pQ <= threshold" for each run (row, send order), as slo.verdict.judge
    reaches it: MSER-5 warm-up truncation, the dependence-aware interval, and the steadiness
    check that turns a PASS of a drifting or unsettled run into INCONCLUSIVE. Vectorised: rows
    are grouped by their truncation point. tests/unit/test_simulation.py checks it agrees with
    ``judge`` run by run. Also whether each run's clustering estimate is trusted
    (``slo.intervals.clustering_trusted``), which an early look of the stop rule needs."""
    # Imported here: slo.simulate is a test aid; the verdict code does not depend on it.
    from slo.intervals import clustering_trusted, quantile_bounds
    from slo.steady import drift, mser5

    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    out = np.zeros(a.shape[0], dtype=np.int64)
    trusted = np.ones(a.shape[0], dtype=np.bool_)
    cut, settled = mser5(a)
    for c in np.unique(cut):
        rows = np.flatnonzero(cut == c)
        rest = a[rows, int(c) :]
        lo, _, hi, n_eff = quantile_bounds(rest, q, confidence, threshold)
        trusted[rows] = clustering_trusted(rest.shape[1], n_eff)
        # A drifting run PASSes only if the interval clears the threshold at the drifted level.
        scale = 1 + np.abs(np.nan_to_num(drift(rest), nan=0.0))
        passes = (hi <= threshold) & (hi * scale <= threshold) & settled[rows]
        out[rows] = np.where(lo > threshold, FAIL, np.where(passes, PASS, 0))
    return out, trusted


def judge_sequentially(
    x: npt.ArrayLike, q: float, looks: tuple[int, ...], look_confidence: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(verdict, requests used) per run under a stop rule's looks: the first look where the
    verdict is PASS or FAIL on a trusted clustering estimate, else the last look's verdict (as
    slo.sequential runs it)."""
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    runs = a.shape[0]
    verdict = np.zeros(runs, dtype=np.int64)
    used = np.full(runs, looks[-1], dtype=np.int64)
    open_ = np.ones(runs, dtype=bool)
    for n in looks:
        rows = np.flatnonzero(open_)
        if rows.size == 0:
            break
        v, trusted = judge_quantile_runs_trusted(a[rows, :n], q, look_confidence)
        verdict[rows] = v
        done = ((v != INCONCLUSIVE) & trusted) | (n == looks[-1])
        used[rows[done]] = n
        open_[rows[done]] = False
    return verdict, used
