"""A deployed service: vLLM started apart, the suite pointed at it with --slo-endpoint and a
separate --slo-metrics-url (here a small proxy on another port, as a Prometheus behind a load
balancer is)."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from fixtures.server import VllmServer
from tests.e2e.helpers import DEPLOYED_ENV, deployed_args, run_suite


class _MetricsProxy(BaseHTTPRequestHandler):
    upstream: ClassVar[str] = ""
    hits: ClassVar[list[str | None]] = []
    """The Authorization header of each scrape."""

    def do_GET(self) -> None:
        if self.path != "/prometheus/metrics":
            self.send_response(404)
            self.end_headers()
            return
        self.hits.append(self.headers.get("Authorization"))
        with urllib.request.urlopen(f"{self.upstream}/metrics", timeout=10) as r:
            body = r.read()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def metrics_proxy(deployed_vllm: VllmServer) -> Iterator[str]:
    _MetricsProxy.upstream = deployed_vllm.base_url
    _MetricsProxy.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsProxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/prometheus/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_come_from_the_metrics_url(
    deployed_vllm: VllmServer, metrics_proxy: str, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    args = ["-m", "realtime", *deployed_args(deployed_vllm)]
    run_suite(
        [*args, f"--slo-metrics-url={metrics_proxy}", "--slo-max-requests", "20"],
        reports,
        env=DEPLOYED_ENV,
    )
    assert not (reports / "servers").exists()  # nothing launched
    # The check before traffic, the scrapes before and after the measured requests, and the
    # sampler's once a second in between: all through the proxy, none with the key (it stays
    # with the endpoint's own host).
    series = (reports / "realtime" / "server_series.jsonl").read_text().splitlines()
    assert len(_MetricsProxy.hits) >= 3 + len(series) and series
    assert set(_MetricsProxy.hits) == {None}
    summary = json.loads((reports / "realtime" / "summary.json").read_text())
    ttft = summary["server_metrics"]["vllm:time_to_first_token_seconds"]
    # vLLM's own count of the measured requests, through the proxy: the difference over the run,
    # so the requests of earlier tests on this shared server are not in it.
    assert ttft["count"] == 20
    env = json.loads((reports / "environment.json").read_text())
    assert env["endpoint"] == deployed_vllm.base_url and env["metrics_url"] == metrics_proxy


def test_an_unreadable_metrics_url_stops_before_any_traffic(
    deployed_vllm: VllmServer, metrics_proxy: str, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    wrong = metrics_proxy.replace("/prometheus/metrics", "/metrics")
    args = ["-m", "realtime", *deployed_args(deployed_vllm)]
    proc = run_suite([*args, f"--slo-metrics-url={wrong}"], reports, env=DEPLOYED_ENV)
    assert proc.returncode == 1
    assert f"--slo-metrics-url {wrong}: could not read it (HTTP Error 404" in proc.stdout
    assert not (reports / "realtime").exists()
