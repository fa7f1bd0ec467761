"""Engine-arg sweeps: the grid of configurations, the TTFT-throughput frontier, the best config.

A tuning guide's question: of the configurations tried on the same load, which ones are not beaten
on both TTFT (lower is better) and output throughput (higher is better), and which one has the
most throughput while meeting every objective of the scenario? Pure functions, no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def grid(sweep: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the swept engine args, first arg slowest: ``{a: [1, 2], b: [3]}``
    gives ``[{a: 1, b: 3}, {a: 2, b: 3}]``. An empty sweep is one point with nothing changed."""
    names = list(sweep)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*sweep.values())]


def point_label(args: Mapping[str, Any]) -> str:
    """A name for a point, safe in file names: ``max_num_seqs-8.max_num_batched_tokens-2048``."""
    return ".".join(f"{k}-{v}" for k, v in args.items()) or "base"


@dataclass(frozen=True)
class SweepPoint:
    """One configuration's run on the sweep's load."""

    args: tuple[tuple[str, Any], ...]
    """The swept engine args of this point, in the sweep's order."""
    ttft_s: float
    """The TTFT statistic the frontier is drawn on (e.g. p99); inf when no request succeeded."""
    output_throughput: float
    """Output tokens/s."""
    meets_slo: bool
    """Every objective of the scenario PASSed on this point's run."""
    ttft_p50_s: float = math.nan
    ttft_p99_s: float = math.nan
    misses: tuple[str, ...] = ()
    """Objectives that did not PASS, as ``name: OUTCOME``."""

    @property
    def label(self) -> str:
        return point_label(dict(self.args))

    def dominates(self, other: SweepPoint) -> bool:
        """At least as good on both axes and better on one."""
        no_worse = self.ttft_s <= other.ttft_s and self.output_throughput >= other.output_throughput
        better = self.ttft_s < other.ttft_s or self.output_throughput > other.output_throughput
        return no_worse and better

    def as_dict(self) -> dict[str, Any]:
        return {
            "args": dict(self.args),
            "ttft_s": self.ttft_s,
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "output_throughput": self.output_throughput,
            "meets_slo": self.meets_slo,
            "misses": list(self.misses),
        }


def frontier(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """The Pareto set: points no other point dominates, by ascending TTFT. Points with the same
    figures are all kept (neither dominates the other)."""
    front = [p for p in points if not any(q.dominates(p) for q in points)]
    return sorted(front, key=lambda p: (p.ttft_s, -p.output_throughput))


def best(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The point with the most output throughput among those meeting the SLO (ties: lower TTFT,
    then the earlier point); None when none meets it."""
    ok = [p for p in points if p.meets_slo]
    if not ok:
        return None
    return min(ok, key=lambda p: (-p.output_throughput, p.ttft_s))


@dataclass(frozen=True)
class SweepReport:
    scenario: str
    ttft_statistic: str
    """What ``ttft_s`` is, e.g. ``ttft p99`` or ``ttft p90 class=realtime``."""
    throughput_of: str
    """Whose output throughput, e.g. ``all requests`` or ``class=batch``."""
    points: tuple[SweepPoint, ...]

    @property
    def frontier(self) -> list[SweepPoint]:
        return frontier(self.points)

    @property
    def best(self) -> SweepPoint | None:
        return best(self.points)

    def as_dict(self) -> dict[str, Any]:
        b = self.best
        return {
            "scenario": self.scenario,
            "ttft_statistic": self.ttft_statistic,
            "throughput_of": self.throughput_of,
            "points": [p.as_dict() for p in self.points],
            "frontier": [p.label for p in self.frontier],
            "best": b.label if b else None,
        }

    def to_markdown(self) -> str:
        front = {p.label for p in self.frontier}
        b = self.best
        names = [k for k, _ in self.points[0].args] if self.points else []
        # The frontier's own TTFT column only where it is not already the p50 or p99 column.
        own = self.ttft_statistic not in ("ttft p50", "ttft p99")
        head = [*names, *([self.ttft_statistic] if own else []), "TTFT p50", "TTFT p99"]
        head += ["output tok/s", "SLO", ""]
        lines = [
            f"## Sweep of {self.scenario}",
            "",
            f"Frontier: lowest {self.ttft_statistic} against highest output throughput "
            f"({self.throughput_of}); best: the most throughput among configs meeting every "
            "objective.",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for p in self.points:
            marks = [m for m, on in (("best", p is b), ("frontier", p.label in front)) if on]
            slo = "meets" if p.meets_slo else "misses: " + ", ".join(p.misses)
            row = [
                *(str(v) for _, v in p.args),
                *([_ms(p.ttft_s)] if own else []),
                _ms(p.ttft_p50_s),
                _ms(p.ttft_p99_s),
                f"{p.output_throughput:.0f}",
                slo,
                ", ".join(marks),
            ]
            lines.append("| " + " | ".join(row) + " |")
        lines += [
            "",
            f"Best config meeting the SLO: {b.label if b else 'none of the points'}",
            "",
        ]
        return "\n".join(lines)


def _ms(seconds: float) -> str:
    return (
        "n/a"
        if math.isnan(seconds)
        else "inf"
        if math.isinf(seconds)
        else f"{seconds * 1e3:.0f} ms"
    )
