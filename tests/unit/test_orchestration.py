"""The orchestration without vLLM: plan -> measure -> assemble against the fault injector,
verdicts judged once, host facts probed once, and the load runner the settings ask for."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures import host, measure
from fixtures.load_runner import OneProcess, Spread, load_runner
from fixtures.measure import Measured, Planned, assemble, plan
from fixtures.models import resolve_model
from fixtures.result import ScenarioResult
from fixtures.runner import Target
from fixtures.selection import Selection
from fixtures.settings import Settings
from fixtures.targets import MODEL_CACHE, ServerInfo, Started
from fixtures.workload import WorkloadPlan
from slo import judging
from slo.histogram import Histogram
from slo.planning import requests_for_pass_at
from slo.records import RequestRecord
from slo.scenario import Scenario, load_profile, load_scenario
from slo.stats import summarize
from slo.verdict import Outcome
from tests.faults.injector import FaultInjector
from tests.unit.builders import obj, rec

MODEL = "fault-injector-model"

SCENARIO = """\
[scenario]
name = "orchestrated"
description = "a short open-loop workload against the fault injector"

[workload]
api = "chat"
class = "default"
arrival = "constant"
rate = "100 req/s"
requests = 30
warmup_requests = 2
prompt_tokens = { min = 4, max = 4 }
output_tokens = 4
timeout = "10s"

[validity]
schedule_lag_p99 = "10s"  # a busy test machine must not make the run INVALID

