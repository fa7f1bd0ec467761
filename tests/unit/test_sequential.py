"""Sequential early stop: look schedule, the exact Pocock level, and stop decisions.

The level is checked two ways: the dynamic programme against a direct simulation of the
binomial random walk it describes, and the per-look level against naive peeking (the unadjusted
95% at every look), which it must beat. Error rates on correlated and queue-like traffic are
checked in tests/unit/test_simulation.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slo.quantile import _ranks
from slo.records import RequestRecord
from slo.scenario import Objective
from slo.sequential import (
    StopRule,
    check,
    crossing_probability,
    decided,
    early_decidable,
    look_sample,
    pocock_level,
    should_stop,
)
from slo.verdict import Outcome
from tests.unit.builders import obj, rec

MS = 1_000_000
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE


# ---------------------------------------------------------------- schedule and level


def test_default_schedule_and_level() -> None:
    r600 = StopRule.for_workload(600, CONFIDENCE)
    assert r600.looks == tuple(range(200, 601, 50))
    assert CONFIDENCE < r600.look_confidence < 1 - ALPHA / len(r600.looks) / 2
    for q in (0.5, 0.9, 0.99):
        assert max(crossing_probability(r600.looks, q, r600.look_confidence)) <= ALPHA / 4
    assert StopRule.for_workload(320, CONFIDENCE).looks == (200, 250, 300, 320)
    assert StopRule.for_workload(120, CONFIDENCE).looks == (120,)
    assert StopRule.for_workload(1, CONFIDENCE).looks == (1,)
    assert StopRule.for_workload(100, 0.9, every=30, first=30).looks == (30, 60, 90, 100)
    assert r600.latest_look(199) is None and r600.latest_look(200) == 200
    assert r600.latest_look(599) == 550 and r600.latest_look(600) == 600


def test_the_level_spends_the_budget_that_bonferroni_left() -> None:
    # Bonferroni over 12 looks would judge each at 1 - 0.05/12; the exact level is lower (wider
    # tails, earlier decisions), yet its crossing chance stays within the budget; a little more
    # and it would not.
    looks = tuple(range(50, 601, 50))
    level = pocock_level(looks, 0.9, CONFIDENCE, share=1.0)
    assert level < 1 - ALPHA / len(looks)
    assert max(crossing_probability(looks, 0.9, level)) <= ALPHA / 2
    assert max(crossing_probability(looks, 0.9, level - 0.002)) > ALPHA / 2
    # The design's default keeps half of it for serial correlation.
    assert max(crossing_probability(looks, 0.9, pocock_level(looks, 0.9, CONFIDENCE))) <= ALPHA / 4


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_crossing_probability_matches_the_random_walk(q: float) -> None:
    looks, level = (20, 40, 80), 0.98
    rng = np.random.default_rng(7)
    runs = 200_000
    steps = rng.binomial(1, 1 - q, (runs, looks[-1])).cumsum(axis=1)
    passed, failed = np.zeros(runs, bool), np.zeros(runs, bool)
    for n in looks:
        low, up = _ranks(n, q, level)
        count = steps[:, n - 1]
        open_ = ~(passed | failed)
        if up is not None:
            passed |= open_ & (count <= n - up)
        if low is not None:
            failed |= open_ & ~passed & (count >= n - low + 1)
    exact_pass, exact_fail = crossing_probability(looks, q, level)
    slack = 4 * math.sqrt(0.05 / runs)
    assert passed.mean() == pytest.approx(exact_pass, abs=slack)
    # The programme counts a side's crossings ignoring the other side's stops: an upper bound.
    assert failed.mean() <= exact_fail + slack


def test_naive_peeking_exceeds_the_level() -> None:
    looks = tuple(range(50, 601, 50))
    naive = max(crossing_probability(looks, 0.9, CONFIDENCE))
    assert naive > 2 * ALPHA / 2


def test_invalid_rules_raise() -> None:
    bad_rules: list[Callable[[], StopRule]] = [
        lambda: StopRule.for_workload(0, CONFIDENCE),
        lambda: StopRule.for_workload(100, 95),
        lambda: StopRule.for_workload(100, CONFIDENCE, every=0),
        lambda: StopRule(looks=(), look_confidence=0.95),
        lambda: StopRule(looks=(10, 10, 20), look_confidence=0.95),
        lambda: StopRule(looks=(10, 20), look_confidence=1.0),
    ]
    for bad in bad_rules:
        with pytest.raises(ValueError):
            bad()


# ---------------------------------------------------------------- decisions at a look

RULE_80 = StopRule(looks=(10, 20, 40, 80), look_confidence=1 - ALPHA / 4)  # 98.75 %


def fast(n: int, start: int = 0, ttft_ms: float = 10) -> list[RequestRecord]:
    # Independent-looking values: a repeating pattern would read as serial correlation.
    return [rec(start + i, ttft_ms + 4 * random.Random(start + i).random()) for i in range(n)]


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


def test_judging_between_looks_raises_and_a_class_is_judged_on_its_own() -> None:
    with pytest.raises(ValueError, match="not a look"):
        check([obj("ttft p50", "<= 60ms")], fast(11), RULE_80, "p")
    vip = obj("ttft p50 class=vip", "<= 60ms")
    # A class objective is judged on that class's requests only.
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
    rule = StopRule(looks=(5, 10, 20, 40), look_confidence=1 - ALPHA / 4)
    records = [rec(i, 10, warmup=True) for i in range(warmups)]
    records += [rec(warmups + i, t) for i, t in enumerate(ttft)]
    delay = [0] * warmups + delays
    # Completion order: each request comes back some requests after it was sent.
    order = sorted(records, key=lambda r: (r.index + delay[r.index], r.index))
    objectives = [obj("ttft p50", "<= 60ms"), obj("ttft p50", "<= 30ms")]
    got = [should_stop(order[: t + 1], objectives, rule, "p") for t in range(len(order))]
    assert got == _reference_stops(order, objectives, rule)


def test_run_level_objectives_are_not_judged_at_a_look() -> None:
    # goodput needs per-request bounds a look's summary does not carry; judging it at a look
    # raised, and the runner's callback swallowed it, so the run never stopped early.
    rule = StopRule.for_workload(600, CONFIDENCE, quantiles=(0.99,))
    records = [rec(i, 300) for i in range(rule.looks[0])]
    objectives = [obj("ttft p99", "<= 100ms"), obj("goodput", ">= 30 req/s")]
    result = check(objectives, records, rule, "p")
    assert [v.objective.metric for v in result.verdicts] == ["ttft"]
    assert result.decided and result.stop  # the ttft FAIL settles the scenario
    assert should_stop(records, objectives, rule, "p")


def test_an_early_look_on_untrusted_clustering_does_not_stop() -> None:
    # Waves of 10 near-identical requests, all far over the threshold: the look FAILs, but 200
    # such requests count as a few dozen independent ones, too few to trust the estimate of
    # the clustering; only the last look may end the run on it.
    rng = np.random.default_rng(9)
    levels = np.repeat(rng.lognormal(np.log(400), 0.3, 40), 10) * rng.lognormal(0, 0.02, 400)
    records = [rec(i, float(ms)) for i, ms in enumerate(levels)]
    rule = StopRule(looks=(200, 400), look_confidence=0.99)
    p50 = obj("ttft p50", "<= 100ms")
    early = check([p50], records[:200], rule, "p")
    assert early.verdicts[0].outcome is Outcome.FAIL
    assert early.verdicts[0].n_eff is not None and early.verdicts[0].n_eff < 100
    assert not early.decided and not early.stop
    last = check([p50], records, rule, "p")
    assert last.verdicts[0].outcome is Outcome.FAIL and last.decided
