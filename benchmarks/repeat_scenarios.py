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

The objectives are listed under the calibration their runs were judged at (see below). Below
them, one line per calibration counts the runs in which every objective of that scenario PASSed
(and one line the runs in which every verdict did, claims included), with the exact two-sided
95% interval (Clopper-Pearson) on that run PASS rate, and a forecast for the whole scenario:
the Bonferroni bound 1 - sum of its objectives' chances of not PASSing (no assumption on how
their verdicts depend on each other), the lowest over the runs. k PASSes in k runs put the
interval's lower end at 0.025^(1/k): 0.83 for 20 in 20, 0.95 for 72 in 72.

Runs made on different days add up: ``--tally SOURCE...`` counts the run folders given (and
their ``-tightened`` replays where present) and the runs of the ledgers given, so 20 runs need
not be one sitting. A ledger (``--ledger FILE.jsonl``) keeps one line per run, with what the
tally needs, so a run still counts once its folder is gone (run folders are large, and CI's
are thrown away): ``-m`` appends each run it makes, ``--tally`` the run folders it is given.
A run is named by when it ended and the commit it ran (from its ``benchmark.json``) and is
recorded once. A tally takes one profile: thresholds differ between machines. Within one, a
scenario counts apart at each request count and each set of thresholds it was judged against
(the line names them where they changed): runs against a looser bound do not count towards a
tighter one.

Usage: .venv/bin/python benchmarks/repeat_scenarios.py -m realtime -k 5 [--tighten 3]
       [--out DIR] [--ledger FILE.jsonl] [-- extra pytest args]
       .venv/bin/python benchmarks/repeat_scenarios.py --forecast RUN_DIR [RUN_DIR ...]
       .venv/bin/python benchmarks/repeat_scenarios.py --tally RUN_DIR|FILE.jsonl ...
       [--ledger FILE.jsonl] [--profile NAME]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from run_ledger import (
    NO_VERDICT,
    ROOT,
    RunRecord,
    append_ledger,
    load,
    objective_name,
    print_forecasts,
    record_of,
    run_name,
)
from scipy.stats import binomtest


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


Row = tuple[str, str]
"""(section, verdict): a scenario's calibration (see calibrations) or CLAIMS, and the objective
with its threshold, or the claim test"""

CLAIMS = "claims"


@dataclass
class Tally:
    """Verdicts per objective (or claim) over runs, and per objective over their replays, each
    under the calibration it was judged at."""

    counts: dict[Row, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    tightened: dict[Row, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    estimates: dict[Row, list[float]] = field(default_factory=lambda: defaultdict(list))
    n_eff: dict[Row, list[float]] = field(default_factory=lambda: defaultdict(list))
    chances: dict[Row, list[float]] = field(default_factory=lambda: defaultdict(list))
    reach: dict[Row, list[float]] = field(default_factory=lambda: defaultdict(list))
    # Per calibration (and "every verdict"): was every verdict of the run a PASS, and the
    # Bonferroni forecast that all of them would be.
    runs: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    run_chances: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, record: RunRecord, groups: dict[str, str]) -> None:
        """Count a run; ``groups`` names the calibration of each of its scenarios."""
        passed: dict[str, bool] = defaultdict(lambda: True)
        not_pass: dict[str, float] = defaultdict(float)
        for v in record.verdicts:
            passed[ALL_VERDICTS] &= v.outcome == "PASS"
            if v.scenario is None:
                self.counts[CLAIMS, v.key][v.outcome] += 1
                continue
            group = groups[v.scenario]
            row = (group, v.objective)
            self.counts[row][v.outcome] += 1
            passed[group] &= v.outcome == "PASS"
            for values, value in ((self.estimates, v.estimate), (self.n_eff, v.n_eff)):
                if value is not None:
                    values[row].append(value)
            chance = math.nan if v.forecast is None else v.forecast
            self.chances[row].append(chance)
            for name in (ALL_VERDICTS, group):
                not_pass[name] += 1 - chance  # nan where no forecast: the bound is unknown
            if v.fails_from is not None:
                self.reach[row].append(v.fails_from)
            if v.tightened is not None:
                self.tightened[group, objective_name(row[1])][v.tightened] += 1
        for group, all_passed in passed.items():
            self.runs[group].append(all_passed)
            bound = 1 - not_pass[group]
            self.run_chances[group].append(bound if math.isnan(bound) else max(0.0, bound))


ALL_VERDICTS = "every verdict (claims included)"


def calibrations(records: list[RunRecord]) -> dict[str, dict[str, str]]:
    """The calibration each run's scenarios count under: by run, then by scenario.

    A scenario counts apart at each request count and each set of thresholds it ran with: runs
    judged against looser bounds must not count towards tighter ones. A run in which some
    objectives reached no verdict (its server died) judged fewer; it counts under the
    calibration, among those that judged all its thresholds and more, with the most runs. The
    label names the thresholds only where a scenario ran at one request count with several sets.
    """
    seen: dict[tuple[str, str], Counter[frozenset[str]]] = defaultdict(Counter)
    runs: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}
    for record in records:
        for scenario in {v.scenario for v in record.verdicts if v.scenario is not None}:
            n = str(record.requests.get(scenario, "?"))
            judged = frozenset(
                v.objective
                for v in record.verdicts
                if v.scenario == scenario and not v.key.endswith(NO_VERDICT)
            )
            seen[scenario, n][judged] += 1
            runs[record.run, scenario] = (n, judged)
    # A set that another contains is a partial run's, not a calibration of its own.
    full = {
        at: {s for s in sets if not any(s < other for other in sets)} for at, sets in seen.items()
    }
    labels: dict[str, dict[str, str]] = defaultdict(dict)
    for (run, scenario), (n, judged) in runs.items():
        sets, calibrated = seen[scenario, n], full[scenario, n]
        home = max((s for s in calibrated if judged <= s), key=lambda s: (sets[s], sorted(s)))
        label = f"{scenario} ({n} requests"
        if len(calibrated) > 1:
            label += "; " + ", ".join(sorted(home))
        labels[run][scenario] = label + ")"
    return labels


