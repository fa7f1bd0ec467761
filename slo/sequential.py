"""Sequential early stop: end a workload as soon as every objective is decided.

Looking at the verdict after every few requests and stopping at the first PASS or FAIL is the
classic way to be wrong more often than the stated confidence says: each look is another chance
for the interval to miss. The rule here is a group-sequential design (Jennison & Turnbull,
"Group Sequential Methods", ch. 2): a look at ``FIRST_LOOK`` measured requests and every
``LOOK_EVERY`` after, each judged
at one nominal level (Pocock's design), chosen so that the chance of any false verdict over all
looks stays at or under the fixed-N promise.

The nominal level is computed exactly, not bounded. A quantile verdict at a threshold depends on
the data only through S_n, the count of requests over the threshold: PASS when S_n is at or
under the order-statistic boundary, FAIL when at or over the other. With independent requests
and the true quantile exactly at the threshold, S_n is a binomial random walk, so the chance
that it crosses a boundary at any look is a short dynamic programme over the looks (a
convolution per look). ``StopRule.for_workload`` finds by bisection the largest per-look level
whose crossing chance is at most half of ``(1 - confidence) / 2`` on each side, for every
quantile the scenario judges early; the other half is kept for serial correlation (below).
(The former rule, Bonferroni over 4 looks at independent-sample intervals, spent about 1.2% of
a 5% budget on independent requests and far more than 5% on clustered ones.)

Serial correlation: each look's interval is the dependence-aware one (slo/intervals.py), at
the nominal level, on the look's n_eff. On clustered traffic such an interval errs up to about
twice its nominal rate, so the sequence is designed at half the budget
(``DEPENDENCE_SHARE``): within 5% per side on clustered traffic, 1.25% on independent requests.
tests/unit/test_simulation.py checks it on correlated and queue-like data.

Strong clustering: an early look stops the run only where its clustering estimate is trusted
(``slo.intervals.clustering_trusted``: at least 100 effective samples, or half the look). On
fewer, the estimate runs low and the look's interval too narrow: with AR(1) rho 0.9 traffic and
the p50 on the threshold, early FAILs were false 7.9% of the time (2000 runs); with the rule,
0.95%. The last look decides as a fixed-N run does.

Warm-up: early looks judge the start of a run, where a queue has not reached its steady state
(its p99 reads low); each look goes through ``slo.verdict.judge``, so MSER-5 truncation and the
drift check apply at every look (a look that is not steady cannot PASS).

Which objectives may be decided early: percentiles and ``error_rate``. Not the others: mean,
max, throughput and goodput on a shortened run are not their value on the full one. A scenario
with such an objective stops early only when every decidable objective is decided and at least
one is FAIL (the scenario then fails whatever the others show). The sample at a look is the
first n measured requests in send order, each complete; not the first n to complete, which are
the fastest ones.

The final look is judged at the nominal level too: that is the price of being allowed to stop
early (a p99 PASS needs more requests at N than a fixed-N run). The runner must judge the final
verdicts at ``rule.look_confidence`` on ``look_sample(...)``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from slo.intervals import clustering_trusted
from slo.quantile import _ranks
from slo.records import RequestRecord
from slo.scenario import Objective
from slo.verdict import Outcome, Verdict, judge

LOOK_EVERY = 50
"""Measured requests between looks."""
FIRST_LOOK = 200
"""No look before this many measured requests: on fewer, the estimate of serial correlation is
too rough to trust (simulation: a queue at utilisation 0.5 PASSed 7% of runs at the threshold
with looks from 50 on), and a queue has not yet reached its steady state."""


@dataclass(frozen=True)
class StopRule:
    """When to look and at what level. Build it with ``StopRule.for_workload``.

    A hand-made rule is allowed (a test compares against one), but its guarantee is only what
    its ``look_confidence`` gives over its looks.
    """

    looks: tuple[int, ...]
    """Measured-request counts at which the objectives are judged; the last is the workload's N."""
    look_confidence: float
    """Level of the two-sided interval at every look, the final one included."""
    confidence: float = 0.95
    """The level the whole sequence keeps: any false verdict over all looks at most
    ``(1 - confidence) / 2`` per side on clustered traffic (simulated), and half of that on
    independent requests (exactly)."""

    def __post_init__(self) -> None:
        if not self.looks:
            raise ValueError("a stop rule needs at least one look (the workload's N)")
        if self.looks[0] < 1 or any(b <= a for a, b in itertools.pairwise(self.looks)):
            raise ValueError(f"looks = {self.looks!r} must be positive and strictly increasing")
        if not 0 < self.look_confidence < 1:
            raise ValueError(f"look_confidence = {self.look_confidence!r} must be in (0, 1)")

    @classmethod
    def for_workload(
        cls,
        total_requests: int,
        confidence: float,
        *,
        quantiles: Iterable[float] = (0.5, 0.9, 0.99),
        every: int = LOOK_EVERY,
        first: int = FIRST_LOOK,
    ) -> StopRule:
        """Looks at ``first`` requests, every ``every`` after, and at N, each at the Pocock
        level (``pocock_level``) of the most demanding of ``quantiles`` (the scenario's
        early-decidable statistics: q of each percentile, 1 - bound of an error rate)."""
        if total_requests < 1:
            raise ValueError(f"total_requests = {total_requests!r} must be >= 1")
        if not 0 < confidence < 1:
            raise ValueError(f"confidence = {confidence!r} must be in (0, 1), e.g. 0.95")
        if every < 1:
            raise ValueError(f"every = {every!r} must be >= 1 (requests between looks)")
        looks = (*range(min(first, total_requests), total_requests, every), total_requests)
        looks = tuple(sorted(set(looks)))
        qs = sorted({round(q, 6) for q in quantiles if 0 < q < 1}) or [0.5]
        # The most demanding quantile's level (the highest) keeps every one within budget.
        level = max(pocock_level(looks, q, confidence) for q in qs)
        return cls(looks=looks, look_confidence=level, confidence=confidence)

    @property
    def total_requests(self) -> int:
        return self.looks[-1]

    def latest_look(self, n: int) -> int | None:
        """The largest look at or under ``n`` measured requests; None before the first."""
        found = None
        for look in self.looks:
            if look > n:
                break
            found = look
        return found


