"""Mixed scenario (slo/scenarios/mixed.toml): per-class objectives, and the article's claim that
priority scheduling protects realtime traffic, measured on the same load under FCFS."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.claims import (
    assert_claim,
    claim_comparison,
    claim_sentence,
    class_figures,
    fail_if_invalid,
    report_comparison,
    report_figures,
    run_variants,
)
from fixtures.scenario_fixtures import SloCheck
from fixtures.selection import Selection
from fixtures.session import ScenarioRunner
from slo.scenario import Objective

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
    results = run_variants(
        scenario_runner, scenario_selection, {"priority": {}, "fcfs": {"scheduling_policy": "fcfs"}}
    )
    figures = {name: class_figures(r, "realtime") for name, r in results.items()}
    report_figures(scenario_runner, record_property, "priority-vs-fcfs", figures)
    c = claim_comparison(results["fcfs"], results["priority"], "ttft", "p90", "realtime")
    sentence = claim_sentence(c, "priority", "realtime TTFT p90")
    report_comparison(record_property, "priority/fcfs", "ttft_p90_s", c, sentence)
    fail_if_invalid(results)
    assert_claim(c, sentence, expect="lower")
