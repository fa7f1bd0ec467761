"""Numbers the sign-off report shows, computed from a run folder's records and histograms.

Everything here is plain data (frozen dataclasses); signoff.py only lays it out. Latency
percentiles reuse the suite's own statistics (slo.stats, slo.quantile), so the report and the
verdicts can never disagree on how a p99 is computed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from reports.run_folder import RunFolder, ScenarioRun, ServerHistogram, VerdictRow
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


TTFT_HIST = "vllm:time_to_first_token_seconds"
QUEUE_HIST = "vllm:request_queue_time_seconds"
PREFILL_HIST = "vllm:request_prefill_time_seconds"


@dataclass(frozen=True)
class Component:
    name: str
    seconds: float
    source: str


@dataclass(frozen=True)
class TtftComparison:
    """Client TTFT against vLLM's own ``time_to_first_token`` for the same requests."""

    statistic: str
    client: float
    server: float | None
    server_bucket: tuple[float, float] | None
    """The histogram bucket the server quantile lies in (its resolution)."""

    @property
    def difference(self) -> tuple[float, float] | None:
        """client - vLLM as the bounds the bucket allows (equal for a mean); None: no figure
        (not recorded, or the bucket is so wide that the difference could be 0)."""
        if self.server is None:
            return None
        if self.server_bucket is None:
            return self.client - self.server, self.client - self.server
        low, high = self.client - self.server_bucket[1], self.client - self.server_bucket[0]
        return None if low <= 0 <= high or not math.isfinite(low) else (low, high)


@dataclass(frozen=True)
class Decomposition:
    client_mean: float
    client_n: int
    server_count: int
    components: tuple[Component, ...]
    """Stacked, they add up to the client's mean TTFT (the last is the remainder)."""
    comparisons: tuple[TtftComparison, ...]
    notes: tuple[str, ...]


def _mean(h: ServerHistogram | None) -> float | None:
    return None if h is None else h.mean


def client_ttft(records: Sequence[RequestRecord]) -> tuple[list[float], list[str]]:
    """The client's TTFT like-for-like with vLLM's histogram (sorted), and a note where it is
    not: vLLM times its first output token, whether or not it decodes to text, and sends a
    chunk for it (the chat role chunk comes with it), so the first chunk is the peer of its
    figure (``ttft_chunk``, docs/metrics.md). Runs stored before the first chunk was kept
    fall back to ``ttft`` (first generated text), which can run later."""
    measured = [r for r in records if not r.warmup and r.ok]
    chunk = [r.ttft_chunk_s for r in measured]
    if measured and all(v is not None for v in chunk):
        return sorted(v for v in chunk if v is not None), []
    text = sorted(r.ttft_s for r in measured if r.ttft_s is not None)
    note = (
        "client TTFT is to the first chunk with text (this run did not record the first "
        "chunk): it can run above vLLM's, which stops at the first token even if it is no text"
    )
    return text, [note] if text else []


