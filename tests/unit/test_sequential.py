"""Sequential early stop: look schedule, stop decisions, and the error rate under repeated looks.

The error-rate tests judge synthetic runs with the real ``check``: a Monte Carlo simulation
from exponential and lognormal TTFT (true p99 known in closed form), and an exact computation
over the binomial count of slow requests, which is all an order-statistic verdict depends on.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.stats import binom

from slo.records import RequestRecord
from slo.scenario import Objective
from slo.sequential import (
    StopRule,
    check,
    decided,
    early_decidable,
    look_sample,
    should_stop,
)
from slo.stats import RunSummary
from slo.verdict import Outcome
from tests.unit.builders import obj, rec

MS = 1_000_000
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE


def ttft_summary(ttft: Sequence[float], n_errors: int = 0) -> RunSummary:
    """A summary with only TTFT samples and an error count: all a p99 or error_rate needs."""
    n = len(ttft)
    return RunSummary(None, n, n - n_errors, {}, 1.0, tuple(ttft), (), (), (), (), 0)


# ---------------------------------------------------------------- schedule


def test_default_schedule_and_level() -> None:
    r600 = StopRule.for_workload(600, CONFIDENCE)
    assert r600.looks == (75, 150, 300, 600)
    assert r600.look_confidence == pytest.approx(1 - 0.05 / 4)
    assert r600.confidence == pytest.approx(CONFIDENCE)
    assert StopRule.for_workload(2000, CONFIDENCE).looks == (250, 500, 1000, 2000)
    # Family-wise over 3 objectives: the budget is split 12 ways.
    r3 = StopRule.for_workload(600, CONFIDENCE, objectives=3)
    assert r3.look_confidence == pytest.approx(1 - 0.05 / 12)
    assert r3.confidence == pytest.approx(CONFIDENCE)
    assert StopRule.for_workload(1, CONFIDENCE).looks == (1,)
    assert StopRule.for_workload(100, 0.9, first_look=10, growth=3).looks == (10, 30, 90, 100)
    assert r600.latest_look(74) is None and r600.latest_look(75) == 75
    assert r600.latest_look(599) == 300 and r600.latest_look(600) == 600


@given(
    n=st.integers(1, 100_000),
    confidence=st.floats(0.5, 0.999),
    growth=st.floats(1.05, 4.0),
    first=st.none() | st.integers(1, 100_000),
    objectives=st.integers(1, 5),
)
def test_schedule_properties(
    n: int, confidence: float, growth: float, first: int | None, objectives: int
) -> None:
    rule = StopRule.for_workload(
        n, confidence, objectives=objectives, first_look=first, growth=growth
    )
    looks = rule.looks
    assert looks[-1] == n == rule.total_requests
    assert looks[0] >= 1 and all(b > a for a, b in itertools.pairwise(looks))
    start = math.ceil(n / growth**3) if first is None else first
    assert looks[0] == min(start, n)
    # Geometric: the number of looks grows like log N, never more.
    assert len(looks) <= 2 + max(0.0, math.log(n / min(start, n), growth))
    assert rule.look_confidence >= confidence
    assert rule.confidence == pytest.approx(confidence, abs=1e-12)


def test_invalid_rules_raise() -> None:
    bad_rules: list[Callable[[], StopRule]] = [
        lambda: StopRule.for_workload(0, CONFIDENCE),
        lambda: StopRule.for_workload(100, 95),
        lambda: StopRule.for_workload(100, CONFIDENCE, growth=1.0),
        lambda: StopRule.for_workload(100, CONFIDENCE, first_look=0),
        lambda: StopRule(looks=(), look_confidence=0.95),
        lambda: StopRule(looks=(10, 10, 20), look_confidence=0.95),
        lambda: StopRule(looks=(10, 20), look_confidence=1.0),
    ]
    for bad in bad_rules:
        with pytest.raises(ValueError):
            bad()


# ---------------------------------------------------------------- decisions at a look

RULE_80 = StopRule.for_workload(80, CONFIDENCE)  # looks 10, 20, 40, 80 at 98.75 %


def fast(n: int, start: int = 0, ttft_ms: float = 10) -> list[RequestRecord]:
    return [rec(start + i, ttft_ms + (i % 5)) for i in range(n)]


def test_which_objectives_can_be_decided_early() -> None:
    assert early_decidable(obj("ttft p99", "<= 1s"))
    assert early_decidable(obj("tpot p50", "<= 1s"))
    assert early_decidable(obj("error_rate", "<= 1%"))
    assert not early_decidable(obj("ttft mean", "<= 1s"))
    assert not early_decidable(obj("ttft max", "<= 1s"))
    assert not early_decidable(obj("output_throughput", ">= 1 tok/s"))


def test_decided_when_every_objective_is_pass_or_fail() -> None:
    records = fast(10)
    assert RULE_80.looks[0] == 10
    p50_pass = obj("ttft p50", "<= 60ms")
    p50_fail = obj("ttft p50", "<= 5ms")
    p99 = obj("ttft p99", "<= 60ms")
    errors = obj("error_rate", "<= 30%")
    assert decided([p50_pass], records, RULE_80, "p")
    assert decided([p50_fail, p50_pass], records, RULE_80, "p")
    # 10 samples cannot bound a p99 from above: undecided, keep sending.
    result = check([p50_pass, p99], records, RULE_80, "p")
    assert [v.outcome for v in result.verdicts] == [Outcome.PASS, Outcome.INCONCLUSIVE]
    assert not result.decided and not result.stop and not result.final
    assert all(v.confidence == RULE_80.look_confidence for v in result.verdicts)
    # Ten error-free requests cannot show an error rate under 30 % at 98.75 %; twenty can.
    assert not decided([p50_pass, errors], records, RULE_80, "p")
    assert decided([p50_pass, errors], fast(20), RULE_80, "p")


def test_throughput_objective_stops_early_only_on_a_fail() -> None:
    throughput = obj("output_throughput", ">= 1 tok/s")
    mean = obj("ttft mean", "<= 1s")
    p50_pass = obj("ttft p50", "<= 60ms")
    p50_fail = obj("ttft p50", "<= 5ms")
    records = fast(10)
    for other in (throughput, mean):
        # Everything decidable passes: run to N so the other one is measured on the whole run.
        assert not decided([p50_pass, other], records, RULE_80, "p")
        # A FAIL decides the scenario whatever the other one shows.
        assert decided([p50_pass, p50_fail, other], records, RULE_80, "p")
    assert not decided([throughput], records, RULE_80, "p")


def test_final_look_stops_even_when_undecided() -> None:
    result = check([obj("ttft p99", "<= 60ms")], fast(80), RULE_80, "p")
    assert result.final and result.stop and not result.decided
    assert result.verdicts[0].outcome is Outcome.INCONCLUSIVE


def test_judging_between_looks_or_a_class_from_a_summary_raises() -> None:
    with pytest.raises(ValueError, match="not a look"):
        check([obj("ttft p50", "<= 60ms")], fast(11), RULE_80, "p")
    vip = obj("ttft p50 class=vip", "<= 60ms")
    with pytest.raises(ValueError, match="class 'vip'"):
        check([vip], ttft_summary([0.01] * 10), RULE_80, "p")
    # From records, a class objective is judged on that class's requests only.
    mixed = [rec(i, 10, cls="vip" if i % 2 else "default") for i in range(10)]
    assert check([vip], mixed, RULE_80, "p").verdicts[0].n == 5


# ---------------------------------------------------------------- should_stop on a live run


def test_should_stop_waits_for_the_first_n_sent_not_the_first_n_done() -> None:
    p50 = obj("ttft p50", "<= 60ms")
    warm = [rec(0, 10, warmup=True), rec(1, 10, warmup=True)]
    measured = fast(30, start=2)
    late = measured[3]  # the 4th request sent comes back after the 15th
    order = warm + measured[:3] + measured[4:15] + [late] + measured[15:]
    seen: list[RequestRecord] = []
    stops = []
    for r in order:
        seen.append(r)
        stops.append(should_stop(seen, [p50], RULE_80, "p"))
    # 14 measured records are back before `late`, yet the first look (10) is not complete.
    assert stops.index(True) == order.index(late)
    assert look_sample(seen, RULE_80) == tuple(measured[:20])
    assert look_sample(order[: order.index(late) + 1], RULE_80) == tuple(measured[:10])


def test_a_slow_straggler_is_judged_not_skipped() -> None:
    p50 = obj("ttft p50", "<= 60ms")
    measured = fast(30)
    slow = rec(3, 500)  # slower than the threshold: 10 samples with it cannot PASS a p50
    measured[3] = slow
    order = measured[:3] + measured[4:15] + [slow] + measured[15:]
    stops = [should_stop(order[: t + 1], [p50], RULE_80, "p") for t in range(len(order))]
    # Not at the first look (10, the straggler in it); at the second (20), once it is complete.
    assert stops.index(True) == order.index(measured[19])
    assert not decided([p50], measured[:10], RULE_80, "p")


def test_interleaved_classes_follow_the_plans_send_order() -> None:
    vip, batch = obj("ttft p50 class=vip", "<= 60ms"), obj("ttft p50 class=batch", "<= 60ms")
    # Indices 0-39 are vip, 40-79 batch; the plan sends them alternately.
    records = [rec(i, 10, cls="vip" if i < 40 else "batch") for i in range(80)]
    send_order = [i for pair in zip(range(40), range(40, 80), strict=True) for i in pair]
    order = [records[i] for i in send_order]  # completion in send order
    stops = [
        should_stop(order[: t + 1], [vip, batch], RULE_80, "p", send_order=send_order)
        for t in range(len(order))
    ]
    # Look 20 holds 10 of each class: a p50 of 10 samples can PASS at 98.75 % (look 10 cannot).
    assert stops.index(True) == 19
    assert look_sample(order[:20], RULE_80, send_order=send_order) == tuple(order[:20])
    # In index order the first 20 are all vip: the batch objective has no samples yet.
    assert not any(should_stop(order[: t + 1], [vip, batch], RULE_80, "p") for t in range(40))


def _reference_stops(
    order: Sequence[RequestRecord], objectives: Sequence[Objective], rule: StopRule
) -> list[bool]:
    """Recompute from scratch at each completion: True where the newest record completed a look
    and the workload may stop there."""
    out, previous = [], None
    for t in range(1, len(order) + 1):
        done = {r.index: r for r in order[:t]}
        measured, i = [], 0
        while i in done:
            if not done[i].warmup:
                measured.append(done[i])
            i += 1
        look = rule.latest_look(len(measured))
        out.append(
            look is not None
            and look != previous
            and check(objectives, measured[:look], rule, "p").stop
        )
        previous = look
    return out


@given(
    # Fast, middling and over-the-threshold requests, so that looks decide either way.
    ttft=st.lists(st.sampled_from([10.0, 40.0, 500.0]), min_size=40, max_size=40),
    delays=st.lists(st.integers(0, 12), min_size=40, max_size=40),
    warmups=st.integers(0, 3),
)
@example(ttft=[10.0] * 40, delays=[0, 9, 0, 0, 3] * 8, warmups=2)  # decides at look 10
@example(ttft=[40.0, 500.0] * 20, delays=[4, 0] * 20, warmups=0)  # p50 <= 30ms FAILs
def test_should_stop_matches_a_from_scratch_recomputation(
    ttft: list[float], delays: list[int], warmups: int
) -> None:
    rule = StopRule.for_workload(40, CONFIDENCE, first_look=5)  # looks 5, 10, 20, 40
    records = [rec(i, 10, warmup=True) for i in range(warmups)]
    records += [rec(warmups + i, t) for i, t in enumerate(ttft)]
    delay = [0] * warmups + delays
    # Completion order: each request comes back some requests after it was sent.
    order = sorted(records, key=lambda r: (r.index + delay[r.index], r.index))
    objectives = [obj("ttft p50", "<= 60ms"), obj("ttft p50", "<= 30ms")]
    got = [should_stop(order[: t + 1], objectives, rule, "p") for t in range(len(order))]
    assert got == _reference_stops(order, objectives, rule)


# ---------------------------------------------------------------- error rate under repeated looks

THRESHOLD_S = 1.0
P99 = obj("ttft p99", "<= 1s")
Z99 = statistics.NormalDist().inv_cdf(0.99)


def exponential(rng: np.random.Generator, p99: float, size: tuple[int, int]) -> np.ndarray:
    # Exp(scale): p99 = scale * ln(100).
    return rng.exponential(p99 / math.log(100), size)


def lognormal(rng: np.random.Generator, p99: float, size: tuple[int, int]) -> np.ndarray:
    # sigma 0.39 is the realtime scenario's measured shape (p50 22 ms, p99 55 ms).
    sigma = 0.39
    return rng.lognormal(math.log(p99) - sigma * Z99, sigma, size)


Sampler = Callable[[np.random.Generator, float, tuple[int, int]], np.ndarray]


def simulate(samples: np.ndarray, rule: StopRule) -> list[Outcome]:
    """Each row is one run: look at the rule's looks, stop at the first decided one."""
    outcomes = []
    for row in samples.tolist():
        for n in rule.looks:
            result = check([P99], ttft_summary(row[:n]), rule, "sim")
            if result.stop:
                outcomes.append(result.verdicts[0].outcome)
                break
    return outcomes


