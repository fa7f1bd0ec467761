"""A scenario file's ``[workload]``, ``[servers.NAME]``, ``[sweep]``, ``[search]`` and
``[cold_start]`` tables."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slo.errors import ScenarioFileError
from slo.prefix_cache import DEFAULT_PREFIX_CACHE, PREFIX_CACHE_MODES
from slo.schema import (
    ColdStartSpec,
    PromptLengths,
    SearchEnvelope,
    SharedPrefix,
    TrafficClass,
    Workload,
)
from slo.toml_table import Table
from slo.trace import TraceEntry, load_trace
from slo.units import Dimension
from slo.vocabulary import ARRIVAL_KEYS, ARRIVALS, OPEN_LOOP_RATED

# Most requests one workload may plan: the plan holds every request (prompt text included) in
# memory, so a count past this ends in MemoryError, not a run. Longer soaks: several runs.
MAX_REQUESTS = 1_000_000
MAX_STARTS = 100
_WHY_MAX_STARTS = (
    ": each start takes the server's whole start-up (minutes on a GPU). Fix: fewer starts; a "
    "median needs a few, a p90 about 36 and a p99 about 370 (see docs/statistics.md)"
)
# Request fields the suite builds itself; request_extra adds fields, never replaces these.
SUITE_FIELDS = (
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "stream",
    "stream_options",
    "ignore_eos",
    "min_tokens",
    "priority",
)
_WHY_MAX = (
    " per workload: every planned request is held in memory. "
    "Fix: use a smaller count (split a longer soak into several runs)"
)


def _count(t: Table, k: str, default: Any = ..., minimum: int = 1) -> Any:
    """A number of requests or streams: bounded by MAX_REQUESTS."""
    return t.positive_int(k, default, minimum, MAX_REQUESTS, _WHY_MAX)


def parse_workload(t: Table) -> Workload:
    """``[workload]`` holds one class's keys itself, or one ``[workload.classes.NAME]`` each."""
    if "classes" in t.data:
        classes_t = t.table("classes")
        classes = []
        for name in classes_t.data:
            classes.append(parse_class(classes_t.table(name, required=True), name))
        if not classes:
            raise t.error("classes", {}, "expected at least one [workload.classes.NAME] table")
        classes_t.done()
    else:
        classes = [parse_class(t, t.get("class", str, default="default"), done=False)]
    w = Workload(
        api=t.choice("api", ("chat", "completions"), default="chat"),
        classes=tuple(classes),
        warmup_requests=_count(t, "warmup_requests", default=0, minimum=0),
        seed=t.get("seed", int, default=0),
        timeout_s=t.quantity("timeout", Dimension.TIME, default=120.0),
        prefix_cache=t.choice("prefix_cache", PREFIX_CACHE_MODES, default=DEFAULT_PREFIX_CACHE),
        shared_prefix=_shared_prefix(t, classes) if "shared_prefix" in t.data else None,
    )
    if w.prefix_cache == "warm" and not (w.warmup_requests and w.shared_prefix):
        raise t.error(
            "prefix_cache",
            "warm",
            "a warm cache needs warm-up requests that share prefixes with the measured ones: "
            "set warmup_requests = N and a [workload.shared_prefix] table (tokens, count), "
            'or declare prefix_cache = "cold"',
        )
    if len(classes) > 1:  # each class is bounded; so is their sum
        t.at_most("classes", w.requests + w.warmup_requests, MAX_REQUESTS, _WHY_MAX)
    t.done()
    return w


def _shared_prefix(t: Table, classes: list[TrafficClass]) -> SharedPrefix:
    """``[workload.shared_prefix]``: shorter than every prompt, so each has a unique tail."""
    pt = t.table("shared_prefix")
    shared = SharedPrefix(
        tokens=pt.positive_int("tokens"),
        count=pt.positive_int("count", default=1, maximum=MAX_REQUESTS, why_maximum=_WHY_MAX),
    )
    pt.done()
    for c in classes:
        if shared.tokens >= c.prompt_tokens.min:
            raise pt.error(
                "tokens",
                shared.tokens,
                f"a shared prefix must be shorter than every prompt, and class {c.name!r} has "
                f"prompts of {c.prompt_tokens.min} tokens: lower tokens or raise the class's "
                "prompt_tokens.min",
            )
    return shared


@dataclass(frozen=True)
class _Lengths:
    """What a class sends: from its own keys, or each request's from a trace."""

    requests: int
    prompt_tokens: PromptLengths
    output_tokens: int
    trace: tuple[TraceEntry, ...] = ()


