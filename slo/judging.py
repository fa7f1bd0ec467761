"""A finished run's verdicts: which records each objective is judged on, and at what level.

The pytest side hands a ``RunEvidence`` (the records and what the scenario says about them) and
gets ``Verdict``s back; nothing here knows about servers, settings or pytest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slo.cold_start import ColdStartRun, judge_cold
from slo.planning import requests_for_pass_at
from slo.records import RequestRecord
from slo.scenario import Objective, Scenario
from slo.sequential import StopRule, look_sample
from slo.stats import RunSummary, summarize
from slo.verdict import Verdict, check_background, check_server, check_validity, judge
from slo.vocabulary import COLD_START_METRICS


def invalid_reasons(
    scenario: Scenario, records: Sequence[RequestRecord], summary: RunSummary
) -> tuple[str, ...]:
    """What the client spoiled (INVALID), with schedule lag bounded over the requests that had
    a schedule."""
    timed = {c.name for c in scenario.workload.classes if c.arrival != "closed"}
    lags = [r.schedule_lag_s for r in records if not r.warmup and r.request_class in timed]
    return tuple(
        check_validity(summary, scenario.validity, lags)
        + check_background(records, scenario.workload.classes)
    )


def server_failures(scenario: Scenario, summary: RunSummary) -> tuple[str, ...]:
    """What the server failed as a whole (every objective FAILs)."""
    return tuple(check_server(summary, scenario.validity))


def run_checks(
    scenario: Scenario, records: Sequence[RequestRecord]
) -> tuple[RunSummary, tuple[str, ...], tuple[str, ...]]:
    """A run's summary under the scenario's goodput bounds, with what the client spoiled
    (``invalid_reasons``) and what the server failed as a whole (``server_failures``)."""
    summary = summarize(records, goodput_limits=scenario.goodput or None)
    return summary, invalid_reasons(scenario, records, summary), server_failures(scenario, summary)


@dataclass(frozen=True)
class RunEvidence:
    """What a run's objectives are judged on."""

    records: tuple[RequestRecord, ...]
    profile: str
    confidence: float
    goodput_limits: Mapping[str, float] | None = None
    invalid: tuple[str, ...] = ()
    server_failures: tuple[str, ...] = ()
    stop_rule: StopRule | None = None
    """Set when the workload stopped sequentially."""
    send_order: tuple[int, ...] = ()
    cold_starts: ColdStartRun | None = None
    """The server starts that cold-start objectives are judged on; None: none measured."""
    _summaries: dict[str | None, RunSummary] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Per request class, summarised once: planning asks again for every objective."""

    def judge(self, objective: Objective) -> Verdict:
        if objective.metric in COLD_START_METRICS:
            # Judged on the starts, not the records: the workload's validity and its sequential
            # looks are about other requests.
            return judge_cold(
                objective, self.cold_starts, confidence=self.confidence, profile=self.profile
            )
        records: Sequence[RequestRecord] = self.records
        confidence = self.confidence
        if self.stop_rule is not None:
            # Sequential runs are judged on the first n requests sent at the last complete look,
            # at the per-look level: that is what keeps the error bound under repeated looks.
            records = look_sample(self.records, self.stop_rule, send_order=self.send_order)
            confidence = self.stop_rule.look_confidence
        return judge(
            objective,
            records,
            confidence=confidence,
            profile=self.profile,
            goodput_limits=self.goodput_limits,
            invalid=self.invalid,
            server_failures=self.server_failures,
        )

    def summary(self, request_class: str | None) -> RunSummary:
        if request_class not in self._summaries:
            self._summaries[request_class] = summarize(
                self.records, request_class, self.goodput_limits
            )
        return self._summaries[request_class]

    def requests_for_pass(self, verdict: Verdict, headroom: float) -> int | None:
        """Requests a PASS of the verdict's percentile objective needs with 90% probability if
        its true value were ``headroom`` x the threshold (the run's shape and clustering)."""
        obj = verdict.objective
        if obj.quantile is None or not verdict.n_eff or obj.metric in COLD_START_METRICS:
            return None
        return requests_for_pass_at(
            obj,
            self.summary(obj.request_class).samples(obj.metric),
            verdict.n / verdict.n_eff,
            verdict.confidence,
            headroom,
        )
