"""Prometheus-style cumulative histograms, as vLLM exports them, and what can be read off them."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Histogram:
    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...]
    """(upper bound, cumulative count), ascending, +inf last."""

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since ``earlier`` (vLLM's histograms only grow)."""
        before = dict(earlier.buckets)
        return Histogram(
            self.count - earlier.count,
            self.sum - earlier.sum,
            tuple((le, c - before.get(le, 0.0)) for le, c in self.buckets),
        )

    def plus(self, other: Histogram) -> Histogram:
        """Both servers' observations together (same vLLM release, so the same buckets)."""
        theirs = dict(other.buckets)
        return Histogram(
            self.count + other.count,
            self.sum + other.sum,
            tuple((le, c + theirs.get(le, 0.0)) for le, c in self.buckets),
        )

    @property
    def mean(self) -> float | None:
        """Exact: from the sum and the count, not from the buckets."""
        return self.sum / self.count if self.count else None

    def quantile(self, q: float) -> tuple[float, float, float] | None:
        """(estimate, bucket lower bound, bucket upper bound), like Prometheus'
        histogram_quantile (linear within the bucket). The bounds say how coarse the estimate
        is: vLLM's queue and prefill histograms start at 0.3 s, so quantiles of a few ms mean
        nothing there."""
        if not self.count:
            return None
        rank = q * self.count
        prev_le, prev_c = 0.0, 0.0
        for le, c in self.buckets:
            if c >= rank:
                if math.isinf(le):
                    return prev_le, prev_le, le
                frac = (rank - prev_c) / (c - prev_c) if c > prev_c else 0.0
                return prev_le + (le - prev_le) * frac, prev_le, le
            prev_le, prev_c = le, c
        return prev_le, prev_le, math.inf
