"""vLLM's /metrics sampled during a workload: parsing, the sampler, and the report's chart."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from fixtures.metrics import MetricsSampler, keep_lines, parse_series
from reports.run_folder import load_run
from reports.server_series import server_series
from reports.signoff import build_report, render_html, render_markdown

NEW = Path(__file__).parent / "data" / "run-new"


def exposition(running: float, waiting: float, preemptions: float, ttfts: list[float]) -> str:
    """/metrics text as vLLM's prometheus_client writes it: two engines, model labels."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    run = Gauge("vllm:num_requests_running", "running", labels, registry=reg)
    wait = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=reg)
    kv = Gauge("vllm:kv_cache_usage_perc", "kv", labels, registry=reg)
    pre = Counter("vllm:num_preemptions", "preemptions", labels, registry=reg)
    ttft = Histogram(
        "vllm:time_to_first_token_seconds", "ttft", labels, registry=reg, buckets=(0.01, 0.1, 1)
    )
    Gauge("vllm:num_requests_running_other", "a longer name", registry=reg).set(99)
    Counter("vllm:unrelated", "not kept", registry=reg).inc(5)
    for engine, share in (("0", 0.25), ("1", 0.75)):
        run.labels("m", engine).set(running * share)
        wait.labels("m", engine).set(waiting * share)
        kv.labels("m", engine).set(share / 2)
        pre.labels("m", engine).inc(preemptions * share)
    for v in ttfts:
        ttft.labels("m", "0").observe(v)
    return generate_latest(reg).decode()


def test_parse_series_sums_engines_and_keeps_counters_cumulative() -> None:
    text = exposition(8, 4, 2, [0.02, 0.04])
    kept = keep_lines(text)
    assert "_bucket{" not in kept and "vllm:unrelated" not in kept
    values = parse_series(kept)
    assert values["running"] == 8  # not the longer-named gauge the line filter let through
    assert values["waiting"] == 4
    assert values["kv_cache_usage"] == 0.375  # the fullest engine, not the sum
    assert values["preemptions"] == 2
    assert values["ttft_count"] == 2 and values["ttft_sum"] == pytest.approx(0.06)
    assert "unrelated" not in values


def test_sampler_scrapes_in_a_thread_while_the_workload_runs() -> None:
    calls: list[int] = []
    main = threading.get_ident()

    async def scenario() -> tuple[str, MetricsSampler]:
        loop = asyncio.get_running_loop()
        fourth = asyncio.Event()  # call 4 starts once call 3's sample is kept

        def fetch(url: str, key: str | None, timeout: float) -> str | None:
            calls.append(threading.get_ident())
            if len(calls) == 4:
                loop.call_soon_threadsafe(fourth.set)
            if len(calls) == 2:
                return None  # a failed scrape is counted and skipped
            return exposition(len(calls), 0, 0, [0.01] * len(calls))

        async def workload() -> str:
            await fourth.wait()
            return "done"

        sampler = MetricsSampler("http://x/metrics", interval_s=0.01, fetch=fetch)
        return await sampler.around(workload()), sampler

    result, sampler = asyncio.run(scenario())
    assert result == "done"
    assert main not in calls and len(calls) >= 4
    samples = sampler.samples
    assert sampler.failed == 1 and len(samples) >= 2
    assert [s.values["ttft_count"] for s in samples[:2]] == [1, 3]
    assert samples[0].t_ns < samples[1].t_ns


def test_sampler_stops_when_the_workload_fails() -> None:
    async def scenario() -> MetricsSampler:
        sampler = MetricsSampler(
            "http://x/metrics", interval_s=0.01, fetch=lambda *a: exposition(1, 1, 0, [])
        )

        async def broken() -> None:
            await asyncio.sleep(0.05)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            await sampler.around(broken())
        return sampler

    sampler = asyncio.run(scenario())
    assert sampler.samples and sampler.samples[0].values["running"] == 1


def _with_series(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(NEW, run)
    rows = []
    for i in range(30):
        rows.append(
            {
                "t_s": i * 1.0,
                "running": min(i, 8),
                "waiting": max(0, i - 8) if i < 20 else 0,
                "kv_cache_usage": i / 100,
                "preemptions": 3 if i > 10 else 1,
                "ttft_count": 2.0 * i,
                "ttft_sum": 0.05 * i if i < 15 else 0.75 + 0.2 * (i - 15),
            }
        )
    (run / "realtime" / "server_series.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    return run


def test_server_series_in_the_signoff(tmp_path: Path) -> None:
    run = load_run(_with_series(tmp_path))
    s = server_series(run.scenarios[0])
    assert s is not None
    assert max(s.waiting) == 11 and s.preemptions == 2 and s.interval_s == 1.0
    # vLLM's mean TTFT per interval from histogram differences: 0.05/2, then 0.2/2.
    assert s.ttft_mean_s[0] == pytest.approx(0.025)
    assert s.ttft_mean_s[-1] == pytest.approx(0.1)
    report = build_report(run)
    html = render_html(report)
    assert "vLLM&#x27;s queue over time" in html and "waiting (peak 11)" in html
    assert "preemptions: 2" in html
    assert "waiting peak 11, KV cache peak 29%, 2 preemptions" in render_markdown(report)
    # Without the file the page says why there is no chart.
    assert "server_series.jsonl" in render_html(build_report(load_run(NEW)))
