"""Prefix-cache hygiene on real CPU vLLM: a shared-prefix workload run warm hits the prefixes its
warm-up cached; the same prompts run cold after that miss each prefix once (the reset emptied
the cache); without the reset they would all hit, and the run is INVALID.

One vLLM serves all three runs (one config, one pool): about 80 short requests in all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures import measure
from fixtures.pool import ServerPool
from fixtures.result import ScenarioResult
from fixtures.selection import select
from fixtures.session import ScenarioRunner
from fixtures.settings import programmatic

MEASURED = 20
PREFIX_TOKENS = 256  # two of vLLM's 128-token CPU blocks, with the chat template's 3 tokens
SCENARIO = f"""\
[scenario]
name = "NAME"

[workload]
api = "chat"
arrival = "constant"
rate = "4 req/s"
requests = {MEASURED}
warmup_requests = 4
prompt_tokens = {{ min = 600, max = 700 }}
output_tokens = 4
seed = 18
timeout = "60s"
prefix_cache = "MODE"

[workload.shared_prefix]
tokens = {PREFIX_TOKENS}
count = 2

[validity]
schedule_lag_p99 = "1s"  # this test checks the cache, not the client

[objectives.cpu-tiny]
"ttft p50" = "<= 10s"
"""


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRunner]:
    settings = programmatic("cpu-tiny", run_dir=tmp_path_factory.mktemp("prefix-cache-run"))
    pool = ServerPool(settings)
    try:
        yield ScenarioRunner(settings, pool)
    finally:
        pool.close()


def _run(runner: ScenarioRunner, folder: Path, name: str, mode: str) -> ScenarioResult:
    path = folder / f"{name}.toml"
    path.write_text(SCENARIO.replace("NAME", name).replace("MODE", mode))
    return runner.result(select(str(path), runner.settings))


def test_warm_hits_the_warm_up_and_cold_after_a_reset_misses_each_prefix_once(
    runner: ScenarioRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = _run(runner, tmp_path, "shared-warm", "warm")
    cold = _run(runner, tmp_path, "shared-cold", "cold")
    assert len(runner.pool.starts) == 1  # one server for every run
    for r in (warm, cold):
        print(r.selection.label, r.prefix_cache and r.prefix_cache.describe())
        assert r.summary.n_ok == MEASURED and r.invalid_reasons == ()
    w, c = warm.prefix_cache, cold.prefix_cache
    assert w is not None and w.counters is not None and w.forecast is not None
    assert c is not None and c.counters is not None and c.forecast is not None
    assert w.reset == "reset before the warm-up" and c.reset == "reset after the warm-up"
    assert w.forecast.block_sizes == (128,)
    # Warm: every measured request hits its prefix's two blocks, cached by the warm-up.
    assert w.forecast.warm_floor == MEASURED * PREFIX_TOKENS
    assert w.counters.hits == w.forecast.warm_floor
    # Cold, the same prompts after a reset: the first request of each prefix misses it.
    assert 0 < c.counters.hits <= (MEASURED - 2) * PREFIX_TOKENS <= c.forecast.cold_ceiling
    assert c.counters.queries == w.counters.queries
    summary = json.loads((runner.settings.run_dir / "shared-cold" / "summary.json").read_text())
    assert summary["prefix_cache"]["hit_rate"] == c.hit_rate

    # The same prompts once more, the reset left out: served from the cache, so INVALID.
    monkeypatch.setattr(measure, "reset_all", lambda targets, when: f"not reset {when}: test")
    again = _run(runner, tmp_path, "shared-again", "cold")
    a = again.prefix_cache
    assert a is not None and a.counters is not None and a.forecast is not None
    assert a.counters.hits > a.forecast.cold_ceiling
    (reason,) = again.invalid_reasons
    assert reason.startswith('prefix cache declared "cold", but ')
