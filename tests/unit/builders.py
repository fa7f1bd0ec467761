"""Synthetic records and objectives shared by the statistics tests."""

from __future__ import annotations

from slo.records import RequestRecord
from slo.scenario import Objective, parse_objective

MS = 1_000_000


def rec(
    i: int,
    ttft_ms: float,
    e2e_ms: float = 400,
    tokens: int = 33,
    lag_ms: float = 0.0,
    error: str | None = None,
    warmup: bool = False,
    cls: str = "default",
) -> RequestRecord:
    """Request ``i``, due at i * 100 ms, with evenly spaced text chunks."""
    intended = i * 100 * MS
    sent = intended + int(lag_ms * MS)
    first = None if error else sent + int(ttft_ms * MS)
    end = sent + int(e2e_ms * MS)
    chunks = (
        ()
        if first is None
        else tuple(first + k * (end - first) // (tokens - 1) for k in range(tokens))
    )
    return RequestRecord(
        index=i,
        request_class=cls,
        intended_send_ns=intended,
        sent_ns=sent,
        first_text_ns=first,
        end_ns=end,
        chunk_ns=chunks,
        prompt_tokens=100,
        output_tokens=None if error else tokens,
        max_tokens=tokens,
        warmup=warmup,
        error=error,
    )


def obj(key: str, value: str) -> Objective:
    return parse_objective("t.toml", "objectives.t", key, value)
