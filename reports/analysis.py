"""Numbers the sign-off report shows, computed from a run folder's records and histograms.

Everything here is plain data (frozen dataclasses); signoff.py only lays it out. Latency
percentiles reuse the suite's own statistics (slo.stats, slo.quantile), so the report and the
verdicts can never disagree on how a p99 is computed. vLLM's own figures have modules of their
own: ttft_decomposition.py (its histograms against client TTFT) and server_series.py (its
scheduler over time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reports.run_folder import RunFolder, ScenarioRun, VerdictRow
from slo.intervals import quantile_interval
from slo.records import RequestRecord
from slo.stats import RunSummary, safe_percentile, summarize
from slo.verdict import Outcome
from slo.vocabulary import PER_REQUEST_METRICS, POOLED_METRICS

PERCENTILES = (50, 90, 99)
METRICS = PER_REQUEST_METRICS
# Pooled inter-token gaps of one request are correlated, so an order-statistics interval that
# assumes independent samples would be too narrow: ITL gets no interval.
NO_INTERVAL = POOLED_METRICS


@dataclass(frozen=True)
class Interval:
    estimate: float
    lower: float
    upper: float


@dataclass(frozen=True)
class MetricRow:
    metric: str
    n: int
    failed: int
    mean: float
    percentiles: tuple[tuple[int, Interval], ...]


@dataclass(frozen=True)
class ClassStats:
    """Percentiles of one request class (or all classes: ``request_class`` None)."""

    request_class: str | None
    requests: int
    errors: int
    errors_by_kind: tuple[tuple[str, int], ...]
    request_throughput: float
    output_throughput: float
    rows: tuple[MetricRow, ...]


def _interval(values: Sequence[float], q: float, confidence: float, with_ci: bool) -> Interval:
    if not with_ci:
        return Interval(safe_percentile(values, q * 100), math.nan, math.nan)
    iv = quantile_interval(values, q, confidence)  # as the verdicts do (serial correlation)
    return Interval(safe_percentile(values, q * 100), iv.lower, iv.upper)


def class_stats(summary: RunSummary, confidence: float) -> ClassStats:
    rows = []
    for metric in METRICS:
        values = summary.samples(metric)
        if not values:
            continue
        finite = [v for v in values if math.isfinite(v)]
        mean = sum(values) / len(values) if len(finite) == len(values) else math.inf
        pcts = tuple(
            (p, _interval(values, p / 100, confidence, metric not in NO_INTERVAL))
            for p in PERCENTILES
        )
        rows.append(MetricRow(metric, len(values), len(values) - len(finite), mean, pcts))
    return ClassStats(
        request_class=summary.request_class,
        requests=summary.n,
        errors=summary.n_errors,
        errors_by_kind=tuple(sorted(summary.errors_by_kind.items())),
        request_throughput=summary.request_throughput,
        output_throughput=summary.output_throughput,
        rows=tuple(rows),
    )


def scenario_stats(scenario: ScenarioRun, confidence: float) -> tuple[ClassStats, ...]:
    """All requests, then each class when there are several."""
    out = [class_stats(summarize(scenario.records), confidence)]
    if len(scenario.classes) > 1:
        out += [
            class_stats(summarize(scenario.records, request_class=c), confidence)
            for c in scenario.classes
        ]
    return tuple(out)


@dataclass(frozen=True)
class Cdf:
    request_class: str
    xs: tuple[float, ...]
    """TTFT in seconds, ascending (subsampled for large runs)."""
    ys: tuple[float, ...]
    """Fraction of the class's measured requests with TTFT <= x; failed requests never
    arrive, so a class with failures tops out below 1."""
    n: int
    failed: int


def ttft_cdfs(scenario: ScenarioRun, max_points: int = 800) -> tuple[Cdf, ...]:
    out = []
    for cls in scenario.classes:
        measured = [r for r in scenario.records if not r.warmup and r.request_class == cls]
        values = sorted(r.ttft_s for r in measured if r.ok and r.ttft_s is not None)
        n = len(measured)
        if not values:
            continue
        step = max(1, math.ceil(len(values) / max_points))
        idx = list(range(0, len(values), step))
        if idx[-1] != len(values) - 1:
            idx.append(len(values) - 1)
        out.append(
            Cdf(
                cls,
                tuple(values[i] for i in idx),
                tuple((i + 1) / n for i in idx),
                n,
                n - len(values),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class TimelinePoint:
    t_s: float
    """Send time, seconds since the scenario's first intended send."""
    ttft_s: float | None
    """None for a failed request."""
    request_class: str
    warmup: bool


@dataclass(frozen=True)
class Timeline:
    points: tuple[TimelinePoint, ...]
    every: int
    """1 when every request is drawn, k when every k-th is (large runs)."""
    inflight_t: tuple[float, ...]
    inflight_max: tuple[int, ...]
    """Most requests in flight within each time bin (a step per bin)."""
    peak: int
    duration_s: float
    max_num_seqs: int | None


def _end_ns(r: RequestRecord) -> int:
    # The load runner sets end_ns for failures too (when the client gave up); a row without
    # one ends, as far as the record can tell, at its last recorded moment.
    times = [t for t in (r.end_ns, r.first_text_ns, *r.chunk_ns[-1:]) if t is not None]
    return max([r.sent_ns, *times])


