"""The article's advice to lower max_num_seqs for TTFT, measured: the same load under a small and
a large max_num_seqs, below saturation (realtime's light Poisson load) and above it (a burst of 64
requests, slo/scenarios/burst.toml). TTFT p50/p90/p99 and output throughput of each are reported
as JUnit properties, on the sign-off page and in ``<run>/claims/``, with the ratio of TTFT p50
and its interval; only the robust direction is asserted, on that interval."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.claims import (
    Figures,
    assert_claim,
    claim_comparison,
    claim_sentence,
    class_figures,
    fail_if_invalid,
    report_comparison,
    report_figures,
    run_variants,
)
from fixtures.selection import Selection
from fixtures.session import ScenarioRunner
from slo.compare import Comparison

pytestmark = pytest.mark.claims

SMALL, LARGE = 8, 128


def _measure(
    runner: ScenarioRunner, base: Selection, record_property: Callable[[str, object], None]
) -> tuple[dict[int, Figures], Comparison, str]:
    """Run the base load under each max_num_seqs (one server at a time) and report the figures."""
    variants = {
        f"max_num_seqs-{n}": {}
        if base.engine_args.get("max_num_seqs") == n
        else {"max_num_seqs": n}
        for n in (SMALL, LARGE)
    }
    results = run_variants(runner, base, variants)
    figures = {name: class_figures(result) for name, result in results.items()}
    report_figures(runner, record_property, f"max-num-seqs.{base.scenario.name}", figures)
    small, large = results[f"max_num_seqs-{SMALL}"], results[f"max_num_seqs-{LARGE}"]
    c = claim_comparison(large, small, "ttft", "p50")
    sentence = claim_sentence(c, f"max_num_seqs {SMALL} (against {LARGE})", "TTFT p50")
    report_comparison(record_property, f"max_num_seqs-{SMALL}/{LARGE}", "ttft_p50_s", c, sentence)
    fail_if_invalid(results)  # after reporting: the figures are kept
    return {n: figures[f"max_num_seqs-{n}"] for n in (SMALL, LARGE)}, c, sentence


@pytest.mark.scenario("realtime")
def test_max_num_seqs_below_saturation(
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    record_property: Callable[[str, object], None],
) -> None:
    """Below saturation few requests are in flight at once, so max_num_seqs seldom binds: the
    figures are reported, no direction is asserted (it is within noise on CPU vLLM)."""
    figures, _, _ = _measure(scenario_runner, scenario_selection, record_property)
    for n, f in figures.items():
        assert f["requests"] > 0 and f["output_tok_s"] > 0, f"max_num_seqs {n}: {f}"


@pytest.mark.scenario("burst")
def test_smaller_max_num_seqs_raises_ttft_under_a_burst(
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    record_property: Callable[[str, object], None],
) -> None:
    """Above saturation, the article's advice turns over: with a burst eight times max_num_seqs,
    requests are admitted in waves and the smaller max_num_seqs gives the higher TTFT p50."""
    _, c, sentence = _measure(scenario_runner, scenario_selection, record_property)
    assert_claim(c, f"under a burst of 64, {sentence}", expect="higher")
