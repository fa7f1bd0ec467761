"""The sign-off page's sections, each built once from the run folder as plain blocks.

HTML and Markdown are laid out from these by reports/page_html.py and reports/page_markdown.py:
what the page says is decided here, and only here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reports import charts
from reports.analysis import (
    NO_INTERVAL,
    PERCENTILES,
    Cdf,
    ClassStats,
    ComparisonRow,
    Timeline,
    overall,
)
from reports.engines import engine_lines, no_figures, no_figures_text
from reports.page import (
    Block,
    Cell,
    CellLike,
    Code,
    Fields,
    Figure,
    Figures,
    Heading,
    Paragraph,
    Section,
    Table,
)
from reports.run_folder import JunitCase, RunFolder, ScenarioRun, VerdictRow
from reports.server_series import ServerSeries
from reports.signoff_format import (
    VERDICT_NOTE,
    claim_cases,
    claim_tables,
    class_title,
    declared_note,
    difference_text,
    engine_args_text,
    environment_rows,
    fmt,
    fmt_change,
    fmt_interval,
    fmt_started,
    lag1,
    message,
    reproduce,
    stalls_text,
    threshold,
    ttft_markers,
    unjudged_tests,
    verdict_ci,
)
from reports.ttft_decomposition import Decomposition
from slo.cold_start import COLD_START_CLAIM
from slo.records import RequestRecord
from slo.verdict import CLAIM
from slo.vocabulary import COLD_START_METRICS


@dataclass(frozen=True)
class ScenarioSection:
    """What one scenario folder shows: its verdicts and the figures computed from its records."""

    scenario: ScenarioRun
    verdicts: tuple[VerdictRow, ...]
    stats: tuple[ClassStats, ...]
    cdfs: tuple[Cdf, ...]
    timeline: Timeline
    decomposition: Decomposition | None
    server: ServerSeries | None = None


def _num(text: object) -> Cell:
    return Cell(str(text), kind="num")


def verdicts(run: RunFolder, confidence: float) -> Section:
    blocks: list[Block] = []
    if run.verdicts:
        head = ("scenario", "objective", "outcome", "estimate", f"{confidence:.0%} CI", "n")
        rows = tuple(
            (
                v.scenario,
                v.name,
                Cell(badge=v.outcome.value),
                _num(fmt(v.estimate, v.metric)),
                _num(verdict_ci(v)),
                _num(v.n_shown),
                _num(lag1(v)),
                _num(threshold(v)),
                Cell(v.message, kind="msg"),
            )
            for v in run.verdicts
        )
        blocks.append(Table((*head, "lag-1", "threshold", "message"), rows))
    else:
        blocks.append(Paragraph.of("No objective was judged in this run.", "warn"))
    blocks.append(Paragraph.of(VERDICT_NOTE + CLAIM, "note"))
    if any(v.metric in COLD_START_METRICS for v in run.verdicts):
        blocks.append(
            Paragraph.of("startup, ttft_cold: n is server starts. " + COLD_START_CLAIM, "note")
        )
    blocks += _unjudged(unjudged_tests(run))
    return Section("verdicts", "Objectives", tuple(blocks))


def _unjudged(tests: Sequence[JunitCase]) -> list[Block]:
    if not tests:
        return []
    rows = tuple((t.test_id, Cell(badge=t.status), Cell(message(t), kind="msg")) for t in tests)
    return [
        Heading("Tests without a verdict"),
        Paragraph.of(
            "Test cases in junit.xml that judged no objective: tests that stopped before "
            "judging, or checks of another kind.",
            "note",
        ),
        Table(("test", "status", "message"), rows),
    ]


def claims(run: RunFolder) -> Section | None:
    cases = claim_cases(run)
    if not cases:
        return None
    blocks: list[Block] = [
        Paragraph.of(
            "Tuning advice tested as a comparison: the same load (same seed) under each "
            "variant's engine args, one server at a time. The test asserts only the direction "
            "named in its title.",
            "note",
        )
    ]
    for case in cases:
        figures, rows = claim_tables(case)
        blocks.append(Heading(case.name, badge=case.status))
        if case.message:
            blocks.append(Paragraph.of(message(case), "msg"))
        blocks.append(Table(("variant", *figures), tuple(tuple(r) for r in rows)))
    return Section("claims", "Claims measured", tuple(blocks))


def _context_warnings(candidate: RunFolder, baselines: Sequence[RunFolder]) -> list[Block]:
    out: list[Block] = []
    for base in baselines:
        for what, a, b in (
            ("hardware", candidate.hardware, base.hardware),
            ("model", candidate.model, base.model),
            ("profile", candidate.profile, base.profile),
        ):
            if a != b:
                out.append(
                    Paragraph.of(
                        f"{base.name} ran with another {what} ({b}, candidate {a}): its "
                        f"changes mix the release with the {what}",
                        "warn",
                    )
                )
    return out


def _estimate(v: VerdictRow | None) -> Cell:
    if v is None:
        return _num("not judged")
    return Cell(fmt(v.estimate, v.metric), v.outcome.value, f"threshold {threshold(v)}", kind="num")


def comparison(
    candidate: RunFolder, baselines: Sequence[RunFolder], rows: Sequence[ComparisonRow]
) -> Section | None:
    if not baselines:
        return None
    runs = tuple(
        (
            "candidate" if i == 0 else f"baseline {i}",
            run.name,
            run.vllm_version,
            run.model,
            run.profile,
            run.hardware,
            fmt_started(run),
            Cell(badge=overall(run)[0]),
        )
        for i, run in enumerate([candidate, *baselines])
    )
    head = ["scenario", "objective", f"candidate ({candidate.vllm_version})"]
    for i, base in enumerate(baselines, 1):
        head += [f"baseline {i} ({base.vllm_version})", f"change vs baseline {i}"]
    changes = []
    for r in rows:
        cells: list[str | Cell] = [r.scenario, r.objective, _estimate(r.candidate)]
        for cell in r.baselines:
            word = cell.verdict_word
            text = f"{fmt_change(cell.change)} {word}".strip()
            shown = Cell(text, kind="worse" if word == "worse" else "num")
            if word == "better":
                shown = Cell(text, kind="better")
            cells += [_estimate(cell.verdict), shown]
        changes.append(tuple(cells))
    blocks: list[Block] = [
        Table(("role", "run", "vLLM", "model", "profile", "hardware", "started", "result"), runs),
        *_context_warnings(candidate, baselines),
        Table(tuple(head), tuple(changes)),
        Paragraph.of(
            "Change = (candidate - baseline) / baseline of each objective's estimate; worse "
            "means further from meeting the objective (higher latency, lower throughput). Where "
            "the two runs' confidence intervals overlap the change may be noise, and it says so. "
            "Objectives are matched on scenario and statistic, even where the threshold changed.",
            "note",
        ),
    ]
    return Section("comparison", "Compared with earlier runs", tuple(blocks))


def _stats(stats: Sequence[ClassStats], confidence: float) -> list[Block]:
    head = ("metric", "samples", "failed", "mean", *(f"p{p}" for p in PERCENTILES))
    out: list[Block] = [Heading("Percentiles")]
    for c in stats:
        rows: tuple[tuple[CellLike, ...], ...] = tuple(
            (
                row.metric,
                _num(row.n),
                _num(row.failed),
                _num(fmt(row.mean)),
                *(_num(fmt_interval(i)) for _, i in row.percentiles),
            )
            for row in c.rows
        )
        out += [Heading(class_title(c)), Table(head, rows)]
    out.append(
        Paragraph.of(
            f"Percentile [{confidence:.0%} confidence interval]: order statistics at the "
            "effective sample size (serial correlation accounted for), as the verdicts use; ∞ "
            "where the sample is too small or too clustered to bound that side. Failed requests "
            f"count as infinitely slow. {', '.join(sorted(NO_INTERVAL))} has no interval: gaps "
            "within one request are not independent samples.",
            "note",
        )
    )
    return out


def _decomposition(d: Decomposition | None) -> Figure:
    if d is None:
        return Figure(
            "TTFT decomposition",
            text=(
                Paragraph.of(
                    "Not available: this run has no vLLM histograms (summary.json has no "
                    "server_metrics: the run predates them, or the server's /metrics could not "
                    "be read).",
                    "note",
                ),
            ),
        )
    parts = tuple(
        (c.name, fmt(c.seconds), f"{c.seconds / d.client_mean:.0%}") for c in d.components
    )
    rows = []
    for c in d.comparisons:
        server = "not recorded" if c.server is None else fmt(c.server)
        if c.server_bucket is not None:
            server += f" (bucket {fmt(c.server_bucket[0])} to {fmt(c.server_bucket[1])})"
        rows.append((c.statistic, fmt(c.client), server, difference_text(c)))
    return Figure(
        "TTFT decomposition (vLLM histograms)",
        svg=charts.stacked_bar(d.components, d.client_mean, "Mean client TTFT split into parts"),
        text=(Table(("part", "mean", "share"), parts),),
        blocks=(
            Table(("TTFT", "client", "vLLM (histogram)", "client - vLLM"), tuple(rows)),
            *(Paragraph.of(n, "note") for n in d.notes),
        ),
        caption="Means are exact (histogram sum / count); vLLM's quantiles are interpolated "
        "within its buckets, so they are only as fine as the bucket shown. "
        f"Over {d.client_n} successful measured requests; vLLM counted {d.server_count}.",
    )


def _server(s: ScenarioSection) -> Figure:
    title = "vLLM's queue over time"
    sv = s.server
    if sv is None:
        return Figure(
            title,
            text=(
                Paragraph.of(
                    "Not available: this run has no server_series.jsonl (it predates the "
                    "sampling, ran from stored records, or the server's /metrics could not be "
                    "read).",
                    "note",
                ),
            ),
        )
    summary = (
        f"vLLM /metrics during the workload ({len(sv.t_s)} samples, every {sv.interval_s:.1f} "
        f"s): running peak {max(sv.running):.0f}, waiting peak {max(sv.waiting):.0f}, KV cache "
        f"peak {max(sv.kv_cache_usage):.0%}, {sv.preemptions} preemptions."
    )
    stalled = stalls_text(sv)
    return Figure(
        title,
        svg=charts.server_chart(sv, s.timeline.duration_s, f"{title}, scenario {s.scenario.label}"),
        text=(Paragraph.of(summary),),
        blocks=(Paragraph.of(stalled, "warn"),) if stalled else (),
        caption="From vLLM's own /metrics, read during the workload: requests running and "
        "waiting in its scheduler and KV-cache use as snapshots at each reading (a request "
        "shorter than the interval can fall between two), and vLLM's own mean TTFT of the "
        "requests whose first token came in each interval. Same time axis as above.",
    )


def _about(sc: ScenarioRun) -> Paragraph:
    line = f"engine args: {engine_args_text(sc.engine_args)}{declared_note(sc)}"
    if sc.workload_s is not None:
        line += f"; workload {sc.workload_s:.0f} s"
    if sc.server.get("ready_s") is not None:
        line += f"; server ready in {float(sc.server['ready_s']):.0f} s"
    return Paragraph((line, *(x for x in engine_lines(sc.server) if x)), "sub")


def _cold_starts(sc: ScenarioRun) -> list[Block]:
    """Each start's figures: what the startup and ttft_cold objectives were judged on."""
    cold = sc.cold_starts
    if cold is None:
        return []
    if cold.unmeasured:
        return [Heading("Cold starts"), Paragraph.of(f"Not measured: {cold.unmeasured}", "warn")]
    rows = tuple(
        (
            _num(i),
            _num(fmt(s.ready_s, "startup")),
            _num(fmt(s.ttft_cold_s, "ttft_cold")),
            _num(", ".join(fmt(_ttft(r)) for r in s.requests)),
            Cell(s.log.rsplit("/", 1)[-1], kind="msg"),
        )
        for i, s in enumerate(cold.starts, 1)
    )
    return [
        Heading("Cold starts"),
        Table(("start", "startup", "ttft_cold", "first requests' TTFT", "server log"), rows),
        Paragraph.of(
            f"Each start: the server's process start to its first healthy answer (startup), "
            f"then the workload's first {cold.requests} prompt(s) sent one at a time before any "
            "warm-up; ttft_cold is the slowest of their TTFTs. The starts are the samples of "
            "the startup and ttft_cold objectives.",
            "note",
        ),
    ]


