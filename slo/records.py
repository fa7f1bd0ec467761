"""Per-request samples: the data that flows from the load runner to the statistics."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it. All times are ``time.perf_counter_ns()`` values.

    A failed request is kept (``error`` set), never dropped: it counts in every denominator.
    """

    index: int
    request_class: str
    intended_send_ns: int
    """When the arrival process wanted the request sent."""
    sent_ns: int
    """When the client actually started the request."""
    first_text_ns: int | None
    """First streamed chunk that carries generated text (not the role-only chunk)."""
    end_ns: int | None
    """Last chunk received (stream closed)."""
    chunk_ns: tuple[int, ...] = field(default=(), repr=False)
    """Arrival time of every text-carrying chunk, in order."""
    prompt_tokens: int | None = None
    """From the usage chunk (the server's count)."""
    output_tokens: int | None = None
    """From the usage chunk, not from the number of chunks."""
    expected_prompt_tokens: int | None = None
    max_tokens: int | None = None
    warmup: bool = False
    error: str | None = None
    """Error kind and message, e.g. ``"APIStatusError: 503 ..."``; None when it succeeded."""
    instance: str = ""
    """The vLLM instance that served it (``[servers.NAME]``); empty with one server."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_text_ns is not None and self.end_ns is not None

    @property
    def ttft_s(self) -> float | None:
        if self.first_text_ns is None:
            return None
        return (self.first_text_ns - self.sent_ns) / 1e9

    @property
    def e2e_s(self) -> float | None:
        if self.end_ns is None or not self.ok:
            return None
        return (self.end_ns - self.sent_ns) / 1e9

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1): vLLM bench serve's and MLPerf's definition."""
        if not self.ok or self.output_tokens is None or self.output_tokens < 2:
            return None
        assert self.end_ns is not None and self.first_text_ns is not None
        return (self.end_ns - self.first_text_ns) / 1e9 / (self.output_tokens - 1)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Gaps between consecutive text-carrying chunks."""
        c = self.chunk_ns
        return tuple((b - a) / 1e9 for a, b in itertools.pairwise(c))

    @property
    def schedule_lag_s(self) -> float:
        return (self.sent_ns - self.intended_send_ns) / 1e9


def to_row(r: RequestRecord, t0_ns: int) -> dict[str, Any]:
    """A record as a JSON row: times as integer ns since ``t0_ns`` (the run's start), so a
    stored run can be judged again exactly (``--slo-replay``)."""

    def rel(t: int | None) -> int | None:
        return None if t is None else t - t0_ns

    return {
        "index": r.index,
        "class": r.request_class,
        "warmup": r.warmup,
        "error": r.error,
        "intended_send_ns": rel(r.intended_send_ns),
        "sent_ns": rel(r.sent_ns),
        "first_text_ns": rel(r.first_text_ns),
        "end_ns": rel(r.end_ns),
        "chunk_ns": [t - t0_ns for t in r.chunk_ns],
        "prompt_tokens": r.prompt_tokens,
        "expected_prompt_tokens": r.expected_prompt_tokens,
        "output_tokens": r.output_tokens,
        "max_tokens": r.max_tokens,
        "instance": r.instance,
        # Derived, for people reading the file; ignored when it is read back.
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "e2e_s": r.e2e_s,
    }


def from_row(row: dict[str, Any]) -> RequestRecord:
    return RequestRecord(
        index=row["index"],
        request_class=row["class"],
        intended_send_ns=row["intended_send_ns"],
        sent_ns=row["sent_ns"],
        first_text_ns=row["first_text_ns"],
        end_ns=row["end_ns"],
        chunk_ns=tuple(row["chunk_ns"]),
        prompt_tokens=row["prompt_tokens"],
        output_tokens=row["output_tokens"],
        expected_prompt_tokens=row["expected_prompt_tokens"],
        max_tokens=row["max_tokens"],
        warmup=row["warmup"],
        error=row["error"],
        instance=row.get("instance", ""),  # absent in runs stored before instances existed
    )
