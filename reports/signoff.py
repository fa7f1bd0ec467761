"""The release sign-off report: one self-contained HTML page and a Markdown summary per run.

The page holds the verdicts, percentiles with their confidence intervals, the TTFT
distribution and timeline, the server-side TTFT decomposition, the environment and the command
to reproduce; with baselines (release N-1, ...) also each objective's change. Plots are inline
SVG, styles inline: the file opens anywhere, offline, and can be attached to a release ticket.
Request records hold no prompt text and nothing here adds any.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from reports import changes, charts
from reports.analysis import (
    NO_INTERVAL,
    PERCENTILES,
    Cdf,
    ClassStats,
    ComparisonRow,
    Decomposition,
    Interval,
    ServerSeries,
    Timeline,
    TtftComparison,
    compare,
    confidence_of,
    decomposition,
    overall,
    scenario_stats,
    server_series,
    timeline,
    ttft_cdfs,
)
from reports.engines import (
    engine_lines,
    engines_html,
    no_figures,
    no_figures_html,
)
from reports.engines import markdown as engines_markdown
from reports.engines import stored as stored_engines
from reports.files import RunEnding, read_ending, write_atomic
from reports.run_folder import JunitCase, RunFolder, ScenarioRun, VerdictRow, load_run
from slo.errors import UnitError
from slo.units import Dimension, dimension_of, format_quantity
from slo.verdict import CLAIM

MESSAGE_LIMIT = 600
"""Characters of a failed test's message that are kept (pytest may print long tracebacks)."""


@dataclass(frozen=True)
class ScenarioSection:
    scenario: ScenarioRun
    verdicts: tuple[VerdictRow, ...]
    stats: tuple[ClassStats, ...]
    cdfs: tuple[Cdf, ...]
    timeline: Timeline
    decomposition: Decomposition | None
    server: ServerSeries | None = None


@dataclass(frozen=True)
class SignoffReport:
    candidate: RunFolder
    baselines: tuple[RunFolder, ...]
    result: str
    reason: str
    sections: tuple[ScenarioSection, ...]
    comparison: tuple[ComparisonRow, ...]
    confidence: float
    ending: RunEnding | None = None
    """How the run ended (ending.json); None: not recorded (an older run, or one killed)."""


@dataclass(frozen=True)
class SignoffFiles:
    html: Path
    markdown: Path


def build_report(candidate: RunFolder, baselines: Sequence[RunFolder] = ()) -> SignoffReport:
    confidence = confidence_of(candidate)
    sections = tuple(
        ScenarioSection(
            scenario=s,
            verdicts=tuple(v for v in candidate.verdicts if v.scenario == s.label),
            stats=scenario_stats(s, confidence),
            cdfs=ttft_cdfs(s),
            timeline=timeline(s),
            decomposition=decomposition(s),
            server=server_series(s),
        )
        for s in candidate.scenarios
        if s.records
    )
    result, reason = overall(candidate)
    ending = read_ending(candidate.path)
    if ending is not None and not ending.complete:
        # What was judged before the end may all have passed: the run still did not.
        result, reason = "INCOMPLETE", f"the run ended early, {ending.how}; {reason}"
    return SignoffReport(
        candidate=candidate,
        baselines=tuple(baselines),
        result=result,
        reason=reason,
        sections=sections,
        comparison=compare(candidate, baselines) if baselines else (),
        confidence=confidence,
        ending=ending,
    )


def ending_banner(report: SignoffReport) -> str | None:
    """One sentence on how a run cut short ended; None for a completed run."""
    e = report.ending
    if e is None or e.complete:
        return None
    return (
        f"This run ended early, {e.how} ({e.reason}; exit status {e.exit_status}). Below is "
        "what was measured before it ended; objectives and scenarios it did not reach are not "
        "judged and not passed."
    )


# ---- formatting shared by HTML and Markdown -------------------------------------------------


def _dimension(metric: str) -> Dimension | None:
    try:
        return dimension_of(metric)
    except UnitError:
        return None


def fmt(value: float, metric: str = "ttft") -> str:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    dim = _dimension(metric)
    return format_quantity(value, dim) if dim is not None else f"{value:.4g}"


def fmt_ci(lower: float, upper: float, metric: str) -> str:
    if math.isnan(lower) and math.isnan(upper):
        return ""
    return f"[{fmt(lower, metric)}, {fmt(upper, metric)}]"


def verdict_ci(v: VerdictRow) -> str:
    if v.ci_lower == v.ci_upper:
        # Throughput is one number per run and max one order statistic: no interval.
        return "none (single value)"
    return fmt_ci(v.ci_lower, v.ci_upper, v.metric)