def _ttft(r: RequestRecord) -> float:
    return r.ttft_s if r.ok and r.ttft_s is not None else math.inf


def scenario(s: ScenarioSection, confidence: float) -> Section:
    sc = s.scenario
    markers = ttft_markers(s.verdicts)
    why = no_figures(sc.server)
    server_side = (
        Figure("Server figures", text=(Paragraph.of(no_figures_text(why), "note"),))
        if why
        else _decomposition(s.decomposition)
    )
    cdf = Figure(
        "TTFT distribution",
        svg=charts.cdf_chart(s.cdfs, markers, f"TTFT CDF, scenario {sc.label}"),
        caption="Share of measured requests whose TTFT was at most x, per class. A percentile "
        "objective holds where its marker lies on or left of the curve.",
    )
    over_time = Figure(
        "TTFT and load over time",
        svg=charts.timeline_chart(
            s.timeline, markers, f"TTFT and requests in flight over time, scenario {sc.label}"
        ),
        caption="Each dot is one request at its send time. Requests in flight above "
        "max_num_seqs wait in vLLM's queue.",
    )
    blocks: list[Block] = [
        _about(sc),
        *((Paragraph.of(sc.prefix_cache.describe(), "sub"),) if sc.prefix_cache else ()),
        *_cold_starts(sc),
        *(Paragraph.of(f"run INVALID: {r}", "warn") for r in sc.invalid_reasons),
        *_stats(s.stats, confidence),
        Figures((cdf, server_side)),
        over_time,
    ]
    if not why:
        blocks.append(_server(s))
    return Section(f"scenario-{sc.label}", f"Scenario {sc.label}", tuple(blocks))


def environment(run: RunFolder) -> Section:
    return Section(
        "environment", "Environment", (Table(("what", "value"), tuple(environment_rows(run))),)
    )


def reproduce_section(run: RunFolder) -> Section:
    blocks: list[Block] = []
    for what, cmd, note in reproduce(run):
        blocks.append(Heading(what))
        if cmd:
            blocks.append(Code(cmd))
        if note:
            blocks.append(Paragraph.of(note, "note"))
    return Section("reproduce", "Reproduce", tuple(blocks))


def sign_off() -> Section:
    return Section(
        "sign-off", "Sign-off", (Fields(("Name", "Role", "Date", "Decision", "Signature")),)
    )
