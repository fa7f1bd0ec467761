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
- Server start times (``start_models``, one value per start; slo/cold_start.py): log-normal, a
  fixed part plus an exponential delay, a gamma, and a log-normal with a 10% slow mode (a start
  that meets a busy disk or a compile); ``start_pairs`` draws two arms' starts in AB BA order.

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


# --- server starts (slo/cold_start.py) ---------------------------------------------------------


def shifted_exponential(base: float = 20.0, scale: float = 1.0) -> TrafficModel:
    """A fixed start-up plus an exponential delay: strongly skewed for its spread."""

    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        return base + rng.exponential(scale, (runs, n))

    return TrafficModel(
        f"{base:g} s + exponential {scale:g} s", draw, lambda q: base - scale * math.log1p(-q)
    )


def gamma_starts(shape: float = 2.0) -> TrafficModel:
    from scipy import stats as sps

    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        return rng.gamma(shape, 1.0, (runs, n))

    return TrafficModel(f"gamma shape {shape:g}", draw, lambda q: float(sps.gamma.ppf(q, shape)))


def slow_mode(share: float = 0.1, factor: float = 1.5, sigma: float = 0.05) -> TrafficModel:
    """Log-normal starts of which ``share`` take ``factor`` times longer."""
    from scipy import optimize

    def draw(rng: np.random.Generator, runs: int, n: int) -> Array:
        slow = rng.random((runs, n)) < share
        scale: Array = np.where(slow, factor, 1.0)
        return np.exp(sigma * rng.standard_normal((runs, n))) * scale

    def quantile(q: float) -> float:
        def cdf(x: float) -> float:
            f = NormalDist(0, sigma).cdf
            return (1 - share) * f(math.log(x)) + share * f(math.log(x / factor)) - q

        return float(optimize.brentq(cdf, 0.5, 2 * factor))

    return TrafficModel(f"log-normal, {share:.0%} of starts x{factor:g}", draw, quantile)


def start_models() -> tuple[TrafficModel, ...]:
    """The shapes the cold-start verdicts are checked on; the first is their model."""
    return (iid(0.1), shifted_exponential(), gamma_starts(), slow_mode())


def judge_start_runs(
    x: npt.ArrayLike, statistic: str, confidence: float, threshold: float = 1.0
) -> npt.NDArray[np.int64]:
    """The verdict of "startup STATISTIC <= threshold" for each run (row: its starts), as
    slo.cold_start.judge_cold reaches it."""
    from slo.cold_start import ColdStart, ColdStartRun, judge_cold
    from slo.objectives import Objective
    from slo.verdict import Outcome

    objective = Objective("startup", statistic, "<=", threshold)
    codes = {Outcome.PASS: PASS, Outcome.FAIL: FAIL}
    out = []
    for row in np.atleast_2d(np.asarray(x, dtype=np.float64)):
        run = ColdStartRun(tuple(ColdStart(float(v), ()) for v in row), requests=1)
        v = judge_cold(objective, run, confidence=confidence, profile="simulated")
        out.append(codes.get(v.outcome, INCONCLUSIVE))
    return np.asarray(out, dtype=np.int64)


def start_pairs(
    rng: np.random.Generator,
    runs: int,
    pairs: int,
    ratio: float,
    *,
    sigma: float = 0.1,
    drift_sd: float = 0.05,
    order: float = 0.0,
) -> tuple[Array, Array]:
    """(baseline, candidate) starts, runs x pairs: log-normal of log-sd ``sigma``, the candidate
    ``ratio`` times slower, the machine drifting between pairs (a random walk of step
    ``drift_sd`` in log terms, shared by a pair) and the first start of each pair ``order``
    slower in log terms (a pair runs AB, then BA, ...)."""
    walk = np.cumsum(rng.normal(0.0, drift_sd, (runs, pairs)), axis=1)
    a_first = np.arange(pairs) % 2 == 0
    a = walk + sigma * rng.standard_normal((runs, pairs)) + np.where(a_first, order, 0.0)
    b = walk + sigma * rng.standard_normal((runs, pairs)) + np.where(a_first, 0.0, order)
    return np.exp(a), np.exp(b + math.log(ratio))