def parse_class(t: Table, name: str, *, done: bool = True) -> TrafficClass:
    arrival = t.choice("arrival", ARRIVALS)
    _check_arrival_keys(t, arrival)
    rate, rate_end = _rates(t, arrival)
    concurrency = _count(t, "concurrency", default=None)
    if arrival == "closed" and concurrency is None:
        raise t.error("concurrency", None, 'arrival = "closed" needs concurrency = N (streams)')
    burstiness = _burstiness(t) if arrival == "gamma" else 1.0
    burst_size, burst_interval = _bursts(t) if arrival == "bursts" else (None, None)
    lengths = _trace_lengths(t) if arrival == "trace" else _own_lengths(t)
    c = TrafficClass(
        name=name,
        arrival=arrival,
        rate=rate,
        concurrency=concurrency,
        requests=lengths.requests,
        prompt_tokens=lengths.prompt_tokens,
        output_tokens=lengths.output_tokens,
        priority=t.get("priority", int, default=None),
        background=t.get("background", bool, default=False),
        server=t.get("server", str, default=None),
        rate_end=rate_end,
        burstiness=burstiness,
        burst_size=burst_size,
        burst_interval_s=burst_interval,
        trace=lengths.trace,
        request_extra=_request_extra(t),
    )
    if c.background and c.arrival != "closed":
        raise t.error(
            "background",
            True,
            'only a closed-loop class (arrival = "closed") can be background load',
        )
    if done:
        t.done()
    return c


def _request_extra(t: Table) -> tuple[tuple[str, str], ...]:
    """``request_extra = { tools = [...], tool_choice = {...} }``: fields added to each body."""
    extra = t.get("request_extra", dict, default={}, expected="a table of request fields")
    for k in extra:
        if k in SUITE_FIELDS:
            raise t.error(
                "request_extra",
                k,
                f"the suite builds {k!r} itself ({', '.join(SUITE_FIELDS)}); "
                "remove it from request_extra (lengths and priority have their own keys)",
            )
    try:
        return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in extra.items()))
    except TypeError as e:  # a TOML date or time has no JSON form
        raise t.error("request_extra", extra, f"JSON values only ({e}); quote dates") from None


def _check_arrival_keys(t: Table, arrival: str) -> None:
    for k, takes in ARRIVAL_KEYS.items():
        if k in t.data and arrival not in takes:
            raise t.error(
                k,
                t.data[k],
                f'arrival = "{arrival}" takes no {k}; it belongs to arrival = '
                + " or ".join(f'"{a}"' for a in takes),
            )


def _rates(t: Table, arrival: str) -> tuple[float | None, float | None]:
    """``rate`` (and a ramp's ``rate_end``): a ramp may start or end at 0, not both."""
    ramp = arrival == "ramp"
    rate = _positive_rate(t, "rate", required=arrival in OPEN_LOOP_RATED, allow_zero=ramp)
    if not ramp:
        return rate, None
    rate_end = _positive_rate(t, "rate_end", required=True, allow_zero=True)
    if rate == 0 and rate_end == 0:
        raise t.error("rate_end", "0 req/s", "a ramp from 0 to 0 req/s sends nothing")
    return rate, rate_end


def _burstiness(t: Table) -> float:
    """Gamma: the gaps' shape, given directly or as their coefficient of variation."""
    if "burstiness" in t.data and "cv" in t.data:
        raise t.error("cv", t.data["cv"], "give burstiness or cv, not both")
    burstiness = 1.0
    for k in ("burstiness", "cv"):
        v = t.get(k, (int, float), default=None, expected="a number > 0")
        if v is not None and not v > 0:
            raise t.error(k, v, "expected a number > 0, e.g. 0.5")
        if v is not None:
            burstiness = float(v) if k == "burstiness" else 1.0 / float(v) ** 2
    return burstiness


def _bursts(t: Table) -> tuple[int, float]:
    size = _count(t, "burst_size")
    interval = t.quantity("burst_interval", Dimension.TIME)
    if not interval > 0:
        raise t.error("burst_interval", t.data["burst_interval"], 'expected a time > 0, e.g. "2s"')
    return size, interval


def _trace_lengths(t: Table) -> _Lengths:
    file = t.get("trace", str, expected='a path to a JSONL file, e.g. "traces/chat.jsonl"')
    trace = load_trace(Path(t.path).parent / file)
    for k in ("prompt_tokens", "output_tokens", "priority"):
        if k in t.data:
            raise t.error(k, t.data[k], "a trace gives each request's lengths; remove it")
    requests = _count(t, "requests", default=len(trace))
    if requests > len(trace):
        raise t.error("requests", requests, f"the trace has only {len(trace)} requests")
    prompts = PromptLengths(
        min(e.prompt_tokens for e in trace), max(e.prompt_tokens for e in trace)
    )
    return _Lengths(requests, prompts, max(e.output_tokens for e in trace), trace)


