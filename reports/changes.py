"""The sign-off's "What changed" section: each compared objective's baseline and candidate figures
and the ratio candidate/baseline with its interval, as a table and a forest plot (inline SVG),
and what a given margin costs in requests per arm.

Read from the run's ``test_regression[...]`` JUnit cases (their ``slo.regression.*``
properties, written by fixtures/regression.py) and, in A/B mode, ``<scenario>/comparison.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from reports.page import Block, Figure, Paragraph, Section, Table
from reports.run_folder import JunitCase, RunFolder
from slo.errors import UnitError
from slo.units import dimension_of, format_quantity


@dataclass(frozen=True)
class ChangeRow:
    scenario: str
    objective: str
    status: str
    change: str
    baseline: float
    candidate: float
    ratio: float
    lower: float
    upper: float
    margin: float
    message: str


def regression_cases(run: RunFolder) -> tuple[JunitCase, ...]:
    """The run's test_regression[...] cases (A/B or --slo-baseline)."""
    return tuple(t for t in run.other_tests if "slo.regression.mode" in t.properties)


def _f(raw: object) -> float:
    try:
        return float(str(raw))
    except ValueError:
        return math.nan


def rows(run: RunFolder) -> list[ChangeRow]:
    out = []
    for t in regression_cases(run):
        p = t.properties
        out.append(
            ChangeRow(
                scenario=t.classname.rsplit(".", 1)[-1].removeprefix("test_"),
                objective=t.name.partition("[")[2].rstrip("]") or t.name,
                status=t.status,
                change=str(p.get("slo.regression.change", "")),
                baseline=_f(p.get("slo.regression.baseline")),
                candidate=_f(p.get("slo.regression.candidate")),
                ratio=_f(p.get("slo.regression.ratio")),
                lower=_f(p.get("slo.regression.ratio_lower")),
                upper=_f(p.get("slo.regression.ratio_upper")),
                margin=_f(p.get("slo.regression.margin")),
                message=str(p.get("slo.regression.message", "")),
            )
        )
    return out


def cost_lines(run: RunFolder) -> list[str]:
    """One line per A/B scenario: how it ran and what the margin costs."""
    lines = []
    for sc in run.scenarios:
        path = run.path / sc.label.replace("[", ".").rstrip("]") / "comparison.json"
        if not path.exists():
            continue
        try:
            c = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        line = (
            f"{c['scenario']}: {c['blocks']} interleaved block pairs of {c['block_size']} "
            f"requests ({c['order']}); baseline vLLM {c['baseline']['vllm_version']}, "
            f"candidate vLLM {c['candidate']['vllm_version']}"
        )
        if c.get("cold_start_order"):
            line += f"; cold starts before the blocks ({c['cold_start_order']})"
        costs = c.get("costs") or {}
        if costs:
            first = next(iter(costs.values()))
            each = "; ".join(
                f"{name} {v['requests_per_arm']:,} ({v['blocks']} pairs)"
                for name, v in costs.items()
            )
            line += (
                f". Cost, from this run's block-to-block spread: to tell a {first['margin']:.0%} "
                f"change at {first['power']:.0%} power with blocks of {first['block_size']}, "
                f"requests per arm: {each}"
            )
        lines.append(line + ".")
    return lines


def _fmt(v: float, metric: str) -> str:
    if not math.isfinite(v):
        return "n/a" if math.isnan(v) else "inf"
    if metric == "error_rate":
        return f"{v:.2%}"
    try:
        return format_quantity(v, dimension_of(metric))
    except UnitError:
        return f"{v:.4g}"


def _ratio(r: ChangeRow) -> str:
    if not math.isfinite(r.ratio):
        return "n/a"
    if math.isnan(r.lower):
        return f"x{r.ratio:.3g}"
    upper = "inf" if math.isinf(r.upper) else f"{r.upper:.3g}"
    return f"x{r.ratio:.3g} [{r.lower:.3g}, {upper}]"