RUNS = 2000
N = 600
# Naive peeking: the unadjusted 95 % interval every 50 requests.
NAIVE = StopRule(looks=tuple(range(50, N + 1, 50)), look_confidence=CONFIDENCE)


@pytest.mark.parametrize("sampler", [exponential, lognormal])
def test_false_verdict_rate_under_repeated_looks(sampler: Sampler) -> None:
    """P(PASS | true p99 just over the threshold) + P(FAIL | just under) <= 1 - confidence.

    Just over and just under: the sum is then as large as it gets (at the threshold itself,
    any verdict is wrong), so this is the worst case. The same runs judged with naive peeking
    exceed the level: the test can tell a valid rule from an invalid one.
    """
    rng = np.random.default_rng(20261202)
    above = sampler(rng, THRESHOLD_S * 1.002, (RUNS, N))
    below = sampler(rng, THRESHOLD_S * 0.998, (RUNS, N))
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)

    def false_rate(rule: StopRule) -> float:
        wrong_pass = simulate(above, rule).count(Outcome.PASS)
        wrong_fail = simulate(below, rule).count(Outcome.FAIL)
        return (wrong_pass + wrong_fail) / RUNS

    rule = StopRule.for_workload(N, CONFIDENCE)
    assert false_rate(rule) <= ALPHA + slack
    assert false_rate(NAIVE) > ALPHA + slack