def threshold(v: VerdictRow) -> str:
    op = {"<=": "≤", ">=": "≥"}.get(v.comparison, v.comparison)
    return f"{op} {fmt(v.threshold, v.metric)}"


def fmt_interval(i: Interval) -> str:
    ci = fmt_ci(i.lower, i.upper, "ttft")
    return f"{fmt(i.estimate)} {ci}".strip()


def fmt_change(change: float | None) -> str:
    return "n/a" if change is None else f"{change:+.1%}"


def fmt_started(run: RunFolder) -> str:
    if not run.started:
        return "not recorded"
    try:
        when = dt.datetime.fromisoformat(run.started)
    except ValueError:
        return run.started
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def class_title(c: ClassStats) -> str:
    who = "All requests" if c.request_class is None else f"Class {c.request_class}"
    errors = f"{c.errors} error{'' if c.errors == 1 else 's'}" + (
        " (" + ", ".join(f"{k} x{n}" for k, n in c.errors_by_kind) + ")" if c.errors else ""
    )
    return (
        f"{who}: {c.requests} measured, {errors}, "
        f"{fmt(c.request_throughput, 'request_throughput')}, "
        f"{fmt(c.output_throughput, 'output_throughput')}"
    )


def ttft_markers(verdicts: Iterable[VerdictRow]) -> list[charts.Marker]:
    out = []
    for v in verdicts:
        if v.metric != "ttft" or not v.statistic:
            continue
        q = int(v.statistic[1:]) / 100 if v.statistic.startswith("p") else None
        label = f"{v.statistic} {threshold(v)}" + (
            f" ({v.request_class})" if v.request_class else ""
        )
        out.append(charts.Marker(label, v.threshold, q))
    return out


def scenario_marker(label: str) -> str:
    """The marker that selects a scenario folder's tests: its scenario name, '-' written '_'.

    A variant folder (``mixed.fcfs``; ``mixed[fcfs]`` in older runs) belongs to its scenario.
    """
    return label.split("[", 1)[0].split(".", 1)[0].replace("-", "_")


def reproduce(run: RunFolder) -> list[tuple[str, str | None, str]]:
    """(what, command or None, note) lines for the reproduce section."""
    out: list[tuple[str, str | None, str]] = []
    scenarios = sorted({scenario_marker(s.label) for s in run.scenarios}) or sorted(
        {v.scenario for v in run.verdicts}
    )
    marker = " or ".join(scenarios) if scenarios else "SCENARIO"
    marker = f'"{marker}"' if " " in marker else marker
    recorded = run.command
    if recorded:
        out.append(("The run's command, as recorded", recorded, ""))
    else:
        guess = f".ci/pytest -m {marker} --slo-profile {run.profile}"
        if run.model != "not recorded" and "," not in run.model:
            guess += f" --slo-model {run.model}"
        if run.environment.get("endpoint"):
            guess += f" --slo-endpoint {run.environment['endpoint']}"
        measured = ", ".join(
            f"{s.label} {sum(not r.warmup for r in s.records)}" for s in run.scenarios
        )
        out.append(
            (
                "The run's command was not recorded",
                guess,
                "This run folder stores no pytest command line (environment.json has no "
                "'command'). The line above is rebuilt from what was recorded (scenario, "
                "profile, model); whether --slo-max-requests, --slo-tighten or other options "
                "were used is not known."
                + (f" Measured requests: {measured}." if measured else ""),
            )
        )
    for start in run.starts:
        cmd = start.get("command")
        if isinstance(cmd, list) and cmd:
            out.append(
                (
                    f"vLLM server {start.get('config', '')}, as the suite started it",
                    " ".join(_shell_word(str(c)) for c in cmd),
                    "from servers/starts.json",
                )
            )
    out.append(
        (
            "Judge these stored records again (other thresholds: add --slo-tighten)",
            f".ci/pytest -m {marker} --slo-replay {_shell_word(str(run.path))}",
            "",
        )
    )
    return out


def _shell_word(word: str) -> str:
    safe = all(c.isalnum() or c in "@%+=:,./-_" for c in word)
    return word if safe and word else "'" + word.replace("'", "'\"'\"'") + "'"


