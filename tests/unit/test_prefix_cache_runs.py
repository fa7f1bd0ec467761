"""Prefix-cache hygiene through the whole harness without vLLM: plan -> measure -> assemble
against the fault injector with a prefix cache in miniature (tests/faults/prompt_cache.py), the
run folder's summary.json, both JUnit files, the sign-off page, and a replay."""

from __future__ import annotations

import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from fixtures import measure
from fixtures.measure import assemble, plan
from fixtures.models import resolve_model
from fixtures.pool import ServerPool
from fixtures.result import ScenarioResult
from fixtures.runner import Target
from fixtures.selection import Selection
from fixtures.session import ScenarioRunner
from fixtures.settings import ROOT, Settings, programmatic
from fixtures.targets import MODEL_CACHE, ServerInfo, Started
from reports.junit_report import suite_properties
from reports.run_folder import load_run
from reports.signoff import build_report, render_markdown
from slo.prefix_cache import PrefixCacheRun
from slo.scenario import SCENARIO_DIR, load_profile, load_scenario
from slo.verdict import Outcome
from tests.faults.injector import FaultInjector
from tests.faults.prompt_cache import PromptCache

MODEL = "fault-injector-model"
NEW = ROOT / "tests" / "unit" / "data" / "run-new"

SCENARIO = """\
[scenario]
name = "cached"

[workload]
api = "chat"
arrival = "constant"
rate = "100 req/s"
requests = 30
warmup_requests = 2
prompt_tokens = { min = 40, max = 48 }
output_tokens = 4
timeout = "10s"
PREFIX

[validity]
schedule_lag_p99 = "10s"  # a busy test machine must not make the run INVALID

[objectives.cpu-tiny]
"ttft p50" = "<= 10s"
"""
WARM = 'prefix_cache = "warm"\n[workload.shared_prefix]\ntokens = 32\ncount = 2'


def _selection(tmp_path: Path, prefix: str = "") -> Selection:
    path = tmp_path / "cached.toml"
    path.write_text(SCENARIO.replace("PREFIX", prefix))
    scenario = load_scenario(path)
    # Unpinned: the test's process may not own the profile's client CPU.
    profile = dataclasses.replace(load_profile("cpu-tiny"), client_cpus=())
    return Selection(scenario, profile, scenario.objectives_for("cpu-tiny"), MODEL, {})


def _settings(tmp_path: Path) -> Settings:
    return programmatic("cpu-tiny", run_dir=tmp_path / "run")


def _run(sel: Selection, settings: Settings, url: str) -> ScenarioResult:
    """One scenario run against an external endpoint at ``url``."""
    info = ServerInfo(url, MODEL, "none", started_by_suite=False, ready_s=None)
    model = resolve_model("tiny-llama", cache_dir=MODEL_CACHE)
    planned = plan(sel, settings, {"": Started(Target(url, MODEL), info, None, model)})
    return assemble(planned, measure.measure(planned))


def test_the_same_seed_twice_without_a_reset_is_invalid_and_with_one_is_cold(
    tmp_path: Path,
) -> None:
    sel, settings = _selection(tmp_path), _settings(tmp_path)
    (objective,) = sel.objectives
    no_reset = PromptCache(reset_served=False)
    with FaultInjector(cache=no_reset) as inj:
        first, second = _run(sel, settings, inj.url), _run(sel, settings, inj.url)
    for r in (first, second):
        assert r.prefix_cache is not None and r.prefix_cache.forecast is not None
        assert r.prefix_cache.forecast.block_sizes == (16,)
        assert r.prefix_cache.forecast.cold_ceiling == 0  # unique prompts share no block
        assert r.prefix_cache.reset.startswith(
            f"not reset after the warm-up: {inj.url}/reset_prefix_cache answered 404"
        )
    assert first.prefix_cache is not None and first.prefix_cache.hit_rate == 0.0
    assert first.invalid_reasons == ()
    # The second run sends the first run's prompts: every measured token is a hit.
    assert second.prefix_cache is not None and second.prefix_cache.hit_rate == 1.0
    counters = second.prefix_cache.counters
    # The cache in miniature counts words, and each prompt word is one token.
    assert counters is not None
    assert counters.queries == sum(r.prompt_tokens or 0 for r in second.records if not r.warmup)
    (reason,) = second.invalid_reasons
    assert reason.startswith('prefix cache declared "cold", but ')
    assert second.judge(objective).outcome is Outcome.INVALID

    resets = PromptCache()
    with FaultInjector(cache=resets) as inj:
        runs = [_run(sel, settings, inj.url) for _ in range(2)]
    assert resets.resets == 2
    for r in runs:
        assert r.prefix_cache is not None and r.prefix_cache.reset == "reset after the warm-up"
        assert r.prefix_cache.hit_rate == 0.0 and r.invalid_reasons == ()