def crossing_probability(
    looks: Sequence[int], q: float, look_confidence: float
) -> tuple[float, float]:
    """(false PASS, false FAIL) chance over all looks for a q-quantile exactly at the
    threshold, requests independent: the binomial random walk of the count over the threshold
    against each look's order-statistic boundaries (the verdict PASSes when the count is at
    most n - u, FAILs when it is at least n - l + 1; l, u the interval's ranks)."""
    p = 1 - q
    out = []
    for side in ("pass", "fail"):
        dist = np.ones(1)
        crossed = 0.0
        previous = 0
        for n in looks:
            step = binom.pmf(np.arange(n - previous + 1), n - previous, p)
            dist = np.convolve(dist, step)  # count over the threshold at this look
            previous = n
            low, up = _ranks(n, q, look_confidence)
            if side == "pass" and up is not None:
                edge = n - up  # PASS: count <= edge
                crossed += float(dist[: edge + 1].sum())
                dist[: edge + 1] = 0.0
            elif side == "fail" and low is not None:
                edge = n - low + 1  # FAIL: count >= edge
                crossed += float(dist[edge:].sum())
                dist[edge:] = 0.0
        out.append(crossed)
    return out[0], out[1]


DEPENDENCE_SHARE = 0.5
"""The sequence is designed for this share of the error budget. On clustered traffic each
look's interval errs up to about twice its nominal rate (tests/unit/test_simulation.py), so a
design at the full budget ended at 7.8% false PASS over 9 looks on a queue at utilisation 0.5;
at half of it, within 5%. On independent requests the sequence then errs at most 1.25%."""


@functools.lru_cache(maxsize=256)
def pocock_level(
    looks: tuple[int, ...], q: float, confidence: float, share: float = DEPENDENCE_SHARE
) -> float:
    """The largest per-look two-sided level whose crossing chance (``crossing_probability``)
    is at most ``share`` x (1 - confidence) / 2 on each side; bisection on the level's tail."""
    budget = share * (1 - confidence) / 2

    def ok(tail: float) -> bool:
        return max(crossing_probability(looks, q, 1 - 2 * tail)) <= budget

    # Bonferroni's tail (budget / looks) is within budget by the union bound; the fixed-N tail is
    # the most any level can have.
    lo, hi = budget / len(looks), budget
    if ok(hi):
        return 1 - 2 * hi
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return 1 - 2 * lo


def early_decidable(objective: Objective) -> bool:
    """Whether the objective can be decided before N (percentiles and error_rate)."""
    return objective.quantile is not None or objective.metric == "error_rate"


@dataclass(frozen=True)
class LookResult:
    """The verdicts at one look, and whether the workload may stop there."""

    n: int
    """Measured requests judged (a look of the rule)."""
    final: bool
    """This is the last look: the workload is complete."""
    verdicts: tuple[Verdict, ...]
    """One per early-decidable objective, in the order given, at ``rule.look_confidence``
    (the others, e.g. throughput or goodput, are judged on the whole run only)."""
    decided: bool
    """Every early-decidable objective is PASS or FAIL, and either every objective is early
    decidable or one of them FAILs (the scenario's outcome can no longer change)."""

    @property
    def stop(self) -> bool:
        """Stop sending: decided, or nothing left to send."""
        return self.decided or self.final


