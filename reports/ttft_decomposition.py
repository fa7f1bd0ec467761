"""Client TTFT set against vLLM's own histograms: how much of it was queue, prefill and the rest.

Plain data for the sign-off report; the client side reuses slo.stats' percentile so the figures
agree with the verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reports.run_folder import ScenarioRun, ServerHistogram
from slo.records import RequestRecord
from slo.stats import safe_percentile

TTFT_HIST = "vllm:time_to_first_token_seconds"
QUEUE_HIST = "vllm:request_queue_time_seconds"
PREFILL_HIST = "vllm:request_prefill_time_seconds"


@dataclass(frozen=True)
class Component:
    name: str
    seconds: float
    source: str


@dataclass(frozen=True)
class TtftComparison:
    """Client TTFT against vLLM's own ``time_to_first_token`` for the same requests."""

    statistic: str
    client: float
    server: float | None
    server_bucket: tuple[float, float] | None
    """The histogram bucket the server quantile lies in (its resolution)."""

    @property
    def difference(self) -> tuple[float, float] | None:
        """client - vLLM as the bounds the bucket allows (equal for a mean); None: no figure
        (not recorded, or the bucket is so wide that the difference could be 0)."""
        if self.server is None:
            return None
        if self.server_bucket is None:
            return self.client - self.server, self.client - self.server
        low, high = self.client - self.server_bucket[1], self.client - self.server_bucket[0]
        return None if low <= 0 <= high or not math.isfinite(low) else (low, high)


@dataclass(frozen=True)
class Decomposition:
    client_mean: float
    client_n: int
    server_count: int
    components: tuple[Component, ...]
    """Stacked, they add up to the client's mean TTFT (the last is the remainder)."""
    comparisons: tuple[TtftComparison, ...]
    notes: tuple[str, ...]


def _mean(h: ServerHistogram | None) -> float | None:
    return None if h is None else h.mean


def client_ttft(records: Sequence[RequestRecord]) -> tuple[list[float], list[str]]:
    """The client's TTFT like-for-like with vLLM's histogram (sorted), and a note where it is
    not: vLLM times its first output token, whether or not it decodes to text, and sends a
    chunk for it (the chat role chunk comes with it), so the first chunk is the peer of its
    figure (``ttft_chunk``, docs/metrics.md). Runs stored before the first chunk was kept
    fall back to ``ttft`` (first generated text), which can run later."""
    measured = [r for r in records if not r.warmup and r.ok]
    chunk = [r.ttft_chunk_s for r in measured]
    if measured and all(v is not None for v in chunk):
        return sorted(v for v in chunk if v is not None), []
    text = sorted(r.ttft_s for r in measured if r.ttft_s is not None)
    note = (
        "client TTFT is to the first chunk with text (this run did not record the first "
        "chunk): it can run above vLLM's, which stops at the first token even if it is no text"
    )
    return text, [note] if text else []


def decomposition(scenario: ScenarioRun) -> Decomposition | None:
    """Mean client TTFT split into vLLM's queue and prefill time and the rest, from the
    histograms vLLM kept over the measured requests. None when the run has no histograms."""
    m = scenario.server_metrics
    ttft_h, queue_h, prefill_h = m.get(TTFT_HIST), m.get(QUEUE_HIST), m.get(PREFILL_HIST)
    if ttft_h is None and (queue_h is None or prefill_h is None):
        return None
    client, notes = client_ttft(scenario.records)
    if not client:
        return None
    client_mean = sum(client) / len(client)
    comps: list[Component] = []
    queue, prefill, server_ttft = _mean(queue_h), _mean(prefill_h), _mean(ttft_h)
    accounted = 0.0
    if queue is not None and prefill is not None:
        comps += [
            Component("queue (vLLM)", queue, QUEUE_HIST),
            Component("prefill (vLLM)", prefill, PREFILL_HIST),
        ]
        accounted = queue + prefill
        if server_ttft is not None:
            comps.append(
                Component(
                    "rest of server TTFT (tokenize, scheduling, output)",
                    server_ttft - accounted,
                    f"{TTFT_HIST} - queue - prefill",
                )
            )
            accounted = server_ttft
    elif server_ttft is not None:
        comps.append(Component("server TTFT (vLLM)", server_ttft, TTFT_HIST))
        accounted = server_ttft
        notes.append("queue and prefill histograms not recorded: server TTFT shown whole")
    # vLLM's histograms start when the engine sees a request: time before that (a stalled API
    # server, the network, the client) is not measured by anyone, so it is not named as if it were.
    rest = client_mean - accounted
    comps.append(
        Component(
            "not attributed (outside vLLM's engine: API server, network, client)",
            rest,
            "client TTFT mean - the above",
        )
    )
    if client_mean > 0 and rest / client_mean > 0.5:
        notes.append(
            f"{rest / client_mean:.0%} of the mean TTFT is not attributed: it passed before "
            "vLLM's engine saw the requests or after it sent the tokens. A stall of the API "
            "server shows here (see the stalls under vLLM's queue over time), not as client time"
        )
    if any(c.seconds < 0 for c in comps):
        notes.append(
            "a part came out negative: the server's and the client's clocks measure slightly "
            "different spans, so parts within their noise are shown as 0 in the bar"
        )
    server_count = int(ttft_h.count) if ttft_h is not None else 0
    if ttft_h is not None and server_count != len(client):
        notes.append(
            f"vLLM counted {server_count} requests, the client {len(client)} successful "
            "measured ones: the histograms may include other traffic"
        )
    comparisons = [TtftComparison("mean", client_mean, server_ttft, None)]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        client_q = safe_percentile(client, q * 100)
        sq = ttft_h.quantile(q) if ttft_h is not None else None
        comparisons.append(
            TtftComparison(
                name,
                client_q,
                None if sq is None else sq[0],
                None if sq is None else (sq[1], sq[2]),
            )
        )
    return Decomposition(
        client_mean=client_mean,
        client_n=len(client),
        server_count=server_count,
        components=tuple(comps),
        comparisons=tuple(comparisons),
        notes=tuple(notes),
    )
