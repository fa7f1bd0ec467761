"""PASS / FAIL / INCONCLUSIVE per objective, from confidence intervals, and run validity.

A percentile objective is judged on a distribution-free interval for the quantile: PASS only if
the whole interval meets the threshold, FAIL only if the whole interval misses it. A run whose
client lagged its schedule or whose error rate is past its bound is INVALID, never PASS.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as scipy_stats

from slo.quantile import min_samples_to_bound_lower, min_samples_to_bound_upper
from slo.scenario import Objective, Validity
from slo.stats import RunSummary, quantile_interval, safe_percentile
from slo.units import Dimension, format_quantity


class Outcome(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    INVALID = "INVALID"


@dataclass(frozen=True)
class Verdict:
    objective: Objective
    outcome: Outcome
    estimate: float
    lower: float
    upper: float
    n: int
    confidence: float
    profile: str
    note: str = ""
    """Why it is INCONCLUSIVE or INVALID, in words."""

    @property
    def message(self) -> str:
        """E.g. ``ttft p99 = 812 ms > 800 ms (n=600, profile cpu-tiny; 95% CI 790-850 ms)``."""
        dim = self.objective.dimension
        est = format_quantity(self.estimate, dim)
        thr = format_quantity(self.objective.threshold, dim)
        meets = _meets(self.estimate, self.objective)
        op = (
            self.objective.comparison
            if meets
            else {"<=": ">", ">=": "<"}[self.objective.comparison]
        )
        ctx = f"n={self.n}, profile {self.profile}"
        if self.lower != self.upper:
            lo, hi = _fmt_bound(self.lower, dim), _fmt_bound(self.upper, dim)
            ctx += f"; {_pct(self.confidence)} CI {lo} to {hi}"
        text = f"{self.objective.name} = {est} {op} {thr} ({ctx})"
        if self.note:
            text += f": {self.outcome.value}, {self.note}"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "objective": self.objective.describe(),
            "metric": self.objective.metric,
            "statistic": self.objective.statistic,
            "request_class": self.objective.request_class,
            "comparison": self.objective.comparison,
            "threshold": self.objective.threshold,
            "outcome": self.outcome.value,
            "estimate": self.estimate,
            "ci_lower": self.lower,
            "ci_upper": self.upper,
            "n": self.n,
            "confidence": self.confidence,
            "profile": self.profile,
            "message": self.message,
        }


def _pct(level: float) -> str:
    """95% or 98.75%, never a rounded 99% for a per-look level."""
    return f"{level * 100:.4g}%"


def _fmt_bound(v: float, dim: Dimension) -> str:
    return "-inf" if v == -math.inf else format_quantity(v, dim)


def _meets(value: float, obj: Objective) -> bool:
    return value <= obj.threshold if obj.comparison == "<=" else value >= obj.threshold


def evaluate(
    objective: Objective, summary: RunSummary, *, confidence: float, profile: str
) -> Verdict:
    """Judge one objective on one run's samples."""
    lo, est, hi, n = _interval(objective, summary, confidence)
    if objective.comparison == "<=":
        passed, failed = hi <= objective.threshold, lo > objective.threshold
    else:
        passed, failed = lo >= objective.threshold, hi < objective.threshold
    note = ""
    if passed:
        outcome = Outcome.PASS
    elif failed:
        outcome = Outcome.FAIL
    else:
        outcome = Outcome.INCONCLUSIVE
        note = _inconclusive_note(objective, n, confidence)
    return Verdict(objective, outcome, est, lo, hi, n, confidence, profile, note)


def _interval(obj: Objective, s: RunSummary, confidence: float) -> tuple[float, float, float, int]:
    """(lower, estimate, upper, n) for the objective's statistic."""
    if obj.statistic is None:
        if obj.metric == "error_rate":
            k, n = s.n_errors, s.n
            if n == 0:
                return 0.0, 0.0, 1.0, 0
            ci = scipy_stats.binomtest(k, n).proportion_ci(confidence, method="exact")
            return float(ci.low), k / n, float(ci.high), n
        # Throughput is one number per run; its spread across runs is not measured here.
        v = s.aggregate(obj.metric)
        return v, v, v, s.n
    values = s.samples(obj.metric)
    n = len(values)
    if n == 0:
        return -math.inf, math.nan, math.inf, 0
    if obj.statistic == "max":
        m = max(values)
        return m, m, m, n
    if obj.statistic == "mean":
        mean = sum(values) / n
        if n < 2 or not math.isfinite(mean):
            return (mean if math.isinf(mean) else -math.inf), mean, math.inf, n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        return mean - half, mean, mean + half, n
    q = obj.quantile
    assert q is not None
    lo, est, hi = quantile_interval(values, q, confidence)
    return lo, est, hi, n


def _inconclusive_note(obj: Objective, n: int, confidence: float) -> str:
    q = obj.quantile
    if q is not None:
        need = (
            min_samples_to_bound_upper(q, confidence)
            if obj.comparison == "<="
            else min_samples_to_bound_lower(q, confidence)
        )
        if n < need:
            return (
                f"{obj.statistic} needs at least {need} samples to PASS at {_pct(confidence)} "
                f"confidence, got {n}: raise workload.requests"
            )
    return (
        f"the {_pct(confidence)} confidence interval straddles the threshold: "
        "more requests would decide it"
    )


def check_validity(
    summary: RunSummary, validity: Validity, schedule_lag: Sequence[float] | None = None
) -> list[str]:
    """Reasons the run cannot be judged (empty when it is valid).

    ``schedule_lag``: the samples to bound, when only some requests had a schedule (closed-loop
    requests are sent when a stream frees up, so their near-zero lag would hide a late client).
    """
    reasons = []
    if summary.n == 0:
        return ["no measured requests"]
    lags = summary.schedule_lag if schedule_lag is None else schedule_lag
    lag = safe_percentile(lags, 99) if lags else 0.0
    if lag > validity.schedule_lag_p99_s:
        reasons.append(
            f"schedule lag p99 = {format_quantity(lag, Dimension.TIME)} > "
            f"{format_quantity(validity.schedule_lag_p99_s, Dimension.TIME)}: the client, not the "
            "server, was the bottleneck (lower the rate, or give the client more CPU)"
        )
    if summary.error_rate > validity.error_rate:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.errors_by_kind.items()))
        reasons.append(
            f"error rate = {summary.error_rate:.2%} > {validity.error_rate:.2%} "
            f"({summary.n_errors} of {summary.n} requests failed: {kinds})"
        )
    return reasons