def check(
    objectives: Sequence[Objective],
    records: Sequence[RequestRecord],
    rule: StopRule,
    profile: str,
) -> LookResult:
    """Judge every early-decidable objective on a look's records (``look_sample``): the first
    n measured requests in send order. ``ValueError`` if n is not a look of the rule."""
    n = sum(1 for r in records if not r.warmup)
    if n not in rule.looks:
        raise ValueError(
            f"{n} measured requests is not a look of the rule ({rule.looks}); judging between "
            "looks would void the error guarantee"
        )
    # Only early-decidable objectives are judged at a look: the others need the whole run.
    verdicts = tuple(
        judge(obj, records, confidence=rule.look_confidence, profile=profile)
        for obj in objectives
        if early_decidable(obj)
    )
    early = list(verdicts)
    final = n == rule.total_requests
    all_decided = bool(early) and all(_settles(v, final) for v in early)
    complete = len(early) == len(objectives) or any(v.outcome is Outcome.FAIL for v in early)
    return LookResult(n=n, final=final, verdicts=verdicts, decided=all_decided and complete)


def _settles(v: Verdict, final: bool) -> bool:
    """A PASS or FAIL stops the run, but before the last look only where the clustering
    estimate is trusted: early looks on strongly clustered traffic underestimate it, and a FAIL
    on it was false 7.9% of the time (AR(1) rho 0.9, p50 at the threshold, 2000 runs)."""
    if v.outcome not in (Outcome.PASS, Outcome.FAIL):
        return False
    return final or v.n_eff is None or bool(clustering_trusted(v.n, v.n_eff))


def decided(
    objectives: Sequence[Objective],
    records: Sequence[RequestRecord],
    rule: StopRule,
    profile: str,
) -> bool:
    """Whether the workload may stop at this look (``check(...).decided``)."""
    return check(objectives, records, rule, profile).decided


def _prefix(
    records: Sequence[RequestRecord], send_order: Iterable[int] | None, upto: int | None = None
) -> tuple[list[RequestRecord], int | None]:
    """Measured records of the longest complete send-order prefix, and how many measured
    records precede ``upto`` in it (None when ``upto`` is not in the prefix)."""
    by_index = {r.index: r for r in records}
    measured: list[RequestRecord] = []
    before = None
    for i in itertools.count() if send_order is None else send_order:
        r = by_index.get(i)
        if r is None:
            break
        if i == upto:
            before = len(measured)
        if not r.warmup:
            measured.append(r)
    return measured, before


def look_sample(
    records: Sequence[RequestRecord],
    rule: StopRule,
    *,
    send_order: Sequence[int] | None = None,
) -> tuple[RequestRecord, ...]:
    """The records judged at the latest complete look: the first n measured requests in send
    order, all complete. Empty before the first look. Judge the run's final verdicts on this,
    not on every record: requests that were in flight when it stopped are not part of it.
    """
    measured, _ = _prefix(records, send_order)
    look = rule.latest_look(len(measured))
    return () if look is None else tuple(measured[:look])


def should_stop(
    records_so_far: Sequence[RequestRecord],
    objectives: Sequence[Objective],
    rule: StopRule,
    profile: str,
    *,
    send_order: Sequence[int] | None = None,
) -> bool:
    """Call after every completed request, with every record so far in completion order
    (warm-up included, the newest last): True when sending may stop.

    The intervals are computed only when the newest record completes a look (the first n
    requests in send order are all back); otherwise this is a scan of the record indices
    (about 0.1 ms for 2000 records). A call that is skipped can only miss a look, which keeps
    the guarantee (fewer looks). ``send_order``: the plan's order of indices when it is not
    0, 1, 2, ... (see the module docstring).
    """
    if len(records_so_far) < rule.looks[0]:
        return False
    newest = records_so_far[-1]
    # The newest record extends the prefix only if every index before it is back: a cheap
    # necessary condition first (enough records to fill the indices up to it).
    if send_order is None and newest.index >= len(records_so_far):
        return False
    measured, before = _prefix(records_so_far, send_order, upto=newest.index)
    if before is None:
        return False
    look = rule.latest_look(len(measured))
    if look is None or look <= before:
        return False  # no look completed by this record; an earlier call judged the last one
    return check(objectives, measured[:look], rule, profile).stop
