"""What a ledger keeps of a scenario run: its verdicts, their figures, and the run's calibration.

A run folder (``--slo-report-dir``) is large and does not outlive its machine, so
``repeat_scenarios.py`` keeps one JSON line per run (``RunRecord``) with what its tally needs:
every objective's outcome, estimate, effective sample size, forecast and tightened outcome, and
every claim test's outcome from ``junit.xml``. A run is named by when it ended and the commit it
ran (from its ``benchmark.json``) and is recorded once.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scipy.stats import norm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reports.junit_xml import JunitCase, read_junit  # noqa: E402
from reports.run_files import read_environment, read_verdicts  # noqa: E402
from slo.planning import pass_chance, requests_needed  # noqa: E402
from slo.records import from_row  # noqa: E402
from slo.stats import RunSummary, summarize  # noqa: E402
from slo.vocabulary import PER_REQUEST_METRICS, POOLED_METRICS  # noqa: E402


@functools.cache
def _records(path: Path, request_class: str | None) -> RunSummary:
    """A run's records summarised once: every objective of a run forecasts from them."""
    rows = [from_row(json.loads(line)) for line in path.read_text().splitlines() if line]
    return summarize(rows, request_class=request_class)


def forecast(folder: Path, row: dict[str, Any]) -> tuple[float, str]:
    """How often a repeat of this run would PASS the row's objective, and the room the run
    had (see the docstring)."""
    conf, threshold, est = float(row["confidence"]), float(row["threshold"]), row["estimate"]
    below = row["comparison"] == "<="
    statistic, metric = str(row["statistic"] or ""), str(row["metric"])
    records = folder / str(row["scenario"]) / "records.jsonl"
    per_request = metric in PER_REQUEST_METRICS and metric not in POOLED_METRICS
    if statistic.startswith("p") and per_request and records.exists():
        values = _records(records, row["request_class"]).samples(metric)
        values = values[int(row.get("warmup_dropped") or 0) :]
        if not values or row.get("n_eff") is None:
            return math.nan, ""
        p_over = sum(v > threshold for v in values) / len(values)
        q = int(statistic[1:]) / 100
        n_eff = float(row["n_eff"])
        # ">=": PASS is the interval wholly above the threshold.
        chance = pass_chance(q, conf, p_over, len(values), n_eff, below=below)
        need = requests_needed(q, conf, p_over, 1.0, below=below)
        return chance, "" if need is None else f"n_eff x{n_eff / need:.2f}"
    lower, upper = row.get("ci_lower"), row.get("ci_upper")
    if est is None or lower is None or upper is None:
        return math.nan, ""
    half = float(upper - est) if below else float(est - lower)
    if not math.isfinite(half) or half <= 0:
        return math.nan, ""
    z = float(norm.ppf(1 - (1 - conf) / 2))
    margin = (threshold - est) if below else (est - threshold)
    return float(norm.cdf(z * margin / half - z)), f"{margin / half:.1f} half-widths"


def print_forecasts(folders: list[Path]) -> None:
    print(f"{'run':<16}{'objective':<48}{'outcome':>13}  forecast  room")
    for folder in folders:
        for v in read_verdicts(folder):
            key = f"{v['scenario']}: {v['objective']}"
            chance, room = forecast(folder, v)
            print(f"{folder.name:<16}{key:<48}{v['outcome']:>13}  {chance:8.3f}  {room}")


def claim_outcome(case: JunitCase) -> str | None:
    """A claim test's verdict from its junit case (fixtures/claims.py words the failures)."""
    if case.status == "skipped":
        return None
    if case.status == "passed":
        return "PASS"
    if "run INVALID" in case.message:
        return "INVALID"
    return "INCONCLUSIVE" if "(undecided)" in case.message else "FAIL"


NO_VERDICT = " (no verdict)"  # the key's end for an objective test that reached no verdict

Outcome = tuple[str, str, dict[str, Any] | None, str | None]
"""(objective or test, outcome, verdict row, scenario)"""


def outcomes(folder: Path) -> list[Outcome]:
    """Every verdict of a run folder: the objectives from verdicts.json, the other tests
    (claims) from junit.xml, and as a FAIL each objective test that failed or errored without
    reaching a verdict (a server that would not start, or died): a broken run must not drop out
    of the count of runs that PASSed."""
    judged = read_verdicts(folder)
    rows: list[Outcome] = [
        (f"{v['scenario']}: {v['objective']}", str(v["outcome"]), v, str(v["scenario"]))
        for v in judged
    ]
    scenario_of = {str(v["test"]).split("::")[0]: str(v["scenario"]) for v in judged}
    junit = folder / "junit.xml"
    cases = read_junit(junit).cases if junit.exists() else ()
    for case in cases:
        if not case.name.startswith("test_objective"):
            outcome = claim_outcome(case)
            if outcome is not None:
                key = f"{case.classname.rsplit('.', 1)[-1]}::{case.name}"
                rows.append((key, outcome, None, None))
        elif case.status in ("failed", "error") and not any(
            case.is_test(str(v["test"])) for v in judged
        ):
            test_file = case.test_id.split("::")[0]
            scenario = scenario_of.get(test_file, test_file)  # a file none of whose tests judged
            rows.append((f"{scenario}: {case.name}{NO_VERDICT}", "FAIL", None, scenario))
    return rows


