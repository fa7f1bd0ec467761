"""vLLM's scheduler over a workload, from /metrics sampled during it, and the stalls it shows."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from reports.run_folder import ScenarioRun


@dataclass(frozen=True)
class ServerSeries:
    """vLLM's scheduler over time, from /metrics sampled during the workload."""

    t_s: tuple[float, ...]
    running: tuple[float, ...]
    waiting: tuple[float, ...]
    kv_cache_usage: tuple[float, ...]
    """Fraction of the KV cache in use (0-1)."""
    preemptions: int
    """Preemptions during the sampled span."""
    ttft_t_s: tuple[float, ...]
    ttft_mean_s: tuple[float, ...]
    """vLLM's mean TTFT of the requests that got their first token in each interval
    (histogram sum and count differences), at the interval's end."""
    interval_s: float
    max_num_seqs: int | None
    """From the engine args the suite started the server with; None in endpoint mode, where
    the scenario's engine args are only declared."""
    stalls: tuple[Stall, ...] = ()


@dataclass(frozen=True)
class Stall:
    """A span in which vLLM made no progress while it had work: no new token and requests
    running or waiting, or /metrics not answering at all."""

    start_s: float
    end_s: float
    why: str


# A gap between two /metrics readings this many times the usual interval: the server did not
# answer in between. No token progress counts as a stall only from this long on.
STALL_GAP_FACTOR = 3.0
STALL_MIN_S = 2.0


def find_stalls(rows: Sequence[dict[str, float]], interval_s: float) -> tuple[Stall, ...]:
    out: list[Stall] = []
    still: float | None = None  # start of a run of readings without token progress
    for a, b in itertools.pairwise(rows):
        busy = a.get("running", 0.0) + a.get("waiting", 0.0) > 0
        if b["t_s"] - a["t_s"] > max(STALL_GAP_FACTOR * interval_s, STALL_MIN_S):
            out.append(Stall(a["t_s"], b["t_s"], "/metrics did not answer"))
        progress = b.get("generation_tokens", 0.0) > a.get("generation_tokens", 0.0)
        if busy and not progress and "generation_tokens" in a:
            still = a["t_s"] if still is None else still
        elif still is not None:
            if a["t_s"] - still >= STALL_MIN_S:
                out.append(Stall(still, a["t_s"], "no token generated with requests in vLLM"))
            still = None
    if still is not None and rows[-1]["t_s"] - still >= STALL_MIN_S:
        out.append(Stall(still, rows[-1]["t_s"], "no token generated with requests in vLLM"))
    return tuple(sorted(out, key=lambda x: x.start_s))


def server_series(scenario: ScenarioRun) -> ServerSeries | None:
    rows = sorted(scenario.server_series, key=lambda r: r["t_s"])
    if len(rows) < 2:
        return None
    ttft_t: list[float] = []
    ttft_mean: list[float] = []
    for a, b in itertools.pairwise(rows):
        dn = b.get("ttft_count", 0.0) - a.get("ttft_count", 0.0)
        if dn > 0:
            ttft_t.append(b["t_s"])
            ttft_mean.append((b.get("ttft_sum", 0.0) - a.get("ttft_sum", 0.0)) / dn)
    gaps = sorted(b["t_s"] - a["t_s"] for a, b in itertools.pairwise(rows))
    started = scenario.server.get("started_by_suite", True) is not False
    max_seqs = scenario.engine_args.get("max_num_seqs") if started else None
    return ServerSeries(
        t_s=tuple(r["t_s"] for r in rows),
        running=tuple(r.get("running", 0.0) for r in rows),
        waiting=tuple(r.get("waiting", 0.0) for r in rows),
        kv_cache_usage=tuple(r.get("kv_cache_usage", 0.0) for r in rows),
        preemptions=int(rows[-1].get("preemptions", 0.0) - rows[0].get("preemptions", 0.0)),
        ttft_t_s=tuple(ttft_t),
        ttft_mean_s=tuple(ttft_mean),
        interval_s=gaps[len(gaps) // 2],
        max_num_seqs=int(max_seqs) if isinstance(max_seqs, int) else None,
        stalls=find_stalls([dict(r) for r in rows], gaps[len(gaps) // 2]),
    )
