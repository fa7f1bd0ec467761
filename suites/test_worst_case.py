"""Worst-case search (opt-in: ``pytest -m explore``): the prompt mix of highest TTFT p99 within
the realtime scenario's ``[search]`` envelope, found by Hypothesis and saved with the report.

``--slo-hypothesis-profile`` picks the budget (ci, explore, signoff); ``--slo-replay-mix=FILE``
sends a saved mix once instead of searching.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.search import replay, worst_case_search
from fixtures.selection import Selection
from fixtures.session import ScenarioRunner
from fixtures.settings import Settings
from slo.errors import SuiteError

pytestmark = [pytest.mark.explore, pytest.mark.scenario("realtime")]


def test_worst_case_ttft_p99(
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    scenario_runner: ScenarioRunner,
    scenario_selection: Selection,
    slo_settings: Settings,
    record_property: Callable[[str, object], None],
) -> None:
    if "explore" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("the worst-case search is opt-in: run it with -m explore")

    def say(line: str) -> None:
        with capsys.disabled():
            print(f"\n  [search] {line}", end="", flush=True)

    try:
        if slo_settings.replay_mix is not None:
            run = replay(scenario_runner, scenario_selection, slo_settings.replay_mix, say)
            record_property("search.replayed_ttft_p99_s", run.ttft_p99_s)
            env = scenario_selection.scenario.search
            limit = env.ttft_p99_s if env else None
            if limit is not None and run.ttft_p99_s > limit / slo_settings.tighten:
                pytest.fail(
                    f"replayed mix: TTFT p99 {run.ttft_p99_s * 1000:.0f} ms > "
                    f"{limit * 1000:.0f} ms ([search] ttft_p99)",
                    pytrace=False,
                )
            return
        report = worst_case_search(scenario_runner, scenario_selection, say)
    except SuiteError as e:
        pytest.fail(str(e), pytrace=False)
    record_property("search.examples", report.examples)
    record_property("search.token_mismatches", report.token_mismatches)
    record_property("search.multi_turn_requests", report.multi_turn)
    record_property("search.shared_prefix_requests", report.shared_prefix)
    if report.worst is not None:
        record_property("search.worst_ttft_p99_s", report.worst.ttft_p99_s)
        record_property("search.worst_mix", str(report.worst_path))
    if report.failing is not None:
        record_property("search.failing_ttft_p99_s", report.failing.ttft_p99_s)
        pytest.fail(
            f"a prompt mix within the envelope has TTFT p99 "
            f"{report.failing.ttft_p99_s * 1000:.0f} ms > {(report.limit_s or 0) * 1000:.0f} ms: "
            f"{report.failing.mix.describe()}; saved to {report.failing_path}; replay it with "
            f"--slo-replay-mix={report.failing_path}",
            pytrace=False,
        )