def timeline(scenario: ScenarioRun, bins: int = 600, max_points: int = 4000) -> Timeline:
    """TTFT at each send time and requests in flight (sent, not finished) over time.

    Warm-up requests are drawn too: they load the server like any other request.
    """
    recs = sorted(scenario.records, key=lambda r: r.sent_ns)
    if not recs:
        return Timeline((), 1, (), (), 0, 0.0, None)
    t0 = min(r.intended_send_ns for r in recs)
    every = max(1, math.ceil(len(recs) / max_points))
    points = tuple(
        TimelinePoint(
            (r.sent_ns - t0) / 1e9,
            r.ttft_s if r.ok else None,
            r.request_class,
            r.warmup,
        )
        for r in recs[::every]
    )
    events = sorted(
        [(r.sent_ns - t0, 1) for r in recs] + [(_end_ns(r) - t0, -1) for r in recs],
        # At equal times, finish before start: a back-to-back pair is never counted twice.
        key=lambda e: (e[0], e[1]),
    )
    end = max(e[0] for e in events)
    width = max(end / bins, 1.0)
    peaks = []
    level = i = 0
    for b in range(bins):
        # The level carried into the bin, then every level the bin's events reach.
        peak = level
        while i < len(events) and (events[i][0] < (b + 1) * width or b == bins - 1):
            level += events[i][1]
            peak = max(peak, level)
            i += 1
        peaks.append(peak)
    max_seqs = scenario.engine_args.get("max_num_seqs")
    return Timeline(
        points,
        every,
        tuple(b * width / 1e9 for b in range(bins)),
        tuple(peaks),
        max(peaks),
        end / 1e9,
        int(max_seqs) if isinstance(max_seqs, int) else None,
    )


@dataclass(frozen=True)
class ComparisonCell:
    verdict: VerdictRow | None
    change: float | None
    """Relative change of the candidate's estimate against this run's (None if not
    comparable)."""
    worse: bool | None
    """Whether the candidate is worse than this run on this objective's direction."""
    overlap: bool | None = None
    """Whether the two runs' confidence intervals overlap: the change may then be noise.
    None where an estimate has no interval (throughput is one number per run)."""

    @property
    def verdict_word(self) -> str:
        if self.worse is None:
            return ""
        if self.overlap:
            return "within the intervals"
        return "worse" if self.worse else "better"


@dataclass(frozen=True)
class ComparisonRow:
    scenario: str
    objective: str
    candidate: VerdictRow | None
    baselines: tuple[ComparisonCell, ...]


def relative_change(candidate: float, baseline: float) -> float | None:
    if not (math.isfinite(candidate) and math.isfinite(baseline)) or baseline == 0:
        return None
    return (candidate - baseline) / abs(baseline)


def compare(candidate: RunFolder, baselines: Sequence[RunFolder]) -> tuple[ComparisonRow, ...]:
    """Each objective's estimate per run, matched on scenario and objective (not threshold)."""
    keys: list[tuple[str, str]] = []
    for run in (candidate, *baselines):
        for v in run.verdicts:
            if v.key not in keys:
                keys.append(v.key)
    rows = []
    for key in keys:
        cand = next((v for v in candidate.verdicts if v.key == key), None)
        cells = []
        for base in baselines:
            b = next((v for v in base.verdicts if v.key == key), None)
            change = worse = overlap = None
            if cand is not None and b is not None:
                change = relative_change(cand.estimate, b.estimate)
                if change is not None and change != 0:
                    # Lower is better for "<=" objectives (latency), higher for ">=" ones.
                    worse = change > 0 if cand.comparison == "<=" else change < 0
                if cand.ci_lower != cand.ci_upper and b.ci_lower != b.ci_upper:
                    overlap = cand.ci_lower <= b.ci_upper and b.ci_lower <= cand.ci_upper
            cells.append(ComparisonCell(b, change, worse, overlap))
        rows.append(ComparisonRow(key[0], key[1], cand, tuple(cells)))
    return tuple(rows)


def overall(run: RunFolder) -> tuple[str, str]:
    """The run's result for sign-off and why: PASS only if every objective passed and no other
    test failed; an undecided objective counts against it (INCONCLUSIVE fails in sign-off)."""
    if not run.verdicts:
        return "NO VERDICTS", "the run judged no objective (see the tests below, if any)"
    counts = {o: sum(v.outcome is o for v in run.verdicts) for o in Outcome}
    total = len(run.verdicts)
    broken = [t for t in run.other_tests if t.status in ("failed", "error")]
    also = f"; {len(broken)} other test(s) failed" if broken else ""
    for o in (Outcome.INVALID, Outcome.FAIL, Outcome.INCONCLUSIVE):
        if counts[o]:
            return o.value, f"{counts[o]} of {total} objectives {o.value}{also}"
    if broken:
        return "FAIL", f"all {total} objectives PASS, but {len(broken)} other test(s) failed"
    return "PASS", f"all {total} objectives PASS"


def confidence_of(run: RunFolder) -> float:
    return run.verdicts[0].confidence if run.verdicts else 0.95
