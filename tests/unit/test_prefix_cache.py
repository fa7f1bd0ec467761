"""Prefix-cache hygiene without vLLM: the forecast from token blocks, the INVALID rule on known
counters, vLLM's /metrics counters, the reset, and the scenario keys that declare it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from fixtures import prefix_cache as fpc
from fixtures.measure import window_counters
from fixtures.models import resolve_model
from fixtures.prefix_cache import CacheState, parse_state, plan_forecast, reset, reset_all
from fixtures.selection import select
from fixtures.settings import programmatic
from fixtures.targets import MODEL_CACHE, load_tokenizer
from fixtures.workload import PromptFactory, plan_workload
from slo.errors import ScenarioFileError
from slo.prefix_cache import (
    CacheCounters,
    CacheForecast,
    PrefixCacheMode,
    PrefixCacheRun,
    forecast,
    prompt_blocks,
)
from slo.scenario import SCENARIO_DIR, SharedPrefix, load_scenario

# -- the forecast: vLLM's block hashing, by hand ----------------------------------------------


def test_blocks_chain_so_a_block_matches_only_after_the_same_prefix() -> None:
    a = prompt_blocks([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = prompt_blocks([1, 2, 3, 4, 9, 9, 9, 9, 9, 9], 4)
    c = prompt_blocks([0, 0, 0, 0, 5, 6, 7, 8], 4)
    assert len(a.hashes) == 2 and a.hashes[0] == b.hashes[0] and a.hashes[1] != b.hashes[1]
    assert a.hashes[1] != c.hashes[1]  # same tokens, after another first block
    # Another server's cache, or another block size, never holds the block.
    assert prompt_blocks([1, 2, 3, 4], 4, "other").hashes[0] != a.hashes[0]
    assert prompt_blocks([1, 2, 3, 4, 1, 2, 3, 4], 2).hashes[0] != a.hashes[0]


def test_the_forecast_counts_full_shared_blocks_and_never_the_last_token() -> None:
    head = list(range(100, 110))  # a 10-token shared prefix: two full blocks of 4
    measured = [
        prompt_blocks([*head, 1, 2, 3], 4),  # 13 tokens: two shared blocks
        prompt_blocks([*head, 4, 5, 6, 7, 8], 4),  # 15 tokens: two shared blocks
        prompt_blocks(head[:8], 4),  # 8 tokens: the last one is computed, one block can hit
        prompt_blocks([7, 7, 7, 7, 7], 4),  # shares nothing
    ]
    warmup = [prompt_blocks([*head[:4], 0, 0, 0, 0, 0], 4)]  # caches the first block only
    f = forecast(warmup, measured)
    assert f.block_sizes == (4,)
    assert f.prompt_tokens == 13 + 15 + 8 + 5
    assert f.cold_ceiling == 8 + 8 + 4
    assert f.warm_floor == 4 + 4 + 4
    assert forecast([], measured[3:]).cold_ceiling == 0  # one prompt cannot hit itself


@pytest.fixture(scope="module")
def prompts() -> PromptFactory:
    return PromptFactory(load_tokenizer(resolve_model("tiny-llama", cache_dir=MODEL_CACHE)))


def _workload_file(tmp_path: Path, extra: str = "", mode: str = "cold", warmup: int = 4) -> Path:
    path = tmp_path / "shared.toml"
    tmp_path.mkdir(exist_ok=True)
    path.write_text(
        f"""\
[scenario]
name = "shared"

