"""The README's main job, end to end on real CPU vLLM: it passes, reports, and can fail."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import psutil
import pytest

from slo.sequential import StopRule
from tests.e2e.helpers import (
    NOT_STEADY,
    TOO_BUSY,
    client_lagged,
    group_alive,
    junit_cases,
    requests_seen,
    run_lagged,
    run_suite,
    run_suite_on_schedule,
    scenario_requests,
    scenario_warmup,
)

OBJECTIVES = ("ttft p50", "ttft p99", "tpot p99", "output_throughput", "goodput")
REQUESTS = scenario_requests()  # measured requests of slo/scenarios/realtime.toml
# The gate runs the main job capped at a third of its requests (7 minutes, not 20) to keep CI
# short. Capped at 1200 (then a third of 3600), a quiet run's TTFT p99 held about 600 effective
# samples (368 decide it), and TPOT p99's waves of slow requests left one run INCONCLUSIVE
# (243 effective, 2026-12-06). Whether the full job PASSes 19 runs in 20 is
# benchmarks/repeat_scenarios.py's question, not CI's.
CAP = REQUESTS // 3


@pytest.fixture(scope="module")
def main_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("realtime")
    return run_suite_on_schedule(["-m", "realtime", f"--slo-max-requests={CAP}"], out)


def test_realtime_scenario_judges_every_objective_on_cpu_vllm(
    main_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = main_run
    cases = junit_cases(out / "junit.xml")
    assert {c.split("[", 1)[1].rstrip("]") for c in cases} == set(OBJECTIVES)
    if run_lagged(out):
        # Lagged in both runs (main_run measures once more): the run is void as a whole, every
        # objective INVALID with the client named, nothing PASSed; what follows is not reached.
        assert all(client_lagged(c) for c in cases.values()), cases
        assert proc.returncode == 1 and re.search(r"\b5 failed\b", proc.stdout)
        pytest.skip(TOO_BUSY)
    # On a quiet 2-core machine the full job PASSes every objective (slo/scenarios/realtime.toml);
    # capped, TPOT p99 may be undecided. A shared CI machine can cluster the slow requests so
    # much that they hold fewer effective samples than a p99 needs, or shift TTFT halfway
    # through (another job starting): then the verdict is INCONCLUSIVE with its reason (the
    # requests that would decide it, or the drift).
    # Never a PASS the data cannot carry, never FAIL or INVALID from a healthy server.
    outcomes = {}
    for name, case in cases.items():
        props = case["properties"]
        outcomes[name] = props["slo.outcome"]
        print(name, props["slo.outcome"], props["slo.estimate"], props.get("slo.n_eff"))
        assert props["slo.outcome"] in ("PASS", "INCONCLUSIVE"), (name, case["message"])
        assert (case["outcome"] == "passed") == (props["slo.outcome"] == "PASS"), case
        if props["slo.outcome"] == "INCONCLUSIVE":
            reason = rf"about \d+ requests would decide it|{NOT_STEADY}"
            assert re.search(reason, case["message"]), case
        assert props["slo.profile"] == "cpu-tiny"
        assert props["slo.vllm_version"] == "0.32.0"
    # Throughput is judged on batch means over time windows and sits 25% above its floor at the
    # offered load: it decides on any machine that keeps up with 4 req/s.
    assert outcomes["test_objective[output_throughput]"] == "PASS", outcomes
    passed = sum(o == "PASS" for o in outcomes.values())
    assert proc.returncode == (0 if passed == len(OBJECTIVES) else 1)
    assert re.search(rf"\b{passed} passed\b", proc.stdout)
    ttft_p99 = cases["test_objective[ttft p99]"]["properties"]
    assert requests_seen(ttft_p99) == CAP
    assert (
        float(ttft_p99["slo.ci_lower"])
        <= float(ttft_p99["slo.estimate"])
        <= float(ttft_p99["slo.ci_upper"])
    )
    assert ttft_p99["slo.claim"].startswith("Each objective is judged on a two-sided")


def test_serial_correlation_of_a_real_run_is_measured_and_reported(
    main_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    # What the dependence handling made of real vLLM traffic: the lag-1 autocorrelation of each
    # judged series and the effective sample size, per objective, in summary.json and JUnit.
    _, out = main_run
    stats = json.loads((out / "realtime" / "summary.json").read_text())["statistics"]
    assert stats["claim"].startswith("Each objective is judged")
    cases = junit_cases(out / "junit.xml")
    for name, row in stats["objectives"].items():
        props = cases[f"test_objective[{name}]"]["properties"]
        assert float(props["slo.n_eff"]) == pytest.approx(row["n_eff"])
        assert 0 < row["n_eff"] <= row["n"]
        print(f"{name}: n={row['n']} n_eff={row['n_eff']:.0f} lag1={row['lag1_autocorrelation']}")
    ttft = stats["objectives"]["ttft p50"]
    # Poisson arrivals into a queue: TTFTs of neighbouring requests are correlated.
    assert -1 < ttft["lag1_autocorrelation"] < 1


def test_one_server_start_for_all_objectives_and_nothing_left_running(
    main_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = main_run
    starts = json.loads((out / "servers" / "starts.json").read_text())
    assert len(starts) == 1, starts
    pid = starts[0]["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert group_alive(pid) == []
    log = Path(starts[0]["log"]).read_text()
    assert "--port 0" in log.splitlines()[0]  # the command heads the log
    assert "max_num_seqs" in log or "max-num-seqs" in log


def test_benchmark_json_in_pytest_benchmark_format(
    main_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = main_run
    data = json.loads((out / "benchmark.json").read_text())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(data)
    by_name = {b["name"]: b for b in data["benchmarks"]}
    ttft = by_name["realtime[ttft]"]
    assert ttft["stats"]["rounds"] == CAP == len(ttft["stats"]["data"])
    assert 0 < ttft["stats"]["min"] <= ttft["stats"]["median"] <= ttft["stats"]["max"]
    assert ttft["extra_info"]["profile"] == "cpu-tiny"
    assert "realtime[tpot]" in by_name and "realtime[e2e]" in by_name
    records = (out / "realtime" / "records.jsonl").read_text().splitlines()
    assert len(records) == CAP + scenario_warmup()  # measured + warm-up, none dropped
    rows = [json.loads(r) for r in records]
    assert all(r["error"] is None for r in rows)
    assert all(r["output_tokens"] == 32 for r in rows)
    # The prompt lengths the workload planned are the ones the server counted.
    assert all(r["prompt_tokens"] == r["expected_prompt_tokens"] for r in rows)


def test_ten_times_tighter_thresholds_fail(
    main_run: tuple[subprocess.CompletedProcess[str], Path],
    tmp_path: Path,
) -> None:
    _, out = main_run
    if run_lagged(out):
        pytest.skip("the client lagged its schedule in both runs: a void run stays void replayed")
    proc = run_suite(["-m", "realtime", f"--slo-replay={out}", "--slo-tighten", "10"], tmp_path)
    assert proc.returncode == 1
    assert re.search(r"\b5 failed\b", proc.stdout)
    p99 = r"ttft p99 = [\d.]+ m?s > [\d.]+ ms \(n=\d+, (effective n=\d+, )?profile cpu-tiny"
    assert re.search(p99, proc.stdout)
    assert re.search(r"output_throughput = [\d.]+ tok/s < [\d.]+ tok/s", proc.stdout)


def test_sequential_stop_ends_a_clearly_failing_run_early(tmp_path: Path) -> None:
    # With its own server: against the e2e tests' shared deployed server the client lagged its
    # schedule in 3 of 4 runs (6 of 200 requests late, 24-74 ms, in a CI run), and the run was
    # INVALID; why a run against that server lags more is not known yet.
    args = ["-m", "realtime", "--slo-sequential", "--slo-tighten", "10"]
    proc, out = run_suite_on_schedule(args, tmp_path)
    assert proc.returncode == 1
    if run_lagged(out):
        pytest.skip(TOO_BUSY)
    rows = [json.loads(r) for r in (out / "realtime" / "records.jsonl").read_text().splitlines()]
    measured = [r for r in rows if not r["warmup"]]
    # Looks at 200 requests and every 50 after; a look stops the run only where its
    # clustering estimate is trusted (100 effective samples for the p99: 450 requests in a
    # quiet CPU run). A few more requests may have been in flight.
    rule = StopRule.for_workload(REQUESTS, 0.95, quantiles=(0.5, 0.99))
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert {v["outcome"] for v in verdicts} == {"FAIL"}
    (look,) = {v["n"] + v["warmup_dropped"] for v in verdicts}
    assert look in rule.looks and look <= 1000, look  # well before the end
    assert look <= len(measured) < look + 100
    # Judged at the rule's per-look level (the p50 and p99 objectives set it).
    assert f"{rule.look_confidence * 100:.4g}% CI" in verdicts[0]["message"]
    # The sign-off page and per-objective JUnit are rendered at the end of the run.
    assert "FAIL" in (out / "signoff.html").read_text()
    assert (out / "slo-junit.xml").exists()
