"""``python -m reports.engines RUN_A RUN_B [--out DIR]``: two engines side by side.

The article's framework comparison: the same SLO file run against two serving engines on the
same machine, one after the other (e.g. vLLM started by the suite, then ``transformers serve``
behind ``--slo-endpoint``). Each objective is shown with each side's estimate and confidence
interval, as each run judged it; nothing here claims one engine beats the other beyond what the
two intervals show. The runs must have sent the same request list (same scenario, seed,
``--slo-max-requests``): that is checked, request by request.

Writes ``engines.json`` and ``engines.md`` into DIR (default: RUN_A, whose sign-off page then
shows the table) and renders RUN_A's sign-off again.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports import page_markdown
from reports.files import write_json
from reports.page import Bullets, Paragraph, Section, Table
from reports.run_folder import RunFolder, ScenarioRun, VerdictRow, load_run
from reports.signoff_format import fmt
from slo.errors import SuiteError

FILE = "engines.json"


@dataclass(frozen=True)
class Side:
    run: str
    """The run folder's name."""
    engine: str
    """What the server was taken for and what the requests carried."""
    endpoint: str
    version: str


def engine_of(run: RunFolder) -> Side:
    servers = [s.server for s in run.scenarios]
    first: Mapping[str, Any] = servers[0] if servers else {}
    engine = str(first.get("requests") or first.get("engine") or "vllm")
    return Side(run.name, engine, str(first.get("endpoint", "")), run.vllm_version)


def same_requests(a: ScenarioRun, b: ScenarioRun) -> str | None:
    """Why two runs of a scenario did not send the same request list; None when they did."""

    def shape(s: ScenarioRun) -> list[tuple[Any, ...]]:
        t0 = min((r.intended_send_ns for r in s.records), default=0)
        return [
            (
                r.index,
                r.request_class,
                r.warmup,
                r.expected_prompt_tokens,
                r.max_tokens,
                # Closed-loop requests are sent when a stream frees: only open-loop times count.
                round((r.intended_send_ns - t0) / 1e6) if r.sent_ns != r.intended_send_ns else None,
            )
            for r in sorted(s.records, key=lambda r: r.index)
        ]

    sa, sb = shape(a), shape(b)
    if len(sa) != len(sb):
        return f"{len(sa)} requests against {len(sb)} (same --slo-max-requests on both sides?)"
    for x, y in zip(sa, sb, strict=True):
        if x[:5] != y[:5]:
            return f"request {x[0]} differs: {x[1:5]} against {y[1:5]}"
    return None


def compare(a: RunFolder, b: RunFolder) -> dict[str, Any]:
    """Each objective both runs judged, with both sides' outcome, estimate and interval."""
    scenarios_a = {s.label: s for s in a.scenarios}
    scenarios_b = {s.label: s for s in b.scenarios}
    common = sorted(set(scenarios_a) & set(scenarios_b))
    if not common:
        raise SuiteError(
            f"{a.path} and {b.path} share no scenario: run the same SLO file (-m NAME) against "
            "both engines"
        )
    for label in common:
        why = same_requests(scenarios_a[label], scenarios_b[label])
        if why is not None:
            raise SuiteError(
                f"scenario {label!r}: {a.path.name} and {b.path.name} did not send the same "
                f"request list ({why}); run both with the same scenario and --slo-max-requests"
            )
    by_key_b = {v.key: v for v in b.verdicts}
    rows = []
    for v in a.verdicts:
        w = by_key_b.get(v.key)
        if v.scenario in common and w is not None:
            rows.append(
                {"scenario": v.scenario, "objective": v.objective, "a": _cell(v), "b": _cell(w)}
            )
    return {"a": vars(engine_of(a)), "b": vars(engine_of(b)), "scenarios": common, "rows": rows}


