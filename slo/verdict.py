"""PASS / FAIL / INCONCLUSIVE / INVALID per objective, and what each one promises.

The promise (stated once here; the docs, JUnit and the sign-off quote ``CLAIM``): every objective
is judged on a two-sided interval at the profile's confidence (95%) that accounts for serial
correlation between requests (slo/intervals.py). PASS only if the whole interval meets the
threshold, FAIL only if the whole interval misses it. On independent requests each verdict is
wrong at most 2.5% of the time (one tail); on traffic like real serving traffic (clustered slow
requests, warm-up, drift) at most 5%, shown by simulation with known truth
(tests/unit/test_simulation.py, benchmarks/verdict_errors.py). A scenario PASSes only if every
objective PASSes, so a false scenario PASS is no likelier than the likeliest false objective
PASS; false FAILs add up over objectives (up to about 5% x objectives when all sit exactly on
their thresholds).

Around the interval:
- Warm-up: the leading requests MSER-5 marks as transient are dropped (slo/steady.py).
- Steadiness: a run that never settled cannot PASS, nor can a latency objective whose own
  series (TTFT, TPOT, ...) drifted unless its interval still meets the threshold at the drifted
  level: INCONCLUSIVE.
- Server-caused failure (errors, timeouts, a server that died) counts against the objectives:
  a failed request is an infinitely slow one, and past the scenario's error-rate bound every
  objective FAILs. INVALID is kept for what the client spoiled (a lagging schedule, requests the
  server rejected as malformed, a background load that ran dry) or could not measure (no
  requests).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scipy.stats import binom

from slo.intervals import (
    Interval,
    mean_interval,
    proportion_interval,
    quantile_interval,
    rate_interval,
)
from slo.planning import inconclusive_note
from slo.records import RequestRecord
from slo.scenario import Objective, TrafficClass, Validity
from slo.stats import RunSummary, safe_percentile, summarize
from slo.steady import SteadyState, warmup, with_drift
from slo.units import Dimension, format_quantity
from slo.vocabulary import POOLED_METRICS

CLAIM = (
    "Each objective is judged on a two-sided confidence interval that accounts for serial "
    "correlation between requests. A verdict is wrong at most 2.5% of the time on independent "
    "requests and at most 5% on clustered serving traffic (shown by simulation); a scenario "
    "PASSes only when every objective PASSes."
)


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
    """Why it is INCONCLUSIVE, INVALID or FAIL beyond the interval, in words."""
    n_eff: float | None = None
    """Effective sample size after the dependence handling (n when requests are independent)."""
    lag1: float | None = None
    """Lag-1 autocorrelation of the judged series in send order."""
    warmup_dropped: int = 0
    """Leading measured requests dropped as a warm-up transient (MSER-5)."""

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
        ctx = f"n={self.n}"
        if self.n_eff is not None and self.n_eff < 0.9 * self.n:
            # Shown where clustering matters (independent requests read about n).
            ctx += f", effective n={self.n_eff:.0f}"
        ctx += f", profile {self.profile}"
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
            "n_eff": self.n_eff,
            "lag1_autocorrelation": self.lag1,
            "warmup_dropped": self.warmup_dropped,
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
    """Judge one objective on one run's samples (in send order)."""
    iv = interval(objective, summary, confidence)
    lo, hi = iv.lower, iv.upper
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
        note = inconclusive_note(objective, summary, iv, confidence)
    return Verdict(
        objective,
        outcome,
        iv.estimate,
        lo,
        hi,
        iv.n,
        confidence,
        profile,
        note,
        n_eff=iv.n_eff,
        lag1=None if math.isnan(iv.lag1) else iv.lag1,
    )


