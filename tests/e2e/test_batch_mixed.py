"""The batch and mixed scenarios end to end on CPU vLLM, and the priority-vs-FCFS claim."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.helpers import (
    NOT_STEADY,
    TOO_BUSY,
    junit_cases,
    run_lagged,
    run_suite_on_schedule,
)


def test_batch_and_mixed_scenarios(tmp_path: Path) -> None:
    # Capped at 120 measured requests per class (the scenarios send 3000 and 800) to keep CI
    # short; the background batch class of mixed still runs until the realtime class is done.
    cap = ["--slo-max-requests=120"]
    proc, out = run_suite_on_schedule(
        ["suites/test_batch.py", "suites/test_mixed.py", *cap], tmp_path
    )
    if run_lagged(out):  # void as a whole, and it says so
        assert proc.returncode == 1
        pytest.skip(TOO_BUSY)
    cases = junit_cases(out / "junit.xml")
    assert proc.returncode in (0, 1), proc.returncode  # verdicts reached, nothing broke
    objectives = {k: c for k, c in cases.items() if k.startswith("test_objective[")}
    assert len(objectives) == 5 and len(cases) == 6
    # Closed-loop batch traffic is strongly clustered (a wave of 32 streams moves together), so
    # on 2 cores percentiles cannot be decided from 120 requests: INCONCLUSIVE with the reason
    # and the requests that would decide it, never a PASS the data cannot carry, never a FAIL or
    # INVALID here.
    for name, case in objectives.items():
        props = case["properties"]
        assert props["slo.outcome"] in ("PASS", "INCONCLUSIVE"), (name, case["message"])
        if props["slo.outcome"] == "INCONCLUSIVE":
            # Or not steady: mixed's background batch class may still be ramping at 120
            # requests (MSER-5 found it changing at its midpoint, 2026-12-07).
            message = case["message"]
            if "not steady" in message:
                assert re.search(NOT_STEADY, message), case
            else:
                assert "clustered" in message or "straddles" in message, case
                assert "requests would decide it" in message, case
        print(name, props["slo.outcome"], props["slo.n"], props.get("slo.n_eff"))
    # Throughput is judged on batch means over time windows. At 120 closed-loop requests the
    # windows hold a wave or two each, and on a noisy machine they can straddle the floor (769
    # tok/s, CI 291-1247 against 300, 2026-12-06): then INCONCLUSIVE, asked for more requests.
    throughput = objectives["test_objective[output_throughput]"]
    if throughput["properties"]["slo.outcome"] != "PASS":
        reason = rf"more requests would decide it|{NOT_STEADY}"
        assert re.search(reason, throughput["message"]), throughput
    # The priority claim is a comparison with an interval: with 120 clustered realtime requests
    # per variant it may be undecided on 2 cores (then it says so), never shown without one.
    claim_case = cases["test_priority_scheduling_lowers_realtime_ttft"]
    assert claim_case["outcome"] == "passed" or "undecided" in claim_case["message"], claim_case
    # Three servers: batch, mixed under priority, the same load under FCFS.
    starts = json.loads((out / "servers" / "starts.json").read_text())
    assert len(starts) == 3
    claim = cases["test_priority_scheduling_lowers_realtime_ttft"]["properties"]
    assert claim["claim.priority.requests"] == claim["claim.fcfs.requests"] == "120"
    # Per-class records: both classes ran at the same time, with their priorities.
    rows = [json.loads(r) for r in (out / "mixed" / "records.jsonl").read_text().splitlines()]
    realtime = [r for r in rows if r["class"] == "realtime" and not r["warmup"]]
    batch = [r for r in rows if r["class"] == "batch" and not r["warmup"]]
    assert len(realtime) == 120 and len(batch) > 24
    assert min(r["sent_ns"] for r in batch) < max(r["sent_ns"] for r in realtime)
    assert (out / "mixed.fcfs" / "summary.json").exists()
    assert {r["output_tokens"] for r in batch} == {128}
