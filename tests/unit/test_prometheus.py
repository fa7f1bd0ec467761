"""Monitoring without servers: the run folder as metrics, the live endpoint, the dashboard JSON.

The end-to-end test (tests/e2e/test_prometheus.py) puts the same through real Prometheus.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families as text_families

from fixtures.live_metrics import TTFT_BUCKETS, LiveMetrics
from reports.prometheus import (
    METRICS_FILE,
    PushError,
    check_pushgateway_url,
    export,
    metric_names,
    parse_openmetrics,
    registry_for,
)
from slo.errors import SuiteError
from tests.e2e.helpers import run_suite
from tests.unit.builders import rec

DATA = Path(__file__).parent / "data"
DASHBOARD = Path(__file__).resolve().parents[2] / "reports" / "grafana" / "slo-dashboard.json"
# What CPU vLLM 0.32 exposes at /metrics that the dashboard reads (the e2e test scrapes them).
VLLM_NAMES = {
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:request_queue_time_seconds_bucket",
    "vllm:request_prefill_time_seconds_bucket",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "20261203-run"
    shutil.copytree(DATA / "run-new", out)
    return out


def samples(path: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in parse_openmetrics(path.read_text()):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def one(found: list[Any], **labels: str) -> float:
    hits = [s.value for s in found if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (labels, hits)
    return float(hits[0])


def test_the_run_folder_as_openmetrics(run_dir: Path) -> None:
    path = export(run_dir)
    assert path == run_dir / METRICS_FILE
    assert path.read_text().endswith("# EOF\n")  # OpenMetrics, not the older text format
    got = samples(path)
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    run_labels = {
        "run_id": "20261203-run",
        "suite_commit": "c79595c",
        "profile": "cpu-tiny",
        "vllm_version": "0.32.0",
        "model": "tiny-llama",
    }
    assert len(got["slo_verdict"]) == 4 * len(verdicts) == 16
    for v in verdicts:
        test = v["test"]
        for outcome in ("PASS", "FAIL", "INCONCLUSIVE", "INVALID"):
            value = one(got["slo_verdict"], test=test, outcome=outcome, **run_labels)
            assert value == (1.0 if v["outcome"] == outcome else 0.0)
        assert one(got["slo_objective_samples"], test=test) == v["n"]
        unit = {"ttft": "seconds", "tpot": "seconds", "output_throughput": "tokens_per_second"}
        suffix = unit[v["metric"]]
        for key in ("estimate", "ci_lower", "ci_upper", "threshold"):
            found = [
                s for s in got.get(f"slo_objective_{key}_{suffix}", []) if s.labels["test"] == test
            ]
            if v[key] is None:  # an unbounded interval has no sample, not a made-up one
                assert found == []
            else:
                assert [s.value for s in found] == [v[key]]
    p50 = [s for s in got["slo_objective_estimate_seconds"] if s.labels["objective"] == "ttft p50"]
    assert p50[0].labels["scenario"] == "realtime"
    summary = json.loads((run_dir / "realtime" / "summary.json").read_text())
    stats = summary["summary"]
    labels = {**run_labels, "scenario": "realtime"}
    assert one(got["slo_run_ttft_seconds"], statistic="p99", **labels) == stats["ttft"]["p99"]
    assert one(got["slo_run_tpot_seconds"], statistic="mean", **labels) == stats["tpot"]["mean"]
    assert one(got["slo_run_requests"], **labels) == stats["requests"] == 120
    assert (
        one(got["slo_run_output_throughput_tokens_per_second"], **labels)
        == stats["output_throughput"]
    )
    assert one(got["slo_run_valid"], **labels) == 1.0
    server = summary["server_metrics"]["vllm:time_to_first_token_seconds"]
    ttft_hist = "vllm:time_to_first_token_seconds"
    assert one(got["slo_run_vllm_observations"], histogram=ttft_hist) == server["count"]
    vllm_p99 = one(got["slo_run_vllm_time_to_first_token_seconds"], statistic="p99")
    assert vllm_p99 == server["p99"]
    assert one(got["slo_run_info"], **run_labels) == 1.0
    started = (run_dir / "environment.json").stat().st_mtime
    assert one(got["slo_run_start_timestamp_seconds"], **run_labels) == started


def test_extra_and_missing_verdict_keys_are_tolerated(run_dir: Path) -> None:
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    verdicts[0]["a_new_key"] = {"nested": 1}
    verdicts[1]["outcome"] = "FAIL"
    del verdicts[1]["ci_lower"]
    verdicts.append({"scenario": "odd", "objective": "something new", "outcome": "PASS"})
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts))
    got = samples(export(run_dir))
    assert one(got["slo_verdict"], objective="ttft p99", outcome="FAIL") == 1.0
    assert [
        s for s in got["slo_objective_ci_lower_seconds"] if s.labels["objective"] == "ttft p99"
    ] == []
    assert one(got["slo_verdict"], objective="something new", outcome="PASS") == 1.0


def test_an_invalid_run_says_so(run_dir: Path) -> None:
    path = run_dir / "realtime" / "summary.json"
    summary = json.loads(path.read_text())
    summary["invalid_reasons"] = ["schedule lag p99 40 ms > 20 ms"]
    path.write_text(json.dumps(summary))
    assert one(samples(export(run_dir))["slo_run_valid"], scenario="realtime") == 0.0


def test_a_push_that_fails_keeps_the_file_and_names_the_gateway(run_dir: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(PushError, match=re.escape(f"--slo-pushgateway {url}: the push failed")):
        export(run_dir, url)
    assert "slo_verdict" in (run_dir / METRICS_FILE).read_text()


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("pushgateway:9091", "expected the Pushgateway's http:// or https:// root URL"),
        ("ftp://pushgateway:9091", "expected the Pushgateway's http:// or https:// root URL"),
        ("http://pushgateway:9091/metrics/job/x", "without a path"),
        # urlsplit and .port raise ValueError on these: still the one-line error.
        ("A://[", "--slo-pushgateway 'A://[': not a URL"),
        ("http://pushgateway:99999", "--slo-pushgateway 'http://pushgateway:99999': not a URL"),
    ],
)
def test_bad_pushgateway_urls(url: str, needle: str) -> None:
    with pytest.raises(SuiteError, match=re.escape(needle)):
        check_pushgateway_url(url)
    assert check_pushgateway_url("http://pushgateway:9091/") == "http://pushgateway:9091"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slo-pushgateway", "pushgateway:9091"], "--slo-pushgateway 'pushgateway:9091'"),
        (["--slo-metrics-port", "70000"], "--slo-metrics-port = '70000': expected a TCP port"),
        (["--slo-metrics-port", "x"], "--slo-metrics-port = 'x': expected a TCP port"),
        (
            ["--slo-metrics-port", "9400", "-n", "2", "--dist", "loadscope"],
            "--slo-metrics-port 9400 with -n",
        ),
    ],
)
def test_bad_monitoring_options_stop_the_suite(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    proc = run_suite(["--collect-only", "-m", "realtime", *args], tmp_path)
    assert proc.returncode == 4
    assert needle in proc.stderr


def scrape(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, list[Any]] = {}
    for family in text_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_the_live_endpoint_serves_the_client_view() -> None:
    live = LiveMetrics(free_port(), run_id="r1", profile="cpu-tiny")
    live.start()
    try:
        obs = live.observer("realtime")
        for _ in range(4):
            obs.sent()
        obs.record(rec(0, ttft_ms=30, warmup=True))
        obs.record(rec(1, ttft_ms=30))
        obs.record(rec(2, ttft_ms=300))
        got = scrape(live.url)
        labels = {"run_id": "r1", "profile": "cpu-tiny", "scenario": "realtime"}
        assert one(got["slo_client_requests_in_flight"], **labels) == 1
        obs.record(rec(3, ttft_ms=0, error="HTTP 503: overloaded"))
        got = scrape(live.url)
        assert one(got["slo_client_requests_in_flight"], **labels) == 0
        measured = {**labels, "phase": "measured"}
        assert one(got["slo_client_time_to_first_token_seconds_count"], **measured) == 2
        assert one(got["slo_client_time_to_first_token_seconds_sum"], **measured) == pytest.approx(
            0.33
        )
        assert one(got["slo_client_time_to_first_token_seconds_bucket"], le="0.04", **measured) == 1
        assert one(got["slo_client_time_to_first_token_seconds_bucket"], le="0.5", **measured) == 2
        assert one(got["slo_client_requests_total"], result="error", **measured) == 1
        assert one(got["slo_client_requests_total"], phase="warmup", result="ok") == 1
        buckets = {s.labels["le"] for s in got["slo_client_time_to_first_token_seconds_bucket"]}
        assert len(buckets) == len(TTFT_BUCKETS) + 1  # vLLM's bounds and +Inf
    finally:
        live.close(linger_s=0)


def test_close_waits_for_the_scrape_that_carries_the_last_record() -> None:
    live = LiveMetrics(free_port(), run_id="r1", profile="p")
    live.start()
    obs = live.observer("s")
    obs.sent()
    scrape(live.url)  # something scrapes the endpoint
    obs.sent()
    obs.record(rec(1, ttft_ms=30))
    seen: list[float] = []

    def late_scrape() -> None:
        time.sleep(0.5)
        seen.append(scrape(live.url)["slo_client_time_to_first_token_seconds_count"][1].value)

    thread = threading.Thread(target=late_scrape)
    thread.start()
    t0 = time.monotonic()
    live.close(linger_s=10)
    waited = time.monotonic() - t0
    thread.join()
    assert seen == [1.0]  # the last record reached the scraper
    assert 0.4 < waited < 5


def test_close_does_not_wait_when_nothing_scrapes() -> None:
    live = LiveMetrics(free_port(), run_id="r1", profile="p")
    live.start()
    live.observer("s").record(rec(1, ttft_ms=30))
    t0 = time.monotonic()
    live.close(linger_s=10)
    assert time.monotonic() - t0 < 1


def test_a_port_in_use_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        live = LiveMetrics(port, run_id="r", profile="p")
        with pytest.raises(SuiteError, match=f"--slo-metrics-port {port}: cannot serve on"):
            live.start()


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def exprs(d: dict[str, Any]) -> list[str]:
    found = [t["expr"] for p in d["panels"] for t in p["targets"]]
    return found + [a["expr"] for a in d["annotations"]["list"] if "expr" in a]


def test_the_dashboard_reads_only_metrics_that_exist(run_dir: Path) -> None:
    live = LiveMetrics(1, run_id="r", profile="p")
    live.observer("s").record(rec(1, ttft_ms=30))
    exposed = metric_names(registry_for(run_dir).collect())
    exposed |= metric_names(live.registry.collect()) | VLLM_NAMES
    used = {m for e in exprs(dashboard()) for m in re.findall(r"\b(?:slo_|vllm:)[\w:]+", e)}
    assert used - exposed == set()
    assert used >= VLLM_NAMES  # vLLM's TTFT, queue time, prefill, running/waiting, KV cache
    for name in (
        "slo_verdict",
        "slo_run_ttft_seconds",
        "slo_client_time_to_first_token_seconds_bucket",
    ):
        assert name in used


def test_the_dashboard_imports_with_a_prometheus_data_source() -> None:
    d = dashboard()
    assert [i["name"] for i in d["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"]
        assert p["targets"] and all(t["datasource"] == p["datasource"] for t in p["targets"])
        assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
    runs = [a for a in d["annotations"]["list"] if "expr" in a]
    assert len(runs) == 1 and "slo_run_start_timestamp_seconds" in runs[0]["expr"]
    assert runs[0]["useValueForTime"] is True and "* 1000" in runs[0]["expr"]  # Grafana wants ms
    # Every expression is balanced (a typo in hand-kept JSON shows here before Prometheus).
    for e in exprs(d):
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}"), e