def interval(obj: Objective, s: RunSummary, confidence: float) -> Interval:
    """The objective's statistic with its dependence-aware interval."""
    if obj.statistic is None:
        if obj.metric == "error_rate":
            return proportion_interval(s.failed, confidence)
        window = s.window_s
        if obj.metric == "output_throughput":
            return rate_interval(s.done_s, s.done_tokens, window, confidence)
        if obj.metric == "request_throughput":
            return rate_interval(s.done_s, [1.0] * len(s.done_s), window, confidence)
        if obj.metric == "goodput":
            s.aggregate("goodput")  # KeyError without per-request bounds
            return rate_interval(s.done_s, [float(g) for g in s.done_good], window, confidence)
        raise KeyError(obj.metric)
    values = s.samples(obj.metric)
    n = len(values)
    if obj.statistic == "max":
        # The run's own maximum: a statement about this run, certain either way.
        m = max(values) if values else math.nan
        return Interval(m, m, m, n, float(n), math.nan)
    if obj.statistic == "mean":
        return mean_interval(values, confidence)
    q = obj.quantile
    assert q is not None
    groups = s.itl_request if obj.metric in POOLED_METRICS else None
    iv = quantile_interval(values, q, confidence, threshold=obj.threshold, groups=groups)
    # The estimate as the reports show it (+inf kept as a value).
    return replace(iv, estimate=safe_percentile(values, 100 * q)) if values else iv


def judge(
    objective: Objective,
    records: Sequence[RequestRecord],
    *,
    confidence: float,
    profile: str,
    goodput_limits: Mapping[str, float] | None = None,
    invalid: Sequence[str] = (),
    server_failures: Sequence[str] = (),
) -> Verdict:
    """The whole verdict of one objective on a run's records: warm-up dropped, the interval,
    steadiness, then what the run's validity and the server's failures say."""
    mine = sorted(
        (
            r
            for r in records
            if not r.warmup
            and (objective.request_class is None or r.request_class == objective.request_class)
        ),
        key=lambda r: r.index,
    )
    state = steady_state(mine)
    kept = mine[state.truncated :]
    summary = summarize(kept, objective.request_class, goodput_limits)
    if objective.dimension is Dimension.TIME and objective.statistic is not None:
        # Each latency its own drift: TPOT can double through a run whose TTFT holds (decode
        # slowing), and the other way round. A rate's batch means over time windows already
        # carry the run's changes in their spread.
        state = with_drift(state, summary.samples(objective.metric), objective.metric)
    v = evaluate(objective, summary, confidence=confidence, profile=profile)
    v = replace(v, warmup_dropped=state.truncated)
    if invalid:
        return replace(v, outcome=Outcome.INVALID, note="run INVALID: " + "; ".join(invalid))
    if server_failures:
        return replace(
            v, outcome=Outcome.FAIL, note="the server failed: " + "; ".join(server_failures)
        )
    if v.outcome is not Outcome.PASS or state.steady:
        return v
    if not state.settled:
        return replace(v, outcome=Outcome.INCONCLUSIVE, note=f"not steady, {state.reason}")
    if state.drift is None:
        return v
    # Drift: the PASS must hold at the level the run drifted to, not only at its average: the
    # interval is scaled by the change between the halves, on the side that matters.
    scale = 1 + abs(state.drift)
    if _clears(objective, v.lower, v.upper, scale):
        return replace(v, note=f"{state.reason}; the PASS holds at that later level")
    return replace(
        v,
        outcome=Outcome.INCONCLUSIVE,
        note=f"not steady, {state.reason}: the interval does not clear the threshold at that level",
    )


def _clears(objective: Objective, lower: float, upper: float, scale: float) -> bool:
    """The interval, made ``scale`` times worse, still meets the threshold."""
    if objective.comparison == "<=":
        return upper * scale <= objective.threshold
    return lower / scale >= objective.threshold


def steady_state(records: Sequence[RequestRecord]) -> SteadyState:
    """Warm-up of the records' TTFT series (measured, in send order)."""
    series = [r.ttft_s if r.ok and r.ttft_s is not None else math.inf for r in records]
    return warmup(series)


