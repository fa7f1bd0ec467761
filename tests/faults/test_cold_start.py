"""Cold starts without vLLM: a pool whose "servers" are the fault injector, each start given a
known start-up time. What is checked: a fresh start per sample (the one before it stopped), the
workload's first prompts sent one at a time before anything else, the slowest of them taken as
ttft_cold, a failed one making it infinite, the A/B order AB BA AB with one server at a time,
and an A/B run that compares the arms' starts beside its blocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.ab import run_ab
from fixtures.cold_start import NOT_STARTED, cold_requests, measure_ab_starts, measure_starts
from fixtures.pool import ServerPool
from fixtures.selection import Selection, select
from fixtures.server import ServerConfig, VllmServer
from fixtures.session import ScenarioRunner
from fixtures.settings import Settings, programmatic
from slo.cold_start import judge_cold
from slo.compare import Change
from slo.scenario import SCENARIO_DIR, parse_objective
from slo.verdict import Outcome
from tests.faults.injector import Fault, FaultInjector


class InjectorPool(ServerPool):
    """Starts stand-ins for vLLM that the injector answers for; start n takes 20 + n s."""

    def __init__(self, settings: Settings, injector: FaultInjector) -> None:
        super().__init__(settings)
        self.injector = injector
        self.events: list[str] = []
        self.most_up = 0

    def get(self, config: ServerConfig, *, origin: str) -> VllmServer:
        if config in self.servers:
            return self.servers[config]
        n = len(self.events) // 2 + 1
        server = VllmServer(config, self.settings.run_dir / "servers" / f"start{n}.log")
        server.port, server.ready_s = self.injector.port, 20.0 + n
        self.servers[config] = server
        self.events.append(f"start {dict(config.env).get('SLO_AB_ARM', '')}".strip())
        self.most_up = max(self.most_up, len(self.servers))
        return server

    def release(self, config: ServerConfig) -> None:
        if self.servers.pop(config, None) is not None:
            self.events.append("stop")


def _selection(tmp_path: Path, settings: Settings) -> Selection:
    text = (SCENARIO_DIR / "cold-start.toml").read_text()
    text = text.replace("requests = 4 ", "requests = 3 ")
    path = tmp_path / "cold.toml"
    path.write_text(text)
    return select(str(path), settings)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return programmatic("cpu-tiny", run_dir=tmp_path / "run")


def test_each_start_is_fresh_and_its_first_prompts_go_one_at_a_time(
    tmp_path: Path, settings: Settings, injector: FaultInjector
) -> None:
    sel = _selection(tmp_path, settings)
    pool = InjectorPool(settings, injector)
    runner = ScenarioRunner(settings, pool)
    config, model = runner.server_config(sel), runner.model_spec(sel)
    firsts = cold_requests(sel, model, settings).requests
    injector.faults = {firsts[1].prompt: Fault("slow", delay_s=0.05)}
    pool.get(config, origin="an earlier scenario")  # a server already up is not cold
    run = measure_starts(pool, config, sel, settings, model)
    assert pool.events == ["start", "stop", "start", "stop", "start", "stop", "start"]
    assert run.samples("startup") == (22.0, 23.0, 24.0)
    assert [s.log.rsplit("/", 1)[-1] for s in run.starts] == [
        "start2.log",
        "start3.log",
        "start4.log",
    ]
    # Each start's requests: the workload's first three prompts, nothing before them.
    assert [s.prompt for s in injector.seen] == [r.prompt for r in firsts] * 3
    for start in run.starts:
        rs = start.requests
        assert [r.index for r in rs] == [r.index for r in firsts] and not any(r.warmup for r in rs)
        ends = [r.end_ns or 0 for r in rs]
        assert all(b.sent_ns >= end for end, b in zip(ends, rs[1:], strict=False))
        assert start.ttft_cold_s == max(r.ttft_s or 0.0 for r in rs)
        assert start.ttft_cold_s >= 0.05  # the slow second prompt
    assert config in pool.servers  # the last start stays up: the workload runs on it


def test_a_failed_cold_request_fails_ttft_cold(
    tmp_path: Path, settings: Settings, injector: FaultInjector
) -> None:
    sel = _selection(tmp_path, settings)
    pool = InjectorPool(settings, injector)
    runner = ScenarioRunner(settings, pool)
    config, model = runner.server_config(sel), runner.model_spec(sel)
    first = cold_requests(sel, model, settings).requests[0]
    injector.faults = {first.prompt: Fault("status", status=500)}
    run = measure_starts(pool, config, sel, settings, model)
    assert run.samples("ttft_cold") == (float("inf"),) * 3
    v = judge_cold(
        parse_objective("t", "o", "ttft_cold max", "<= 10s"), run, confidence=0.95, profile="p"
    )
    assert v.outcome is Outcome.FAIL and "failed a cold request" in v.note


def test_ab_starts_alternate_one_server_at_a_time(
    tmp_path: Path, settings: Settings, injector: FaultInjector
) -> None:
    sel = _selection(tmp_path, settings)
    pool = InjectorPool(settings, injector)
    runner = ScenarioRunner(settings, pool)
    model = runner.model_spec(sel)

    def config(arm: str) -> ServerConfig:
        return ServerConfig.build(model, dict(sel.engine_args), {"SLO_AB_ARM": arm})

    configs: dict[str, ServerConfig | None] = {a: config(a) for a in ("baseline", "candidate")}
    runs, order = measure_ab_starts(pool, configs, sel, settings, model)
    assert "".join(order) == "ABBAAB"
    assert [e for e in pool.events if e != "stop"] == [
        f"start {a}"
        for a in ("baseline", "candidate", "candidate", "baseline", "baseline", "candidate")
    ]
    assert pool.most_up == 1 and not pool.servers
    assert len(runs["baseline"].starts) == len(runs["candidate"].starts) == 3
    assert runs["baseline"].samples("startup") == (21.0, 24.0, 25.0)
    configs["baseline"] = None  # an endpoint: nothing to start
    runs, order = measure_ab_starts(pool, configs, sel, settings, model)
    assert runs["baseline"].unmeasured == NOT_STARTED and not runs["baseline"].starts
    assert "".join(order) == "BBB"


def test_an_endpoint_has_no_start_to_time(tmp_path: Path, injector: FaultInjector) -> None:
    settings = programmatic("cpu-tiny", run_dir=tmp_path / "run", endpoint=injector.url)
    sel = _selection(tmp_path, settings)
    pool = InjectorPool(settings, injector)
    runner = ScenarioRunner(settings, pool)
    run = measure_starts(pool, runner.server_config(sel), sel, settings, runner.model_spec(sel))
    assert run.unmeasured == NOT_STARTED and not pool.events and not injector.seen
    v = judge_cold(
        parse_objective("t", "o", "startup p50", "<= 1min"), run, confidence=0.95, profile="p"
    )
    assert v.outcome is Outcome.INVALID and "--slo-endpoint" in v.note


class SlowCandidatePool(InjectorPool):
    """As InjectorPool; the candidate arm's servers take twice as long to start."""

    def get(self, config: ServerConfig, *, origin: str) -> VllmServer:
        server = super().get(config, origin=origin)
        if dict(config.env).get("SLO_AB_ARM") == "candidate" and server.ready_s is not None:
            server.ready_s = 2 * (20.0 + len(self.events))
        return server