def objective_name(key: str) -> str:
    """The key without its threshold, which a tightened replay changes."""
    return key.split(" <=")[0].split(" >=")[0]


@dataclass(frozen=True)
class Judged:
    """One verdict of a run as the tally counts it: an objective, or a claim (no scenario)."""

    key: str  # "scenario: objective" with its threshold, or "TestClass::test" for a claim
    outcome: str
    scenario: str | None = None
    estimate: float | None = None
    n_eff: float | None = None
    forecast: float | None = None  # None where the run gives none
    fails_from: float | None = None
    tightened: str | None = None  # the outcome in the run's -tightened replay, if any

    @property
    def objective(self) -> str:
        """The key without its scenario: the objective and its threshold, or the claim test."""
        return self.key.removeprefix(f"{self.scenario}: ") if self.scenario else self.key


@dataclass(frozen=True)
class RunRecord:
    """One run as a ledger line keeps it: what the tally needs once the folder is gone."""

    run: str  # when the run ended and the commit it ran
    profile: str
    requests: dict[str, int]  # per scenario, the calibration it ran at (see record_of)
    verdicts: tuple[Judged, ...]


def _number(value: Any) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else float(value)


def run_name(folder: Path) -> str:
    """When the run ended and the commit it ran, "+changes" where the checkout had uncommitted
    changes (pytest-benchmark's record of both)."""
    path = folder / "benchmark.json"
    info: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    ended = str(info.get("datetime", ""))[:16] or time.strftime(
        "%Y-%m-%dT%H:%M", time.gmtime(folder.stat().st_mtime)
    )
    commit_info = info.get("commit_info") or {}
    commit = str(commit_info.get("id") or "unknown")[:7]
    return f"{ended} {commit}{'+changes' if commit_info.get('dirty') else ''}"


def record_of(folder: Path) -> RunRecord:
    """A run folder, with its -tightened replay where there is one, as the ledger keeps it."""
    replay = folder.with_name(f"{folder.name}-tightened")
    tightened = {
        objective_name(key): outcome
        for key, outcome, row, _ in (outcomes(replay) if replay.is_dir() else [])
        if row is not None  # a claim has no threshold to tighten
    }
    judged = []
    for key, outcome, row, scenario in outcomes(folder):
        if row is None:
            judged.append(Judged(key, outcome, scenario=scenario))
            continue
        judged.append(
            Judged(
                key,
                outcome,
                scenario=str(row["scenario"]),
                estimate=_number(row.get("estimate")),
                n_eff=_number(row.get("n_eff")),
                forecast=_number(forecast(folder, row)[0]),
                fails_from=fails_from(row),
                tightened=tightened.get(objective_name(key)),
            )
        )
    # The calibration a scenario ran at: its smallest class's count (a background class sends
    # for as long as the others run, so its count moves from run to run).
    rows = read_verdicts(folder)
    requests: dict[str, int] = {}
    for row in rows:
        scenario, n = str(row["scenario"]), int(row["n"])
        requests[scenario] = min(requests.get(scenario, n), n)
    profiles = {str(row["profile"]) for row in rows}
    if not profiles:  # nothing judged: the profile the run was started with
        profiles = {str(read_environment(folder).get("profile", "unknown"))}
    profile = profiles.pop() if len(profiles) == 1 else "unknown"
    return RunRecord(run_name(folder), profile, requests, tuple(judged))


def read_ledger(path: Path) -> list[RunRecord]:
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            verdicts = tuple(Judged(**v) for v in row.pop("verdicts"))
            records.append(RunRecord(verdicts=verdicts, **row))
        except (ValueError, TypeError, KeyError) as e:
            raise SystemExit(f"{path}:{number}: not a ledger line ({e}); fix or remove it") from e
    return records


def append_ledger(path: Path, records: list[RunRecord]) -> int:
    """Add the runs the ledger does not hold yet; how many were added."""
    held = {r.run for r in read_ledger(path)} if path.exists() else set()
    new = [r for r in records if r.run not in held]
    with path.open("a") as f:
        for record in new:
            f.write(json.dumps(asdict(record), sort_keys=True) + "\n")
    return len(new)


def load(sources: list[Path]) -> list[RunRecord]:
    """The runs of run folders and ledgers, each run once (the first source that has it)."""
    records: dict[str, RunRecord] = {}
    for source in sources:
        if source.is_dir():
            found = [record_of(source)]
        elif source.suffix == ".jsonl" and source.is_file():
            found = read_ledger(source)
        else:
            raise SystemExit(f"{source}: neither a run folder nor a .jsonl ledger; give either")
        for record in found:
            records.setdefault(record.run, record)
    return list(records.values())


def fails_from(row: dict[str, Any]) -> float | None:
    """How many times tighter the threshold must be for the run's interval to lie wholly on the
    failing side: the size of regression the objective catches (its interval taken as it was;
    a replay recomputes it, so this is approximate)."""
    threshold, lower, upper = (row.get(k) for k in ("threshold", "ci_lower", "ci_upper"))
    if threshold is None or float(threshold) <= 0:
        return None
    bound = lower if row["comparison"] == "<=" else upper  # the side that must cross it
    if bound is None or not math.isfinite(float(bound)) or float(bound) <= 0:
        return None
    ratio = float(threshold) / float(bound)
    return ratio if row["comparison"] == "<=" else 1 / ratio
