"""Wrong-verdict rates of the cold-start rules (slo/cold_start.py), by simulation.

Verdicts: for each start shape of slo/simulate.py (log-normal, the rule's model; a fixed part plus
an exponential delay; a gamma; a 10% slow mode), each statistic and each number of starts, the
threshold sits on the true quantile, so any PASS or FAIL is wrong. Printed: % PASS / % FAIL.

Comparisons: start pairs of two arms (AB BA ...) with a drifting machine, log-sd sigma per start
and an order effect (the first start of a pair slower); at a true ratio of 1.1 (on the 10%
margin) REGRESSION and NO CHANGE are wrong; at 1.0 REGRESSION is wrong and NO CHANGE right; at
1.25 REGRESSION is right. Printed: % REGRESSION / NO CHANGE / IMPROVEMENT / INCONCLUSIVE.

Usage: .venv/bin/python benchmarks/cold_start_errors.py [--runs 4000] [--seed 1]
Not a test: it prints figures and asserts nothing (tests/unit/test_cold_start_simulation.py
asserts).
"""

from __future__ import annotations

import argparse

import numpy as np

from slo.cold_start import ColdStart, ColdStartRun, compare_starts
from slo.compare import Change
from slo.simulate import FAIL, PASS, judge_start_runs, start_models, start_pairs

CONFIDENCE = 0.95


def verdicts(runs: int, seed: int) -> None:
    print("Verdicts, threshold on the true quantile: % wrong PASS / % wrong FAIL")
    for model in start_models():
        for statistic in ("p50", "p90"):
            q = 0.5 if statistic == "p50" else 0.9
            cells = []
            for n in (2, 3, 5, 10, 40):
                x = model.sample(np.random.default_rng(seed + n), runs, n, q)
                v = judge_start_runs(x, statistic, CONFIDENCE)
                cells.append(f"n={n}: {np.mean(v == PASS):5.1%} / {np.mean(v == FAIL):5.1%}")
            print(f"  {model.name:36s} {statistic}  " + "  ".join(cells))


def comparisons(runs: int, seed: int) -> None:
    print("Start pairs, margin 10%: % REGRESSION / NO CHANGE / IMPROVEMENT / INCONCLUSIVE")
    for sigma, order in ((0.05, 0.0), (0.2, 0.0), (0.05, 0.1)):
        for ratio in (1.0, 1.1, 1.25):
            cells = []
            for pairs in (3, 4, 8):
                rng = np.random.default_rng(seed + pairs)
                a, b = start_pairs(rng, runs, pairs, ratio, sigma=sigma, order=order)
                got = [
                    compare_starts(
                        "startup p50", _run(x), _run(y), "startup", margin=0.1,
                        confidence=CONFIDENCE,
                    ).change
                    for x, y in zip(a, b, strict=True)
                ]  # fmt: skip
                shares = "/".join(f"{got.count(c) / runs:.1%}" for c in Change)
                cells.append(f"{pairs} pairs: {shares}")
            print(f"  sigma {sigma:g}, order {order:g}, ratio {ratio:g}  " + "  ".join(cells))


def _run(row: np.ndarray) -> ColdStartRun:
    return ColdStartRun(tuple(ColdStart(float(v), ()) for v in row), requests=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    verdicts(a.runs, a.seed)
    comparisons(a.runs, a.seed)


if __name__ == "__main__":
    main()