def test_warm_without_hits_is_invalid_and_the_cache_is_reset_before_the_warm_up(
    tmp_path: Path,
) -> None:
    sel, settings = _selection(tmp_path, WARM), _settings(tmp_path)
    # Whole prompts only: the shared prefixes the warm-up sent are never hit.
    cache = PromptCache()
    with FaultInjector(cache=cache) as inj:
        r = _run(sel, settings, inj.url)
    assert cache.resets == 1
    run = r.prefix_cache
    assert run is not None and run.reset == "reset before the warm-up" and run.hit_rate == 0.0
    assert run.forecast is not None and run.forecast.warm_floor == 30 * 32
    (reason,) = r.invalid_reasons
    assert reason.startswith('prefix cache declared "warm", but only 0 of ')


def test_a_server_without_vllm_metrics_is_reported_not_invalid(tmp_path: Path) -> None:
    sel, settings = _selection(tmp_path), _settings(tmp_path)
    with FaultInjector() as inj:  # no /metrics, no reset
        r = _run(sel, settings, inj.url)
    run = r.prefix_cache
    assert run is not None and run.counters is None and r.invalid_reasons == ()
    assert run.describe().startswith("prefix cache cold (not reset after the warm-up: ")
    assert f"hit rate not measured: {inj.url}/metrics answered HTTP 404" in run.describe()


def test_summary_junit_and_signoff_carry_the_hit_rate(tmp_path: Path) -> None:
    sel, settings = _selection(tmp_path), _settings(tmp_path)
    with FaultInjector(cache=PromptCache(reset_served=False)) as inj:
        _run(sel, settings, inj.url)
        second = _run(sel, settings, inj.url)
    ScenarioRunner(settings, ServerPool(settings)).save(second)
    summary = json.loads((settings.run_dir / "cached" / "summary.json").read_text())
    assert summary["prefix_cache"]["hit_rate"] == 1.0
    assert summary["prefix_cache"]["mode"] == "cold"
    assert summary["invalid_reasons"] == list(second.invalid_reasons)

    run = load_run(settings.run_dir)
    (scenario,) = run.scenarios
    assert scenario.prefix_cache == second.prefix_cache
    # slo-junit.xml's suite of the scenario: its properties.
    props = suite_properties(run, "cached")
    assert props["prefix_cache.mode"] == "cold" and props["prefix_cache.hit_rate"] == "1.0000"
    assert props["prefix_cache.cold_ceiling"] == "0.0000"
    page = render_markdown(build_report(run))
    assert second.prefix_cache is not None and second.prefix_cache.describe() in page
    assert 'run INVALID: prefix cache declared "cold"' in page


def _stored_run(tmp_path: Path, prefix_cache: dict[str, Any]) -> Path:
    run = tmp_path / "stored"
    shutil.copytree(NEW, run)
    path = run / "realtime" / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "prefix_cache": prefix_cache}))
    return run


def test_a_replay_judges_the_stored_hit_rate_again_and_records_it_in_junit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stored = PrefixCacheRun.from_dict(
        {
            "mode": "cold",
            "queries": 40_000,
            "hits": 36_000,
            "forecast": {
                "block_sizes": [128],
                "prompt_tokens": 40_000,
                "cold_ceiling": 0,
                "warm_floor": 0,
            },
            "reset": "not reset after the warm-up: 404",
        }
    )
    run = _stored_run(tmp_path, stored.as_dict())
    monkeypatch.setenv("SLO_PROFILE", "cpu-tiny")
    pytester.makefile(".slo.toml", rt=(SCENARIO_DIR / "realtime.toml").read_text())
    result = pytester.runpytest_inprocess(f"--slo-replay={run}", "--slo-report-dir=out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = pytester.path / "out"
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert verdicts and {v["outcome"] for v in verdicts} == {"INVALID"}
    assert all('prefix cache declared "cold", but 36000 of 40000' in v["message"] for v in verdicts)
    for case in ET.parse(out / "junit.xml").getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["slo.prefix_cache.hit_rate"] == "0.9000"
        assert props["slo.prefix_cache"] == stored.describe()
    again = json.loads((out / "realtime" / "summary.json").read_text())
    assert again["prefix_cache"] == json.loads(json.dumps(stored.as_dict()))


def test_a_damaged_stored_entry_is_named_with_the_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = _stored_run(tmp_path, {"mode": "tepid"})
    monkeypatch.setenv("SLO_PROFILE", "cpu-tiny")
    pytester.makefile(".slo.toml", rt=(SCENARIO_DIR / "realtime.toml").read_text())
    result = pytester.runpytest_inprocess(f"--slo-replay={run}", "--slo-report-dir=out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [f"*{run / 'realtime' / 'summary.json'}: prefix_cache is not as the suite writes it*"]
    )
