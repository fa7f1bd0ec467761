"""Shared helpers of the end-to-end tests: run the suite as a user would, inspect its artifacts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from fixtures.pool import ServerPool
from fixtures.selection import select
from fixtures.server import ServerConfig, VllmServer
from fixtures.session import ScenarioRunner
from fixtures.settings import ROOT, Settings, programmatic
from reports.run_files import read_starts
from slo.scenario import load_scenario

REALTIME = ROOT / "slo" / "scenarios" / "realtime.toml"

DEPLOYED_KEY = "sk-e2e-7f3a9c-not-for-reports"
"""The API key of the shared deployed server (conftest.py): never in a report or a log."""


def deployed_args(server: VllmServer) -> list[str]:
    """The suite pointed at the shared deployed server, with its key from E2E_KEY (pass
    ``env=DEPLOYED_ENV`` to run_suite)."""
    return ["--slo-endpoint", server.base_url, "--slo-api-key-env", "E2E_KEY"]


DEPLOYED_ENV = {"E2E_KEY": DEPLOYED_KEY}


def set_requests(text: str, requests: object) -> str:
    """A scenario file's text with its workload's request count replaced (the first
    ``requests =`` line); raises if there is none, so a test cannot silently run the full count."""
    out, n = re.subn(r"^requests = \S+", f"requests = {requests}", text, count=1, flags=re.M)
    if n != 1:
        raise ValueError("no 'requests = N' line in the scenario text")
    return out


def scenario_requests(path: Path = REALTIME) -> int:
    """The measured request count a bundled scenario file asks for."""
    return load_scenario(path).workload.requests


def scenario_warmup(path: Path = REALTIME) -> int:
    """The warm-up request count a bundled scenario file asks for (sent before the measured)."""
    return load_scenario(path).workload.warmup_requests


def run_pytest(
    args: list[str],
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 1500,
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in a subprocess, this checkout's code first on the path (as an
    installed copy would be found from any folder); no option of the suite's added."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def run_suite(
    args: list[str],
    report_dir: Path,
    *,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 1500,
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in a subprocess, reports into ``report_dir``."""
    # With '=': pytest must not take the folder for a test path.
    suite_args = [*args, f"--slo-report-dir={report_dir}", "--slo-no-progress"]
    proc = run_pytest(suite_args, cwd=cwd, env=env, timeout=timeout)
    # Shown by pytest when an assertion on the result fails.
    print(
        f"$ {' '.join(proc.args)}\n--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n"
        f"{proc.stderr[-3000:]}"
    )
    return proc


def junit_cases(path: Path) -> dict[str, dict[str, Any]]:
    """testcase name -> {"outcome": passed/failed/error/skipped, "message", "properties"}."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome, message = {"failure": "failed"}.get(tag, tag), el.get("message", "")
        out[str(case.get("name"))] = {"outcome": outcome, "message": message, "properties": props}
    return out


def requests_seen(props: dict[str, Any]) -> int:
    """Requests a JUnit case's objective was judged on plus the warm-up transient the
    steady-state check trimmed: what the run measured, whatever the trim."""
    return int(props["slo.n"]) + int(props["slo.warmup_dropped"])


def client_lagged(case: dict[str, Any]) -> bool:
    """Whether a JUnit case (from ``junit_cases``) is INVALID because the client lagged its
    schedule: more than 1% of the requests late beyond chance, which a few stalls of a busy
    2-core machine make of a short run."""
    props = case["properties"]
    return bool(
        props.get("slo.outcome") == "INVALID"
        and re.search(
            r"run INVALID: .*schedule lag p99 = .* the client, not the server", case["message"]
        )
    )


def run_lagged(report_dir: Path) -> bool:
    """Whether any objective of the run reported in ``report_dir`` is INVALID because the client
    lagged its schedule (``client_lagged``)."""
    junit = report_dir / "junit.xml"
    return junit.exists() and any(client_lagged(c) for c in junit_cases(junit).values())


def run_suite_on_schedule(
    args: list[str], report_dir: Path, **kwargs: Any
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``run_suite``, measured once more (into ``report_dir/again``) when the client lagged its
    schedule: a shared 2-core CI machine can stall it for tens of ms, which voids the run as the
    suite is built to (INVALID, the client's fault). The tests that use this are about the server
    and its verdicts, not the client. Returns the last run and its folder, lagged or not: a test
    must still say what it makes of a second lagged run."""
    proc = run_suite(args, report_dir, **kwargs)
    if run_lagged(report_dir):
        report_dir = report_dir / "again"
        proc = run_suite(args, report_dir, **kwargs)
    return proc, report_dir


TOO_BUSY = "the client lagged its schedule in both runs: this machine is too busy"
"""Why a test skips when ``run_suite_on_schedule``'s second run lagged too."""


NOT_STEADY = (
    r"not steady, (drift: typical \w+ (rose|fell) \d+%"
    r"|no steady state: .* run longer or add warm-up requests)"
)
"""The reason an INCONCLUSIVE verdict gives for a run that is not steady (slo/steady.py)."""


def realtime_server_config(settings: Settings | None = None) -> ServerConfig:
    """The server config the realtime scenario gets under the cpu-tiny profile."""
    s = settings or programmatic("cpu-tiny")
    return ScenarioRunner(s, ServerPool(s)).server_config(select("realtime", s))


def server_pid(
    proc: subprocess.Popen[str], run_dir: Path, index: int = 0, timeout_s: float = 600
) -> int:
    """The pid of the run's server number ``index`` (from 0), once the run folder's
    servers/starts.json records it: a server is up once its start is recorded. Fails when the
    run ends first or the server takes longer than ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while len(starts := read_starts(run_dir)) <= index:
        if proc.poll() is not None:
            out = proc.communicate()[0] or ""  # None when the output was not piped
            raise AssertionError(f"the run ended before server {index} was up\n{out[-3000:]}")
        assert time.monotonic() < deadline, f"server {index} did not start in {timeout_s:.0f} s"
        time.sleep(0.3)
    return int(starts[index]["pid"])


def group_alive(pgid: int) -> list[psutil.Process]:
    """Processes still in the process group (a vLLM server's engine core and workers)."""
    alive = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                alive.append(p)
        except (ProcessLookupError, psutil.Error):
            pass
    return alive


def vllm_counter(base_url: str, name: str) -> float:
    """A vLLM sample (e.g. ``vllm:request_success_total``) summed over its labels, from the
    server's own /metrics (open without the API key)."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as r:
        families = text_string_to_metric_families(r.read().decode())
    return sum(s.value for f in families for s in f.samples if s.name == name)


def finished(pid: int) -> float:
    """Requests the server has finished, from its own /metrics."""
    (port,) = [
        c.laddr.port
        for c in psutil.Process(pid).net_connections("tcp")
        if c.status == psutil.CONN_LISTEN
    ]
    return vllm_counter(f"http://127.0.0.1:{port}", "vllm:request_success_total")


def wait_finished(pid: int, n: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while finished(pid) < n:
        assert time.monotonic() < deadline, f"the server did not finish {n} requests"
        time.sleep(0.3)