def exact_outcomes(
    rule: StopRule,
    count_probability: float,
    verdict: Callable[[int, int], Outcome],
) -> dict[Outcome, float]:
    """Exact probability of each final outcome of a sequential run, by dynamic programming over
    the count of 'bad' requests (slower than the threshold, or failed) at each look.

    An order-statistic or binomial verdict depends on a run only through that count, so
    ``verdict(n, count)`` (the real ``check`` on a synthetic sample) gives the outcome at each
    (look, count), weighted by the probability of reaching it undecided. More bad requests can
    only move every bound up, so PASS is a range of low counts and FAIL one of high counts:
    bisection finds both ends.
    """
    alive = np.array([1.0])  # P(count = k and still running)
    totals = dict.fromkeys(Outcome, 0.0)
    previous = 0
    for n in rule.looks:
        step = n - previous
        alive = np.convolve(alive, binom.pmf(np.arange(step + 1), step, count_probability))
        passes, fails = _decided_ranges(n, functools.partial(verdict, n))
        totals[Outcome.PASS] += float(alive[:passes].sum())
        totals[Outcome.FAIL] += float(alive[fails:].sum())
        alive[:passes] = 0.0
        alive[fails:] = 0.0
        previous = n
    totals[Outcome.INCONCLUSIVE] = float(alive.sum())
    return totals


