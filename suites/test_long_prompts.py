"""Long-prompt scenario (slo/scenarios/long-prompts.toml): the chunked-prefill budget's effect
on TTFT, measured on one load under two max_num_batched_tokens values."""

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

pytestmark = [pytest.mark.long_prompts, pytest.mark.scenario("long-prompts")]

SMALL_BUDGET = 256  # a 1024-1536 token prompt then takes 4-6 engine steps to prefill


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)


def test_small_prefill_budget_raises_long_prompt_ttft(
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    record_property: Callable[[str, object], None],
) -> None:
    """Claim: a smaller max_num_batched_tokens raises long prompts' TTFT.

    Also reported, not asserted: the chat class's TPOT under each budget (the advice says the
    small budget lowers it; on a light load the difference can be within the noise).
    """
    large = scenario_selection.engine_args["max_num_batched_tokens"]
    results = run_variants(
        scenario_runner,
        scenario_selection,
        {f"budget-{large}": {}, f"budget-{SMALL_BUDGET}": {"max_num_batched_tokens": SMALL_BUDGET}},
    )
    figures = {}
    for name, result in results.items():
        for cls in ("long", "chat"):
            figures[f"{name}.{cls}"] = class_figures(result, cls)
    report_figures(scenario_runner, record_property, "prefill-budget", figures)
    small, big = results[f"budget-{SMALL_BUDGET}"], results[f"budget-{large}"]
    c = claim_comparison(big, small, "ttft", "p50", "long")
    sentence = claim_sentence(
        c, f"max_num_batched_tokens {SMALL_BUDGET} (against {large})", "long-prompt TTFT p50"
    )
    report_comparison(
        record_property, f"budget-{SMALL_BUDGET}/budget-{large}.long", "ttft_p50_s", c, sentence
    )
    fail_if_invalid(results)
    assert_claim(c, sentence, expect="higher")