def test_an_ab_run_compares_the_arms_starts_like_any_objective(
    tmp_path: Path, injector: FaultInjector
) -> None:
    settings = programmatic("cpu-tiny", run_dir=tmp_path / "run", ab_blocks=4, max_requests=16)
    sel = _selection(tmp_path, settings)
    pool = SlowCandidatePool(settings, injector)
    result = run_ab(ScenarioRunner(settings, pool), sel)
    assert "".join(result.cold_order) == "ABBAAB"
    startup = result.comparisons["startup p50"]
    assert startup.change is Change.REGRESSION and startup.n_blocks == 3
    assert startup.lower > 1.5 and "3 interleaved start pairs" in startup.method
    assert result.comparisons["ttft p50"].n_blocks == 4  # the blocks, as before
    assert "startup p50" not in result.costs and "ttft p50" in result.costs
    # Each arm's own verdicts are judged on its own starts.
    assert result.baseline.cold_starts is not None and result.candidate.cold_starts is not None
    assert len(result.candidate.cold_starts.starts) == 3
    summary = json.loads((settings.run_dir / "cold-start" / "comparison.json").read_text())
    assert summary["cold_start_order"] == "AB BA AB"
    names = {c["name"]: c for c in summary["comparisons"]}
    assert names["startup p50"]["change"] == "REGRESSION"
    stored = json.loads((settings.run_dir / "cold-start.ab-baseline" / "summary.json").read_text())
    assert len(stored["cold_starts"]["starts"]) == 3
    # Six cold starts, then one server per arm for the blocks.
    assert [e for e in pool.events if e != "stop"].count("start baseline") == 4