def _decided_ranges(n: int, verdict: Callable[[int], Outcome]) -> tuple[int, int]:
    """(a, b): PASS for counts k < a, FAIL for k >= b, at a look of n requests."""
    passes = _first(n + 1, lambda k: verdict(k) is not Outcome.PASS)
    fails = _first(n + 1, lambda k: verdict(k) is Outcome.FAIL)
    return passes, fails


def _first(hi: int, pred: Callable[[int], bool]) -> int:
    """Smallest k in [0, hi) with pred(k), for pred false...false true...true; hi if none."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def p99_verdict(rule: StopRule) -> Callable[[int, int], Outcome]:
    def verdict(n: int, slow: int) -> Outcome:
        # Ties at 0.5 s and 2 s give the same order-statistic verdict as any continuous sample
        # with `slow` values over the 1 s threshold.
        sample = ttft_summary([0.5] * (n - slow) + [2.0] * slow)
        return check([P99], sample, rule, "exact").verdicts[0].outcome

    return verdict


@pytest.mark.parametrize("n", [600, 2000])
def test_exact_error_at_the_threshold(n: int) -> None:
    """True p99 exactly at the threshold: any PASS or FAIL is wrong; its exact probability."""
    rule = StopRule.for_workload(n, CONFIDENCE)
    p = exact_outcomes(rule, 0.01, p99_verdict(rule))
    assert sum(p.values()) == pytest.approx(1)
    assert p[Outcome.PASS] + p[Outcome.FAIL] <= ALPHA
    # The unadjusted 95 % interval at the same looks, and every 50 requests: over the level.
    for looks in (rule.looks, tuple(range(50, n + 1, 50))):
        naive = StopRule(looks=looks, look_confidence=CONFIDENCE)
        q = exact_outcomes(naive, 0.01, p99_verdict(naive))
        assert q[Outcome.PASS] + q[Outcome.FAIL] > ALPHA


def error_rate_verdict(rule: StopRule, bound: Objective) -> Callable[[int, int], Outcome]:
    def verdict(n: int, errors: int) -> Outcome:
        sample = ttft_summary([0.5] * (n - errors) + [math.inf] * errors, n_errors=errors)
        return check([bound], sample, rule, "exact").verdicts[0].outcome

    return verdict


def test_exact_error_rate_objective_at_the_threshold() -> None:
    """True error rate exactly at the bound: any PASS or FAIL is wrong."""
    rule = StopRule.for_workload(600, CONFIDENCE)
    bound = obj("error_rate", "<= 5%")
    p = exact_outcomes(rule, 0.05, error_rate_verdict(rule, bound))
    assert p[Outcome.PASS] > 0 and p[Outcome.FAIL] > 0  # both verdicts are reachable
    assert p[Outcome.PASS] + p[Outcome.FAIL] <= ALPHA
    naive = StopRule(looks=rule.looks, look_confidence=CONFIDENCE)
    q = exact_outcomes(naive, 0.05, error_rate_verdict(naive, bound))
    assert q[Outcome.PASS] + q[Outcome.FAIL] > ALPHA


def test_run_level_objectives_are_not_judged_at_a_look() -> None:
    # goodput needs per-request bounds a look's summary does not carry; judging it at a look
    # raised, and the runner's callback swallowed it, so the run never stopped early.
    rule = StopRule.for_workload(600, CONFIDENCE)
    records = [rec(i, 300) for i in range(rule.looks[0])]
    objectives = [obj("ttft p99", "<= 100ms"), obj("goodput", ">= 30 req/s")]
    result = check(objectives, records, rule, "p")
    assert [v.objective.metric for v in result.verdicts] == ["ttft"]
    assert result.decided and result.stop  # the ttft FAIL settles the scenario
    assert should_stop(records, objectives, rule, "p")
