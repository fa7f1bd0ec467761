"""Cold starts: the server's start-up and the first requests after it, one value per start.

A scenario with a ``[cold_start]`` table has its server started ``starts`` times before the
workload (fixtures/cold_start.py). Each start gives one value of each metric:

- ``startup``: seconds from the server process's start to its first healthy ``/health`` answer
  (polled every 0.5 s, so a value is up to 0.5 s late);
- ``ttft_cold``: the slowest TTFT of the first ``requests`` requests after it was ready, sent one
  at a time before any warm-up; a failed one is infinitely slow.

The starts are the samples, assumed independent and alike. Verdicts are two-sided at the
profile's confidence, each side wrong at most (1 - confidence) / 2 of the time:

- ``p50``, ``p90``, ``p95``, ``p99``: distribution-free order statistics (slo/quantile.py), which
  hold for any shape of start times. They need enough starts to bound a side: 6 for a median at
  95%, 36 for a PASS of a p90 (fewer can still FAIL it, when even the fastest starts miss).
- A median of 2 to 5 starts, too few for order statistics: a t interval of the log values,
  ``exp(mean(log x) +- t(n-1) sd(log x) / sqrt(n))``, exact when the starts are log-normal; with
  the threshold on the true median of skewed shapes (a fixed part plus an exponential delay, a
  gamma, a 10% slow mode) it was wrong at most 5% of the time (benchmarks/cold_start_errors.py).
  It is not used past 5 starts: it estimates the geometric mean, which on a skewed shape is not
  the median, and with many starts its narrow interval misses the median (40 starts: up to 42%
  wrong FAILs). No such model is used for a p90: a log-normal fit to 5 starts with a 10% slow
  mode said PASS in about half the runs whose true p90 sat on the threshold. One start gives no
  interval: INCONCLUSIVE.
- ``max``: this run's slowest start, a statement about these starts (no interval).

A start whose cold request failed makes every ``ttft_cold`` objective FAIL: the server failed a
request right after it started. A server the suite did not start (``--slo-endpoint``) has no
start to time: its cold-start objectives are INVALID, with that reason.

Between releases (fixtures/ab.py) the starts alternate AB BA AB ...; start pair j gives
``d_j = log(candidate_j / baseline_j)`` and the ratio's interval is the t interval of their mean
(slo/compare.py's block rule): the ratio of the arms' geometric means, the ratio of medians when
the starts are log-normal.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from slo.compare import Comparison, compare_blocks
from slo.intervals import Interval
from slo.objectives import Objective
from slo.quantile import min_samples_to_bound_upper, quantile_ci
from slo.records import RequestRecord, from_row, to_row
from slo.verdict import Outcome, Verdict

COLD_START_CLAIM = (
    "Each cold-start objective is judged over the run's server starts, one value each: a "
    "percentile on distribution-free order statistics (wrong at most 2.5% of the time whatever "
    "the shape of the start times), except a median of 2 to 5 starts, on a t interval of the log "
    "values (exact for log-normal starts, wrong at most 5% on the skewed shapes simulated); a max "
    "on the run's own starts."
)


@dataclass(frozen=True)
class ColdStart:
    """One server start and the first requests it served."""

    ready_s: float
    """Server process start -> first healthy /health answer."""
    requests: tuple[RequestRecord, ...]
    """The first requests after it was ready, in send order (one at a time)."""
    pid: int | None = None
    log: str = ""
    """The server's log of this start."""

    @property
    def ttft_cold_s(self) -> float:
        """The slowest TTFT of the cold requests (+inf if one failed; NaN if none was sent)."""
        if not self.requests:
            return math.nan
        return max(r.ttft_s if r.ok and r.ttft_s is not None else math.inf for r in self.requests)

    def value(self, metric: str) -> float:
        if metric == "startup":
            return self.ready_s
        if metric == "ttft_cold":
            return self.ttft_cold_s
        raise KeyError(metric)


