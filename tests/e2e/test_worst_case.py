"""The worst-case search end to end on CPU vLLM (the e2e tests' shared deployed server), with the
ci profile's small budget."""

from __future__ import annotations

import json
import math
from pathlib import Path

from fixtures.server import VllmServer
from fixtures.strategies import load_mix
from tests.e2e.helpers import DEPLOYED_ENV, deployed_args, junit_cases, run_suite


def test_worst_case_search_saves_and_reports_the_worst_mix(
    deployed_vllm: VllmServer, tmp_path: Path
) -> None:
    proc = run_suite(
        [
            "suites/test_worst_case.py",
            "-m",
            "explore",
            "--slo-hypothesis-profile=ci",
            *deployed_args(deployed_vllm),
        ],
        tmp_path,
        env=DEPLOYED_ENV,
        timeout=600,
    )
    assert proc.returncode in (0, 1), "the search itself broke (not a pass or an SLO miss)"
    saved = json.loads((tmp_path / "realtime" / "worst-mix.json").read_text())
    worst = saved["ttft_p99_s"]
    assert worst is not None and 0 < worst < math.inf
    mix = load_mix(tmp_path / "realtime" / "worst-mix.json")
    assert len(mix.requests) == 16  # realtime.toml [search] requests
    assert saved["errors"] == 0
    assert saved["token_mismatches"] == 0  # vLLM counted exactly the planned prompt tokens
    assert all(r.prompt_tokens + sum(r.history) <= 1536 for r in mix.requests)
    assert f"worst-mix.json: TTFT p99 {worst * 1000:.0f} ms" in proc.stdout
    props = junit_cases(tmp_path / "junit.xml")["test_worst_case_ttft_p99"]["properties"]
    assert float(props["search.worst_ttft_p99_s"]) == worst
    assert int(props["search.examples"]) == 7  # the envelope's corner, then the ci budget of 6
    # Over every example, multi-turn and shared-prefix prompts included: vLLM counted exactly the
    # planned prompt tokens (chat template included).
    assert int(props["search.multi_turn_requests"]) > 0
    assert int(props["search.shared_prefix_requests"]) > 0
    assert int(props["search.token_mismatches"]) == 0
    if proc.returncode == 1:  # a mix over the [search] limit: it must be saved too
        assert (tmp_path / "realtime" / "failing-mix.json").exists()
