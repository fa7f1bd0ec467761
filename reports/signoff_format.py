"""What the sign-off says, as text: figures with their units, the reproduce commands, notes.

Shared by every section of the page (reports/signoff_sections.py) and by the JUnit report, so a
figure reads the same wherever it is shown.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from reports import changes, charts
from reports.analysis import ClassStats, Interval
from reports.run_folder import JunitCase, RunFolder, ScenarioRun, VerdictRow
from reports.server_series import ServerSeries
from reports.ttft_decomposition import TtftComparison
from slo.errors import UnitError
from slo.units import Dimension, dimension_of, format_quantity

MESSAGE_LIMIT = 600
"""Characters of a failed test's message that are kept (pytest may print long tracebacks)."""


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


def slo_files(run: RunFolder) -> dict[str, str]:
    """Scenario -> the SLO file its tests were collected from (their test id's file is no
    Python module), made absolute with the rootdir the run recorded."""
    root = run.environment.get("rootdir")
    out = {}
    for v in run.verdicts:
        file = v.test.split("::", 1)[0]
        if file and not file.endswith(".py"):
            out[v.scenario] = os.path.normpath(os.path.join(str(root), file)) if root else file
    return out


def _profile_words(run: RunFolder) -> list[str]:
    """The run's profile, and the team's profiles file it may come from."""
    one = run.profile != "not recorded" and "," not in run.profile
    words = ["--slo-profile", run.profile] if one else []
    if run.environment.get("profiles_file"):
        words.append(f"--slo-profiles={run.environment['profiles_file']}")
    return words


def reproduce(run: RunFolder) -> list[tuple[str, str | None, str]]:
    """(what, command or None, note) lines for the reproduce section."""
    out: list[tuple[str, str | None, str]] = []
    files = slo_files(run)
    scenarios = sorted(
        {scenario_marker(s.label) for s in run.scenarios if s.label.split(".")[0] not in files}
    ) or sorted({v.scenario for v in run.verdicts if v.scenario not in files})
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
    again = "Judge these stored records again (other thresholds: add --slo-tighten)"
    if scenarios or not files:
        cmd = f".ci/pytest -m {marker} --slo-replay {_shell_word(str(run.path))}"
        if run.environment.get("profiles_file"):  # the profile may be one of the team's own
            cmd += "".join(f" {_shell_word(w)}" for w in _profile_words(run))
        out.append((again, cmd, ""))
    if files:
        # The SLO files by their absolute paths: the command works from any folder.
        words = ["python", "-m", "pytest", *sorted(set(files.values()))]
        words += [f"--slo-replay={run.path}", *_profile_words(run)]
        out.append((again, " ".join(_shell_word(w) for w in words), ""))
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


def message(case: JunitCase) -> str:
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


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def lag1(v: VerdictRow) -> str:
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


def regression_tests(run: RunFolder) -> tuple[JunitCase, ...]:
    """The run's test_regression[...] cases: shown under "What changed" (reports/changes.py)."""
    return changes.regression_cases(run)


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