@dataclass(frozen=True)
class ColdStartRun:
    """A run's cold starts, or why it has none."""

    starts: tuple[ColdStart, ...]
    requests: int
    """Cold requests per start."""
    unmeasured: str = ""
    """Why there are no starts (a server the suite did not start); empty when measured."""

    def samples(self, metric: str) -> tuple[float, ...]:
        return tuple(s.value(metric) for s in self.starts)

    def describe(self) -> str:
        if self.unmeasured:
            return f"no cold starts: {self.unmeasured}"
        up = ", ".join(f"{s.ready_s:.1f}" for s in self.starts)
        cold = ", ".join(f"{s.ttft_cold_s * 1000:.0f}" for s in self.starts)
        return (
            f"{len(self.starts)} starts: startup {up} s; ttft_cold (slowest of the first "
            f"{self.requests}) {cold} ms"
        )

    def properties(self) -> dict[str, object]:
        """JUnit properties (``slo.`` is prefixed by the caller)."""
        if self.unmeasured:
            return {"cold_starts": 0, "cold_starts.unmeasured": self.unmeasured}
        return {
            "cold_starts": len(self.starts),
            "cold_starts.requests": self.requests,
            "cold_starts.startup_s": " ".join(f"{v:.3f}" for v in self.samples("startup")),
            "cold_starts.ttft_cold_s": " ".join(f"{v:.4f}" for v in self.samples("ttft_cold")),
        }

    def as_dict(self) -> dict[str, Any]:
        """``summary.json``'s ``cold_starts``: each start's figures and its requests' rows."""

        def start(s: ColdStart) -> dict[str, Any]:
            t0 = min((r.intended_send_ns for r in s.requests), default=0)
            return {
                "ready_s": s.ready_s,
                "ttft_cold_s": s.ttft_cold_s,
                "pid": s.pid,
                "log": s.log,
                "requests": [to_row(r, t0) for r in s.requests],
            }

        return {
            "requests": self.requests,
            "unmeasured": self.unmeasured,
            "starts": [start(s) for s in self.starts],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ColdStartRun:
        """Back from ``as_dict``; ``KeyError``/``TypeError``/``ValueError`` on a damaged one."""
        starts = []
        for s in raw["starts"]:
            pid = s.get("pid")
            starts.append(
                ColdStart(
                    ready_s=float(s["ready_s"]),
                    requests=tuple(from_row(r) for r in s["requests"]),
                    pid=None if pid is None else int(pid),
                    log=str(s.get("log") or ""),
                )
            )
        return cls(tuple(starts), int(raw["requests"]), str(raw.get("unmeasured") or ""))


def start_interval(values: Sequence[float], statistic: str, confidence: float) -> Interval:
    """The statistic over the starts with its interval (see the module docstring); the
    interval's note says why a side is unbounded."""
    x = [float(v) for v in values]
    n = len(x)
    if n == 0:
        return Interval(-math.inf, math.nan, math.inf, 0, 0.0, math.nan, "no starts")
    if statistic == "max":
        m = max(x)
        return Interval(m, m, m, n, float(n), math.nan)
    q = int(statistic[1:]) / 100
    if _log_t(statistic, n, confidence):
        return log_t_interval(x, confidence)
    ci = quantile_ci(x, q, confidence)
    note = ""
    if not ci.upper_bounded:
        need = min_samples_to_bound_upper(q, confidence)
        note = (
            f"a PASS of a {statistic} over starts needs {need} starts at "
            f"{confidence:.0%} (no model of the slow starts is assumed), this run had {n}"
        )
    return Interval(ci.lower, ci.estimate, ci.upper, n, float(n), math.nan, note)


def _log_t(statistic: str, n: int, confidence: float) -> bool:
    """A median of too few starts for order statistics (fewer than 6 at 95%)."""
    return statistic == "p50" and n < min_samples_to_bound_upper(0.5, confidence)


def method(statistic: str, n: int, confidence: float) -> str:
    """How ``start_interval`` judged this statistic over n starts, in words."""
    if statistic == "max":
        return "the run's own starts"
    if _log_t(statistic, n, confidence):
        return "t interval of the log values, log-normal starts assumed"
    return "order statistics"


def log_t_interval(values: Sequence[float], confidence: float) -> Interval:
    """The median of log-normal starts: the t interval of their mean log value, exponentiated.
    Unbounded with one start, or with values all equal (no spread to scale it by)."""
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if not (np.isfinite(x).all() and (x > 0).all()):
        est = float(np.median(x))
        return Interval(-math.inf, est, math.inf, n, float(n), math.nan, "a value is not > 0")
    logs = np.log(x)
    centre = float(logs.mean())
    if n < 2 or float(logs.std(ddof=1)) == 0:
        why = (
            "one start gives no spread to build an interval on: set [cold_start] starts = 3 or "
            "more, or judge a max (this run's starts only)"
            if n < 2
            else "the starts gave identical values, so there is no spread to build an interval on"
        )
        return Interval(-math.inf, math.exp(centre), math.inf, n, float(n), math.nan, why)
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * float(logs.std(ddof=1)) / math.sqrt(n)
    return Interval(
        math.exp(centre - half), math.exp(centre), math.exp(centre + half), n, float(n), math.nan
    )


def judge_cold(
    objective: Objective, run: ColdStartRun | None, *, confidence: float, profile: str
) -> Verdict:
    """One cold-start objective's verdict on the run's starts."""
    assert objective.statistic is not None
    if run is None or run.unmeasured or not run.starts:
        why = run.unmeasured if run is not None and run.unmeasured else "no cold starts measured"
        return Verdict(
            objective, Outcome.INVALID, math.nan, -math.inf, math.inf, 0, confidence, profile,
            f"cold starts not measured: {why}",
        )  # fmt: skip
    values = run.samples(objective.metric)
    iv = start_interval(values, objective.statistic, confidence)
    n = len(values)
    how = method(objective.statistic, n, confidence)
    note = f"over {n} server start{'s' if n != 1 else ''} ({how})"
    failed = [i + 1 for i, v in enumerate(values) if not math.isfinite(v)]
    if failed:
        outcome = Outcome.FAIL
        note += (
            f"; start {', '.join(map(str, failed))} failed a cold request: the server failed a "
            "request right after it started"
        )
    elif iv.upper <= objective.threshold:
        outcome = Outcome.PASS
    elif iv.lower > objective.threshold:
        outcome = Outcome.FAIL
    else:
        outcome = Outcome.INCONCLUSIVE
        note += f": {iv.note}" if iv.note else ": the interval straddles the threshold"
    return Verdict(
        objective, outcome, iv.estimate, iv.lower, iv.upper, n, confidence, profile, note,
        n_eff=float(n),
    )  # fmt: skip


def compare_starts(
    name: str,
    baseline: ColdStartRun,
    candidate: ColdStartRun,
    metric: str,
    *,
    margin: float,
    confidence: float,
) -> Comparison:
    """The candidate's starts against the baseline's, pair by pair (start j of each arm)."""
    k = min(len(baseline.starts), len(candidate.starts))
    a, b = baseline.samples(metric)[:k], candidate.samples(metric)[:k]
    c = compare_blocks(name, a, b, lower_is_better=True, margin=margin, confidence=confidence)
    method = f"{k} interleaved start pairs, t interval of the log ratios"
    note = c.note
    for arm, run in (("baseline", baseline), ("candidate", candidate)):
        if run.unmeasured:
            note = f"the {arm} has no cold starts: {run.unmeasured}"
    return dataclasses.replace(c, method=method, note=note)
