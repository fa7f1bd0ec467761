"""The pure parts of benchmarks/ttft_definitions.py (its run needs a server, and is not here)."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))

from ttft_definitions import definition_gap, plan, report

from tests.unit.builders import MS, rec


def test_gap_between_first_chunk_and_first_text() -> None:
    base = [rec(i, ttft_ms=10) for i in range(4)]
    records = [
        replace(base[0], first_chunk_ns=base[0].sent_ns + 10 * MS),  # first chunk had text
        replace(base[1], first_chunk_ns=base[1].sent_ns + 7 * MS),  # 3 ms of textless chunks
        replace(base[2], first_chunk_ns=base[2].sent_ns + 9 * MS),
        rec(3, ttft_ms=10, error="HTTP 503: busy"),  # failed: not measured
        base[3],  # recorded before the first chunk was kept: not measured
    ]
    g = definition_gap(records)
    assert (g.requests, g.measured, g.textless_first) == (5, 3, 2)
    assert g.gaps_s == pytest.approx((0.0, 0.003, 0.001))
    assert g.mean_s == pytest.approx(0.004 / 3)
    assert g.median_s == pytest.approx(0.001)
    assert g.max_s == pytest.approx(0.003)
    text = report(g, "chat")
    assert "3 of 5 requests succeeded" in text
    assert "mean 1.33 ms   p50 1.00 ms   max 3.00 ms" in text
    assert "without generated output: 2 of 3" in text


def test_no_successful_request_is_said_not_averaged() -> None:
    g = definition_gap([rec(0, ttft_ms=10, error="HTTP 503: busy")])
    assert g.measured == 0 and math.isnan(g.mean_s)
    assert "none succeeded" in report(g, "chat")


def test_plan_sends_one_request_at_a_time_with_distinct_prompts() -> None:
    p = plan("chat", requests=3, prompt_words=4, max_tokens=8)
    assert p.streams == (("gap", 1, False),)
    assert all(r.offset_s is None and r.max_tokens == 8 for r in p.requests)
    prompts = [r.prompt for r in p.requests]
    assert len(set(prompts)) == 3 and all(len(x.split()) == 4 for x in prompts)
