"""Mixed traffic on two vLLM instances, one per class (slo/scenarios/mixed-two-instances.toml),
and the article's choice between that and one shared instance with priorities, on the same load."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.claims import (
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

pytestmark = [pytest.mark.mixed, pytest.mark.scenario("mixed-two-instances")]

SERVER_TTFT = "vllm:time_to_first_token_seconds"


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)


def test_two_instances_against_one_shared_priority_instance(
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    record_property: Callable[[str, object], None],
) -> None:
    """Realtime TTFT with one instance per class vs one instance shared under priorities.

    The same request list both times; only where the requests go differs. Which layout gives the
    lower realtime TTFT depends on the hardware split (here both instances share the profile's
    server CPUs), so the figures are reported, not asserted; what is asserted is the routing.
    """
    results = run_variants(
        scenario_runner,
        scenario_selection,
        {"two-instances": {}, "one-instance": scenario_selection.one_instance("one-instance")},
    )
    two, one = results["two-instances"], results["one-instance"]
    figures = {
        f"{layout}.{cls}": class_figures(result, cls)
        for layout, result in results.items()
        for cls in ("realtime", "batch")
    }
    report_figures(scenario_runner, record_property, "two-instances", figures)
    # Reported with its interval, not asserted (see the docstring).
    c = claim_comparison(one, two, "ttft", "p50", "realtime")
    sentence = claim_sentence(c, "two instances (against one shared)", "realtime TTFT p50")
    report_comparison(
        record_property, "two-instances/one-instance.realtime", "ttft_p50_s", c, sentence
    )
    # Every request was served by its class's instance, and vLLM itself saw exactly them.
    wrong = [
        (r.index, r.request_class, r.instance) for r in two.records if r.instance != r.request_class
    ]
    assert not wrong, (
        f"requests served by another class's instance (index, class, instance): {wrong[:5]}"
    )
    assert {r.instance for r in one.records} == {""}
    for cls in ("realtime", "batch"):
        if scenario_runner.settings.replay_dir is not None:
            break  # a replayed run has its records, not the servers' histograms
        measured = sum(1 for r in two.records if r.request_class == cls and not r.warmup)
        hist = two.instance_metrics.get(cls, {}).get(SERVER_TTFT)
        assert hist is not None, f"no {SERVER_TTFT} histogram was scraped from the {cls} instance"
        seen = hist.count
        assert seen == measured, (
            f"the {cls} instance's vLLM counted {seen:.0f} first tokens over the measured window, "
            f"the client sent it {measured} measured requests"
        )
    fail_if_invalid(results)
