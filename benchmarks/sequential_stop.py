"""Requests-to-decision of sequential early stop against a fixed-N run, by simulation.

For a ``ttft p99 <= 1s`` objective and a true p99 at 0.5x to 2x the threshold, simulates many
runs, judges each with ``slo.sequential.check`` at the looks of ``StopRule.for_workload(N, 0.95)``
and prints, per cell, the mean and median requests sent before the run stopped (N when it never
decided early), the sequential decision mix, and the fixed-N decision mix (one look at N, 95 %).

Two TTFT shapes: lognormal with sigma 0.39 (the realtime scenario's measured p50 22 ms,
p99 55 ms) and exponential (a heavier tail: p99 / p50 = 6.6). A heavier tail puts the 20 %
around the p99 closer in probability, so it takes more requests to tell apart.

Usage: .venv/bin/python benchmarks/sequential_stop.py [--runs 1000] [--seed 1]
Not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from slo.quantile import min_samples_to_bound_upper
from slo.scenario import parse_objective
from slo.sequential import StopRule, check
from slo.stats import RunSummary
from slo.verdict import Outcome, evaluate

CONFIDENCE = 0.95
THRESHOLD_S = 1.0
P99 = parse_objective("benchmark", "objectives.sim", "ttft p99", "<= 1s")
RATIOS = (0.5, 0.8, 0.9, 1.1, 1.2, 1.5, 2.0)
SIZES = (600, 2000)
Z99 = statistics.NormalDist().inv_cdf(0.99)

Sampler = Callable[[np.random.Generator, float, tuple[int, int]], np.ndarray]


def lognormal(rng: np.random.Generator, p99: float, size: tuple[int, int]) -> np.ndarray:
    sigma = 0.39
    return rng.lognormal(math.log(p99) - sigma * Z99, sigma, size)


def exponential(rng: np.random.Generator, p99: float, size: tuple[int, int]) -> np.ndarray:
    return rng.exponential(p99 / math.log(100), size)


SHAPES: dict[str, Sampler] = {"lognormal": lognormal, "exponential": exponential}


def summary(ttft: list[float]) -> RunSummary:
    n = len(ttft)
    return RunSummary(None, n, n, {}, 1.0, tuple(ttft), (), (), (), (), 0)


@dataclass(frozen=True)
class Cell:
    used: tuple[int, ...]
    """Requests sent per run before it stopped."""
    sequential: Counter[Outcome]
    fixed: Counter[Outcome]


def simulate(samples: np.ndarray, rule: StopRule) -> Cell:
    used: list[int] = []
    sequential: Counter[Outcome] = Counter()
    fixed: Counter[Outcome] = Counter()
    for row in samples.tolist():
        for n in rule.looks:
            result = check([P99], summary(row[:n]), rule, "sim")
            if result.stop:
                used.append(n)
                sequential[result.verdicts[0].outcome] += 1
                break
        whole = evaluate(P99, summary(row), confidence=CONFIDENCE, profile="sim")
        fixed[whole.outcome] += 1
    return Cell(tuple(used), sequential, fixed)


def mix(counts: Counter[Outcome], runs: int) -> str:
    return " ".join(
        f"{100 * counts[o] / runs:5.1f}" for o in (Outcome.PASS, Outcome.FAIL, Outcome.INCONCLUSIVE)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.monotonic()
    print(f"ttft p99 <= {THRESHOLD_S:g}s, confidence {CONFIDENCE}, {args.runs} runs per row")
    for n in SIZES:
        rule = StopRule.for_workload(n, CONFIDENCE)
        print(
            f"\nN = {n}: looks at {', '.join(map(str, rule.looks))}; "
            f"each judged at {rule.look_confidence:.2%}; fixed-N judged at {CONFIDENCE:.0%}"
        )
        print(
            f"a p99 can PASS from {min_samples_to_bound_upper(0.99, rule.look_confidence)} "
            f"samples at {rule.look_confidence:.2%} "
            f"({min_samples_to_bound_upper(0.99, CONFIDENCE)} at {CONFIDENCE:.0%}); "
            "FAIL needs no minimum"
        )
        print(
            f"{'shape':<12}{'p99/thr':>8}{'mean n':>9}{'median n':>10}{'mean/N':>8}"
            f"   {'sequential %':^17}   {'fixed-N %':^17}   target"
        )
        print(f"{'':<47}{'PASS  FAIL  INC':>17}   {'PASS  FAIL  INC':>17}")
        for shape, sampler in SHAPES.items():
            for ratio in RATIOS:
                cell = simulate(sampler(rng, ratio * THRESHOLD_S, (args.runs, n)), rule)
                mean = statistics.fmean(cell.used)
                median = statistics.median(cell.used)
                # The goal: at most N/2 on average when the true p99 is 20 % or more away.
                far = ratio <= 0.8 or ratio >= 1.2
                target = ("met" if mean <= n / 2 else "missed") if far else ""
                row = (
                    f"{shape:<12}{ratio:>7.1f}x{mean:>9.0f}{median:>10.0f}{mean / n:>8.2f}"
                    f"   {mix(cell.sequential, args.runs)}   {mix(cell.fixed, args.runs)}"
                    f"   {target}"
                )
                print(row.rstrip())
    print(f"\n{time.monotonic() - t0:.0f} s of simulation")


if __name__ == "__main__":
    main()