_CLIENT_HTTP = frozenset(range(400, 500)) - {408, 429}
"""Rejections caused by the request itself (malformed, too long): the client's fault. 408 (the
server timed out) and 429 (it shed load) are the server's."""


def client_caused(error_kind: str) -> bool:
    """An error kind (``"HTTP 400"``, ``"Timeout"``, ...) the client, not the server, caused."""
    if error_kind.startswith("HTTP "):
        code = error_kind[5:].split()[0]
        return code.isdigit() and int(code) in _CLIENT_HTTP
    return False


LAG_SHARE = 0.01
"""``schedule_lag_p99``: at most this share of the requests may be sent later than the bound."""
LAG_LEVEL = 0.025
"""The run is INVALID when more requests than that share were late beyond chance: P(at least as
many late requests | exactly 1% late) under this level, an exact one-sided binomial test at the
level at which an objective FAILs. The sample p99 of a short run is its largest lags: with 80
requests an A/B arm, two stalls of the client's event loop on a busy 2-core machine (21 and 60
ms) made the run INVALID under the bare rule; 4 of 80 late requests still do."""


def check_validity(
    summary: RunSummary, validity: Validity, schedule_lag: Sequence[float] | None = None
) -> list[str]:
    """Reasons the client cannot vouch for the run (empty when it is valid): INVALID.

    ``schedule_lag``: the samples to bound, when only some requests had a schedule (closed-loop
    requests are sent when a stream frees up, so their near-zero lag would hide a late client).
    """
    reasons = []
    if summary.n == 0:
        return ["no measured requests"]
    lags = summary.schedule_lag if schedule_lag is None else schedule_lag
    bound = validity.schedule_lag_p99_s
    late = sum(1 for x in lags if x > bound)
    if late and binom.sf(late - 1, len(lags), LAG_SHARE) < LAG_LEVEL:
        lag, bound_text = safe_percentile(lags, 99), format_quantity(bound, Dimension.TIME)
        reasons.append(
            f"schedule lag p99 = {format_quantity(lag, Dimension.TIME)} > {bound_text}: {late} of "
            f"{len(lags)} requests were sent more than {bound_text} late, more than the "
            f"{LAG_SHARE:.0%} the bound allows beyond chance; the client, not the server, was "
            "the bottleneck (lower the rate, or give the client more CPU)"
        )
    rejected = {k: v for k, v in summary.errors_by_kind.items() if client_caused(k)}
    if rejected:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(rejected.items()))
        reasons.append(
            f"the server rejected {sum(rejected.values())} of {summary.n} requests as malformed "
            f"({kinds}): the requests, not the server, are at fault (check prompt lengths "
            "against max_model_len, and the request fields the server accepts)"
        )
    return reasons


def check_background(
    records: Sequence[RequestRecord], classes: Sequence[TrafficClass]
) -> list[str]:
    """Background classes that used up their requests (an upper bound) before the rest of the
    workload was done: the end of the run then measured a server without that load: INVALID."""
    reasons = []
    for c in classes:
        if not c.background:
            continue
        sent = sum(1 for r in records if r.request_class == c.name and not r.warmup)
        if sent >= c.requests:
            reasons.append(
                f"background class {c.name!r} used all {c.requests} of its requests before the "
                "rest of the workload was done, so the end of the run was measured without that "
                f"load (raise workload.classes.{c.name}.requests)"
            )
    return reasons


def check_server(summary: RunSummary, validity: Validity) -> list[str]:
    """Reasons the server failed the run as a whole (empty when it did not): FAIL."""
    served = {k: v for k, v in summary.errors_by_kind.items() if not client_caused(k)}
    n_failed = sum(served.values())
    rate = n_failed / summary.n if summary.n else 0.0
    if rate <= validity.error_rate:
        return []
    kinds = ", ".join(f"{k} x{v}" for k, v in sorted(served.items()))
    return [
        f"error rate = {rate:.2%} > {validity.error_rate:.2%} "
        f"({n_failed} of {summary.n} requests failed: {kinds})"
    ]