def table_rows(changes: Sequence[ChangeRow]) -> list[list[str]]:
    return [
        [
            r.objective,
            r.change,
            _fmt(r.baseline, r.objective.split(" ")[0]),
            _fmt(r.candidate, r.objective.split(" ")[0]),
            _ratio(r),
            f"{r.margin:.0%}" if math.isfinite(r.margin) else "",
        ]
        for r in changes
    ]


HEAD = ["objective", "change", "baseline", "candidate", "candidate/baseline [interval]", "margin"]
COLOURS = {"REGRESSION": "#c62828", "IMPROVEMENT": "#2e7d32", "NO CHANGE": "#1565c0"}


def forest_svg(changes: Sequence[ChangeRow]) -> str:
    """Each ratio's interval on a log axis, with 1 and 1 +- margin marked."""
    shown = [r for r in changes if math.isfinite(r.ratio) and r.ratio > 0]
    if not shown:
        return ""
    finite = [v for r in shown for v in (r.lower, r.upper, r.ratio) if math.isfinite(v) and v > 0]
    margin = next((r.margin for r in shown if math.isfinite(r.margin)), 0.1)
    lo = min([*finite, 1 - margin]) / 1.1
    hi = max([*finite, 1 + margin]) * 1.1
    left, width, row_h = 170, 420, 22
    height = row_h * len(shown) + 30

    def x(v: float) -> float:
        v = min(max(v, lo), hi)
        return left + width * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 20}' height='{height}' "
        "role='img' aria-label='ratio candidate/baseline with interval, log scale' "
        "font-family='sans-serif' font-size='12'>"
    ]
    for v, dash in ((1.0, ""), (1 - margin, "4 3"), (1 + margin, "4 3")):
        parts.append(
            f"<line x1='{x(v):.1f}' x2='{x(v):.1f}' y1='4' y2='{height - 22}' stroke='#888' "
            f"stroke-dasharray='{dash}'/><text x='{x(v):.1f}' y='{height - 8}' "
            f"text-anchor='middle'>{v:.2g}</text>"
        )
    for i, r in enumerate(shown):
        y = 14 + i * row_h
        colour = COLOURS.get(r.change, "#555")
        parts.append(
            f"<text x='{left - 8}' y='{y + 4}' text-anchor='end'>{escape(r.objective)}</text>"
        )
        if math.isfinite(r.lower):
            parts.append(
                f"<line x1='{x(r.lower):.1f}' x2='{x(r.upper):.1f}' y1='{y}' y2='{y}' "
                f"stroke='{colour}' stroke-width='2'/>"
            )
        parts.append(f"<circle cx='{x(r.ratio):.1f}' cy='{y}' r='4' fill='{colour}'/>")
    parts.append("</svg>")
    return "".join(parts)


NOTE = (
    "Ratio candidate/baseline with its interval (log scale; dashed: the margin). REGRESSION: the "
    "whole interval is past the margin on the worse side; NO CHANGE: wholly inside it; "
    "INCONCLUSIVE: neither. Interleaved A/B: the t-interval over block pairs, which holds "
    "sampling error, serial correlation and drift; startup and ttft_cold: over start pairs "
    "(each arm started in turn, AB BA ...), the ratio of the arms' geometric means. Stored "
    "baseline: the two runs' own intervals "
    "combined, which cannot tell drift of the machine from a change."
)


def section(run: RunFolder) -> Section | None:
    """The sign-off's "What changed" section; None where the run compared nothing."""
    changes = rows(run)
    if not changes:
        return None
    blocks: list[Block] = [Table(tuple(HEAD), tuple(tuple(r) for r in table_rows(changes)))]
    if forest := forest_svg(changes):
        blocks.append(Figure("Candidate/baseline ratios", svg=forest))
    blocks.append(Paragraph.of(NOTE, "note"))
    if costs := cost_lines(run):
        blocks.append(Paragraph(tuple(costs), "note"))
    return Section("what-changed", "What changed", tuple(blocks))
