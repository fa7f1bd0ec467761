"""Mixed scenario (slo/scenarios/mixed.toml): per-class objectives, and the article's claim that
priority scheduling protects realtime traffic, measured on the same load under FCFS."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.plugin import SloCheck
from fixtures.session import ScenarioRunner, Selection
from slo.scenario import Objective
from slo.stats import safe_percentile, summarize

pytestmark = [pytest.mark.mixed, pytest.mark.scenario("mixed")]


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)


def test_priority_scheduling_lowers_realtime_ttft(
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    record_property: Callable[[str, object], None],
) -> None:
    """Claim: with priorities, the realtime class's TTFT is lower than under FCFS.

    Both runs send the identical request list (same seed); only scheduling_policy differs.
    """
    priority = scenario_runner.result(scenario_selection)
    scenario_runner.release(scenario_selection)  # one server at a time on a small machine
    fcfs_sel = scenario_selection.with_engine_args("fcfs", scheduling_policy="fcfs")
    fcfs = scenario_runner.result(fcfs_sel)
    scenario_runner.release(fcfs_sel)
    figures = {}
    for name, result in (("priority", priority), ("fcfs", fcfs)):
        assert not result.invalid_reasons, f"{name} run INVALID: {result.invalid_reasons}"
        ttft = summarize(result.records, request_class="realtime").ttft
        for q in (50, 90):
            figures[f"{name}_realtime_ttft_p{q}_s"] = safe_percentile(ttft, q)
    for key, value in figures.items():
        record_property(f"claim.{key}", value)
    p, f = figures["priority_realtime_ttft_p90_s"], figures["fcfs_realtime_ttft_p90_s"]
    assert p < f, (
        f"priority scheduling did not lower realtime TTFT p90: {p * 1000:.0f} ms under priority "
        f"vs {f * 1000:.0f} ms under FCFS, same load"
    )
