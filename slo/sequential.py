"""Sequential early stop: end a workload as soon as every objective is decided.

Looking at the verdict after every few requests and stopping at the first PASS or FAIL is the
classic way to be wrong more often than the stated confidence says: each look is another chance
for the interval to miss. The rule here keeps the error at or under ``1 - confidence`` however
the run ends.

Method: a few looks, Bonferroni across them.

- Looks at a fixed, geometric schedule of sample counts ``n0, 2*n0, 4*n0, ..., N``; the
  workload's full N is always the last look. The default ``n0 = ceil(N / 8)`` gives 4 looks
  (N/8, N/4, N/2, N) whatever N is. Interval width shrinks like ``1/sqrt(n)``, so equal ratios
  between looks are equal steps in precision, and the number of looks grows only like log N.
- Every look judges every objective with ``slo.verdict.evaluate`` at the per-look level
  ``look_confidence = 1 - (1 - confidence) / (K * m)`` (K looks, m objectives sharing the
  budget; m = 1 by default), e.g. 98.75 % for 4 looks at 95 %.
- The sample at a look is the first n measured requests in send order, each complete; not the
  first n to complete, which are the fastest ones (the slow requests still in flight are exactly
  the tail a p99 is about).

Why it is valid: at a look of fixed size n, the order-statistic interval of a quantile (and the
exact binomial interval of an error rate) misses the true value with probability at most
``1 - look_confidence``; that is the fixed-n guarantee ``evaluate`` already rests on, and it
holds at each look because the look's sample is fixed by the plan, not by the values. A wrong
verdict (PASS while the true value misses the threshold, FAIL while it meets it, or either one
when it sits exactly on the threshold) needs the interval to miss the true value at that look.
By the union bound, the chance that any interval of any look misses is at most
``K * m * (1 - look_confidence) = 1 - confidence``, whatever the looks' correlation and however
the stopping depends on the data. So every verdict the run reports, at whatever look it stopped,
is wrong with probability at most ``1 - confidence``, and the reported interval covers the true
value with at least that probability. Each side of the interval holds half of the budget, so a
true value just past the threshold is judged the wrong way with probability at most half of it.
Bonferroni ignores the strong correlation between looks, so the real error is well under the
bound (tests/unit/test_sequential.py computes it); in exchange it needs no joint distribution
of the looks, which the exact order-statistic intervals do not have in closed form
(group-sequential boundaries assume a normal statistic). A time-uniform confidence sequence
would allow a look after every request, but is harder to get exactly right and to check, and
a p99 cannot PASS before a few hundred samples anyway, so frequent looks would buy little.

The final look is judged at ``look_confidence`` too, not at ``confidence``: its interval is one
of the K the union bound counts; judged at the unadjusted level, it alone would spend the
whole budget. So a run that reaches N gets a wider interval than a fixed-N run (more
INCONCLUSIVE near the threshold: p99 can PASS only from 505 samples at 98.75 %, against 368 at
95 %). That is the price of being allowed to stop early. The runner must judge the final
verdicts at ``rule.look_confidence`` on ``look_sample(...)``.

``m = 1`` gives the same promise a fixed-N verdict gives: each objective on its own is wrong
with probability at most ``1 - confidence``, now over all looks. Pass ``objectives=m`` (the
number of ``early_decidable`` objectives) to make it family-wise across objectives as well;
it costs samples (three p99-like objectives at 95 % over 4 looks need 615 samples to PASS).

Which objectives may be decided early: percentile objectives (distribution-free interval) and
``error_rate`` (exact binomial interval). Not the others: ``mean`` uses a t interval that assumes
a near-normal mean (and a failed request is +inf), ``max`` has no interval, and throughput and
goodput are one number per run with no interval, whose value on a shortened run is not its value
on the full one. A scenario with such an objective stops early only when every decidable
objective is decided and at least one is FAIL: the scenario then fails whatever the others show,
and that FAIL is covered by the guarantee above. While everything decidable passes, it runs to N,
so the other objectives are measured on the whole workload.

Assumptions, the same as the fixed-N verdict's: requests are independent draws from one
distribution (per request class). "Send order" is the plan's order of record indices: by default
0, 1, 2, ... (one traffic class, warm-up first); a plan that interleaves classes passes its own
(``send_order=[r.index for r in plan.requests]``). Any order fixed by the plan keeps the
guarantee; one close to the real send order lets looks complete sooner.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slo.records import RequestRecord
from slo.scenario import Objective
from slo.stats import RunSummary, summarize
from slo.verdict import Outcome, Verdict, evaluate

DEFAULT_GROWTH = 2.0
DEFAULT_LOOKS_BEFORE_N = 3
"""With growth 2, the default first look is N / 2**3: looks at N/8, N/4, N/2 and N."""


@dataclass(frozen=True)
class StopRule:
    """When to look and at what level. Build it with ``StopRule.for_workload``.

    A hand-made rule is allowed (a test compares against one), but its guarantee is only what
    ``confidence`` says: the union bound over its looks, which may be worthless.
    """

    looks: tuple[int, ...]
    """Measured-request counts at which the objectives are judged; the last is the workload's N."""
    look_confidence: float
    """Level of the two-sided interval at every look, the final one included."""
    objectives: int = 1
    """How many objectives share the error budget (1: each objective on its own)."""

    def __post_init__(self) -> None:
        if not self.looks:
            raise ValueError("a stop rule needs at least one look (the workload's N)")
        if self.looks[0] < 1 or any(b <= a for a, b in itertools.pairwise(self.looks)):
            raise ValueError(f"looks = {self.looks!r} must be positive and strictly increasing")
        if not 0 < self.look_confidence < 1:
            raise ValueError(f"look_confidence = {self.look_confidence!r} must be in (0, 1)")
        if self.objectives < 1:
            raise ValueError(f"objectives = {self.objectives!r} must be >= 1")

    @classmethod
    def for_workload(
        cls,
        total_requests: int,
        confidence: float,
        *,
        objectives: int = 1,
        first_look: int | None = None,
        growth: float = DEFAULT_GROWTH,
    ) -> StopRule:
        """Geometric looks ``first_look * growth**i`` below N, then N; Bonferroni level.

        ``first_look`` defaults to ``ceil(N / growth**3)``: three looks before N (N/8, N/4, N/2
        at growth 2). ``objectives`` is how many objectives share ``1 - confidence`` (see the
        module docstring).
        """
        if total_requests < 1:
            raise ValueError(f"total_requests = {total_requests!r} must be >= 1")
        if not 0 < confidence < 1:
            raise ValueError(f"confidence = {confidence!r} must be in (0, 1), e.g. 0.95")
        if not growth > 1:
            raise ValueError(f"growth = {growth!r} must be > 1 (each look larger than the last)")
        if first_look is None:
            first_look = math.ceil(total_requests / growth**DEFAULT_LOOKS_BEFORE_N)
        if first_look < 1:
            raise ValueError(f"first_look = {first_look!r} must be >= 1")
        looks: list[int] = []
        size = float(first_look)
        while round(size) < total_requests:
            n = round(size)
            if not looks or n > looks[-1]:  # rounding can repeat a count at small sizes
                looks.append(n)
            size *= growth
        looks.append(total_requests)
        k = len(looks)
        return cls(
            looks=tuple(looks),
            look_confidence=1 - (1 - confidence) / (k * objectives),
            objectives=objectives,
        )

    @property
    def total_requests(self) -> int:
        return self.looks[-1]

    @property
    def confidence(self) -> float:
        """The level the union bound guarantees across all looks (and ``objectives``)."""
        return 1 - len(self.looks) * self.objectives * (1 - self.look_confidence)

    def latest_look(self, n: int) -> int | None:
        """The largest look at or under ``n`` measured requests; None before the first."""
        found = None
        for look in self.looks:
            if look > n:
                break
            found = look
        return found


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
    sample: RunSummary | Sequence[RequestRecord],
    rule: StopRule,
    profile: str,
) -> LookResult:
    """Judge every objective at the look ``sample`` is; ``ValueError`` if it is not a look.

    ``sample`` is the look's records (``look_sample``), or its summary. A summary carries one
    request class, so objectives of another class need the records.
    """
    summary = sample if isinstance(sample, RunSummary) else summarize(sample)
    n = summary.n
    if n not in rule.looks:
        raise ValueError(
            f"{n} measured requests is not a look of the rule ({rule.looks}); judging between "
            "looks would void the error guarantee"
        )
    # Only early-decidable objectives are judged at a look: the others need the whole run (and
    # goodput needs bounds this summary does not carry).
    verdicts = tuple(
        evaluate(
            obj,
            _summary_for(obj, summary, sample),
            confidence=rule.look_confidence,
            profile=profile,
        )
        for obj in objectives
        if early_decidable(obj)
    )
    early = list(verdicts)
    all_decided = bool(early) and all(v.outcome in (Outcome.PASS, Outcome.FAIL) for v in early)
    complete = len(early) == len(objectives) or any(v.outcome is Outcome.FAIL for v in early)
    return LookResult(
        n=n, final=n == rule.total_requests, verdicts=verdicts, decided=all_decided and complete
    )


def _summary_for(
    obj: Objective, summary: RunSummary, sample: RunSummary | Sequence[RequestRecord]
) -> RunSummary:
    if obj.request_class is None or obj.request_class == summary.request_class:
        return summary
    if isinstance(sample, RunSummary):
        raise ValueError(
            f"objective {obj.name!r} is for class {obj.request_class!r}; pass the look's records, "
            "not a summary, to judge it"
        )
    return summarize(sample, request_class=obj.request_class)


def decided(
    objectives: Sequence[Objective],
    sample: RunSummary | Sequence[RequestRecord],
    rule: StopRule,
    profile: str,
) -> bool:
    """Whether the workload may stop at this look (``check(...).decided``)."""
    return check(objectives, sample, rule, profile).decided


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
