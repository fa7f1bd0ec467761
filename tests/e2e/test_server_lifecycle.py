"""The server fixture against real vLLM: bad args, failed starts, timeouts, external endpoints."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.engine_args import check_engine_args
from fixtures.server import ServerConfig, VllmServer
from slo.errors import EngineArgError, ServerStartError
from tests.e2e.helpers import (
    DEPLOYED_ENV,
    DEPLOYED_KEY,
    client_lagged,
    deployed_args,
    group_alive,
    junit_cases,
    realtime_server_config,
    requests_seen,
    run_suite,
    set_requests,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "arg,value,says",
    [
        ("num_lookahead_slots", 4, "speculative decoding"),
        ("disable_log_requests", True, "enable_log_requests"),
    ],
)
def test_removed_article_flags_are_named_with_the_vllm_version(
    arg: str, value: object, says: str
) -> None:
    with pytest.raises(EngineArgError) as e:
        check_engine_args(sys.executable, {"max_num_seqs": 8, arg: value}, origin="realtime.toml")
    msg = str(e.value)
    assert f"engine arg {arg!r} is not accepted by the installed vLLM 0.32.0" in msg
    assert says in msg and "Delete it" in msg and "No server was started" in msg


def test_unknown_and_invalid_engine_args() -> None:
    with pytest.raises(
        EngineArgError, match=r"'max_num_seq' is not an option .* Did you mean max_num_seqs"
    ):
        check_engine_args(sys.executable, {"max_num_seq": 8}, origin="x.toml")
    with pytest.raises(EngineArgError, match=r"invalid choice: 'prio'"):
        check_engine_args(sys.executable, {"scheduling_policy": "prio"}, origin="x.toml")


def test_removed_flag_in_a_scenario_stops_the_run_before_any_server(tmp_path: Path) -> None:
    scenario = (ROOT / "slo" / "scenarios" / "realtime.toml").read_text()
    bad = tmp_path / "article.toml"
    bad.write_text(scenario.replace("[server]", "[server]\nnum_lookahead_slots = 4", 1))
    (tmp_path / "test_article.py").write_text(
        "import pytest\n"
        f"pytestmark = pytest.mark.scenario({str(bad)!r})\n"
        "def test_objective(slo_check, objective):\n    slo_check(objective)\n"
    )
    reports = tmp_path / "reports"
    proc = run_suite(
        ["-p", "fixtures.plugin", str(tmp_path / "test_article.py")], reports, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert (
        "engine arg 'num_lookahead_slots' is not accepted by the installed vLLM 0.32.0"
        in proc.stdout
    )
    assert "No server was started" in proc.stdout
    assert not (reports / "servers").exists()


def test_failed_start_reports_exit_code_command_and_log_tail(tmp_path: Path) -> None:
    base = realtime_server_config()
    # Longer than the bundled model's 4096 positions: vLLM exits during engine set-up.
    config = ServerConfig.build(base.model, {**base.args, "max_model_len": 100000}, dict(base.env))
    argv = check_engine_args(sys.executable, config.args, origin="test").argv
    server = VllmServer(config, log_path=tmp_path / "server.log", argv=argv)
    with pytest.raises(ServerStartError) as e:
        server.start()
    msg = str(e.value)
    assert re.search(r"exited before it was ready after [\d.]+ s \(exit code [1-9]\d*\)", msg)
    assert "command: " in msg and "--max-model-len 100000" in msg
    # The cause (vLLM's validation error on max_model_len) is named above the log's tail.
    assert "--- last lines of the log ---" in msg and "max_model_len" in msg
    assert "ValidationError" in msg.split("--- last lines of the log ---")[0]
    assert (tmp_path / "server.log").exists()
    assert server.proc is not None and group_alive(server.proc.pid) == []


def test_startup_timeout_stops_the_server(tmp_path: Path) -> None:
    config = realtime_server_config()
    argv = check_engine_args(sys.executable, config.args, origin="test").argv
    server = VllmServer(config, log_path=tmp_path / "server.log", argv=argv, startup_timeout_s=5)
    with pytest.raises(ServerStartError, match=r"not healthy within the startup timeout \(5 s"):
        server.start()
    assert server.proc is not None and group_alive(server.proc.pid) == []


@pytest.fixture(scope="module")
def external_server(deployed_vllm: VllmServer) -> Iterator[VllmServer]:
    """The shared server started apart from the suite (conftest.py), as a deployed one would be;
    it wants an API key, which must never reach its log."""
    yield deployed_vllm
    assert DEPLOYED_KEY not in deployed_vllm.log_path.read_text(errors="replace")


def test_external_endpoint_with_api_key(external_server: VllmServer, tmp_path: Path) -> None:
    args = ["-m", "realtime", *deployed_args(external_server), "--slo-max-requests", "60"]
    # 3 late requests of 60 void a run (a noisy 2-core machine): correctly INVALID, and this
    # test is about the endpoint and its key, so it measures up to three times.
    for attempt in ("reports", "again", "third"):
        reports = tmp_path / attempt
        proc = run_suite(args, reports, env=DEPLOYED_ENV)
        cases = junit_cases(reports / "junit.xml")
        lagged = client_lagged(cases["test_objective[ttft p50]"])
        if not lagged:
            break
    assert not (reports / "servers").exists()  # nothing launched
    p50, p99 = cases["test_objective[ttft p50]"], cases["test_objective[ttft p99]"]
    # 60 requests sent, less any warm-up transient the steady-state check trimmed.
    props = p50["properties"]
    assert requests_seen(props) == 60, props
    # 60 requests decide a p50 when they are not too clustered; a host that stalled the client
    # in all three runs voids them, which is the right verdict too.
    assert lagged or props["slo.outcome"] in ("PASS", "INCONCLUSIVE"), p50["message"]
    # 60 samples cannot bound a p99: INCONCLUSIVE, which the cpu-tiny profile counts as a failure.
    assert p99["outcome"] == "failed"
    assert p99["properties"]["slo.outcome"] == ("INVALID" if lagged else "INCONCLUSIVE")
    # The message plans the run: a bounded p99 needs a few hundred effective samples. Which way
    # it would decide is the 60 requests' to say: one stall of this shared 2-core machine puts
    # the estimate on the bound (one request at 234 ms: p99 148 ms, "no run length decides it"),
    # two past it (three at 167-293 ms in a CI run: p99 275 ms, a FAIL planned).
    assert lagged or re.search(
        r"about \d{3,} requests would decide it \((PASS|FAIL)\)|no run length decides it",
        p99["message"],
    ), p99["message"]
    assert proc.returncode == 1
    for f in tmp_path.rglob("*"):  # every run's files, a voided first one included
        if f.is_file():
            assert DEPLOYED_KEY not in f.read_text(errors="replace"), f


def test_endpoint_without_the_key_is_a_clear_error(
    external_server: VllmServer, tmp_path: Path
) -> None:
    proc = run_suite(
        [
            "-m",
            "realtime",
            "--slo-endpoint",
            external_server.base_url,
            "--slo-api-key-env",
            "NO_SUCH_VAR_SET",
        ],
        tmp_path,
    )
    assert proc.returncode == 1
    assert "did not list a model at /v1/models" in proc.stdout
    assert "--slo-api-key-env" in proc.stdout


def test_closed_loop_completions_workload(external_server: VllmServer, tmp_path: Path) -> None:
    """The completions API under closed-loop concurrency, through the same plugin path."""
    scenario = (ROOT / "slo" / "scenarios" / "realtime.toml").read_text()
    closed = set_requests(
        scenario.replace('api = "chat"', 'api = "completions"')
        .replace('arrival = "poisson"', 'arrival = "closed"\nconcurrency = 4')
        .replace('rate = "4 req/s"\n', ""),
        40,
    )
    (tmp_path / "closed.toml").write_text(closed)
    (tmp_path / "test_closed.py").write_text(
        "import pytest\n"
        f"pytestmark = pytest.mark.scenario({str(tmp_path / 'closed.toml')!r})\n"
        "def test_objective(slo_check, objective):\n    slo_check(objective)\n"
    )
    reports = tmp_path / "reports"
    run_suite(
        [
            str(tmp_path / "test_closed.py"),
            *deployed_args(external_server),
        ],
        reports,
        cwd=tmp_path,
        env=DEPLOYED_ENV,
    )
    rows = [
        json.loads(r) for r in (reports / "realtime" / "records.jsonl").read_text().splitlines()
    ]
    measured = [r for r in rows if not r["warmup"]]
    assert len(measured) == 40 and all(r["error"] is None for r in measured)
    # Completions prompts: the server's count (BOS included) is the planned one.
    assert all(r["prompt_tokens"] == r["expected_prompt_tokens"] for r in rows)
    assert all(r["output_tokens"] == 32 for r in rows)
    # vLLM's own id for each request, one per request (its logs and traces use it).
    assert all(r["response_id"].startswith("cmpl-") for r in rows)
    assert len({r["response_id"] for r in rows}) == len(rows)
    # Closed loop: never more than 4 requests in flight.
    events = sorted([(r["sent_ns"], 1) for r in measured] + [(r["end_ns"], -1) for r in measured])
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak == 4


def test_load_runner_spread_over_processes(external_server: VllmServer, tmp_path: Path) -> None:
    """--slo-client-processes: two worker processes send one schedule, every record comes back."""
    reports = tmp_path / "reports"
    proc = run_suite(
        [
            "-m",
            "realtime",
            *deployed_args(external_server),
            "--slo-max-requests",
            "60",
            "--slo-client-processes",
            "2",
        ],
        reports,
        env=DEPLOYED_ENV,
    )
    env = json.loads((reports / "environment.json").read_text())
    assert env["client_processes"] == 2
    rows = [
        json.loads(r) for r in (reports / "realtime" / "records.jsonl").read_text().splitlines()
    ]
    measured = [r for r in rows if not r["warmup"]]
    assert sorted(r["index"] for r in rows) == list(range(len(rows)))
    assert len(measured) == 60 and all(r["error"] is None for r in measured)
    assert all(r["output_tokens"] == 32 for r in measured)
    assert len({r["response_id"] for r in measured}) == 60  # passed back from the workers
    cases = junit_cases(reports / "junit.xml")
    p50 = cases["test_objective[ttft p50]"]["properties"]
    # Two client processes on the client's one core: a run voided by their lag (3 late requests
    # of 60) is correct, and the records above are what this test is about.
    lagged = client_lagged(cases["test_objective[ttft p50]"])
    assert lagged or p50["slo.outcome"] in ("PASS", "INCONCLUSIVE"), proc.stdout[-3000:]
    # Judged on the 60 less any warm-up transient trimmed (a stalled start: 55 and 5).
    assert requests_seen(p50) == 60, p50