[workload]
api = "chat"
arrival = "constant"
rate = "4 req/s"
requests = 12
warmup_requests = {warmup}
prompt_tokens = {{ min = 150, max = 200 }}
output_tokens = 4
seed = 7
prefix_cache = "{mode}"
{extra}
[objectives.cpu-tiny]
"ttft p50" = "<= 1s"
"""
    )
    return path


SHARED = "[workload.shared_prefix]\ntokens = 64\ncount = 2\n"


def test_a_shared_prefix_workload_plans_exact_prompts_and_forecasts_its_hits(
    prompts: PromptFactory, tmp_path: Path
) -> None:
    w = load_scenario(_workload_file(tmp_path, SHARED, "warm")).workload
    assert w.prefix_cache == "warm" and w.shared_prefix == SharedPrefix(64, 2)
    plan = plan_workload(w, prompts)
    for i, r in enumerate(plan.requests):
        assert len(prompts.tokenizer.encode(r.prompt, add_special_tokens=False)) == r.prompt_tokens
        assert r.prompt.split()[:64] == plan.requests[i % 2].prompt.split()[:64]
    assert plan.requests[0].prompt.split()[:64] != plan.requests[1].prompt.split()[:64]
    assert len({r.prompt for r in plan.requests}) == len(plan.requests)
    # The chat template's head ("<s>[user] ") and the 64-token prefix fill 4 blocks of 16.
    f = plan_forecast(plan, prompts, {"": 16}, {})
    assert f.warm_floor == f.cold_ceiling == 12 * 64
    assert f.prompt_tokens == sum(r.expected_prompt_tokens or 0 for r in plan.measured)
    # Without the shared prefix nothing can hit: prompts are unique from their first word.
    unique = plan_workload(load_scenario(_workload_file(tmp_path)).workload, prompts)
    assert plan_forecast(unique, prompts, {"": 16}, {}).cold_ceiling == 0


# -- the rule ----------------------------------------------------------------------------------

UNIQUE = CacheForecast((128,), prompt_tokens=10_000, cold_ceiling=0, warm_floor=0)
SHARING = CacheForecast((128,), prompt_tokens=10_000, cold_ceiling=6_000, warm_floor=5_000)


@pytest.mark.parametrize(
    "mode,forecast_,queries,hits,reason",
    [
        ("off", UNIQUE, 0, 0, None),
        ("off", UNIQUE, 10_000, 0, None),  # caching on, nothing hit: the figures stand
        ("off", UNIQUE, 10_000, 128, 'declared "off", but vLLM served 128 of 10000'),
        ("off", None, 10_000, 128, 'declared "off"'),  # needs no forecast
        ("cold", UNIQUE, 10_000, 0, None),
        ("cold", UNIQUE, 10_000, 200, None),  # within the 2% slack
        ("cold", UNIQUE, 10_000, 256, 'declared "cold", but 256 of 10000 prompt tokens (2.6%)'),
        ("cold", UNIQUE, 10_000, 10_000, "same seed again without a reset?"),
        ("cold", SHARING, 10_000, 6_000, None),
        ("cold", SHARING, 10_000, 6_201, "more than the 60.0% the measured prompts share"),
        ("cold", None, 10_000, 10_000, None),  # no block size, no forecast: not judged
        ("warm", SHARING, 10_000, 2_500, None),
        ("warm", SHARING, 10_000, 2_499, 'declared "warm", but only 2499 of 10000'),
        ("warm", SHARING, 0, 0, "or the server does not cache prefixes"),
        ("warm", UNIQUE, 10_000, 0, None),  # the warm-up cached nothing to expect
        ("warm", SHARING, 10_000, 10_000, None),
    ],
)
def test_a_hit_rate_that_contradicts_the_declaration_is_invalid(
    mode: PrefixCacheMode,
    forecast_: CacheForecast | None,
    queries: int,
    hits: int,
    reason: str | None,
) -> None:
    run = PrefixCacheRun(mode, CacheCounters(queries, hits), forecast_)
    got = run.contradiction()
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got and "\n" not in got
    assert PrefixCacheRun.from_dict(run.as_dict()) == run


@pytest.mark.parametrize("mode", ["cold", "warm", "off"])
def test_unmeasured_counters_are_reported_not_invalid(mode: PrefixCacheMode) -> None:
    run = PrefixCacheRun(mode, None, None, reset="", unmeasured="http://x/metrics answered 404")
    assert run.contradiction() is None and run.hit_rate is None
    assert "not measured: http://x/metrics answered 404" in run.describe()
    assert "prefix_cache.hit_rate" not in run.properties()
    assert run.properties()["prefix_cache.mode"] == mode


def test_the_report_line_and_properties_carry_the_figures() -> None:
    run = PrefixCacheRun("cold", CacheCounters(10_000, 100), SHARING, "reset after the warm-up")
    assert run.describe() == (
        "prefix cache cold (reset after the warm-up); hit rate 1.0% (100 of 10000 tokens); "
        "the prompts allow at most 60.0% cold, 50.0% from the warm-up"
    )
    props = run.properties()
    assert props["prefix_cache.hit_rate"] == "0.0100"
    assert props["prefix_cache.cold_ceiling"] == "0.6000"
    assert props["prefix_cache.hits"] == "100" and props["prefix_cache.queries"] == "10000"


def test_a_stored_entry_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"prefix_cache\.mode 'lukewarm'"):
        PrefixCacheRun.from_dict({"mode": "lukewarm"})


# -- vLLM's /metrics and the reset -------------------------------------------------------------


def _vllm_metrics(queries: float, hits: float, engines: int = 2) -> str:
    """The families as vLLM writes them, through prometheus_client (one series per engine)."""
    registry = CollectorRegistry()
    q = Counter("vllm:prefix_cache_queries", "q", ["engine"], registry=registry)
    h = Counter("vllm:prefix_cache_hits", "h", ["engine"], registry=registry)
    info = Gauge(
        "vllm:cache_config_info",
        "c",
        ["block_size", "enable_prefix_caching", "engine"],
        registry=registry,
    )
    for e in range(engines):
        q.labels(str(e)).inc(queries / engines)
        h.labels(str(e)).inc(hits / engines)
        info.labels("128", "True", str(e)).set(1)
    return generate_latest(registry).decode()


def test_counters_are_summed_over_engines_with_the_block_size() -> None:
    state = parse_state(_vllm_metrics(1000, 250))
    assert state == CacheState(CacheCounters(1000, 250), 128, True)
    assert parse_state("").why == "no vllm:prefix_cache_queries and vllm:prefix_cache_hits counters"
    assert parse_state("vllm:x{ 1").why.startswith("not valid Prometheus text")


def test_the_window_is_after_minus_before_summed_over_instances() -> None:
    before = {"a": parse_state(_vllm_metrics(100, 10)), "b": parse_state(_vllm_metrics(50, 0))}
    after = {"a": parse_state(_vllm_metrics(300, 60)), "b": parse_state(_vllm_metrics(80, 0))}
    assert window_counters(before, after, "") == (CacheCounters(230, 50), "")
    broken = {**after, "b": CacheState(None, None, None, "http://b/metrics could not be read")}
    assert window_counters(before, broken, "") == (None, "http://b/metrics could not be read")
    assert window_counters({}, {}, "no vLLM /metrics here") == (None, "no vLLM /metrics here")


class _ResetServer(BaseHTTPRequestHandler):
    answers: ClassVar[list[tuple[int, bytes]]] = []
    """(status, body) per POST, the last one repeated."""
    posts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.posts.append(self.path)
        status, body = self.answers[min(len(self.posts), len(self.answers)) - 1]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def reset_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(fpc, "RESET_PAUSE_S", 0.0)
    _ResetServer.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ResetServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_reset_refused_while_blocks_are_held_is_tried_again(reset_server: str) -> None:
    _ResetServer.answers = [(200, b'{"success": false}')] * 3 + [(200, b'{"success": true}')]
    assert reset(reset_server, None) == ""
    assert _ResetServer.posts == ["/reset_prefix_cache"] * 4
    _ResetServer.answers = [(200, b'{"success": false}')]
    assert reset(reset_server, None) == (
        f"vLLM refused the reset {fpc.RESET_TRIES} times (blocks still held by requests)"
    )


def test_a_server_without_the_dev_endpoint_is_named_with_the_fix(reset_server: str) -> None:
    _ResetServer.answers = [(404, b'{"detail": "Not Found"}')]
    why = reset(reset_server, None)
    assert why.startswith(f"{reset_server}/reset_prefix_cache answered 404")
    assert "VLLM_SERVER_DEV_MODE=1" in why
    done = reset_all({"": (reset_server, None)}, "after the warm-up")
    assert done == f"not reset after the warm-up: {why}"
    _ResetServer.answers = [(200, b'{"success": true}')]
    assert reset_all({"a": (reset_server, None), "b": (reset_server, None)}, "x") == "reset x"


# -- the scenario keys -------------------------------------------------------------------------


def test_the_default_is_cold_and_every_bundled_scenario_loads() -> None:
    for path in SCENARIO_DIR.glob("*.toml"):
        assert load_scenario(path).workload.prefix_cache == "cold"
        assert load_scenario(path).workload.shared_prefix is None


@pytest.mark.parametrize(
    "extra,mode,warmup,needle",
    [
        ("", "lukewarm", 4, "'workload.prefix_cache' = 'lukewarm': expected one of cold, warm"),
        ("", "warm", 4, "a warm cache needs warm-up requests that share prefixes"),
        (SHARED, "warm", 0, "a warm cache needs warm-up requests that share prefixes"),
        (
            "[workload.shared_prefix]\ntokens = 150\n",
            "cold",
            4,
            "'workload.shared_prefix.tokens' = 150: a shared prefix must be shorter than every "
            "prompt, and class 'default' has prompts of 150 tokens",
        ),
        ("[workload.shared_prefix]\ntokens = 8\nsize = 2\n", "cold", 4, "unknown key"),
        (
            "[server]\nenable_prefix_caching = true\n",
            "off",
            4,
            "'server.enable_prefix_caching' = True: contradicts [workload] prefix_cache = \"off\"",
        ),
        (
            f"{SHARED}[server]\nenable_prefix_caching = false\n",
            "warm",
            4,
            'contradicts [workload] prefix_cache = "warm"',
        ),
    ],
)
def test_bad_prefix_cache_keys_name_the_key_the_value_and_the_fix(
    tmp_path: Path, extra: str, mode: str, warmup: int, needle: str
) -> None:
    path = _workload_file(tmp_path, extra, mode, warmup)
    with pytest.raises(ScenarioFileError) as e:
        load_scenario(path)
    assert needle in str(e.value)


def test_off_starts_the_server_without_prefix_caching(tmp_path: Path) -> None:
    settings = programmatic("cpu-tiny")
    off = select(str(_workload_file(tmp_path / "off", mode="off")), settings)
    assert off.engine_args["enable_prefix_caching"] is False
    cold = select(str(_workload_file(tmp_path / "cold")), settings)
    assert "enable_prefix_caching" not in cold.engine_args
    assert off.server_key != cold.server_key  # never one server for both
