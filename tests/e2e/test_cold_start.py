"""Cold starts on real CPU vLLM: the server started twice, each start timed to ready and its
first requests' TTFT measured before any warm-up, judged over the starts, reported in
summary.json, JUnit and the sign-off; the workload then runs on the last start's server.

Two starts (about a minute and a half each on a busy 2-core machine) keep it short: a median of
two starts has a t interval of one degree of freedom, wide but real.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from scipy import stats as sps

from fixtures.settings import ROOT
from slo.scenario import SCENARIO_DIR
from tests.e2e.helpers import TOO_BUSY, client_lagged, junit_cases, run_suite_on_schedule

OBJECTIVES = """\
[objectives.cpu-tiny]
"startup max" = "<= 10min"
"startup p50" = "<= 10min"
"startup p90" = "<= 10min"
"ttft_cold p50" = "<= 30s"
"ttft_cold max" = "<= 1ms"
"ttft p50" = "<= 5s"
"""


@pytest.fixture(scope="module")
def cold_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    folder = tmp_path_factory.mktemp("cold-start")
    text = (SCENARIO_DIR / "cold-start.toml").read_text()
    text = text.split("\n[objectives.cpu-tiny]")[0] + "\n" + OBJECTIVES
    text = text.replace("starts = 3 ", "starts = 2 ").replace("requests = 4 ", "requests = 2 ")
    slo_file = folder / "cold.slo.toml"
    slo_file.write_text(text)
    # The suite's own root and config: the SLO file's folder is outside the checkout.
    args = [f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"), str(slo_file)]
    return run_suite_on_schedule(args, folder / "run")


def test_startup_and_cold_ttft_are_measured_per_start_and_judged(
    cold_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = cold_run
    starts = json.loads((out / "servers" / "starts.json").read_text())
    summary = json.loads((out / "cold-start" / "summary.json").read_text())
    cold = summary["cold_starts"]["starts"]
    assert len(starts) == len(cold) == 2 and len({s["pid"] for s in starts}) == 2
    ready = [s["ready_s"] for s in cold]
    assert ready == [s["ready_s"] for s in starts] and all(r > 1 for r in ready)
    assert all(Path(s["log"]).exists() for s in starts)
    for s in cold:
        ttfts = [(r["first_text_ns"] - r["sent_ns"]) / 1e9 for r in s["requests"]]
        assert len(ttfts) == 2 and s["ttft_cold_s"] == pytest.approx(max(ttfts))
        # One at a time: the second is sent after the first has ended.
        assert s["requests"][1]["sent_ns"] - s["requests"][0]["end_ns"] >= 0
    # The workload ran on the last start's server, after its warm-up: 60 requests, none cold
    # (fewer leave too few effective samples for its ttft p50 to be decided).
    assert summary["server"]["ready_s"] == ready[-1]
    assert summary["summary"]["requests"] == 60

    cases = {n.split("[", 1)[1].rstrip("]"): c for n, c in junit_cases(out / "junit.xml").items()}
    for name, case in cases.items():
        print(name, case["properties"]["slo.outcome"], case["message"])
    p50 = cases["startup p50"]["properties"]
    # The median of two starts: the t interval (1 degree of freedom) of their log values.
    logs = [math.log(r) for r in ready]
    half = float(sps.t.ppf(0.975, 1)) * float(sps.tstd(logs)) / math.sqrt(2)
    assert float(p50["slo.ci_upper"]) == pytest.approx(math.exp(sum(logs) / 2 + half))
    assert p50["slo.n"] == "2" and p50["slo.cold_starts.startup_s"] == " ".join(
        f"{r:.3f}" for r in ready
    )
    assert p50["slo.outcome"] == ("PASS" if float(p50["slo.ci_upper"]) <= 600 else "INCONCLUSIVE")
    assert cases["startup max"]["properties"]["slo.outcome"] == "PASS"
    assert float(cases["startup max"]["properties"]["slo.estimate"]) == max(ready)
    p90 = cases["startup p90"]
    assert (
        p90["properties"]["slo.outcome"] == "INCONCLUSIVE" and "needs 36 starts" in p90["message"]
    )
    assert cases["ttft_cold max"]["properties"]["slo.outcome"] == "FAIL"  # no first token in 1 ms
    assert cases["ttft_cold p50"]["properties"]["slo.outcome"] in ("PASS", "INCONCLUSIVE")
    assert cases["ttft p50"]["properties"]["slo.claim"].startswith("Each objective is judged")
    assert proc.returncode == 1  # the FAIL (and the INCONCLUSIVE p90) fail their tests
    signoff = (out / "signoff.md").read_text()
    assert "### Cold starts" in signoff and "startup, ttft_cold: n is server starts" in signoff
    if client_lagged(cases["ttft p50"]):
        # Lagged in both runs (cold_run measures once more): the workload's verdict is void and
        # says why; the starts were judged all the same.
        pytest.skip(TOO_BUSY)
    assert cases["ttft p50"]["properties"]["slo.outcome"] == "PASS"
