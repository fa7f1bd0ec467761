"""How reliably each scenario decides where it is calibrated: run it k times, count verdicts.

Runs ``pytest -m MARKER`` k times, one after another, each into its own run folder, then judges
every stored run again with the thresholds made ``--tighten`` times harder (``--slo-replay``,
no traffic), and prints per objective how often it PASSed, FAILed, was INCONCLUSIVE or INVALID,
with the estimates' spread and the effective sample sizes. A scenario is reliable where it is
calibrated when every objective PASSes in at least 19 runs of 20, and still FAILs when
tightened.

Usage: .venv/bin/python benchmarks/repeat_scenarios.py -m realtime -k 5 [--tighten 3]
       [--out DIR] [-- extra pytest args]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


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


def verdicts(report_dir: Path) -> list[dict[str, Any]]:
    path = report_dir / "verdicts.json"
    rows: list[dict[str, Any]] = json.loads(path.read_text()) if path.exists() else []
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", dest="marker", required=True, help="pytest marker, e.g. realtime")
    parser.add_argument("-k", dest="runs", type=int, default=5, help="runs (default: 5)")
    parser.add_argument("--tighten", type=float, default=3.0, help="replay factor (default: 3)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    out = args.out or ROOT / "slo-runs" / f"repeat-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    tightened: dict[str, Counter[str]] = defaultdict(Counter)
    estimates: dict[str, list[float]] = defaultdict(list)
    n_eff: dict[str, list[float]] = defaultdict(list)
    for i in range(args.runs):
        folder = out / f"run{i + 1}"
        t0 = time.monotonic()
        rc = run(["-m", args.marker, *args.extra], folder)
        print(f"run {i + 1}/{args.runs}: exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
        for v in verdicts(folder):
            key = f"{v['scenario']}: {v['objective']}"
            outcomes[key][v["outcome"]] += 1
            if v.get("estimate") is not None:
                estimates[key].append(float(v["estimate"]))
            if v.get("n_eff") is not None:
                n_eff[key].append(float(v["n_eff"]))
        replay = out / f"run{i + 1}-tightened"
        run(
            ["-m", args.marker, f"--slo-replay={folder}", "--slo-tighten", f"{args.tighten:g}"],
            replay,
        )
        for v in verdicts(replay):
            tightened[f"{v['scenario']}: {v['objective'].split(' <=')[0].split(' >=')[0]}"][
                v["outcome"]
            ] += 1
    print(f"\n{args.runs} runs of -m {args.marker}; run folders in {out}")
    print(f"{'objective':<48}{'PASS':>5}{'FAIL':>5}{'INC':>5}{'INV':>5}  estimate (cv)   n_eff")
    for key in sorted(outcomes):
        c = outcomes[key]
        est = estimates[key]
        cv = statistics.pstdev(est) / statistics.fmean(est) if len(est) > 1 else 0.0
        neff = f"{min(n_eff[key]):.0f}-{max(n_eff[key]):.0f}" if n_eff[key] else ""
        print(
            f"{key:<48}{c['PASS']:>5}{c['FAIL']:>5}{c['INCONCLUSIVE']:>5}{c['INVALID']:>5}"
            f"  {statistics.fmean(est) if est else float('nan'):.4g} ({cv:.1%})   {neff}"
        )
    print(f"\nthe same runs judged {args.tighten:g}x tighter (replay):")
    for key in sorted(tightened):
        c = tightened[key]
        print(f"{key:<48}{c['PASS']:>5}{c['FAIL']:>5}{c['INCONCLUSIVE']:>5}{c['INVALID']:>5}")


if __name__ == "__main__":
    main()