def _cell(v: VerdictRow) -> dict[str, Any]:
    return {
        "outcome": v.outcome.value,
        "estimate": v.estimate,
        "ci_lower": v.ci_lower,
        "ci_upper": v.ci_upper,
        "n": v.n,
        "confidence": v.confidence,
        "metric": v.metric,
    }


def _value(x: float, metric: str) -> str:
    return fmt(x, metric)


def _bound(x: Any) -> float:
    """An interval side as stored (JSON null for an unbounded side) as a number."""
    return math.inf if x is None else float(x)


def _cells(c: Mapping[str, Any]) -> list[str]:
    metric = str(c["metric"])
    lo, hi, est = _bound(c["ci_lower"]), _bound(c["ci_upper"]), float(c["estimate"])
    shown = f"{_value(lo, metric)} to {_value(hi, metric)}"
    interval = "no interval" if lo == hi == est else shown
    return [str(c["outcome"]), _value(est, metric), interval, str(c["n"])]


def table(data: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of the side-by-side table."""
    head = ["scenario", "objective"]
    for side in ("A", "B"):
        head += [f"{side} outcome", f"{side} estimate", f"{side} interval", f"{side} n"]
    rows = [[r["scenario"], r["objective"], *_cells(r["a"]), *_cells(r["b"])] for r in data["rows"]]
    return head, rows


def _legend(data: Mapping[str, Any]) -> list[str]:
    return [
        f"{side}: run {data[k]['run']}, {data[k]['endpoint'] or 'started by the suite'}, "
        f"vLLM version {data[k]['version']}; {data[k]['engine']}"
        for side, k in (("A", "a"), ("B", "b"))
    ]


NOTE = (
    "Same SLO file and request list on both engines, one after the other on one machine; each "
    "interval is that run's own (distribution-free, at the run's confidence). Where the "
    "intervals overlap, these runs do not tell the engines apart."
)


def section(data: Mapping[str, Any]) -> Section:
    """The side-by-side table as a report section (in the sign-off, and alone in engines.md)."""
    head, rows = table(data)
    blocks = (
        Bullets(tuple(_legend(data))),
        Table(tuple(head), tuple(tuple(r) for r in rows)),
        Paragraph.of(NOTE, "note"),
    )
    return Section("engines", "Engines side by side", blocks)


def no_figures(server: Mapping[str, Any]) -> str:
    """Why a scenario's run has no server figures (summary.json's ``server``); empty if it has."""
    return str(server.get("server_figures") or "")


def no_figures_text(why: str) -> str:
    return (
        f"No server figures: {why}, so there is no TTFT decomposition and no queue timeline. "
        "The verdicts stand on the client's own measurements."
    )


def engine_lines(server: Mapping[str, Any]) -> list[str]:
    """What the requests carried (another engine than vLLM, or --slo-engine) and, where the
    server had no vLLM /metrics, that there are no server figures; Markdown lines."""
    lines = []
    if server.get("engine", "vllm") != "vllm":
        lines += [f"Requests: {server.get('requests') or server.get('engine')}", ""]
    if why := no_figures(server):
        lines += [no_figures_text(why), ""]
    return lines


def stored(run_dir: Path) -> Mapping[str, Any] | None:
    """The comparison kept in a run folder, if one was made there."""
    try:
        data = json.loads((run_dir / FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "rows" in data else None


def write(run_a: Path, run_b: Path, out: Path | None = None) -> list[Path]:
    data = compare(load_run(run_a), load_run(run_b))
    folder = out or run_a
    write_json(folder / FILE, data)
    md = folder / "engines.md"
    md.write_text("\n".join(page_markdown.section(section(data))))
    written = [folder / FILE, md]
    if folder == run_a:
        from reports.signoff import write_signoff

        files = write_signoff([run_a])
        written += [files.html, files.markdown]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reports.engines", description=__doc__)
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="first engine's run folder")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="second engine's run folder")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="default: RUN_A")
    args = p.parse_args(argv)
    try:
        written = write(args.run_a, args.run_b, args.out)
    except SuiteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
