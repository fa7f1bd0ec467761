"""What a scenario or profile file says, as frozen dataclasses (parsed by slo/scenario.py,
slo/workload_file.py and slo/profiles.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from slo.errors import NoObjectivesError
from slo.objectives import Objective
from slo.prefix_cache import DEFAULT_PREFIX_CACHE, PrefixCacheMode
from slo.trace import TraceEntry
from slo.vocabulary import Arrival

Api = Literal["chat", "completions"]
InconclusivePolicy = Literal["fail", "warn"]


@dataclass(frozen=True)
class PromptLengths:
    """Prompt lengths in tokens, uniform in [min, max]."""

    min: int
    max: int


@dataclass(frozen=True)
class TrafficClass:
    """One kind of traffic in a workload, e.g. realtime chat or batch summarisation."""

    name: str
    arrival: Arrival
    rate: float | None
    """Requests per second for open-loop arrivals."""
    concurrency: int | None
    """Streams in flight for closed-loop arrivals."""
    requests: int
    prompt_tokens: PromptLengths
    output_tokens: int
    priority: int | None = None
    """vLLM's ``priority`` request field (lower is sooner); None sends none."""
    background: bool = False
    """Closed-loop load that keeps its streams busy while the open-loop classes run and stops
    when they are done; ``requests`` is then an upper bound."""
    server: str | None = None
    """The ``[servers.NAME]`` instance this class is routed to (multi-instance scenarios)."""
    rate_end: float | None = None
    """Ramp: the rate rises (or falls) linearly from ``rate`` to this over the class's requests."""
    burstiness: float = 1.0
    """Gamma: the shape of the gaps' gamma distribution; 1 is Poisson, lower is burstier
    (coefficient of variation 1/sqrt(burstiness))."""
    burst_size: int | None = None
    """Bursts: this many requests sent together every ``burst_interval_s``."""
    burst_interval_s: float | None = None
    trace: tuple[TraceEntry, ...] = ()
    """Trace: send times and exact lengths of each request, from a JSONL file."""
    request_extra: tuple[tuple[str, str], ...] = ()
    """``request_extra``: (field, JSON value) pairs added to each request body as given, e.g.
    ``tools`` and ``tool_choice``, or vLLM's ``structured_outputs``; sorted and hashable."""


@dataclass(frozen=True)
class SharedPrefix:
    """``[workload.shared_prefix]``: the i-th request planned (the warm-up first, then each
    class's requests in file order) starts with prefix ``i % count`` of ``tokens`` tokens, part
    of its prompt length; the rest of the prompt is unique."""

    tokens: int
    count: int = 1


@dataclass(frozen=True)
class Workload:
    api: Api
    classes: tuple[TrafficClass, ...]
    """Sent at the same time; objectives may name one with ``class=NAME``."""
    warmup_requests: int
    seed: int
    timeout_s: float
    """Per-request limit; a request past it is an error, never a hang."""
    prefix_cache: PrefixCacheMode = DEFAULT_PREFIX_CACHE
    """The state of vLLM's prefix cache the workload measures (slo/prefix_cache.py)."""
    shared_prefix: SharedPrefix | None = None
    """None: every prompt is unique text."""

    @property
    def requests(self) -> int:
        return sum(c.requests for c in self.classes)


@dataclass(frozen=True)
class ColdStartSpec:
    """``[cold_start]``: the server is started ``starts`` times before the workload; each start
    gives one ``startup`` value and one ``ttft_cold`` value (slo/cold_start.py)."""

    starts: int
    requests: int = 1
    """The first requests after each start, sent one at a time before any warm-up: the
    workload's first measured prompts."""


@dataclass(frozen=True)
class Validity:
    """``[validity]``: when more than 1% of the requests were sent later than
    ``schedule_lag_p99_s`` beyond chance (slo/verdict.py: LAG_LEVEL) the client lagged and the run
    is INVALID; past ``error_rate`` the server failed it and every objective FAILs."""

    schedule_lag_p99_s: float = 0.010
    error_rate: float = 0.01


@dataclass(frozen=True)
class SearchEnvelope:
    """``[search]``: the bounds a worst-case search (``pytest -m explore``) stays within."""

    max_prompt_tokens: int
    """Per request, all turns of a conversation together."""
    max_output_tokens: int
    max_concurrency: int
    """Closed-loop streams, and the largest burst of an open-loop mix."""
    max_rate: float
    """Mean offered rate of an open-loop mix (req/s)."""
    requests: int
    """Per example: short workloads, so the search ends in minutes."""
    ttft_p99_s: float | None = None
    """An example whose TTFT p99 is over this is a failing mix (saved, replayable)."""


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    model: str
    device: str
    """"cpu" or "cuda"."""
    confidence: float
    inconclusive: InconclusivePolicy
    server: Mapping[str, Any] = field(default_factory=dict)
    """Engine args this hardware needs (dtype, KV cache size...); the scenario's win on a clash."""
    env: Mapping[str, str] = field(default_factory=dict)
    server_cpus: tuple[int, ...] = ()
    """CPU ids the vLLM server is pinned to (empty: not pinned)."""
    client_cpus: tuple[int, ...] = ()
    """CPU ids the load generator is pinned to while a workload runs (empty: not pinned)."""
    objectives: tuple[Objective, ...] = ()
    """Preset objectives (e.g. MLPerf's) for scenarios with no table for this profile."""
    source: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    path: str
    server: Mapping[str, Any]
    workload: Workload
    objectives: Mapping[str, tuple[Objective, ...]]
    """Per profile name."""
    validity: Validity
    goodput: Mapping[str, float] = field(default_factory=dict)
    """Per-request bounds (ttft, tpot, e2e; seconds) a request must meet to count for goodput."""
    instances: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """``[servers.NAME]``: one vLLM instance each, its engine args overlaid on ``[server]``;
    each traffic class names its instance with ``server = "NAME"``. Empty: one server."""
    sweep: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """``[sweep]``: engine arg -> values; the sweep runs the workload once per combination."""
    search: SearchEnvelope | None = None
    """The worst-case search's envelope; None: the scenario has no ``[search]`` table."""
    cold_start: ColdStartSpec | None = None
    """None: no ``[cold_start]`` table, so no server restarts and no cold-start objectives."""

    def objectives_for(self, profile: str) -> tuple[Objective, ...]:
        try:
            return self.objectives[profile]
        except KeyError:
            known = ", ".join(sorted(self.objectives)) or "none"
            raise NoObjectivesError(
                self.path,
                "objectives",
                profile,
                f"no [objectives.{profile}] table (profiles with objectives here: {known}); "
                f"add one with thresholds measured on that hardware, or choose another profile "
                f"with --slo-profile",
            ) from None