def _own_lengths(t: Table) -> _Lengths:
    pt = t.table("prompt_tokens", required=True)
    lo, hi = pt.positive_int("min"), pt.positive_int("max")
    pt.done()
    if lo > hi:
        raise pt.error("min", lo, f"must be <= max ({hi})")
    return _Lengths(_count(t, "requests"), PromptLengths(lo, hi), t.positive_int("output_tokens"))


def _positive_rate(t: Table, k: str, *, required: bool, allow_zero: bool = False) -> float | None:
    arrival = t.data.get("arrival")
    v = t.quantity(k, Dimension.REQUEST_RATE, default=None)
    if v is None and required:
        raise t.error(k, None, f'arrival = "{arrival}" needs {k}, e.g. {k} = "4 req/s"')
    if v is not None and v == 0 and not allow_zero:
        raise t.error(k, t.data[k], 'expected a rate > 0, e.g. "4 req/s"')
    return v  # type: ignore[no-any-return]


def parse_instances(t: Table, workload: Workload) -> dict[str, Mapping[str, Any]]:
    """``[servers.NAME]`` tables of engine args; every class must name one, and each be used."""
    instances: dict[str, Mapping[str, Any]] = {}
    for name in t.data:
        args = t.table(name)  # engine args are checked against vLLM's own parser later
        args.used.update(args.data)
        instances[name] = dict(args.data)
    t.done()
    used = {c.server for c in workload.classes}
    if not instances:
        named = sorted(c.name for c in workload.classes if c.server is not None)
        if named:
            raise ScenarioFileError(
                t.path,
                f"workload.classes.{named[0]}.server",
                next(c.server for c in workload.classes if c.name == named[0]),
                "names a server, but the file has no [servers.NAME] tables; add one per "
                "instance, or delete the class's server key to use the one [server]",
            )
        return instances
    for c in workload.classes:
        if c.server not in instances:
            one = len(workload.classes) == 1
            key = "workload.server" if one else f"workload.classes.{c.name}.server"
            raise ScenarioFileError(
                t.path,
                key,
                c.server,
                "with [servers.NAME] tables every traffic class is routed to one of them: "
                f"set server = one of {', '.join(sorted(instances))}",
            )
    for name in instances:
        if name not in used:
            raise ScenarioFileError(
                t.path,
                f"servers.{name}",
                name,
                "no traffic class is routed to this instance (server = "
                f'"{name}"); route one to it or delete the table',
            )
    return instances


def parse_sweep(t: Table) -> dict[str, tuple[Any, ...]]:
    """``[sweep]``: engine arg -> a non-empty list of values (checked by vLLM's parser later)."""
    sweep: dict[str, tuple[Any, ...]] = {}
    for arg in t.data:
        values = t.get(arg, list, expected="a non-empty list of engine-arg values, e.g. [8, 32]")
        if not values or any(isinstance(v, (dict, list)) for v in values):
            raise t.error(arg, values, "expected a non-empty list of values, e.g. [8, 32, 128]")
        sweep[arg] = tuple(values)
    t.done()
    return sweep


def parse_search(t: Table) -> SearchEnvelope:
    rate = t.quantity("max_rate", Dimension.REQUEST_RATE)
    if not rate > 0:
        raise t.error("max_rate", t.data["max_rate"], 'expected a rate > 0, e.g. "8 req/s"')
    limit = t.quantity("ttft_p99", Dimension.TIME, default=None)
    envelope = SearchEnvelope(
        max_prompt_tokens=t.positive_int("max_prompt_tokens", minimum=2),
        max_output_tokens=t.positive_int("max_output_tokens"),
        max_concurrency=_count(t, "max_concurrency"),
        max_rate=rate,
        requests=_count(t, "requests", minimum=2),
        ttft_p99_s=limit,
    )
    t.done()
    return envelope


def parse_cold_start(t: Table, workload: Workload) -> ColdStartSpec:
    """``[cold_start]``: how many starts, and how many of the workload's first measured prompts
    follow each one."""
    spec = ColdStartSpec(
        starts=t.positive_int("starts", maximum=MAX_STARTS, why_maximum=_WHY_MAX_STARTS),
        requests=t.positive_int("requests", default=1),
    )
    if spec.requests > workload.requests:
        raise t.error(
            "requests",
            spec.requests,
            f"at most the workload's {workload.requests} measured requests: the cold requests "
            "are its first prompts; lower requests or raise the workload's",
        )
    t.done()
    return spec