def pass_rate(runs: list[bool]) -> str:
    """k of n runs PASSed, with the exact 95% interval on the rate."""
    k, n = sum(runs), len(runs)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return f"{k} of {n}  [{ci.low:.2f}, {ci.high:.2f}]"


def _counts(c: Counter[str]) -> str:
    return f"{c['PASS']:>5}{c['FAIL']:>5}{c['INCONCLUSIVE']:>5}{c['INVALID']:>5}"


def _lowest(chances: list[float]) -> str:
    """The lowest forecast over the runs that gave one."""
    known = [c for c in chances if not math.isnan(c)]
    return f"{min(known):.3f}" if known else ""


def _print_objectives(t: Tally) -> None:
    """One row per objective (and claim), under the calibration it was judged at."""
    print(f"{'objective':<48} PASS FAIL  INC  INV  estimate (cv)   n_eff   forecast  FAILs from")
    section = None
    for row in sorted(t.counts, key=lambda r: (r[0] == CLAIMS, r)):
        if row[0] != section:
            section = row[0]
            print(section)
        est, neff, chances = t.estimates[row], t.n_eff[row], t.chances[row]
        cv = statistics.pstdev(est) / statistics.fmean(est) if len(est) > 1 else 0.0
        mean = f"{statistics.fmean(est):.4g} ({cv:.1%})" if est else ""
        span = f"{min(neff):.0f}-{max(neff):.0f}" if neff else ""
        chance = _lowest(chances)
        reach = f"x{max(t.reach[row]):.1f} tighter" if t.reach[row] else ""
        name = f"  {row[1]}"
        print(f"{name:<48}{_counts(t.counts[row])}  {mean:<15} {span:<7} {chance:<9} {reach}")


def _print_tightened(t: Tally) -> None:
    """The outcomes of the ``-tightened`` replays, per calibration."""
    print("\nthe same runs judged tighter (replay):")
    section = None
    for group, name in sorted(t.tightened):
        if group != section:
            section = group
            print(section)
        print(f"{'  ' + name:<48}{_counts(t.tightened[group, name])}")


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
    groups = calibrations(records)
    for record in records:
        t.add(record, groups[record.run])
    print(f"{len(records)} runs, profile {', '.join(profiles)}:")
    for record in records:
        print(f"  {record.run}  {' '.join(f'{k}={n}' for k, n in record.requests.items())}")
    with_figures = sum(any(v.estimate is not None for v in r.verdicts) for r in records)
    if with_figures < len(records):
        print(f"(estimates, n_eff, forecasts, replays: from the {with_figures} runs with figures)")
    _print_objectives(t)
    print(f"\n{'runs in which every verdict PASSed':<48} runs     95% CI         forecast")
    for group in sorted(t.runs, key=lambda g: (g == ALL_VERDICTS, g)):
        chances = t.run_chances[group]
        name = group if len(group) < 48 else f"{group}\n{'':<48}"  # thresholds: a line alone
        print(f"{name:<48} {pass_rate(t.runs[group]):<23} {_lowest(chances)}")
    if t.tightened:
        _print_tightened(t)


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
