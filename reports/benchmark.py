"""Hand the run's latency samples to pytest-benchmark, so its JSON, storage and compare work.

pytest-benchmark times Python callables; here the samples were measured by the load runner, so
each metric becomes one pytest-benchmark entry whose rounds are the per-request values (seconds).
Its ``--benchmark-json``, ``--benchmark-autosave`` and ``pytest-benchmark compare`` then read
them like any other benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark.stats import Metadata


@dataclass
class _SampleSource:
    """The attributes pytest_benchmark.stats.Metadata reads from its fixture."""

    name: str
    fullname: str
    group: str
    param: str | None = None
    params: dict[str, Any] | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    cprofile_stats: Any = None
    has_error: bool = False


def metric_entry(
    *,
    scenario: str,
    metric: str,
    samples: tuple[float, ...],
    fullname: str,
    extra_info: dict[str, Any],
) -> Metadata | None:
    """A pytest-benchmark entry for one metric's per-request samples (finite ones only)."""
    finite = [v for v in samples if math.isfinite(v)]
    if not finite:
        return None
    source = _SampleSource(
        name=f"{scenario}[{metric}]",
        fullname=f"{fullname}[{metric}]",
        group=scenario,
        param=metric,
        params={"metric": metric},
        extra_info={**extra_info, "metric": metric, "failed_requests": len(samples) - len(finite)},
    )
    options = {"source": "load runner (per-request samples)"}
    entry = Metadata(source, iterations=1, options=options)  # type: ignore[no-untyped-call]
    for v in finite:
        entry.stats.update(v)  # type: ignore[no-untyped-call]
    return entry
