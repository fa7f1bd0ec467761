"""False-verdict rates and requests-to-decision of the verdict rules, by simulation.

For each traffic model of slo/simulate.py (independent, AR(1)-clustered, M/G/1 queues) and each
quantile, many runs are drawn with the true quantile at 0.8x, 1.0x, 1.2x and 1.5x the threshold,
and judged by:
- old: the order-statistic interval that assumes independent requests (the former rule);
- new: the suite's rule (MSER-5 warm-up truncation, dependence-aware interval, steadiness);
- old seq: the former sequential rule (Bonferroni over looks at N/8, N/4, N/2, N, independent);
- new seq: the suite's sequential rule (exact Pocock level, looks every 50 from 200).
At 1.0x any PASS or FAIL is wrong; at 0.8x the right verdict is PASS, at 1.2x and 1.5x FAIL.
Printed per cell: % PASS / FAIL / INCONCLUSIVE and, for the sequential rules, the mean requests
sent before the verdict.

Usage: .venv/bin/python benchmarks/verdict_errors.py [--runs 1000] [--n 600] [--seed 1]
Not a test: it prints figures and asserts nothing (tests/unit/test_simulation.py asserts).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpy.typing as npt

from slo.quantile import _ranks
from slo.sequential import StopRule
from slo.simulate import (
    FAIL,
    PASS,
    ar1,
    iid,
    judge_quantile_runs,
    judge_sequentially,
    queue,
)

CONFIDENCE = 0.95
RATIOS = (0.8, 1.0, 1.2, 1.5)
Codes = npt.NDArray[np.int64]


def old_rule(x: npt.NDArray[np.float64], q: float, confidence: float) -> Codes:
    """The independent-sample order-statistic verdict of "pQ <= 1"."""
    xs = np.sort(x, axis=1)
    n = xs.shape[1]
    low, up = _ranks(n, q, confidence)
    lo = xs[:, low - 1] if low is not None else np.full(len(xs), -np.inf)
    hi = xs[:, up - 1] if up is not None else np.full(len(xs), np.inf)
    return np.where(lo > 1, FAIL, np.where(hi <= 1, PASS, 0))


def old_sequential(x: npt.NDArray[np.float64], q: float) -> tuple[Codes, Codes]:
    n = x.shape[1]
    looks = tuple(dict.fromkeys(max(1, round(n / d)) for d in (8, 4, 2, 1)))
    level = 1 - (1 - CONFIDENCE) / len(looks)
    verdict = np.zeros(len(x), dtype=np.int64)
    used = np.full(len(x), n)
    open_ = np.ones(len(x), dtype=bool)
    for look in looks:
        rows = np.flatnonzero(open_)
        v = old_rule(x[rows, :look], q, level)
        verdict[rows] = v
        done = (v != 0) | (look == n)
        used[rows[done]] = look
        open_[rows[done]] = False
    return verdict, used


def mix(v: Codes) -> str:
    return f"{100 * np.mean(v == PASS):5.1f} {100 * np.mean(v == FAIL):5.1f} " + (
        f"{100 * np.mean(v == 0):5.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per cell")
    parser.add_argument("--n", type=int, default=600, help="measured requests per run")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.n
    t0 = time.monotonic()
    models = (iid(0.39), iid(1.0), ar1(0.5), ar1(0.9), queue(0.3), queue(0.5), queue(0.8))
    print(f"N = {n}, {args.runs} runs per cell, confidence {CONFIDENCE}; % PASS FAIL INC")
    for q in (0.5, 0.9, 0.99):
        rule = StopRule.for_workload(n, CONFIDENCE, quantiles=(q,))
        print(
            f"\np{q * 100:g}: new sequential looks {rule.looks[0]}..{n} every "
            f"{rule.looks[1] - rule.looks[0] if len(rule.looks) > 1 else n}, "
            f"each at {rule.look_confidence:.3%}"
        )
        print(
            f"{'model':<30}{'truth':>6}  {'old':^17}  {'new':^17}  "
            f"{'old seq':^17} {'n':>4}  {'new seq':^17} {'n':>4}"
        )
        for model in models:
            base = model.sample(rng, args.runs, n, q)
            for ratio in RATIOS:
                x = base * ratio
                old_seq, old_used = old_sequential(x, q)
                new_seq, new_used = judge_sequentially(x, q, rule.looks, rule.look_confidence)
                print(
                    f"{model.name:<30}{ratio:>5.1f}x  {mix(old_rule(x, q, CONFIDENCE))}  "
                    f"{mix(judge_quantile_runs(x, q, CONFIDENCE))}  "
                    f"{mix(old_seq)} {np.mean(old_used):4.0f}  {mix(new_seq)} "
                    f"{np.mean(new_used):4.0f}",
                    flush=True,
                )
    print(f"\n{time.monotonic() - t0:.0f} s of simulation")


if __name__ == "__main__":
    main()