def decomposition(scenario: ScenarioRun) -> Decomposition | None:
    """Mean client TTFT split into vLLM's queue and prefill time and the rest, from the
    histograms vLLM kept over the measured requests. None when the run has no histograms."""
    m = scenario.server_metrics
    ttft_h, queue_h, prefill_h = m.get(TTFT_HIST), m.get(QUEUE_HIST), m.get(PREFILL_HIST)
    if ttft_h is None and (queue_h is None or prefill_h is None):
        return None
    client, notes = client_ttft(scenario.records)
    if not client:
        return None
    client_mean = sum(client) / len(client)
    comps: list[Component] = []
    queue, prefill, server_ttft = _mean(queue_h), _mean(prefill_h), _mean(ttft_h)
    accounted = 0.0
    if queue is not None and prefill is not None:
        comps += [
            Component("queue (vLLM)", queue, QUEUE_HIST),
            Component("prefill (vLLM)", prefill, PREFILL_HIST),
        ]
        accounted = queue + prefill
        if server_ttft is not None:
            comps.append(
                Component(
                    "rest of server TTFT (tokenize, scheduling, output)",
                    server_ttft - accounted,
                    f"{TTFT_HIST} - queue - prefill",
                )
            )
            accounted = server_ttft
    elif server_ttft is not None:
        comps.append(Component("server TTFT (vLLM)", server_ttft, TTFT_HIST))
        accounted = server_ttft
        notes.append("queue and prefill histograms not recorded: server TTFT shown whole")
    # vLLM's histograms start when the engine sees a request: time before that (a stalled API
    # server, the network, the client) is not measured by anyone, so it is not named as if it were.
    rest = client_mean - accounted
    comps.append(
        Component(
            "not attributed (outside vLLM's engine: API server, network, client)",
            rest,
            "client TTFT mean - the above",
        )
    )
    if client_mean > 0 and rest / client_mean > 0.5:
        notes.append(
            f"{rest / client_mean:.0%} of the mean TTFT is not attributed: it passed before "
            "vLLM's engine saw the requests or after it sent the tokens. A stall of the API "
            "server shows here (see the stalls under vLLM's queue over time), not as client time"
        )
    if any(c.seconds < 0 for c in comps):
        notes.append(
            "a part came out negative: the server's and the client's clocks measure slightly "
            "different spans, so parts within their noise are shown as 0 in the bar"
        )
    server_count = int(ttft_h.count) if ttft_h is not None else 0
    if ttft_h is not None and server_count != len(client):
        notes.append(
            f"vLLM counted {server_count} requests, the client {len(client)} successful "
            "measured ones: the histograms may include other traffic"
        )
    comparisons = [TtftComparison("mean", client_mean, server_ttft, None)]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        client_q = safe_percentile(client, q * 100)
        sq = ttft_h.quantile(q) if ttft_h is not None else None
        comparisons.append(
            TtftComparison(
                name,
                client_q,
                None if sq is None else sq[0],
                None if sq is None else (sq[1], sq[2]),
            )
        )
    return Decomposition(
        client_mean=client_mean,
        client_n=len(client),
        server_count=server_count,
        components=tuple(comps),
        comparisons=tuple(comparisons),
        notes=tuple(notes),
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


@dataclass(frozen=True)
class ServerSeries:
    """vLLM's scheduler over time, from /metrics sampled during the workload."""

    t_s: tuple[float, ...]
    running: tuple[float, ...]
    waiting: tuple[float, ...]
    kv_cache_usage: tuple[float, ...]
    """Fraction of the KV cache in use (0-1)."""
    preemptions: int
    """Preemptions during the sampled span."""
    ttft_t_s: tuple[float, ...]
    ttft_mean_s: tuple[float, ...]
    """vLLM's mean TTFT of the requests that got their first token in each interval
    (histogram sum and count differences), at the interval's end."""
    interval_s: float
    max_num_seqs: int | None
    """From the engine args the suite started the server with; None in endpoint mode, where
    the scenario's engine args are only declared."""
    stalls: tuple[Stall, ...] = ()


@dataclass(frozen=True)
class Stall:
    """A span in which vLLM made no progress while it had work: no new token and requests
    running or waiting, or /metrics not answering at all."""

    start_s: float
    end_s: float
    why: str


# A gap between two /metrics readings this many times the usual interval: the server did not
# answer in between. No token progress counts as a stall only from this long on.
STALL_GAP_FACTOR = 3.0
STALL_MIN_S = 2.0


def find_stalls(rows: Sequence[dict[str, float]], interval_s: float) -> tuple[Stall, ...]:
    out: list[Stall] = []
    still: float | None = None  # start of a run of readings without token progress
    for a, b in itertools.pairwise(rows):
        busy = a.get("running", 0.0) + a.get("waiting", 0.0) > 0
        if b["t_s"] - a["t_s"] > max(STALL_GAP_FACTOR * interval_s, STALL_MIN_S):
            out.append(Stall(a["t_s"], b["t_s"], "/metrics did not answer"))
        progress = b.get("generation_tokens", 0.0) > a.get("generation_tokens", 0.0)
        if busy and not progress and "generation_tokens" in a:
            still = a["t_s"] if still is None else still
        elif still is not None:
            if a["t_s"] - still >= STALL_MIN_S:
                out.append(Stall(still, a["t_s"], "no token generated with requests in vLLM"))
            still = None
    if still is not None and rows[-1]["t_s"] - still >= STALL_MIN_S:
        out.append(Stall(still, rows[-1]["t_s"], "no token generated with requests in vLLM"))
    return tuple(sorted(out, key=lambda x: x.start_s))


def server_series(scenario: ScenarioRun) -> ServerSeries | None:
    rows = sorted(scenario.server_series, key=lambda r: r["t_s"])
    if len(rows) < 2:
        return None
    ttft_t: list[float] = []
    ttft_mean: list[float] = []
    for a, b in itertools.pairwise(rows):
        dn = b.get("ttft_count", 0.0) - a.get("ttft_count", 0.0)
        if dn > 0:
            ttft_t.append(b["t_s"])
            ttft_mean.append((b.get("ttft_sum", 0.0) - a.get("ttft_sum", 0.0)) / dn)
    gaps = sorted(b["t_s"] - a["t_s"] for a, b in itertools.pairwise(rows))
    started = scenario.server.get("started_by_suite", True) is not False
    max_seqs = scenario.engine_args.get("max_num_seqs") if started else None
    return ServerSeries(
        t_s=tuple(r["t_s"] for r in rows),
        running=tuple(r.get("running", 0.0) for r in rows),
        waiting=tuple(r.get("waiting", 0.0) for r in rows),
        kv_cache_usage=tuple(r.get("kv_cache_usage", 0.0) for r in rows),
        preemptions=int(rows[-1].get("preemptions", 0.0) - rows[0].get("preemptions", 0.0)),
        ttft_t_s=tuple(ttft_t),
        ttft_mean_s=tuple(ttft_mean),
        interval_s=gaps[len(gaps) // 2],
        max_num_seqs=int(max_seqs) if isinstance(max_seqs, int) else None,
        stalls=find_stalls([dict(r) for r in rows], gaps[len(gaps) // 2]),
    )
