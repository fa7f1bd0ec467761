"""Monitoring end to end: real Prometheus and Pushgateway (Debian's packages) on loopback ports,
Prometheus scraping CPU vLLM (the e2e tests' shared deployed server) and the suite's live endpoint,
the suite pushing its verdicts.

What Prometheus holds must agree with the run folder, and every PromQL expression of the
Grafana dashboard must return data.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.server import VllmServer
from reports.prometheus import parse_openmetrics
from tests.e2e.helpers import DEPLOYED_ENV, deployed_args, run_suite, vllm_counter

DASHBOARD = Path(__file__).resolve().parents[2] / "reports" / "grafana" / "slo-dashboard.json"
PROMETHEUS = shutil.which("prometheus")
PUSHGATEWAY = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PUSHGATEWAY is None,
    reason="prometheus / prometheus-pushgateway not installed "
    "(apt-get install prometheus prometheus-pushgateway; .ci/run does it)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def started(cmd: list[str], log: Path, ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
    """A loopback daemon, stopped (its whole group) on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            wait_http(ready_url)
        except OSError:
            pytest.fail(f"{cmd[0]} did not come up: {log.read_text()[-2000:]}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Monitored:
    run_dir: Path
    prometheus: str
    started: float
    ended: float
    proc: subprocess.CompletedProcess[str]
    vllm_ttft_before: float
    """vLLM's TTFT count before the run: the shared server served earlier tests."""

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self._api("query", {"query": expr, "time": f"{time.time():.3f}"})

    def query_range(self, expr: str) -> list[dict[str, Any]]:
        args = {
            "query": expr,
            "start": f"{self.started:.3f}",
            "end": f"{time.time():.3f}",
            "step": "1s",
        }
        return self._api("query_range", args)

    def _api(self, path: str, args: dict[str, str]) -> list[dict[str, Any]]:
        url = f"{self.prometheus}/api/v1/{path}?{urllib.parse.urlencode(args)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    def eventually(self, expr: str, check: Callable[[float], bool], timeout_s: float = 30) -> float:
        """The expression's one value once ``check`` holds (scrapes run every second)."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            value = float(result[0]["value"][1]) if len(result) == 1 else math.nan
            if check(value) or time.monotonic() > deadline:
                return value
            time.sleep(0.5)


@pytest.fixture(scope="module")
def monitored(
    deployed_vllm: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Monitored]:
    """A Pushgateway and a Prometheus scraping the shared CPU vLLM, the suite and the gateway;
    then a short realtime run pushing to the gateway and serving its live endpoint."""
    assert PROMETHEUS is not None and PUSHGATEWAY is not None
    tmp = tmp_path_factory.mktemp("prometheus")
    live_port, gateway_port, prom_port = free_port(), free_port(), free_port()
    vllm = deployed_vllm
    before = vllm_counter(vllm.base_url, "vllm:time_to_first_token_seconds_count")
    gateway = f"127.0.0.1:{gateway_port}"
    scrape = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "vllm", "static_configs": [{"targets": [f"127.0.0.1:{vllm.port}"]}]},
            {
                "job_name": "slo_client",
                "static_configs": [{"targets": [f"127.0.0.1:{live_port}"]}],
            },
            {
                "job_name": "pushgateway",
                "honor_labels": True,
                "static_configs": [{"targets": [gateway]}],
            },
        ],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(scrape))  # JSON is YAML
    with (
        started(
            # Debian's build persists to /var/lib/prometheus by default: memory only here.
            [PUSHGATEWAY, f"--web.listen-address={gateway}", "--persistence.file="],
            tmp / "pushgateway.log",
            f"http://{gateway}/-/ready",
        ),
        started(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            tmp / "prometheus.log",
            f"http://127.0.0.1:{prom_port}/-/ready",
        ),
    ):
        out = tmp / f"run-{int(time.time())}"  # the run_id label
        t0 = time.time()
        proc = run_suite(
            [
                "-m",
                "realtime",
                "--slo-max-requests=200",  # enough for bounded p50 intervals (ci_upper panels)
                *deployed_args(vllm),
                f"--slo-pushgateway=http://{gateway}",
                f"--slo-metrics-port={live_port}",
            ],
            out,
            env=DEPLOYED_ENV,
            timeout=600,
        )
        yield Monitored(out, f"http://127.0.0.1:{prom_port}", t0, time.time(), proc, before)


def test_the_run_reaches_prometheus_as_in_the_run_folder(monitored: Monitored) -> None:
    m, run = monitored, monitored.run_dir.name
    assert "slo: " in m.proc.stdout and (m.run_dir / "verdicts.json").exists(), m.proc.stderr
    verdicts = json.loads((m.run_dir / "verdicts.json").read_text())
    assert len(verdicts) == 5
    # The push comes at the end of the run; Prometheus scrapes the gateway every second.
    n_pushed = m.eventually(f'count(slo_verdict{{run_id="{run}"}} == 1)', lambda v: v == 5)
    assert n_pushed == 5
    for v in verdicts:
        test = v["test"]
        assert m.value(f'slo_verdict{{run_id="{run}",test="{test}",outcome="{v["outcome"]}"}}') == 1
        assert m.value(f'sum(slo_verdict{{run_id="{run}",test="{test}"}})') == 1
        assert m.value(f'slo_objective_samples{{run_id="{run}",test="{test}"}}') == v["n"]
        if v["metric"] in ("ttft", "tpot"):
            sel = f'{{run_id="{run}",test="{test}"}}'
            assert m.value(f"slo_objective_estimate_seconds{sel}") == v["estimate"]
            assert m.value(f"slo_objective_threshold_seconds{sel}") == v["threshold"]
    summary = json.loads((m.run_dir / "realtime" / "summary.json").read_text())
    ttft = summary["summary"]["ttft"]
    sel = f'run_id="{run}",scenario="realtime"'
    assert m.value(f'slo_run_ttft_seconds{{{sel},statistic="p99"}}') == ttft["p99"]
    assert m.value(f'slo_run_ttft_seconds{{{sel},statistic="p50"}}') == ttft["p50"]
    assert m.value(f"slo_run_requests{{{sel}}}") == summary["summary"]["requests"] == 200
    # The run folder's file holds the same figures as the push.
    text = (m.run_dir / "metrics.openmetrics.txt").read_text()
    families = {f.name: f for f in parse_openmetrics(text)}
    p99 = [s for s in families["slo_run_ttft_seconds"].samples if s.labels["statistic"] == "p99"]
    assert [s.value for s in p99] == [ttft["p99"]]


def test_client_and_vllm_ttft_side_by_side(monitored: Monitored) -> None:
    m, run = monitored, monitored.run_dir.name
    summary = json.loads((m.run_dir / "realtime" / "summary.json").read_text())
    ttft = summary["summary"]["ttft"]
    rows = [
        json.loads(r) for r in (m.run_dir / "realtime" / "records.jsonl").read_text().splitlines()
    ]
    warmup = sum(1 for r in rows if r["warmup"])
    assert warmup > 0
    # The live endpoint's last scrape came after the last record (the suite waits for it).
    client = f'slo_client_time_to_first_token_seconds_count{{run_id="{run}",phase="measured"}}'
    assert m.value(f"max_over_time({client}[10m])") == ttft["n"] == 200
    client_sum = m.value(f"max_over_time({client.replace('_count', '_sum')}[10m])")
    assert client_sum == pytest.approx(ttft["mean"] * ttft["n"], rel=1e-9)
    in_flight = f'slo_client_requests_in_flight{{run_id="{run}"}}'
    assert m.value(f"max_over_time({in_flight}[10m])") >= 1
    assert m.value(f"last_over_time({in_flight}[10m])") == 0
    # vLLM counted the warm-up and the measured requests (on top of earlier tests' requests on
    # the shared server); the run folder holds the measured ones.
    server = summary["server_metrics"]["vllm:time_to_first_token_seconds"]
    expected = m.vllm_ttft_before + server["count"] + warmup
    vllm_count = m.eventually(
        "sum(vllm:time_to_first_token_seconds_count)", lambda v: v == expected
    )
    assert vllm_count == expected and server["count"] == 200


def test_every_dashboard_expression_returns_data(monitored: Monitored) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    assert len(exprs) >= 15
    verdicts = json.loads((monitored.run_dir / "verdicts.json").read_text())
    if not any(v["ci_upper"] is not None and v["metric"] in ("ttft", "tpot") for v in verdicts):
        # No time objective had a bounded upper end (too clustered for the run's length): the
        # file rightly holds no ci_upper sample, so its panel has nothing to show.
        exprs = [e for e in exprs if "slo_objective_ci_upper_seconds" not in e]
    empty = []
    for expr in exprs:
        # Grafana's interval for rate(): at least four scrapes (1 s apart here).
        series = monitored.query_range(expr.replace("$__rate_interval", "10s"))
        values = [float(v) for s in series for _, v in s["values"]]
        if not any(math.isfinite(v) for v in values):
            empty.append(expr)
    assert empty == []
    assert re.search(r"slo_verdict", " ".join(exprs))
