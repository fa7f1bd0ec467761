"""Run folders the report tests read.

``data/run-sample`` is a trimmed real run written before verdicts.json existed (verdicts come
from junit.xml); ``data/run-new`` one with verdicts.json and vLLM's histograms. ``synthetic_run``
writes a two-class run with the cases those two lack.
"""

from __future__ import annotations

from pathlib import Path

from reports.files import write_json, write_jsonl
from slo.records import RequestRecord, to_row

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "run-sample"
NEW = DATA / "run-new"
SAMPLE_OBJECTIVES = {
    "ttft p50 <= 60 ms": "PASS",
    "ttft p99 <= 200 ms": "PASS",
    "tpot p99 <= 20 ms": "PASS",
    "output_throughput >= 100 tok/s": "PASS",
}
MS = 1_000_000
SECRET = "PROMPT-TEXT-MUST-NOT-LEAK"


def rec(
    i: int,
    sent_ms: float,
    ttft_ms: float | None,
    e2e_ms: float,
    cls: str = "default",
    warmup: bool = False,
    error: str | None = None,
) -> RequestRecord:
    sent = int(sent_ms * MS)
    first = None if ttft_ms is None else sent + int(ttft_ms * MS)
    end = None if error else sent + int(e2e_ms * MS)
    chunks = () if first is None or end is None else (first, (first + end) // 2, end)
    return RequestRecord(
        index=i,
        request_class=cls,
        intended_send_ns=sent,
        sent_ns=sent,
        first_text_ns=first,
        end_ns=end,
        chunk_ns=chunks,
        prompt_tokens=64,
        output_tokens=None if error else 3,
        max_tokens=3,
        warmup=warmup,
        error=error,
    )


def synthetic_run(root: Path) -> Path:
    """A two-class run with a failed request, an INVALID verdict and a test that errored
    before judging; text fields carry markup and a prompt-like string."""
    recs = [rec(0, 0, 30, 60, cls="batch", warmup=True)]
    recs += [rec(i, i * 50, 10 + i % 7, 80, cls="realtime") for i in range(1, 40)]
    recs += [rec(i, i * 50, 40 + i % 5, 400, cls="batch") for i in range(40, 70)]
    recs += [
        rec(i, 3600 + i, None, 0, cls="batch", error=f"APIStatusError: 400 {SECRET}")
        for i in (70, 71, 72)
    ]
    rows = [{**to_row(r, 0), "prompt": SECRET} for r in recs]  # a stray field is never read
    write_jsonl(root / "mixed" / "records.jsonl", rows)
    write_json(
        root / "mixed" / "summary.json",
        {
            "engine_args": {"max_num_seqs": 16},
            "server": {"vllm_version": "9.9.9"},
            "invalid_reasons": ["error rate = 1.43% > 1.00%"],
            "workload_s": 4.0,
        },
    )
    base = {
        "scenario": "mixed",
        "vllm_version": "9.9.9",
        "model": "m<b>",
        "comparison": "<=",
        "confidence": 0.95,
        "profile": "p",
        "n": 39,
    }
    write_json(
        root / "verdicts.json",
        [
            {
                **base,
                "test": "suites/test_mixed.py::test_objective[ttft p50 class=realtime]",
                "objective": "ttft p50 class=realtime <= 1 ms",
                "metric": "ttft",
                "statistic": "p50",
                "request_class": "realtime",
                "threshold": 0.001,
                "outcome": "INVALID",
                "estimate": 0.013,
                "ci_lower": 0.012,
                "ci_upper": 0.015,
                "message": "run INVALID: <script>alert(1)</script>",
            },
        ],
    )
    (root / "junit.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
        'timestamp="2026-01-02T03:04:05+00:00" hostname="h">'
        '<testcase classname="suites.test_mixed" '
        'name="test_objective[ttft p50 class=realtime]" time="5.0"/>'
        '<testcase classname="suites.test_mixed" name="test_objective[ttft p90 class=realtime]"'
        ' time="0.1"><error message="ServerStartError: vLLM exited">tb</error></testcase>'
        "</testsuite></testsuites>"
    )
    return root
