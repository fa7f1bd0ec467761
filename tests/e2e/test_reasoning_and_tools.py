"""Reasoning and tool-call streams from real CPU vLLM on the bundled model with dummy weights.

Structured outputs force the shape random weights cannot produce: a ``regex`` in the granite
reasoning parser's text markers makes a reasoning stream (``reasoning`` deltas, then
``content``), and a named ``tool_choice`` forces the arguments' JSON and streams ``tool_calls``
deltas. Both come from ``request_extra``. Two instances: with a reasoning parser set, vLLM 0.32
never leaves the reasoning phase of a named tool call (the granite parser gives no token-level
end), so its JSON arrives as ``content``; the tool class gets an instance without one.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures.settings import ROOT
from tests.e2e.helpers import junit_cases, run_suite

REGEX = "Here is my thought process:[a-z ]{8,24}Here is my response:[a-z ]{8,24}"

SCENARIO = f"""\
[scenario]
name = "reasoning-and-tools"
description = "Reasoning and tool-call streams forced by structured outputs"

[servers.reason]
reasoning_parser = "granite"
structured_outputs_config = {{ enable_in_reasoning = true }}

[servers.tool]
tool_call_parser = "pythonic"
enable_auto_tool_choice = true

[workload]
api = "chat"
seed = 7
timeout = "120s"

[workload.classes.reason]
arrival = "closed"
concurrency = 2
requests = 6
prompt_tokens = {{ min = 16, max = 32 }}
output_tokens = 96
server = "reason"
request_extra = {{ structured_outputs = {{ regex = "{REGEX}" }} }}

[workload.classes.tool]
arrival = "closed"
concurrency = 2
requests = 6
prompt_tokens = {{ min = 16, max = 32 }}
output_tokens = 48
server = "tool"

[workload.classes.tool.request_extra]
tool_choice = {{ type = "function", function = {{ name = "pick" }} }}
tools = [{{ type = "function", function = {{ name = "pick", parameters = {{ type = "object", \
required = ["x"], additionalProperties = false, properties = {{ x = {{ type = "string", \
enum = ["a", "b"] }} }} }} }} }}]

[validity]
schedule_lag_p99 = "1s"

[objectives.cpu-tiny]
"ttft_content max class=reason" = "<= 60s"
"ttft_tool max class=tool" = "<= 60s"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    folder = tmp_path_factory.mktemp("reasoning-tools")
    slo_file = folder / "shapes.slo.toml"
    slo_file.write_text(SCENARIO)
    out = folder / "run"
    return run_suite(
        [f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"), str(slo_file)], out
    ), out


def _records(out: Path) -> list[dict[str, Any]]:
    rows = (out / "reasoning-and-tools" / "records.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, rows) if not r["warmup"]]


def _ms(ns: int) -> float:
    return ns / 1e6


def test_reasoning_arrives_before_content_and_tool_calls_first(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = run
    records = _records(out)
    reason = [r for r in records if r["class"] == "reason"]
    tool = [r for r in records if r["class"] == "tool"]
    assert len(reason) == len(tool) == 6 and not any(r["error"] for r in records)
    for r in reason:
        # The first output is reasoning; the content (what the user sees) comes later.
        assert r["first_tool_ns"] is None
        assert r["first_content_ns"] is not None, r
        assert r["first_text_ns"] < r["first_content_ns"]
    for r in tool:
        # The first output is the tool call's delta; no content before (or after) it.
        assert r["first_tool_ns"] is not None, r
        assert r["first_text_ns"] == r["first_tool_ns"]
        assert r["first_content_ns"] is None
    content_gap = [_ms(r["first_content_ns"] - r["first_text_ns"]) for r in reason]
    tool_gap = [_ms(r["first_tool_ns"] - r["first_chunk_ns"]) for r in tool]
    print(
        f"ttft_content - ttft (reasoning): median {statistics.median(content_gap):.1f} ms, "
        f"min {min(content_gap):.1f}, max {max(content_gap):.1f}; "
        f"ttft_tool - ttft_chunk (tools): median {statistics.median(tool_gap):.1f} ms, "
        f"min {min(tool_gap):.1f}, max {max(tool_gap):.1f}"
    )


def test_objectives_on_content_and_tool_ttft_are_judged(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = run
    cases = junit_cases(out / "junit.xml")
    judged = {n.split("[", 1)[1].rstrip("]"): c for n, c in cases.items() if "[" in n}
    for name in ("ttft_content max class=reason", "ttft_tool max class=tool"):
        props = judged[name]["properties"]
        assert props["slo.outcome"] == "PASS", judged[name]
        assert int(props["slo.n"]) == 6
    assert proc.returncode == 0
