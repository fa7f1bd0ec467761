"""How reliably each scenario decides where it is calibrated: run it k times, count verdicts.

Runs ``pytest -m MARKER`` k times, one after another, each into its own run folder, then judges
every stored run again with the thresholds made ``--tighten`` times harder (``--slo-replay``,
no traffic), and prints per objective how often it PASSed, FAILed, was INCONCLUSIVE or INVALID,
with the estimates' spread and the effective sample sizes. A scenario is reliable where it is
calibrated when every objective PASSes in at least 19 runs of 20, and still FAILs when
tightened.

Each run also forecasts how often a repeat like it would PASS (column "forecast": the lowest
over the runs), from its own figures plugged in as the truth: for a pQ objective the fraction
of requests over the threshold and the effective sample size (slo/planning.pass_chance, exact
for that binomial count); for a mean or an aggregate a normal approximation from the interval's
half-width. And the room it had (column "room"): for a pQ, its effective samples over those a
PASS needs with 90% probability at that fraction (x1 is the edge; the clustering moves the
effective samples from run to run, 1.8x to 5x apart on 2 cores); otherwise the distance from
the estimate to the threshold in interval half-widths (a PASS needs 1). A forecast is an
estimate from one run, not a measurement: it says which objectives a few runs already show to
sit far from 19 in 20, and which need the 20 runs. Column "FAILs from": how many times
tighter the threshold must be for every run's interval to lie on the failing side, the size of
regression the objective catches (a threshold far above the figures is a check that rarely can
fail).

A claim test (priority against FCFS, two instances against one) counts too, from junit.xml:
PASS where it passed, INVALID where a run was, INCONCLUSIVE where the interval was undecided,
FAIL otherwise.

Below the objectives, one line per scenario counts the runs in which every objective of that
scenario PASSed (and one line the runs in which every verdict did, claims included), with the
exact two-sided 95% interval (Clopper-Pearson) on that run PASS rate, and a forecast for the
whole scenario: the Bonferroni bound 1 - sum of its objectives' chances of not PASSing (no
assumption on how their verdicts depend on each other), the lowest over the runs. k PASSes in
k runs put the interval's lower end at 0.025^(1/k): 0.83 for 20 in 20, 0.95 for 72 in 72.

Runs made on different days add up: ``--tally SOURCE...`` counts the run folders given (and
their ``-tightened`` replays where present) and the runs of the ledgers given, so 20 runs need
not be one sitting. A ledger (``--ledger FILE.jsonl``) keeps one line per run, with what the
tally needs, so a run still counts once its folder is gone (run folders are large, and CI's
are thrown away): ``-m`` appends each run it makes, ``--tally`` the run folders it is given.
A run is named by when it ended and the commit it ran (from its ``benchmark.json``) and is
recorded once. A tally takes one profile: thresholds differ between machines.

Usage: .venv/bin/python benchmarks/repeat_scenarios.py -m realtime -k 5 [--tighten 3]
       [--out DIR] [--ledger FILE.jsonl] [-- extra pytest args]
       .venv/bin/python benchmarks/repeat_scenarios.py --forecast RUN_DIR [RUN_DIR ...]
       .venv/bin/python benchmarks/repeat_scenarios.py --tally RUN_DIR|FILE.jsonl ...
       [--ledger FILE.jsonl] [--profile NAME]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scipy.stats import binomtest, norm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reports.junit_xml import JunitCase, read_junit  # noqa: E402
from reports.run_files import read_environment, read_verdicts  # noqa: E402
from slo.planning import pass_chance, requests_needed  # noqa: E402
from slo.records import from_row  # noqa: E402
from slo.stats import RunSummary, summarize  # noqa: E402
from slo.vocabulary import PER_REQUEST_METRICS, POOLED_METRICS  # noqa: E402


def run(args: list[str], report_dir: Path) -> int:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--rootdir",
        str(ROOT),
        "-c",
        str(ROOT / "pyproject.toml"),
        "-p",
        "no:cacheprovider",
        "-q",
        "--slo-no-progress",
        f"--slo-report-dir={report_dir}",
        *args,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).returncode


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


def claim_outcome(case: JunitCase) -> str | None:
    """A claim test's verdict from its junit case (fixtures/claims.py words the failures)."""
    if case.status == "skipped":
        return None
    if case.status == "passed":
        return "PASS"
    if "run INVALID" in case.message:
        return "INVALID"
    return "INCONCLUSIVE" if "(undecided)" in case.message else "FAIL"


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
            rows.append((f"{scenario}: {case.name} (no verdict)", "FAIL", None, scenario))
    return rows