def environment_rows(run: RunFolder) -> list[tuple[str, str]]:
    env = run.environment
    rows = [
        ("vLLM version", run.vllm_version),
        ("model", run.model),
        (
            "profile",
            run.profile
            + (f", chosen by {env['profile_source']}" if env.get("profile_source") else ""),
        ),
        ("hardware", run.hardware),
    ]
    for g in run.gpus:
        rows.append(("GPU", ", ".join(f"{k}: {v}" for k, v in g.items() if k != "uuid")))
    if run.gpus:
        rows.append(("CPU", run.cpu_model))
    rows += [
        ("suite commit", run.suite_commit),
        ("python", str(env.get("python") or "not recorded")),
        ("platform", str(env.get("platform") or "not recorded")),
    ]
    packages = env.get("packages")
    if isinstance(packages, Mapping) and packages:
        rows.append(("packages", ", ".join(f"{k} {v}" for k, v in sorted(packages.items()))))
    if env.get("endpoint"):
        rows.append(("endpoint", str(env["endpoint"])))
    rows += [
        ("run started", fmt_started(run)),
        ("run folder", str(run.path)),
        ("verdicts read from", run.verdicts_source),
    ]
    return rows


def engine_args_text(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(args.items())) or "none recorded"


def _message(case: JunitCase) -> str:
    text = " ".join(case.message.split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def claim_tables(case: JunitCase) -> tuple[list[str], list[list[str]]]:
    """A claim test's ``claim.<variant>.<figure>`` properties as (figure names, rows by variant).

    Figures ending in ``_tok_s`` are output tokens per second, other ``_s`` ones seconds, the
    rest plain numbers (e.g. ``requests``).
    """
    by_variant: dict[str, dict[str, str]] = {}
    for key, value in case.properties.items():
        if not key.startswith("claim.") or key.count(".") < 2:
            continue
        variant, figure = key[len("claim.") :].rsplit(".", 1)
        try:
            number = float(value)
        except ValueError:
            text = value
        else:
            if figure.endswith("_tok_s"):
                text = fmt(number, "output_throughput")
            elif figure.endswith("_s"):
                text = fmt(number, "ttft")
            else:
                text = f"{number:g}"
        by_variant.setdefault(variant, {})[figure] = text
    figures = sorted({f for v in by_variant.values() for f in v})
    rows = [[variant, *(v.get(f, "") for f in figures)] for variant, v in by_variant.items()]
    return figures, rows


def claim_cases(run: RunFolder) -> list[JunitCase]:
    return [t for t in run.other_tests if any(k.startswith("claim.") for k in t.properties)]


def unjudged_tests(run: RunFolder) -> list[JunitCase]:
    """Tests that judged no objective, measured no claim and compared with no baseline."""
    listed = [*claim_cases(run), *regression_tests(run)]
    return [t for t in run.other_tests if t not in listed]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _context_warnings(report: SignoffReport) -> list[str]:
    out = []
    cand = report.candidate
    for base in report.baselines:
        for what, a, b in (
            ("hardware", cand.hardware, base.hardware),
            ("model", cand.model, base.model),
            ("profile", cand.profile, base.profile),
        ):
            if a != b:
                out.append(
                    f"{base.name} ran with another {what} ({b}, candidate {a}): its changes "
                    f"mix the release with the {what}"
                )
    return out


# ---- HTML -----------------------------------------------------------------------------------

CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #f4f5f7; color: #1d1d1f;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 2px solid #e3e5e8; }
h3 { font-size: 15px; margin: 20px 0 8px; }
.sub { color: #555; margin: 0 0 14px; }
.result { display: inline-block; padding: 8px 16px; border-radius: 6px; font-weight: 700;
  font-size: 18px; margin-right: 10px; }
table { border-collapse: collapse; margin: 6px 0 12px; width: 100%; }
th, td { border: 1px solid #dfe1e5; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.msg { color: #444; font-size: 12.5px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 700;
  font-size: 12px; }
.PASS { background: #e3f4e8; color: #17692e; }
.FAIL, .ERROR, .failed, .error { background: #fde5e7; color: #a1001c; }
.INCONCLUSIVE, .skipped { background: #fff2cc; color: #7a5200; }
.INVALID { background: #ece3f6; color: #4f237a; }
.NO-VERDICTS, .passed { background: #eceff3; color: #333; }
.INCOMPLETE { background: #fde5e7; color: #a1001c; }
.worse { color: #a1001c; font-weight: 600; }
.better { color: #17692e; font-weight: 600; }
.note { color: #555; font-size: 12.5px; }
.warn { background: #fff7e0; border-left: 4px solid #e0a800; padding: 6px 10px; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr));
  gap: 12px 24px; align-items: start; }
figure { margin: 0; }
figcaption { font-size: 12.5px; color: #555; margin-top: 2px; }
svg.plot { width: 100%; height: auto; display: block; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 8px 10px; white-space: pre-wrap;
  overflow-wrap: anywhere; font-size: 12.5px; margin: 4px 0 10px; }
dl.sign { display: grid; grid-template-columns: 160px 1fr; gap: 18px 12px; max-width: 720px; }
dl.sign dd { margin: 0; border-bottom: 1px solid #999; min-height: 20px; }
pre .w { white-space: nowrap; }
footer { margin-top: 30px; color: #777; font-size: 12px; }
@media print { body { background: #fff; } main { padding: 0; } h2 { break-after: avoid; }
  figure, table { break-inside: avoid; } }
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _badge(outcome: str) -> str:
    return f"<span class='badge {_e(outcome.replace(' ', '-'))}'>{_e(outcome)}</span>"


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], raw: bool = False) -> str:
    """A table of escaped cells; ``raw`` rows hold cells that are already HTML."""
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(c if raw else f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _lag1(v: VerdictRow) -> str:
    return "" if v.lag1 is None or math.isnan(v.lag1) else f"{v.lag1:.2f}"


VERDICT_NOTE = (
    "PASS: the whole confidence interval meets the threshold; FAIL: the whole interval misses "
    "it, or the server failed the run (errors past the scenario's bound, or it died); "
    "INCONCLUSIVE: it straddles the threshold, or the run was not steady (counts as not passed "
    "for sign-off); INVALID: the client could not vouch for the measurement (a lagging schedule, "
    "requests the server rejected as malformed). n (eff.): requests judged, and what they count "
    "for once serial correlation is accounted for; lag-1: their lag-1 autocorrelation in send "
    "order. "
)


def _verdict_table(verdicts: Sequence[VerdictRow], confidence: float) -> str:
    head = [
        "scenario",
        "objective",
        "outcome",
        "estimate",
        f"{confidence:.0%} CI",
        "n",
        "lag-1",
        "threshold",
        "message",
    ]
    rows = [
        [
            f"<td>{_e(v.scenario)}</td>",
            f"<td>{_e(v.name)}</td>",
            f"<td>{_badge(v.outcome.value)}</td>",
            f"<td class='num'>{_e(fmt(v.estimate, v.metric))}</td>",
            f"<td class='num'>{_e(verdict_ci(v))}</td>",
            f"<td class='num'>{_e(v.n_shown)}</td>",
            f"<td class='num'>{_e(_lag1(v))}</td>",
            f"<td class='num'>{_e(threshold(v))}</td>",
            f"<td class='msg'>{_e(v.message)}</td>",
        ]
        for v in verdicts
    ]
    return _table(head, rows, raw=True)


def regression_tests(run: RunFolder) -> tuple[JunitCase, ...]:
    """The run's test_regression[...] cases: shown under "What changed" (reports/changes.py)."""
    return changes.regression_cases(run)


def _other_tests_html(tests: Sequence[JunitCase]) -> str:
    tests = [t for t in tests if "slo.regression.mode" not in t.properties]
    if not tests:
        return ""
    rows = [
        [
            f"<td>{_e(t.test_id)}</td>",
            f"<td>{_badge(t.status)}</td>",
            f"<td class='msg'>{_e(_message(t))}</td>",
        ]
        for t in tests
    ]
    return (
        "<h3>Tests without a verdict</h3><p class='note'>Test cases in junit.xml that judged no "
        "objective: tests that stopped before judging, or checks of another kind.</p>"
        + _table(["test", "status", "message"], rows, raw=True)
    )


def _claims_html(run: RunFolder) -> str:
    cases = claim_cases(run)
    if not cases:
        return ""
    parts = [
        "<section id='claims'><h2>Claims measured</h2><p class='note'>Tuning advice tested as "
        "a comparison: the same load (same seed) under each variant's engine args, one server "
        "at a time. The test asserts only the direction named in its title.</p>"
    ]
    for case in cases:
        figures, rows = claim_tables(case)
        parts.append(f"<h3>{_e(case.name)} {_badge(case.status)}</h3>")
        if case.message:
            parts.append(f"<p class='msg'>{_e(_message(case))}</p>")
        parts.append(_table(["variant", *figures], rows))
    return "".join(parts) + "</section>"


def _comparison_html(report: SignoffReport) -> str:
    if not report.baselines:
        return ""
    runs = [report.candidate, *report.baselines]
    run_rows = []
    for i, run in enumerate(runs):
        result, _ = overall(run)
        run_rows.append(
            [
                f"<td>{'candidate' if i == 0 else f'baseline {i}'}</td>",
                f"<td>{_e(run.name)}</td>",
                f"<td>{_e(run.vllm_version)}</td>",
                f"<td>{_e(run.model)}</td>",
                f"<td>{_e(run.profile)}</td>",
                f"<td>{_e(run.hardware)}</td>",
                f"<td>{_e(fmt_started(run))}</td>",
                f"<td>{_badge(result)}</td>",
            ]
        )
    head = ["scenario", "objective", f"candidate ({report.candidate.vllm_version})"]
    for i, base in enumerate(report.baselines, 1):
        head += [f"baseline {i} ({base.vllm_version})", f"change vs baseline {i}"]
    rows = []
    for r in report.comparison:
        cells = [f"<td>{_e(r.scenario)}</td>", f"<td>{_e(r.objective)}</td>"]
        cells.append(_estimate_cell(r.candidate))
        for cell in r.baselines:
            cells.append(_estimate_cell(cell.verdict))
            word = cell.verdict_word
            cls = f" {word}" if word in ("worse", "better") else ""
            text = f"{fmt_change(cell.change)} {word}".strip()
            cells.append(f"<td class='num{cls}'>{_e(text)}</td>")
        rows.append(cells)
    warnings = "".join(f"<p class='warn'>{_e(w)}</p>" for w in _context_warnings(report))
    return (
        "<section id='comparison'><h2>Compared with earlier runs</h2>"
        + _table(
            ["role", "run", "vLLM", "model", "profile", "hardware", "started", "result"],
            run_rows,
            raw=True,
        )
        + warnings
        + _table(head, rows, raw=True)
        + "<p class='note'>Change = (candidate - baseline) / baseline of each objective's "
        "estimate; worse means further from meeting the objective (higher latency, lower "
        "throughput). Where the two runs' confidence intervals overlap the change may be "
        "noise, and it says so. Objectives are matched on scenario and statistic, even where "
        "the threshold changed.</p></section>"
    )


def _estimate_cell(v: VerdictRow | None) -> str:
    if v is None:
        return "<td class='num'>not judged</td>"
    return (
        f"<td class='num'>{_e(fmt(v.estimate, v.metric))} {_badge(v.outcome.value)}"
        f"<br><span class='note'>threshold {_e(threshold(v))}</span></td>"
    )


def _stats_html(stats: Sequence[ClassStats], confidence: float) -> str:
    out = []
    for c in stats:
        rows = []
        for row in c.rows:
            cells = [
                f"<td>{_e(row.metric)}</td>",
                f"<td class='num'>{row.n}</td>",
                f"<td class='num'>{row.failed}</td>",
                f"<td class='num'>{_e(fmt(row.mean))}</td>",
            ]
            cells += [f"<td class='num'>{_e(fmt_interval(i))}</td>" for _, i in row.percentiles]
            rows.append(cells)
        head = ["metric", "samples", "failed", "mean"] + [f"p{p}" for p in PERCENTILES]
        out.append(f"<h3>{_e(class_title(c))}</h3>" + _table(head, rows, raw=True))
    out.append(
        f"<p class='note'>Percentile [{confidence:.0%} confidence interval]: order statistics "
        "at the effective sample size (serial correlation accounted for), as the verdicts use; "
        "∞ where the sample is too small or too clustered to bound "
        f"that side. Failed requests count as infinitely slow. {', '.join(sorted(NO_INTERVAL))} "
        "has no interval: gaps within one request are not independent samples.</p>"
    )
    return "".join(out)


def difference_text(c: TtftComparison) -> str:
    """client - vLLM only as finely as vLLM's bucket allows; no figure where it could be 0."""
    if c.server is None:
        return ""
    d = c.difference
    if d is None:
        return "within vLLM's bucket: no finer figure"
    return fmt(d[0]) if d[0] == d[1] else f"{fmt(d[0])} to {fmt(d[1])}"


def declared_note(sc: ScenarioRun) -> str:
    """In endpoint mode the scenario's engine args are what it asks for, not what the server
    has; what the server says about itself is shown next to them."""
    if sc.server.get("started_by_suite", True) is not False:
        return ""
    said = sc.server.get("max_model_len")
    told = f"; the server reports max_model_len {said}" if said else ""
    return (
        f" (declared by the scenario, not verified: the server at {sc.server.get('endpoint', '')} "
        f"was started elsewhere{told})"
    )


def stalls_text(sv: ServerSeries) -> str:
    if not sv.stalls:
        return ""
    total = sum(x.end_s - x.start_s for x in sv.stalls)
    spans = "; ".join(f"{x.start_s:.0f}-{x.end_s:.0f} s: {x.why}" for x in sv.stalls[:5])
    return f"vLLM stalled {len(sv.stalls)} time(s), {total:.0f} s in all ({spans})."


def _decomposition_html(d: Decomposition | None) -> str:
    if d is None:
        return (
            "<figure><h3>TTFT decomposition</h3><p class='note'>Not available: this run has no "
            "vLLM histograms (summary.json has no server_metrics: the run predates them, or the "
            "server's /metrics could not be read).</p></figure>"
        )
    bar = charts.stacked_bar(d.components, d.client_mean, "Mean client TTFT split into parts")
    rows = []
    for c in d.comparisons:
        server = "not recorded" if c.server is None else fmt(c.server)
        if c.server_bucket is not None:
            server += f" (bucket {fmt(c.server_bucket[0])} to {fmt(c.server_bucket[1])})"
        rows.append([c.statistic, fmt(c.client), server, difference_text(c)])
    table = _table(["TTFT", "client", "vLLM (histogram)", "client - vLLM"], rows)
    notes = "".join(f"<p class='note'>{_e(n)}</p>" for n in d.notes)
    return (
        "<figure><h3>TTFT decomposition (vLLM histograms)</h3>"
        + bar
        + table
        + "<figcaption>Means are exact (histogram sum / count); vLLM's quantiles are "
        "interpolated within its buckets, so they are only as fine as the bucket shown. "
        f"Over {d.client_n} successful measured requests; vLLM counted {d.server_count}."
        "</figcaption>" + notes + "</figure>"
    )


def _section_html(s: ScenarioSection, confidence: float) -> str:
    sc = s.scenario
    markers = ttft_markers(s.verdicts)
    head = f"<section id='scenario-{_e(sc.label)}'><h2>Scenario {_e(sc.label)}</h2>"
    meta = f"<p class='sub'>engine args: {_e(engine_args_text(sc.engine_args))}"
    meta += _e(declared_note(sc))
    if sc.workload_s is not None:
        meta += f"; workload {sc.workload_s:.0f} s"
    if sc.server.get("ready_s") is not None:
        meta += f"; server ready in {float(sc.server['ready_s']):.0f} s"
    meta += "".join(f"<br>{_e(line)}" for line in engine_lines(sc.server) if line) + "</p>"
    invalid = "".join(f"<p class='warn'>run INVALID: {_e(r)}</p>" for r in sc.invalid_reasons)
    cdf = charts.cdf_chart(s.cdfs, markers, f"TTFT CDF, scenario {sc.label}")
    tl = charts.timeline_chart(
        s.timeline, markers, f"TTFT and requests in flight over time, scenario {sc.label}"
    )
    return (
        head
        + meta
        + invalid
        + "<h3>Percentiles</h3>"
        + _stats_html(s.stats, confidence)
        + "<div class='plots'><figure><h3>TTFT distribution</h3>"
        + cdf
        + "<figcaption>Share of measured requests whose TTFT was at most x, per class. A "
        "percentile objective holds where its marker lies on or left of the curve."
        "</figcaption></figure>"
        + (no_figures_html(sc.server) or _decomposition_html(s.decomposition))
        + "</div><figure><h3>TTFT and load over time</h3>"
        + tl
        + "<figcaption>Each dot is one request at its send time. Requests in flight above "
        "max_num_seqs wait in vLLM's queue.</figcaption></figure>"
        + ("" if no_figures(sc.server) else _server_html(s))
        + "</section>"
    )


def _server_html(s: ScenarioSection) -> str:
    title = "vLLM's queue over time"
    if s.server is None:
        return (
            f"<figure><h3>{title}</h3><p class='note'>Not available: this run has no "
            "server_series.jsonl (it predates the sampling, ran from stored records, or the "
            "server's /metrics could not be read).</p></figure>"
        )
    chart = charts.server_chart(
        s.server, s.timeline.duration_s, f"{title}, scenario {s.scenario.label}"
    )
    return (
        f"<figure><h3>{title}</h3>"
        + chart
        + (f"<p class='warn'>{_e(stalled)}</p>" if (stalled := stalls_text(s.server)) else "")
        + "<figcaption>From vLLM's own /metrics, read during the workload: requests running "
        "and waiting in its scheduler and KV-cache use as snapshots at each reading (a request "
        "shorter than the interval can fall between two), and vLLM's own mean TTFT of the "
        "requests whose first token came in each interval. Same time axis as above."
        "</figcaption>"
        "</figure>"
    )


def render_html(report: SignoffReport) -> str:
    run = report.candidate
    scenarios = ", ".join(s.scenario.label for s in report.sections) or ", ".join(
        sorted({v.scenario for v in run.verdicts})
    )
    title = f"SLO sign-off: {scenarios} on vLLM {run.vllm_version}, {run.model}"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>",
        "<header><h1>vLLM SLO sign-off</h1>",
        f"<p class='sub'>{_e(scenarios)} &middot; vLLM {_e(run.vllm_version)} &middot; "
        f"model {_e(run.model)} &middot; profile {_e(run.profile)} &middot; "
        f"{_e(run.hardware)} &middot; run {_e(run.name)}"
        f"{', started ' + _e(fmt_started(run)) if run.started else ''}</p>",
        f"<p><span class='result {_e(report.result.replace(' ', '-'))}'>Result: "
        f"{_e(report.result)}</span>{_e(report.reason)}</p>",
        f"<p class='warn banner'>{_e(banner)}</p>" if (banner := ending_banner(report)) else "",
        "</header>",
        changes.html(run),
        "<section id='verdicts'><h2>Objectives</h2>",
        _verdict_table(run.verdicts, report.confidence)
        if run.verdicts
        else "<p class='warn'>No objective was judged in this run.</p>",
        f"<p class='note'>{_e(VERDICT_NOTE + CLAIM)}</p>",
        _other_tests_html(unjudged_tests(run)),
        "</section>",
        _claims_html(run),
        _comparison_html(report),
        engines_html(run.path),
        *(_section_html(s, report.confidence) for s in report.sections),
        "<section id='environment'><h2>Environment</h2>",
        _table(["what", "value"], environment_rows(run)),
        "</section><section id='reproduce'><h2>Reproduce</h2>",
    ]
    for what, cmd, note in reproduce(run):
        parts.append(f"<h3>{_e(what)}</h3>")
        if cmd:
            # One unbreakable span per word: browsers may wrap after a hyphen, which would
            # show "--port" split as "-" / "-port" in a command meant to be copied.
            words = " ".join(f"<span class='w'>{_e(w)}</span>" for w in cmd.split(" "))
            parts.append(f"<pre>{words}</pre>")
        if note:
            parts.append(f"<p class='note'>{_e(note)}</p>")
    parts += [
        "</section><section id='sign-off'><h2>Sign-off</h2><dl class='sign'>",
        "<dt>Name</dt><dd></dd><dt>Role</dt><dd></dd><dt>Date</dt><dd></dd>",
        "<dt>Decision</dt><dd></dd><dt>Signature</dt><dd></dd></dl></section>",
        f"<footer>Rendered {_e(_now())} from {_e(run.path)} by python -m reports.</footer>",
        "</main></body></html>\n",
    ]
    return "".join(parts)


# ---- Markdown -------------------------------------------------------------------------------


def _md(value: object) -> str:
    """A table cell: pipes escaped, line breaks folded, HTML neutralised."""
    text = " ".join(str(value).split())
    return escape(text, quote=False).replace("|", "\\|")


def _md_table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def render_markdown(report: SignoffReport) -> str:
    run = report.candidate
    lines = [
        f"# vLLM SLO sign-off: {_md(run.name)}",
        "",
        f"**Result: {report.result}** ({_md(report.reason)})",
        "",
        *([f"> **{_md(banner)}**", ""] if (banner := ending_banner(report)) else []),
        f"vLLM {_md(run.vllm_version)} · model {_md(run.model)} · profile {_md(run.profile)} · "
        f"{_md(run.hardware)} · started {_md(fmt_started(run))}",
        "",
        *changes.markdown(run),
        "## Objectives",
        "",
    ]
    if run.verdicts:
        lines += _md_table(
            [
                "scenario",
                "objective",
                "outcome",
                "estimate",
                f"{report.confidence:.0%} CI",
                "n",
                "lag-1",
                "threshold",
            ],
            (
                [
                    v.scenario,
                    v.name,
                    v.outcome.value,
                    fmt(v.estimate, v.metric),
                    verdict_ci(v),
                    v.n_shown,
                    _lag1(v),
                    threshold(v),
                ]
                for v in run.verdicts
            ),
        )
        lines += [f"- {_md(v.message)}" for v in run.verdicts if v.outcome.value != "PASS"]
        lines += ["", _md(VERDICT_NOTE + CLAIM), ""]
    else:
        lines += ["No objective was judged in this run.", ""]
    if unjudged := unjudged_tests(run):
        lines += ["### Tests without a verdict", ""]
        lines += _md_table(
            ["test", "status", "message"],
            ([t.test_id, t.status, _message(t)] for t in unjudged),
        )
    claims = claim_cases(run)
    if claims:
        lines += ["## Claims measured", ""]
    for case in claims:
        figures, variants = claim_tables(case)
        lines += [f"### {_md(case.name)}: {case.status}", ""]
        lines += _md_table(["variant", *figures], variants)
    if report.baselines:
        lines += ["## Compared with earlier runs", ""]
        lines += _md_table(
            ["role", "run", "vLLM", "hardware", "result"],
            (
                [
                    "candidate" if i == 0 else f"baseline {i}",
                    r.name,
                    r.vllm_version,
                    r.hardware,
                    overall(r)[0],
                ]
                for i, r in enumerate([run, *report.baselines])
            ),
        )
        lines += [f"> {_md(w)}" for w in _context_warnings(report)]
        head = ["scenario", "objective", f"candidate ({run.vllm_version})"]
        for i, base in enumerate(report.baselines, 1):
            head += [f"baseline {i} ({base.vllm_version})", f"change vs baseline {i}"]
        rows = []
        for r in report.comparison:
            row: list[object] = [r.scenario, r.objective, _md_estimate(r.candidate)]
            for cell in r.baselines:
                row += [
                    _md_estimate(cell.verdict),
                    f"{fmt_change(cell.change)} {cell.verdict_word}".strip(),
                ]
            rows.append(row)
        lines += _md_table(head, rows)
    if (engines := stored_engines(run.path)) is not None:
        lines += [engines_markdown(engines)]
    for s in report.sections:
        sc = s.scenario
        lines += [
            f"## Scenario {_md(sc.label)}",
            "",
            f"Engine args: {_md(engine_args_text(sc.engine_args) + declared_note(sc))}",
            "",
            *engine_lines(sc.server),
        ]
        lines += [f"> run INVALID: {_md(r)}" for r in sc.invalid_reasons]
        for c in s.stats:
            lines += [f"**{_md(class_title(c))}**", ""]
            lines += _md_table(
                [
                    "metric",
                    "samples",
                    "failed",
                    "mean",
                    *(f"p{p}" for p in PERCENTILES),
                ],
                (
                    [
                        row.metric,
                        row.n,
                        row.failed,
                        fmt(row.mean),
                        *(fmt_interval(i) for _, i in row.percentiles),
                    ]
                    for row in c.rows
                ),
            )
        lines += [
            f"Percentile [{report.confidence:.0%} confidence interval]: order statistics at the "
            "effective sample size, as the verdicts use; failed requests count as infinitely "
            "slow; itl has no interval.",
            "",
        ]
        if s.server is not None:
            sv = s.server
            lines += [
                f"vLLM /metrics during the workload ({len(sv.t_s)} samples, every "
                f"{sv.interval_s:.1f} s): running peak {max(sv.running):.0f}, waiting peak "
                f"{max(sv.waiting):.0f}, KV cache peak {max(sv.kv_cache_usage):.0%}, "
                f"{sv.preemptions} preemptions. {_md(stalls_text(sv))}",
                "",
            ]
        d = s.decomposition
        if no_figures(sc.server):
            pass  # said under the scenario's heading
        elif d is None:
            lines += ["TTFT decomposition: not available (no vLLM histograms in this run).", ""]
        else:
            lines += ["**TTFT decomposition (means, vLLM histograms)**", ""]
            lines += _md_table(
                ["part", "mean", "share"],
                (
                    [c.name, fmt(c.seconds), f"{c.seconds / d.client_mean:.0%}"]
                    for c in d.components
                ),
            )
            lines += _md_table(
                ["TTFT", "client", "vLLM (histogram)", "client - vLLM"],
                (
                    [
                        c.statistic,
                        fmt(c.client),
                        "not recorded" if c.server is None else fmt(c.server),
                        difference_text(c),
                    ]
                    for c in d.comparisons
                ),
            )
            lines += [f"> {_md(n)}" for n in d.notes]
    lines += ["## Environment", ""]
    lines += _md_table(["what", "value"], environment_rows(run))
    lines += ["## Reproduce", ""]
    for what, cmd, note in reproduce(run):
        lines.append(f"{_md(what)}:")
        lines.append("")
        if cmd:
            lines += ["```", cmd, "```", ""]
        if note:
            lines += [_md(note), ""]
    lines += ["Plots: signoff.html (same folder).", ""]
    return "\n".join(lines)


def _md_estimate(v: VerdictRow | None) -> str:
    return "not judged" if v is None else f"{fmt(v.estimate, v.metric)} {v.outcome.value}"


def write_signoff(run_dirs: Sequence[Path], out_dir: Path | None = None) -> SignoffFiles:
    """Render signoff.html and signoff.md for the first run folder, the others as baselines.

    Written into ``out_dir`` (default: the first run folder).
    """
    if not run_dirs:
        raise ValueError("write_signoff needs at least one run folder")
    runs = [load_run(p) for p in run_dirs]
    report = build_report(runs[0], runs[1:])
    out = out_dir if out_dir is not None else run_dirs[0]
    files = SignoffFiles(out / "signoff.html", out / "signoff.md")
    write_atomic(files.html, render_html(report).encode())
    write_atomic(files.markdown, render_markdown(report).encode())
    return files
