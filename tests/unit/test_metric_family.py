"""The metric vocabulary, the TTFT family and the per-request stall (``max_itl``).

Stream-level timing of each first chunk is tested against the fault injector
(tests/faults/test_ttft_family.py); here: one definition drives every list, old records read
back, each metric reaches the statistics, and a stall objective gets a real interval.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from pathlib import Path

import pytest

from reports.run_folder import load_run
from reports.ttft_decomposition import client_ttft, decomposition
from slo.errors import ScenarioFileError
from slo.records import RequestRecord, from_row, to_row
from slo.stats import RunSummary, samples_only, summarize
from slo.verdict import Outcome, evaluate
from slo.vocabulary import (
    AGGREGATE_METRICS,
    METRIC_DEFS,
    METRICS,
    PER_REQUEST_METRICS,
    POOLED_METRICS,
)
from tests.unit.builders import MS, obj, rec

NEW = Path(__file__).parent / "data" / "run-new"


def test_every_per_request_metric_is_summarised_and_measured_per_record() -> None:
    fields = {f.name for f in dataclasses.fields(RunSummary)}
    assert set(PER_REQUEST_METRICS) <= fields
    for m in PER_REQUEST_METRICS:
        if m not in POOLED_METRICS:
            assert isinstance(getattr(RequestRecord, f"{m}_s"), property), m
    for m in AGGREGATE_METRICS:
        assert hasattr(RunSummary, m), m
    assert len(set(METRICS)) == len(METRIC_DEFS)


@pytest.mark.parametrize("metric", [m for m in PER_REQUEST_METRICS if m not in POOLED_METRICS])
def test_each_per_request_metric_takes_an_objective(metric: str) -> None:
    o = obj(f"{metric} p99", "<= 250ms")
    assert o.metric == metric and o.threshold == pytest.approx(0.25)
    with pytest.raises(ScenarioFileError, match="upper bound"):
        obj(f"{metric} p99", ">= 250ms")


def family(
    i: int, *, chunk: float, text: float, content: float | None, tool: float | None
) -> RequestRecord:
    """Request ``i`` whose first chunk, first output, first content and first tool call came
    these many ms after its send."""
    r = rec(i, ttft_ms=text)

    def at(ms: float | None) -> int | None:
        return None if ms is None else r.sent_ns + int(ms * MS)

    return replace(
        r, first_chunk_ns=at(chunk), first_content_ns=at(content), first_tool_ns=at(tool)
    )


def test_the_family_reaches_the_summary_and_leaves_out_requests_without_the_chunk() -> None:
    records = [
        family(0, chunk=1, text=5, content=9, tool=None),
        family(1, chunk=2, text=6, content=None, tool=6),
        rec(2, ttft_ms=5, error="HTTP 503: busy"),
    ]
    s = summarize(records)
    assert s.ttft_chunk == pytest.approx((0.001, 0.002, math.inf))
    assert s.ttft == pytest.approx((0.005, 0.006, math.inf))
    assert s.ttft_content == pytest.approx((0.009, math.inf))  # request 1 had no content
    assert s.ttft_tool == pytest.approx((0.006, math.inf))  # request 0 called no tool


def test_records_round_trip_with_the_family_and_old_rows_read_as_unknown() -> None:
    r = family(3, chunk=1, text=5, content=9, tool=7)
    row = to_row(r, t0_ns=0)
    assert from_row(row) == r
    for key in ("first_chunk_ns", "first_content_ns", "first_tool_ns"):
        del row[key]
    old = from_row(row)
    assert old.first_chunk_ns is old.first_content_ns is old.first_tool_ns is None
    assert old.ttft_s == r.ttft_s


def test_stored_run_folders_without_the_family_still_read() -> None:
    records = load_run(NEW).scenarios[0].records
    assert records and all(r.first_chunk_ns is None for r in records)
    assert summarize(records).ttft_chunk == ()


def test_client_ttft_against_vllm_is_the_first_chunk_where_recorded() -> None:
    records = [family(i, chunk=1, text=4, content=4, tool=None) for i in range(3)]
    values, notes = client_ttft(records)
    assert values == pytest.approx([0.001] * 3) and notes == []
    older = [replace(r, first_chunk_ns=None) for r in records]
    values, notes = client_ttft(older)
    assert values == pytest.approx([0.004] * 3)
    assert notes and "first chunk with text" in notes[0]
    d = decomposition(load_run(NEW).scenarios[0])  # a stored run: the fallback, said so
    assert d is not None and any("did not record the first chunk" in n for n in d.notes)


def stalled(i: int, gaps_ms: list[float]) -> RequestRecord:
    r = rec(i, ttft_ms=10)
    assert r.first_text_ns is not None
    chunks = [r.first_text_ns]
    for g in gaps_ms:
        chunks.append(chunks[-1] + int(g * MS))
    return replace(r, chunk_ns=tuple(chunks), end_ns=chunks[-1])


def test_max_itl_is_each_request_s_longest_gap() -> None:
    records = [
        stalled(0, [5, 80, 5]),
        stalled(1, [5, 5]),
        replace(rec(2, 10), chunk_ns=rec(2, 10).chunk_ns[:1]),
    ]
    assert records[0].max_itl_s == pytest.approx(0.080)
    assert records[2].max_itl_s is None  # one chunk: no gap
    assert summarize(records).max_itl == pytest.approx((0.080, 0.005))


def test_a_stall_objective_is_judged_on_an_interval() -> None:
    # 600 streams whose worst gap is 20-60 ms, and every 20th one stalls for 400 ms.
    records = [stalled(i, [5, 400 if i % 20 == 0 else 20 + (i * 7) % 41, 5]) for i in range(600)]
    s = summarize(records)
    tight = evaluate(obj("max_itl p90", "<= 100ms"), s, confidence=0.95, profile="t")
    assert tight.outcome is Outcome.PASS
    assert tight.lower < tight.estimate < tight.upper <= 0.100
    stalls = evaluate(obj("max_itl p99", "<= 100ms"), s, confidence=0.95, profile="t")
    assert stalls.outcome is Outcome.FAIL and stalls.lower > 0.100
    assert samples_only("max_itl", s.max_itl).max_itl == s.max_itl