def print_forecasts(folders: list[Path]) -> None:
    print(f"{'run':<16}{'objective':<48}{'outcome':>13}  forecast  room")
    for folder in folders:
        for v in read_verdicts(folder):
            key = f"{v['scenario']}: {v['objective']}"
            chance, room = forecast(folder, v)
            print(f"{folder.name:<16}{key:<48}{v['outcome']:>13}  {chance:8.3f}  {room}")


def _objective_name(key: str) -> str:
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
        _objective_name(key): outcome
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
                tightened=tightened.get(_objective_name(key)),
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


@dataclass
class Tally:
    """Verdicts per objective (or claim) over runs, and per objective over their replays."""

    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    tightened: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    estimates: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    n_eff: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    chances: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    reach: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # Per scenario (and "every verdict"): was every verdict of the run a PASS, and the
    # Bonferroni forecast that all of them would be.
    runs: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    run_chances: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, record: RunRecord) -> None:
        passed: dict[str, bool] = defaultdict(lambda: True)
        not_pass: dict[str, float] = defaultdict(float)
        for v in record.verdicts:
            self.counts[v.key][v.outcome] += 1
            passed[ALL_VERDICTS] &= v.outcome == "PASS"
            if v.scenario is None:
                continue
            # A scenario counts apart at each request count it was calibrated to.
            group = f"{v.scenario} ({record.requests.get(v.scenario, '?')} requests)"
            passed[group] &= v.outcome == "PASS"
            for values, value in ((self.estimates, v.estimate), (self.n_eff, v.n_eff)):
                if value is not None:
                    values[v.key].append(value)
            chance = math.nan if v.forecast is None else v.forecast
            self.chances[v.key].append(chance)
            for name in (ALL_VERDICTS, group):
                not_pass[name] += 1 - chance  # nan where no forecast: the bound is unknown
            if v.fails_from is not None:
                self.reach[v.key].append(v.fails_from)
            if v.tightened is not None:
                self.tightened[_objective_name(v.key)][v.tightened] += 1
        for group, all_passed in passed.items():
            self.runs[group].append(all_passed)
            bound = 1 - not_pass[group]
            self.run_chances[group].append(bound if math.isnan(bound) else max(0.0, bound))


ALL_VERDICTS = "every verdict (claims included)"


def pass_rate(runs: list[bool]) -> str:
    """k of n runs PASSed, with the exact 95% interval on the rate."""
    k, n = sum(runs), len(runs)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return f"{k} of {n}  [{ci.low:.2f}, {ci.high:.2f}]"


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


def _counts(c: Counter[str]) -> str:
    return f"{c['PASS']:>5}{c['FAIL']:>5}{c['INCONCLUSIVE']:>5}{c['INVALID']:>5}"


def _lowest(chances: list[float]) -> str:
    """The lowest forecast over the runs that gave one."""
    known = [c for c in chances if not math.isnan(c)]
    return f"{min(known):.3f}" if known else ""


