"""From per-request records to the samples and rates the objectives are judged on.

Failed requests stay in every denominator: for TTFT, TPOT and E2E a failed request counts as an
infinitely slow one (it certainly missed any latency objective), so errors can only make a
latency percentile worse, never vanish from it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slo.quantile import percentile
from slo.records import RequestRecord
from slo.vocabulary import AGGREGATE_METRICS, PER_REQUEST_METRICS

INF = math.inf


@dataclass(frozen=True)
class RunSummary:
    """Samples of one run (or one request class of it), warm-up requests excluded."""

    request_class: str | None
    n: int
    n_ok: int
    errors_by_kind: Mapping[str, int]
    window_s: float
    """First send to last response of the measured requests."""
    ttft: tuple[float, ...]
    ttft_chunk: tuple[float, ...]
    ttft_content: tuple[float, ...]
    ttft_tool: tuple[float, ...]
    tpot: tuple[float, ...]
    e2e: tuple[float, ...]
    itl: tuple[float, ...]
    schedule_lag: tuple[float, ...]
    max_itl: tuple[float, ...]
    output_tokens: int
    goodput_bounded: bool = False
    """The run had per-request goodput bounds (``done_good`` is then filled in)."""
    failed: tuple[bool, ...] = ()
    """Per request in send order: it failed (the error-rate series)."""
    itl_request: tuple[int, ...] = ()
    """The request (its index) each ``itl`` gap belongs to: gaps of one request move together."""
    done_s: tuple[float, ...] = ()
    """Per completed request: when its last token arrived, seconds from the window's start."""
    done_tokens: tuple[int, ...] = ()
    """Per completed request: its output tokens (same order as ``done_s``)."""
    done_good: tuple[bool, ...] = ()
    """Per completed request: it met every goodput bound (empty without bounds)."""

    @property
    def n_good(self) -> int | None:
        """Requests that met every per-request goodput bound; None when no bounds were given."""
        return sum(self.done_good) if self.goodput_bounded else None

    @property
    def goodput(self) -> float | None:
        if self.n_good is None:
            return None
        return self.n_good / self.window_s if self.window_s > 0 else 0.0

    @property
    def n_errors(self) -> int:
        return self.n - self.n_ok

    @property
    def error_rate(self) -> float:
        return self.n_errors / self.n if self.n else 0.0

    @property
    def request_throughput(self) -> float:
        return self.n_ok / self.window_s if self.window_s > 0 else 0.0

    @property
    def output_throughput(self) -> float:
        return self.output_tokens / self.window_s if self.window_s > 0 else 0.0

    def samples(self, metric: str) -> tuple[float, ...]:
        if metric not in PER_REQUEST_METRICS:
            raise KeyError(metric)
        values: tuple[float, ...] = getattr(self, metric)
        return values

    def aggregate(self, metric: str) -> float:
        if metric not in AGGREGATE_METRICS:
            raise KeyError(metric)
        value: float | None = getattr(self, metric)
        if value is None:
            raise KeyError(f"{metric}: no per-request bounds were given")
        return value

    def as_dict(self) -> dict[str, object]:
        """Plain numbers for reports: percentiles in seconds, rates per second."""
        d: dict[str, object] = {
            "request_class": self.request_class,
            "requests": self.n,
            "ok": self.n_ok,
            "errors": self.n_errors,
            "errors_by_kind": dict(self.errors_by_kind),
            "window_s": self.window_s,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "error_rate": self.error_rate,
            "output_tokens": self.output_tokens,
            "goodput": self.goodput,
        }
        for metric in PER_REQUEST_METRICS:
            values = self.samples(metric)
            d[metric] = describe(values)
        return d