[objectives.cpu-tiny]
"ttft p50" = "<= 10s"
"""


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        profile="cpu-tiny", profile_source="option", endpoint=None, api_key_env="VLLM_API_KEY",
        api_key=None, vllm_python="python", startup_timeout_s=1.0, tighten=1.0,
        max_requests=None, model=None, run_dir=tmp_path, host="127.0.0.1", progress=False,
    )  # fmt: skip
    return Settings(**{**values, **overrides})


def _scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "orchestrated.toml"
    path.write_text(SCENARIO)
    return load_scenario(path)


def _selection(scenario: Scenario) -> Selection:
    # Unpinned: the test's process may not own the profile's client CPU.
    profile = dataclasses.replace(load_profile("cpu-tiny"), client_cpus=())
    return Selection(scenario, profile, scenario.objectives_for("cpu-tiny"), MODEL, {})


def _started(url: str) -> Started:
    info = ServerInfo(url, MODEL, "none", started_by_suite=False, ready_s=None)
    model = resolve_model("tiny-llama", cache_dir=MODEL_CACHE)
    return Started(Target(url, MODEL), info, None, model)


def test_plan_measure_assemble_against_the_fault_injector(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    sel = _selection(_scenario(tmp_path))
    with FaultInjector() as inj:
        planned = plan(sel, settings, {"": _started(inj.url)})
        # The injector has no vLLM /metrics: the run goes on with the client's figures alone.
        assert planned.metrics_urls == {}
        assert planned.info.server_figures.startswith(f"{inj.url}/metrics")
        assert len(planned.plan.measured) == 30 and len(planned.plan.requests) == 32
        assert planned.stop_rule is None and planned.send_order == tuple(range(32))
        measured = measure.measure(planned)
    assert len(measured.records) == 32 and measured.failed == () and measured.invalid == ()
    result = assemble(planned, measured)
    assert [r.index for r in result.records] == list(range(32))
    assert result.summary.n == 30 and result.summary.n_ok == 30
    assert result.server is planned.info and result.instances == {}
    (objective,) = sel.objectives
    verdict = result.judge(objective)
    assert verdict.outcome is not Outcome.INVALID and verdict.n == 30 - verdict.warmup_dropped


def test_an_interrupted_workload_hands_over_what_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[RequestRecord] = []

    def ctrl_c_after_five(sel: Any, workload: Any, sink: Any) -> Any:
        def hook(r: RequestRecord) -> None:
            seen.append(r)
            if len(seen) == 5:
                raise KeyboardInterrupt

        return hook

    monkeypatch.setattr(measure, "progress_hook", ctrl_c_after_five)
    kept: list[Measured] = []
    sel = _selection(_scenario(tmp_path))
    with FaultInjector() as inj:
        planned = plan(sel, _settings(tmp_path), {"": _started(inj.url)})
        with pytest.raises(KeyboardInterrupt):
            measure.measure(planned, on_interrupt=kept.append)
    (partial,) = kept
    assert partial.records == tuple(seen) and partial.invalid == ("interrupted: partial run",)
    result = assemble(planned, partial)
    assert result.invalid_reasons[0] == "interrupted: partial run"
    assert result.judge(sel.objectives[0]).outcome is Outcome.INVALID


def test_assemble_adds_the_instances_histograms_and_a_death(tmp_path: Path) -> None:
    sel = _selection(_scenario(tmp_path))
    planned = Planned(
        selection=sel, settings=_settings(tmp_path), instances={"": _started("http://x")},
        plan=WorkloadPlan(api="chat", timeout_s=1.0, requests=()), client_cpus=(),
        metrics_urls={}, series_url="", metrics_key=None,
        info=ServerInfo("http://x", MODEL, "none", False, None), stop_rule=None,
        stop_sequential=None, send_order=(),
    )  # fmt: skip
    h = Histogram(count=3, sum=0.5, buckets=((0.1, 2), (float("inf"), 3)))
    m = Measured(
        records=tuple(rec(i, 50) for i in (2, 0, 1)),
        per_instance={"a": {"ttft": h}, "b": {"ttft": h}},
        workload_s=1.0,
        server_series=(),
        failed=("it died mid-workload",),
    )
    result = assemble(planned, m)
    assert [r.index for r in result.records] == [0, 1, 2]
    assert result.server_metrics["ttft"].count == 6
    assert result.server_failures[0] == "it died mid-workload"
    assert result.judge(obj("ttft p50", "<= 1s")).outcome is Outcome.FAIL


def _result(tmp_path: Path, records: tuple[RequestRecord, ...]) -> ScenarioResult:
    sel = _selection(_scenario(tmp_path))
    summary = summarize(records)
    return ScenarioResult(
        selection=sel,
        server=ServerInfo("http://x", MODEL, "none", False, None),
        records=records,
        summary=summary,
        invalid_reasons=(),
        workload_s=1.0,
        settings=_settings(tmp_path),
    )


def test_planning_is_computed_once_per_objective(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = requests_for_pass_at
    summaries: list[str | None] = []
    real_summarize = summarize

    def counted(*args: Any, **kwargs: Any) -> int | None:
        calls.append(1)
        return real(*args, **kwargs)

    def counted_summary(*args: Any, **kwargs: Any) -> Any:
        summaries.append(args[1])
        return real_summarize(*args, **kwargs)

    monkeypatch.setattr(judging, "requests_for_pass_at", counted)
    monkeypatch.setattr(judging, "summarize", counted_summary)
    result = _result(tmp_path, tuple(rec(i, 100 + i % 7) for i in range(400)))
    p50, p90 = obj("ttft p50", "<= 1s"), obj("ttft p90", "<= 1s")
    first = result.plan(result.judge(p50))
    assert first is not None and result.plan(result.judge(p50)) == first
    result.plan(result.judge(p90))
    assert len(calls) == 2  # once per objective, however often asked
    assert summaries == [None]  # one summary of the class serves both objectives


def test_git_commit_is_unknown_when_git_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    def hangs(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(cmd="git", timeout=10)

    monkeypatch.setattr(subprocess, "run", hangs)
    assert host.git_commit() == "unknown"


def test_host_facts_are_probed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []

    def gpus() -> list[dict[str, str]]:
        probes.append("gpus")
        return []

    def commit() -> str:
        probes.append("git")
        return "abc1234"

    monkeypatch.setattr(host, "gpu_inventory", gpus)
    monkeypatch.setattr(host, "git_commit", commit)
    host.host_facts.cache_clear()
    try:
        first = host.environment(_settings(tmp_path))
        again = host.environment(_settings(tmp_path, tighten=2.0))
    finally:
        host.host_facts.cache_clear()
    assert sorted(probes) == ["git", "gpus"]
    assert first["suite_commit"] == again["suite_commit"] == "abc1234"
    assert (first["tighten"], again["tighten"]) == (1.0, 2.0)


def test_the_load_runner_follows_client_processes(tmp_path: Path) -> None:
    def on_send() -> None:
        return None

    assert load_runner(_settings(tmp_path), (1,), on_send) == OneProcess(on_send)
    assert load_runner(_settings(tmp_path, client_processes=3), (1, 2), on_send) == Spread(
        3, (1, 2)
    )


def test_n_good_is_counted_from_the_good_completions() -> None:
    records = [rec(i, 100 if i % 4 else 900) for i in range(20)] + [rec(20, 0, error="timeout")]
    bounded = summarize(records, goodput_limits={"ttft": 0.5})
    assert bounded.n_good == 15 and len(bounded.done_good) == 20
    assert summarize(records).n_good is None
    assert summarize(records[-1:], goodput_limits={"ttft": 0.5}).n_good == 0