def print_tally(records: list[RunRecord]) -> None:
    """How often each objective and claim PASSed over the runs, and how their ``-tightened``
    replays (where recorded) came out."""
    profiles = sorted({r.profile for r in records})
    if not records:
        raise SystemExit("no runs to tally: check the sources and --profile")
    if len(profiles) > 1:
        raise SystemExit(
            f"the runs span profiles {', '.join(profiles)}: tally one at a time (--profile NAME)"
        )
    t = Tally()
    for record in records:
        t.add(record)
    print(f"{len(records)} runs, profile {', '.join(profiles)}:")
    for record in records:
        print(f"  {record.run}  {' '.join(f'{k}={n}' for k, n in record.requests.items())}")
    with_figures = sum(any(v.estimate is not None for v in r.verdicts) for r in records)
    if with_figures < len(records):
        print(f"(estimates, n_eff, forecasts, replays: from the {with_figures} runs with figures)")
    print(f"{'objective':<48} PASS FAIL  INC  INV  estimate (cv)   n_eff   forecast  FAILs from")
    for key in sorted(t.counts):
        est, neff, chances = t.estimates[key], t.n_eff[key], t.chances[key]
        cv = statistics.pstdev(est) / statistics.fmean(est) if len(est) > 1 else 0.0
        mean = f"{statistics.fmean(est):.4g} ({cv:.1%})" if est else ""
        span = f"{min(neff):.0f}-{max(neff):.0f}" if neff else ""
        chance = _lowest(chances)
        reach = f"x{max(t.reach[key]):.1f} tighter" if t.reach[key] else ""
        print(f"{key:<48}{_counts(t.counts[key])}  {mean:<15} {span:<7} {chance:<9} {reach}")
    print(f"\n{'runs in which every verdict PASSed':<48} runs     95% CI         forecast")
    for group in sorted(t.runs, key=lambda g: (g == ALL_VERDICTS, g)):
        chances = t.run_chances[group]
        print(f"{group:<48} {pass_rate(t.runs[group]):<23} {_lowest(chances)}")
    if t.tightened:
        print("\nthe same runs judged tighter (replay):")
        for key in sorted(t.tightened):
            print(f"{key:<48}{_counts(t.tightened[key])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", dest="marker", help="pytest marker, e.g. realtime")
    parser.add_argument(
        "--forecast", nargs="+", type=Path, help="only forecast from these run folders"
    )
    parser.add_argument(
        "--tally",
        nargs="+",
        type=Path,
        help="only count the verdicts of these run folders and .jsonl ledgers",
    )
    parser.add_argument(
        "--ledger", type=Path, help="a .jsonl file to add each run to (made where missing)"
    )
    parser.add_argument("--profile", help="tally only the runs of this profile, e.g. cpu-tiny")
    parser.add_argument("-k", dest="runs", type=int, default=5, help="runs (default: 5)")
    parser.add_argument("--tighten", type=float, default=3.0, help="replay factor (default: 3)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    if args.ledger is not None and args.ledger.suffix != ".jsonl":
        parser.error(f"--ledger {args.ledger}: a ledger is a .jsonl file; name it FILE.jsonl")
    if args.forecast:
        print_forecasts(args.forecast)
        return
    if args.tally:
        records = load(args.tally)
        if args.ledger is not None:
            folders = {run_name(f) for f in args.tally if f.is_dir()}
            added = append_ledger(args.ledger, [r for r in records if r.run in folders])
            print(f"{added} run(s) added to {args.ledger}")
        if args.profile:
            records = [r for r in records if r.profile == args.profile]
        print_tally(records)
        return
    if not args.marker:
        parser.error("-m MARKER is required unless --forecast or --tally is given")
    out = args.out or ROOT / "slo-runs" / f"repeat-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(args.runs):
        folder = out / f"run{i + 1}"
        t0 = time.monotonic()
        rc = run(["-m", args.marker, *args.extra], folder)
        print(f"run {i + 1}/{args.runs}: exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
        run(
            ["-m", args.marker, f"--slo-replay={folder}", "--slo-tighten", f"{args.tighten:g}"],
            folder.with_name(f"{folder.name}-tightened"),
        )
        records.append(record_of(folder))
        if args.ledger is not None:  # at once: a later run may be stopped
            append_ledger(args.ledger, records[-1:])
    print(f"\n-m {args.marker}, replays {args.tighten:g}x tighter; run folders in {out}")
    print_tally(records)


if __name__ == "__main__":
    main()
