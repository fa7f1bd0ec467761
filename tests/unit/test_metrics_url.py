"""--slo-metrics-url: a separate Prometheus URL for a deployed endpoint's server-side metrics."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from fixtures.metrics import HISTOGRAMS, check_metrics_url, key_for, scrape
from slo.errors import EndpointError
from tests.e2e.helpers import run_suite

# Two replicas behind one load balancer, as a Prometheus /federate page lists them.
FEDERATED = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{pod="a",le="0.05"} 3.0
vllm:time_to_first_token_seconds_bucket{pod="a",le="+Inf"} 4.0
vllm:time_to_first_token_seconds_count{pod="a"} 4.0
vllm:time_to_first_token_seconds_sum{pod="a"} 0.2
vllm:time_to_first_token_seconds_bucket{pod="b",le="0.05"} 1.0
vllm:time_to_first_token_seconds_bucket{pod="b",le="+Inf"} 2.0
vllm:time_to_first_token_seconds_count{pod="b"} 2.0
vllm:time_to_first_token_seconds_sum{pod="b"} 0.1
"""


class _Page(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, str]] = {"/federate": FEDERATED, "/other": "# TYPE up gauge\nup 1\n"}
    seen_auth: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen_auth.append(self.headers.get("Authorization"))
        body = self.pages.get(self.path.split("?")[0])
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Page.seen_auth = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_replicas_are_summed(prometheus: str) -> None:
    ttft = scrape(f"{prometheus}/federate?match[]=vllm:time_to_first_token_seconds")[HISTOGRAMS[0]]
    assert ttft.count == 6 and ttft.sum == pytest.approx(0.3)
    assert dict(ttft.buckets)[0.05] == 4


def test_the_api_key_goes_only_to_the_endpoints_own_host() -> None:
    assert key_for("http://svc:8000/metrics", "http://svc:8000", "k") == "k"
    assert key_for("http://prometheus:9090/federate", "http://svc:8000", "k") is None
    assert key_for("https://svc:8000/metrics", "http://svc:8000", "k") is None


def test_check_accepts_vllm_metrics_and_names_what_is_wrong(prometheus: str) -> None:
    check_metrics_url(f"{prometheus}/federate")
    with pytest.raises(EndpointError, match=r"/other: the page has no vllm:time_to_first_token"):
        check_metrics_url(f"{prometheus}/other")
    with pytest.raises(EndpointError, match=r"/missing: could not read it \(HTTP Error 404"):
        check_metrics_url(f"{prometheus}/missing")
    assert _Page.seen_auth == [None, None, None]


def test_option_needs_an_endpoint(tmp_path: Path) -> None:
    proc = run_suite(["-m", "realtime", "--slo-metrics-url", "http://x:9090/metrics"], tmp_path)
    assert proc.returncode == 4
    assert "--slo-metrics-url http://x:9090/metrics: " in proc.stderr
    assert "needs --slo-endpoint URL too" in proc.stderr


def test_option_must_be_an_http_url(tmp_path: Path) -> None:
    args = ["-m", "realtime", "--slo-endpoint", "http://127.0.0.1:9", "--slo-metrics-url", "x:9090"]
    proc = run_suite(args, tmp_path)
    assert proc.returncode == 4 and "expected an http:// or https:// URL" in proc.stderr


def test_option_is_shown_in_the_header(tmp_path: Path) -> None:
    args = ["--collect-only", "-m", "realtime", "--slo-endpoint", "http://127.0.0.1:9"]
    proc = run_suite([*args, "--slo-metrics-url", "http://127.0.0.1:9/federate"], tmp_path)
    assert "target http://127.0.0.1:9, metrics from http://127.0.0.1:9/federate" in proc.stdout
