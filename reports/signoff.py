"""The release sign-off report: one self-contained HTML page and a Markdown summary per run.

The page holds the verdicts, percentiles with their confidence intervals, the TTFT
distribution and timeline, the server-side TTFT decomposition, the environment and the command
to reproduce; with baselines (release N-1, ...) also each objective's change. Plots are inline
SVG, styles inline: the file opens anywhere, offline, and can be attached to a release ticket.
Request records hold no prompt text and nothing here adds any.

The page is built once (``build_page``: reports/page.py's sections and blocks, from
reports/signoff_sections.py) and laid out twice, by reports/page_html.py and
reports/page_markdown.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reports import changes, page_html, page_markdown, signoff_sections
from reports.analysis import (
    ComparisonRow,
    compare,
    confidence_of,
    overall,
    scenario_stats,
    timeline,
    ttft_cdfs,
)
from reports.engines import section as engines_section
from reports.engines import stored as stored_engines
from reports.files import RunEnding, read_ending, write_atomic
from reports.page import Page, Section
from reports.run_folder import RunFolder, load_run
from reports.server_series import server_series
from reports.signoff_format import fmt_started, now
from reports.signoff_sections import ScenarioSection
from reports.ttft_decomposition import decomposition

PLOTS_ELSEWHERE = "Plots: signoff.html (same folder)."


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


def build_page(report: SignoffReport) -> Page:
    """The whole sign-off, once, for both renderers."""
    run = report.candidate
    scenarios = ", ".join(s.scenario.label for s in report.sections) or ", ".join(
        sorted({v.scenario for v in run.verdicts})
    )
    started = f", started {fmt_started(run)}" if run.started else ""
    engines = stored_engines(run.path)
    sections: list[Section | None] = [
        changes.section(run),
        signoff_sections.verdicts(run, report.confidence),
        signoff_sections.claims(run),
        signoff_sections.comparison(run, report.baselines, report.comparison),
        None if engines is None else engines_section(engines),
        *(signoff_sections.scenario(s, report.confidence) for s in report.sections),
        signoff_sections.environment(run),
        signoff_sections.reproduce_section(run),
        signoff_sections.sign_off(),
    ]
    return Page(
        title=f"SLO sign-off: {scenarios} on vLLM {run.vllm_version}, {run.model}",
        heading="vLLM SLO sign-off",
        subtitle=f"{scenarios} · vLLM {run.vllm_version} · model {run.model} · profile "
        f"{run.profile} · {run.hardware} · run {run.name}{started}",
        result=report.result,
        reason=report.reason,
        banner=ending_banner(report) or "",
        sections=tuple(s for s in sections if s is not None),
        footer=f"Rendered {now()} from {run.path} by python -m reports.",
    )


def render_html(report: SignoffReport) -> str:
    return page_html.render(build_page(report))


def render_markdown(report: SignoffReport) -> str:
    return page_markdown.render(build_page(report), PLOTS_ELSEWHERE)


def write_signoff(run_dirs: Sequence[Path], out_dir: Path | None = None) -> SignoffFiles:
    """Render signoff.html and signoff.md for the first run folder, the others as baselines.

    Written into ``out_dir`` (default: the first run folder).
    """
    if not run_dirs:
        raise ValueError("write_signoff needs at least one run folder")
    runs = [load_run(p) for p in run_dirs]
    report = build_report(runs[0], runs[1:])
    page = build_page(report)
    out = out_dir if out_dir is not None else run_dirs[0]
    files = SignoffFiles(out / "signoff.html", out / "signoff.md")
    write_atomic(files.html, page_html.render(page).encode())
    write_atomic(files.markdown, page_markdown.render(page, PLOTS_ELSEWHERE).encode())
    return files