def samples_only(
    metric: str, values: tuple[float, ...], request_class: str | None = None
) -> RunSummary:
    """A summary holding one per-request metric's samples (failed requests: +inf) and nothing
    else: to judge an objective on stored samples."""
    if metric not in PER_REQUEST_METRICS:
        raise KeyError(metric)
    empty: dict[str, tuple[float, ...]] = {m: () for m in PER_REQUEST_METRICS}
    empty[metric] = values
    return RunSummary(
        request_class=request_class,
        n=len(values),
        n_ok=sum(1 for v in values if math.isfinite(v)),
        errors_by_kind={},
        window_s=0.0,
        output_tokens=0,
        **empty,  # type: ignore[arg-type]
    )


def describe(values: Sequence[float]) -> dict[str, float | int]:
    """Count, mean and the usual percentiles; infinities (failed requests) are kept."""
    if not values:
        return {"n": 0}
    finite = [v for v in values if math.isfinite(v)]
    out: dict[str, float | int] = {"n": len(values), "failed": len(values) - len(finite)}
    out["mean"] = sum(values) / len(values) if len(finite) == len(values) else INF
    out["min"] = min(values)
    out["max"] = max(values)
    for q in (50, 90, 95, 99, 99.9):
        out[f"p{q:g}"] = safe_percentile(values, q)
    return out


def safe_percentile(values: Sequence[float], q: float) -> float:
    """``percentile`` that treats +inf as a value, not as a source of NaN."""
    p = percentile(values, q)
    return INF if math.isnan(p) else p


def summarize(
    records: Iterable[RequestRecord],
    request_class: str | None = None,
    goodput_limits: Mapping[str, float] | None = None,
) -> RunSummary:
    """``goodput_limits``: per-request bounds (metric -> seconds, e.g. {"ttft": 0.5}) a request
    must all meet to count as good; goodput is the good requests per second of the window."""
    # Send order (the plan's index order): the dependence handling reads the series in it.
    measured = sorted(
        (
            r
            for r in records
            if not r.warmup and (request_class is None or r.request_class == request_class)
        ),
        key=lambda r: r.index,
    )
    ok = [r for r in measured if r.ok]
    errors = Counter((r.error or "no text received").split(":", 1)[0] for r in measured if not r.ok)
    if measured:
        start = min(r.sent_ns for r in measured)
        end = max(max(r.end_ns or r.sent_ns, r.first_text_ns or r.sent_ns) for r in measured)
        window_s = (end - start) / 1e9
    else:
        window_s = 0.0

    def per_request(attr: str) -> tuple[float, ...]:
        """A value per request; a failed request's is +inf, a succeeded one without a value
        (a one-token TPOT, no tool call) is left out."""
        values = (INF if not r.ok else getattr(r, attr) for r in measured)
        return tuple(v for v in values if v is not None)

    good: tuple[bool, ...] = ()
    if goodput_limits is not None:
        good = tuple(
            all(
                (v := getattr(r, f"{m}_s")) is not None and v <= limit
                for m, limit in goodput_limits.items()
            )
            for r in ok
        )
    start_ns = min((r.sent_ns for r in measured), default=0)
    return RunSummary(
        request_class=request_class,
        n=len(measured),
        n_ok=len(ok),
        errors_by_kind=dict(errors),
        window_s=window_s,
        ttft=per_request("ttft_s"),
        ttft_chunk=per_request("ttft_chunk_s"),
        ttft_content=per_request("ttft_content_s"),
        ttft_tool=per_request("ttft_tool_s"),
        tpot=per_request("tpot_s"),
        e2e=per_request("e2e_s"),
        itl=tuple(g for r in ok for g in r.itl_s),
        schedule_lag=tuple(r.schedule_lag_s for r in measured),
        max_itl=per_request("max_itl_s"),
        output_tokens=sum(r.output_tokens or 0 for r in ok),
        goodput_bounded=goodput_limits is not None,
        failed=tuple(not r.ok for r in measured),
        itl_request=tuple(r.index for r in ok for _ in r.itl_s),
        done_s=tuple(((r.last_text_ns or r.sent_ns) - start_ns) / 1e9 for r in ok),
        done_tokens=tuple(r.output_tokens or 0 for r in ok),
        done_good=good,
    )
