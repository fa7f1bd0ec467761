"""The suite's vocabulary: every metric, statistic and arrival process, defined once.

Scenario parsing, the statistics, the verdicts and the reports all derive their lists from
``METRIC_DEFS``, ``STATISTICS`` and ``ARRIVALS`` here, so a new metric is one entry (and the
``RequestRecord`` property that measures it), not edits in five places. Definitions of the
time-to-first-token family beside the peers' are in docs/metrics.md.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args


class Dimension(enum.Enum):
    """What a quantity measures. The value is the canonical unit that parsing returns."""

    TIME = "s"
    TOKEN_RATE = "tok/s"
    REQUEST_RATE = "req/s"
    RATIO = "fraction"


@dataclass(frozen=True)
class MetricDef:
    """One metric objectives may name."""

    name: str
    dimension: Dimension
    per_request: bool
    """A value per request (judged by a statistic: p99, mean...); else one number per run."""
    lower_is_better: bool
    """Its objectives are upper bounds (``<=``); the others lower bounds (``>=``)."""
    definition: str
    """One line, as the docs and reports state it."""
    goodput_bound: bool = False
    """May bound a request in ``[goodput]``: every request has a value when it succeeded."""
    pooled: bool = False
    """Several values per request (the gaps of ITL), pooled over requests: one request's values
    move together, so intervals group them by request."""
    per_start: bool = False
    """One value per server start (the cold-start metrics), judged by a statistic over the
    starts of a ``[cold_start]`` table (slo/cold_start.py)."""


_TIME, _TOKEN_RATE, _REQUEST_RATE, _RATIO = (
    Dimension.TIME,
    Dimension.TOKEN_RATE,
    Dimension.REQUEST_RATE,
    Dimension.RATIO,
)

METRIC_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "ttft",
        _TIME,
        True,
        True,
        "request sent -> first chunk carrying generated output: content, reasoning or a "
        "tool call (not the role-only chunk, not an empty one)",
        goodput_bound=True,
    ),
    MetricDef(
        "ttft_chunk",
        _TIME,
        True,
        True,
        "request sent -> first chunk with a choice, whatever it carries (the chat role-only "
        "chunk, an empty delta): vLLM bench serve's TTFT",
    ),
    MetricDef(
        "ttft_content",
        _TIME,
        True,
        True,
        "request sent -> first chunk with answer text (content, not reasoning or a tool call): "
        "what a user of a reasoning model sees first; requests without answer text left out",
    ),
    MetricDef(
        "ttft_tool",
        _TIME,
        True,
        True,
        "request sent -> first tool-call delta; requests that called no tool left out",
    ),
    MetricDef(
        "tpot",
        _TIME,
        True,
        True,
        "(last generated chunk - first generated chunk) / (output tokens - 1)",
        goodput_bound=True,
    ),
    MetricDef(
        "itl",
        _TIME,
        True,
        True,
        "gaps between consecutive chunks carrying generated output, pooled over requests",
        pooled=True,
    ),
    MetricDef(
        "max_itl",
        _TIME,
        True,
        True,
        "the longest gap between consecutive chunks of one request: its worst stall",
    ),
    MetricDef(
        "e2e",
        _TIME,
        True,
        True,
        "request sent -> last chunk carrying generated output",
        goodput_bound=True,
    ),
    MetricDef(
        "schedule_lag", _TIME, True, True, "request sent - when the arrival process meant to"
    ),
    MetricDef(
        "request_throughput",
        _REQUEST_RATE,
        False,
        False,
        "completed requests per second of the measured window",
    ),
    MetricDef(
        "output_throughput",
        _TOKEN_RATE,
        False,
        False,
        "output tokens per second of the measured window",
    ),
    MetricDef(
        "goodput",
        _REQUEST_RATE,
        False,
        False,
        "requests per second that met every [goodput] bound",
    ),
    MetricDef("error_rate", _RATIO, False, True, "failed requests / measured requests"),
    MetricDef(
        "startup",
        _TIME,
        False,
        True,
        "server process start -> its first healthy /health answer, one value per start",
        per_start=True,
    ),
    MetricDef(
        "ttft_cold",
        _TIME,
        False,
        True,
        "the slowest ttft of the first requests after the server became ready, sent one at a "
        "time before any warm-up, one value per start",
        per_start=True,
    ),
)

METRIC_BY_NAME: Mapping[str, MetricDef] = MappingProxyType({m.name: m for m in METRIC_DEFS})
METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_DEFS)
PER_REQUEST_METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_DEFS if m.per_request)
AGGREGATE_METRICS: tuple[str, ...] = tuple(
    m.name for m in METRIC_DEFS if not m.per_request and not m.per_start
)
COLD_START_METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_DEFS if m.per_start)
LOWER_IS_BETTER: tuple[str, ...] = tuple(m.name for m in METRIC_DEFS if m.lower_is_better)
GOODPUT_METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_DEFS if m.goodput_bound)
POOLED_METRICS: frozenset[str] = frozenset(m.name for m in METRIC_DEFS if m.pooled)
METRIC_DIMENSIONS: Mapping[str, Dimension] = MappingProxyType(
    {m.name: m.dimension for m in METRIC_DEFS}
)
"""Metric name -> the dimension its thresholds and values are in."""

QUANTILES: tuple[int, ...] = (50, 90, 95, 99)
STATISTICS: tuple[str, ...] = (*(f"p{q}" for q in QUANTILES), "mean", "max")
START_STATISTICS: tuple[str, ...] = (*(f"p{q}" for q in QUANTILES), "max")
"""Statistics over server starts: quantiles and the max; no mean, whose interval over a few
starts would rest on a model of the slow ones (slo/cold_start.py)."""

Arrival = Literal["poisson", "constant", "gamma", "bursts", "ramp", "trace", "closed"]
ARRIVALS: tuple[str, ...] = get_args(Arrival)
OPEN_LOOP_RATED: tuple[str, ...] = ("poisson", "constant", "gamma", "ramp")
"""Arrival processes driven by a ``rate``."""
ARRIVAL_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "rate": OPEN_LOOP_RATED,
        "rate_end": ("ramp",),
        "burstiness": ("gamma",),
        "cv": ("gamma",),
        "burst_size": ("bursts",),
        "burst_interval": ("bursts",),
        "trace": ("trace",),
        "concurrency": ("closed",),
    }
)
"""Keys that only some arrival processes take: anything else with them is a mistake."""
