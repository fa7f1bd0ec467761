"""Objectives: ``"ttft p99" = "<= 800ms"`` parsed into a frozen ``Objective``.

The metric names, statistics and each metric's direction and dimension come from
slo/vocabulary.py, so an objective can name exactly the metrics the statistics measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from slo.errors import ScenarioFileError, UnitError
from slo.units import Dimension, dimension_of, format_quantity, parse_quantity
from slo.vocabulary import (
    COLD_START_METRICS,
    LOWER_IS_BETTER,
    METRICS,
    PER_REQUEST_METRICS,
    START_STATISTICS,
    STATISTICS,
)

Comparison = Literal["<=", ">="]

_OBJECTIVE_KEY = re.compile(
    r"^\s*(?P<metric>[a-z][a-z0-9_]*)(?:\s+(?P<stat>p\d+|mean|max))?(?:\s+class=(?P<cls>[\w-]+))?\s*$"
)
_OBJECTIVE_VALUE = re.compile(r"^\s*(?P<cmp><=|>=)\s*(?P<q>.+?)\s*$")


def objective_name(metric: str, statistic: str | None, request_class: str | None) -> str:
    """``ttft p99 class=realtime``: an objective without its threshold, as files write it."""
    parts = [metric]
    if statistic:
        parts.append(statistic)
    if request_class:
        parts.append(f"class={request_class}")
    return " ".join(parts)


@dataclass(frozen=True)
class Objective:
    """One thing that must hold, e.g. ``ttft p99 <= 800ms``."""

    metric: str
    statistic: str | None
    """None for aggregate metrics (throughput, goodput, error rate)."""
    comparison: Comparison
    threshold: float
    """In the metric's canonical unit: seconds, tok/s, req/s or a fraction."""
    request_class: str | None = None

    @property
    def dimension(self) -> Dimension:
        return dimension_of(self.metric)

    @property
    def name(self) -> str:
        return objective_name(self.metric, self.statistic, self.request_class)

    @property
    def quantile(self) -> float | None:
        """The statistic as a quantile fraction (p99 -> 0.99), None for mean/max/aggregates."""
        if self.statistic and self.statistic.startswith("p"):
            return int(self.statistic[1:]) / 100
        return None

    def describe(self) -> str:
        return f"{self.name} {self.comparison} {format_quantity(self.threshold, self.dimension)}"

    def tightened(self, factor: float) -> Objective:
        """The same objective made ``factor`` times harder to meet."""
        t = self.threshold / factor if self.comparison == "<=" else self.threshold * factor
        return replace(self, threshold=t)


def parse_objective(path: str, key: str, metric_key: str, value: object) -> Objective:
    """Parse ``"ttft p99" = "<= 800ms"`` (key and value of an ``[objectives.X]`` table)."""
    full_key = f'{key}."{metric_key}"'  # TOML spelling of a quoted key
    m = _OBJECTIVE_KEY.match(metric_key)
    if not m:
        raise ScenarioFileError(
            path,
            full_key,
            metric_key,
            "expected 'METRIC [STATISTIC] [class=NAME]', e.g. 'ttft p99' or 'ttft p99 class=vip'",
        )
    metric, stat, cls = m["metric"], m["stat"], m["cls"]
    _check_statistic(path, full_key, metric_key, metric, stat)
    if cls is not None and metric in COLD_START_METRICS:
        raise ScenarioFileError(
            path,
            full_key,
            metric_key,
            f"{metric} is one value per server start, whatever the class of its requests, so it "
            f"takes no class=: write '{metric} {stat}'",
        )
    if not isinstance(value, str) or not (v := _OBJECTIVE_VALUE.match(value)):
        raise ScenarioFileError(
            path,
            full_key,
            value,
            "expected a string '<= QUANTITY' or '>= QUANTITY', "
            'e.g. "<= 800ms" or ">= 100 tok/s"',
        )
    want = "<=" if metric in LOWER_IS_BETTER else ">="
    if v["cmp"] != want:
        bound = "an upper bound" if want == "<=" else "a lower bound"
        raise ScenarioFileError(
            path,
            full_key,
            value,
            f"{metric} is {'lower' if want == '<=' else 'higher'} when better, so its objective "
            f'is {bound}: write "{want} {v["q"]}"',
        )
    dim = dimension_of(metric)
    try:
        threshold = parse_quantity(v["q"], dim, what=full_key)
    except UnitError as e:
        raise ScenarioFileError(path, full_key, value, str(e)) from None
    return Objective(metric, stat, v["cmp"], threshold, cls)  # type: ignore[arg-type]


def _check_statistic(
    path: str, full_key: str, metric_key: str, metric: str, stat: str | None
) -> None:
    """A known metric, with a known statistic exactly when it has several values per run
    (per request, or per server start)."""
    if metric not in METRICS:
        raise ScenarioFileError(
            path, full_key, metric, f"unknown metric; known: {', '.join(METRICS)}"
        )
    if metric in COLD_START_METRICS:
        if stat not in START_STATISTICS:
            raise ScenarioFileError(
                path,
                full_key,
                metric_key,
                f"{metric} is one value per server start and needs a statistic over the starts "
                f"({', '.join(START_STATISTICS)}), e.g. '{metric} p50' (the typical start) or "
                f"'{metric} max' (every start of the run)",
            )
    elif metric in PER_REQUEST_METRICS:
        if stat is None:
            raise ScenarioFileError(
                path,
                full_key,
                metric_key,
                f"{metric} is per request and needs a statistic ({', '.join(STATISTICS)}), "
                f"e.g. '{metric} p99'",
            )
        if stat not in STATISTICS:
            raise ScenarioFileError(
                path, full_key, stat, f"unknown statistic; known: {', '.join(STATISTICS)}"
            )
    elif stat is not None:
        raise ScenarioFileError(
            path,
            full_key,
            metric_key,
            f"{metric} is one number per run and takes no statistic; write '{metric}'",
        )
