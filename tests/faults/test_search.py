"""The worst-case search's plumbing against the fault injector (slow streams on demand): a mix
over the limit is saved, reported and replayed exactly; without a limit the worst mix is kept."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.models import resolve_model
from fixtures.pool import ServerPool
from fixtures.runner import Target
from fixtures.search import replay, worst_case_search
from fixtures.selection import select
from fixtures.session import ScenarioRunner
from fixtures.settings import programmatic
from fixtures.strategies import corner_mix, hypothesis_settings, load_mix
from fixtures.targets import MODEL_CACHE, ServerInfo, Started, load_tokenizer
from fixtures.workload import PromptFactory, plan_workload
from slo.errors import ScenarioFileError
from slo.scenario import SearchEnvelope
from tests.faults.injector import Fault, FaultInjector

ENVELOPE = SearchEnvelope(
    max_prompt_tokens=64, max_output_tokens=3, max_concurrency=4, max_rate=40.0, requests=4
)


@pytest.fixture
def injector() -> Iterator[FaultInjector]:
    with FaultInjector(default=Fault("slow", delay_s=0.06)) as inj:
        yield inj
    assert inj.errors == [], "the fault injector itself failed"


def runner_for(
    tmp_path: Path, inj: FaultInjector, monkeypatch: pytest.MonkeyPatch, **search: Any
) -> tuple[ScenarioRunner, Any]:
    settings = programmatic("cpu-tiny", run_dir=tmp_path, hypothesis_profile="ci")
    sel = select("realtime", settings)
    scenario = dataclasses.replace(sel.scenario, search=dataclasses.replace(ENVELOPE, **search))
    sel = dataclasses.replace(sel, scenario=scenario)
    runner = ScenarioRunner(settings, ServerPool(settings))
    model = resolve_model("tiny-llama", cache_dir=MODEL_CACHE)
    info = ServerInfo(inj.url, "m", "none", False, None)
    monkeypatch.setattr(
        runner, "target", lambda _: Started(Target(inj.url, "m"), info, None, model)
    )
    return runner, sel


def test_a_mix_over_the_limit_is_saved_and_replays_exactly(
    tmp_path: Path, injector: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, sel = runner_for(tmp_path, injector, monkeypatch, ttft_p99_s=0.03)
    said: list[str] = []
    report = worst_case_search(runner, sel, said.append)
    assert report.failing is not None and report.failing_path is not None
    assert report.failing.ttft_p99_s >= 0.06  # every text chunk waits 60 ms
    assert report.failing_path == tmp_path / "realtime" / "failing-mix.json"
    saved = json.loads(report.failing_path.read_text())
    assert saved["ttft_p99_s"] == pytest.approx(report.failing.ttft_p99_s)
    assert "--slo-replay-mix=" in saved["replay"]
    assert any("failing-mix.json: TTFT p99" in line for line in said)
    assert "MixOverLimitError" in report.hypothesis_message

    mix = load_mix(report.failing_path)
    assert mix == report.failing.mix
    injector.seen.clear()
    run = replay(runner, sel, report.failing_path, said.append)
    assert run.ttft_p99_s >= 0.06 and run.errors == 0
    prompts = PromptFactory(load_tokenizer(resolve_model("tiny-llama", cache_dir=MODEL_CACHE)))
    planned = sorted(r.prompt for r in plan_workload(mix, prompts).measured)
    assert sorted(s.prompt for s in injector.seen) == planned  # the very same prompts


def test_without_a_limit_the_whole_budget_runs_and_the_worst_mix_is_kept(
    tmp_path: Path, injector: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, sel = runner_for(tmp_path, injector, monkeypatch)
    said: list[str] = []
    report = worst_case_search(runner, sel, said.append)
    assert report.failing is None and report.failing_path is None
    # The envelope's corner first, then the profile's budget of drawn mixes.
    assert report.examples == 1 + hypothesis_settings("ci").max_examples
    corner = corner_mix(ENVELOPE, timeout_s=sel.scenario.workload.timeout_s)
    assert said[1].startswith("example 1: ") and said[1].endswith(corner.describe())
    assert report.worst is not None and report.worst_path is not None
    assert report.worst.ttft_p99_s >= 0.06
    assert load_mix(report.worst_path) == report.worst.mix


def test_a_scenario_without_a_search_table_says_so(
    tmp_path: Path, injector: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, sel = runner_for(tmp_path, injector, monkeypatch)
    sel = dataclasses.replace(sel, scenario=dataclasses.replace(sel.scenario, search=None))
    with pytest.raises(ScenarioFileError, match=r"key 'search' = None: no \[search\] table"):
        worst_case_search(runner, sel, lambda _: None)
