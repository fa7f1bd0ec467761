"""Scenario and profile files (TOML), validated on load into frozen dataclasses.

A scenario file says what to launch (``[server]``: vLLM engine args under vLLM's own names),
what traffic to send (``[workload]``) and what must hold (``[objectives.<profile>]``).
A profile (``profiles.toml``) says which model and hardware the thresholds were set for.
The schema is documented in README.md ("Scenario files"); every error names the file, the key,
the value and the expected form, and is raised before anything is launched.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from slo.errors import NoObjectivesError, ScenarioFileError, UnitError
from slo.trace import TraceEntry, load_trace
from slo.units import Dimension, dimension_of, format_quantity, parse_quantity

SCENARIO_DIR = Path(__file__).parent / "scenarios"
PROFILES_FILE = Path(__file__).parent / "profiles.toml"

PER_REQUEST_METRICS = ("ttft", "tpot", "itl", "e2e", "schedule_lag")
AGGREGATE_METRICS = ("request_throughput", "output_throughput", "goodput", "error_rate")
METRICS = PER_REQUEST_METRICS + AGGREGATE_METRICS
STATISTICS = ("p50", "p90", "p95", "p99", "mean", "max")
Comparison = Literal["<=", ">="]
# Metrics where less is better: an objective on them is an upper bound ("<="). The others
# (throughputs, goodput) are lower bounds (">="). The other way round an objective is a typo.
LOWER_IS_BETTER = (*PER_REQUEST_METRICS, "error_rate")
# Most requests one workload may plan: the plan holds every request (prompt text included) in
# memory, so a count past this ends in MemoryError, not a run. Longer soaks: several runs.
MAX_REQUESTS = 1_000_000
Arrival = Literal["poisson", "constant", "gamma", "bursts", "ramp", "trace", "closed"]
ARRIVALS: tuple[str, ...] = ("poisson", "constant", "gamma", "bursts", "ramp", "trace", "closed")
# Keys that only some arrival processes take: anything else with them is a mistake in the file.
_ARRIVAL_KEYS = {
    "rate": ("poisson", "constant", "gamma", "ramp"),
    "rate_end": ("ramp",),
    "burstiness": ("gamma",),
    "cv": ("gamma",),
    "burst_size": ("bursts",),
    "burst_interval": ("bursts",),
    "trace": ("trace",),
    "concurrency": ("closed",),
}
Api = Literal["chat", "completions"]
InconclusivePolicy = Literal["fail", "warn"]

_OBJECTIVE_KEY = re.compile(
    r"^\s*(?P<metric>[a-z][a-z0-9_]*)(?:\s+(?P<stat>p\d+|mean|max))?(?:\s+class=(?P<cls>[\w-]+))?\s*$"
)
_OBJECTIVE_VALUE = re.compile(r"^\s*(?P<cmp><=|>=)\s*(?P<q>.+?)\s*$")


def objective_name(metric: str, statistic: str | None, request_class: str | None) -> str:
    """``ttft p99 class=realtime``: an objective without its threshold, as files write it."""
    parts = [metric]
    if statistic:
        parts.append(statistic)
    if request_class:
        parts.append(f"class={request_class}")
    return " ".join(parts)


@dataclass(frozen=True)
class Objective:
    """One thing that must hold, e.g. ``ttft p99 <= 800ms``."""

    metric: str
    statistic: str | None
    """None for aggregate metrics (throughput, goodput, error rate)."""
    comparison: Comparison
    threshold: float
    """In the metric's canonical unit: seconds, tok/s, req/s or a fraction."""
    request_class: str | None = None

    @property
    def dimension(self) -> Dimension:
        return dimension_of(self.metric)

    @property
    def name(self) -> str:
        return objective_name(self.metric, self.statistic, self.request_class)

    @property
    def quantile(self) -> float | None:
        """The statistic as a quantile fraction (p99 -> 0.99), None for mean/max/aggregates."""
        if self.statistic and self.statistic.startswith("p"):
            return int(self.statistic[1:]) / 100
        return None

    def describe(self) -> str:
        return f"{self.name} {self.comparison} {format_quantity(self.threshold, self.dimension)}"

    def tightened(self, factor: float) -> Objective:
        """The same objective made ``factor`` times harder to meet."""
        t = self.threshold / factor if self.comparison == "<=" else self.threshold * factor
        return replace(self, threshold=t)


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


@dataclass(frozen=True)
class Workload:
    api: Api
    classes: tuple[TrafficClass, ...]
    """Sent at the same time; objectives may name one with ``class=NAME``."""
    warmup_requests: int
    seed: int
    timeout_s: float
    """Per-request limit; a request past it is an error, never a hang."""

    @property
    def requests(self) -> int:
        return sum(c.requests for c in self.classes)


@dataclass(frozen=True)
class Validity:
    """``[validity]``: past ``schedule_lag_p99_s`` the client lagged and the run is INVALID;
    past ``error_rate`` the server failed it and every objective FAILs."""

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


# ---------------------------------------------------------------- loading helpers


class _Table:
    """A TOML table being read: tracks the keys used so unknown keys are reported."""

    def __init__(self, path: str, prefix: str, data: Mapping[str, Any]) -> None:
        self.path, self.prefix, self.data = path, prefix, data
        self.used: set[str] = set()

    def key(self, k: str) -> str:
        return f"{self.prefix}.{k}" if self.prefix else k

    def error(self, k: str, value: object, expected: str) -> ScenarioFileError:
        return ScenarioFileError(self.path, self.key(k), value, expected)

    def get(
        self, k: str, typ: type | tuple[type, ...], default: Any = ..., expected: str = ""
    ) -> Any:
        self.used.add(k)
        if k not in self.data:
            if default is ...:
                raise self.error(k, None, f"missing; expected {expected or _type_name(typ)}")
            return default
        v = self.data[k]
        # bool is an int in Python; a TOML true is never a number here.
        if not isinstance(v, typ) or (isinstance(v, bool) and bool not in _as_tuple(typ)):
            raise self.error(k, v, f"expected {expected or _type_name(typ)}")
        return v

    def table(self, k: str, *, required: bool = False) -> _Table:
        v = self.get(k, dict, default=... if required else {}, expected="a table")
        return _Table(self.path, self.key(k), v)

    def quantity(self, k: str, dim: Dimension, default: Any = ...) -> Any:
        v = self.get(k, (str, int, float), default=default, expected="a quantity with a unit")
        if v is default and k not in self.data:
            return default
        if isinstance(v, (int, float)) and dim is not Dimension.RATIO:
            raise self.error(k, v, f'needs a unit, e.g. "{v}{_EXAMPLE_UNIT[dim]}"')
        try:
            return parse_quantity(str(v), dim, what=self.key(k))
        except UnitError as e:
            raise self.error(k, v, str(e)) from None

    def positive_int(
        self, k: str, default: Any = ..., minimum: int = 1, maximum: int | None = None
    ) -> Any:
        v = self.get(k, int, default=default, expected=f"an integer >= {minimum}")
        if isinstance(v, int) and v < minimum:
            raise self.error(k, v, f"expected an integer >= {minimum}")
        return v if maximum is None else self.at_most(k, v, maximum)

    def count(self, k: str, default: Any = ..., minimum: int = 1) -> Any:
        """A number of requests or streams: bounded by MAX_REQUESTS."""
        return self.positive_int(k, default, minimum, MAX_REQUESTS)

    def at_most(self, k: str, v: Any, maximum: int) -> Any:
        if isinstance(v, int) and v > maximum:
            raise self.error(
                k,
                v,
                f"at most {maximum} per workload: every planned request is held in memory. "
                f"Fix: use a smaller count (split a longer soak into several runs)",
            )
        return v

    def choice(self, k: str, choices: tuple[str, ...], default: Any = ...) -> Any:
        v = self.get(k, str, default=default, expected=f"one of {', '.join(choices)}")
        if v not in choices:
            raise self.error(k, v, f"expected one of {', '.join(choices)}")
        return v

    def done(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            k = extra[0]
            known = ", ".join(sorted(self.used))
            raise self.error(k, self.data[k], f"unknown key; known keys here: {known}")


_EXAMPLE_UNIT = {
    Dimension.TIME: "ms",
    Dimension.TOKEN_RATE: " tok/s",
    Dimension.REQUEST_RATE: " req/s",
    Dimension.RATIO: "%",
}


def _as_tuple(typ: type | tuple[type, ...]) -> tuple[type, ...]:
    return typ if isinstance(typ, tuple) else (typ,)


def _type_name(typ: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        dict: "a table",
        list: "a list",
    }
    return " or ".join(names.get(t, t.__name__) for t in _as_tuple(typ))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioFileError(str(path), "", None, "file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioFileError(str(path), "", None, f"not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioFileError(
            str(path), "", None, f"not UTF-8 text ({e}); TOML files are UTF-8: save it as UTF-8"
        ) from None
    except OSError as e:
        raise ScenarioFileError(
            str(path), "", None, f"cannot be read ({e.strerror}): pass a readable .toml file"
        ) from None


# ---------------------------------------------------------------- objectives


def parse_objective(path: str, key: str, metric_key: str, value: object) -> Objective:
    """Parse ``"ttft p99" = "<= 800ms"`` (key and value of an ``[objectives.X]`` table)."""
    full_key = f'{key}."{metric_key}"'  # TOML spelling of a quoted key
    m = _OBJECTIVE_KEY.match(metric_key)
    if not m:
        raise ScenarioFileError(
            path,
            full_key,
            metric_key,
            "expected 'METRIC [STATISTIC] [class=NAME]', e.g. 'ttft p99' or 'ttft p99 class=vip'",
        )
    metric, stat, cls = m["metric"], m["stat"], m["cls"]
    if metric not in METRICS:
        raise ScenarioFileError(
            path, full_key, metric, f"unknown metric; known: {', '.join(METRICS)}"
        )
    if metric in PER_REQUEST_METRICS:
        if stat is None:
            raise ScenarioFileError(
                path,
                full_key,
                metric_key,
                f"{metric} is per request and needs a statistic ({', '.join(STATISTICS)}), "
                f"e.g. '{metric} p99'",
            )
        if stat not in STATISTICS:
            raise ScenarioFileError(
                path, full_key, stat, f"unknown statistic; known: {', '.join(STATISTICS)}"
            )
    elif stat is not None:
        raise ScenarioFileError(
            path,
            full_key,
            metric_key,
            f"{metric} is one number per run and takes no statistic; write '{metric}'",
        )
    if not isinstance(value, str) or not (v := _OBJECTIVE_VALUE.match(value)):
        raise ScenarioFileError(
            path,
            full_key,
            value,
            "expected a string '<= QUANTITY' or '>= QUANTITY', "
            'e.g. "<= 800ms" or ">= 100 tok/s"',
        )
    want = "<=" if metric in LOWER_IS_BETTER else ">="
    if v["cmp"] != want:
        bound = "an upper bound" if want == "<=" else "a lower bound"
        raise ScenarioFileError(
            path,
            full_key,
            value,
            f"{metric} is {'lower' if want == '<=' else 'higher'} when better, so its objective "
            f'is {bound}: write "{want} {v["q"]}"',
        )
    dim = dimension_of(metric)
    try:
        threshold = parse_quantity(v["q"], dim, what=full_key)
    except UnitError as e:
        raise ScenarioFileError(path, full_key, value, str(e)) from None
    return Objective(metric, stat, v["cmp"], threshold, cls)  # type: ignore[arg-type]


# ---------------------------------------------------------------- scenario


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a scenario by bundled name (``realtime``) or by path to a TOML file."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = SCENARIO_DIR / f"{name_or_path}.toml"
        if not path.exists():
            known = ", ".join(bundled_scenarios())
            raise ScenarioFileError(
                str(path),
                "",
                str(name_or_path),
                f"no such scenario; bundled scenarios: {known}; or pass a path to a .toml file",
            )
    p = str(path)
    top = _Table(p, "", _read_toml(path))

    meta = top.table("scenario", required=True)
    name = meta.get("name", str, expected="a scenario name")
    description = meta.get("description", str, default="")
    meta.done()

    server_t = top.table("server")
    server = dict(server_t.data)
    server_t.used.update(server)  # engine args are checked against vLLM's own parser later

    workload = _parse_workload(top.table("workload", required=True))
    instances = _parse_instances(top.table("servers"), workload)
    sweep = _parse_sweep(top.table("sweep"))

    obj_t = top.table("objectives", required=True)
    objectives: dict[str, tuple[Objective, ...]] = {}
    for profile, table in obj_t.data.items():
        obj_t.used.add(profile)
        if not isinstance(table, dict) or not table:
            raise obj_t.error(
                profile, table, 'expected a table of objectives, e.g. "ttft p99" = "<= 800ms"'
            )
        objectives[profile] = tuple(
            parse_objective(p, obj_t.key(profile), k, v) for k, v in table.items()
        )

    class_names = {c.name for c in workload.classes}
    for profile, objs in objectives.items():
        for o in objs:
            if o.request_class is not None and o.request_class not in class_names:
                raise ScenarioFileError(
                    p,
                    f'objectives.{profile}."{o.name}"',
                    o.request_class,
                    "no such request class in [workload]; classes: "
                    + ", ".join(sorted(class_names)),
                )

    good_t = top.table("goodput")
    goodput = {}
    for metric in good_t.data:
        if metric not in ("ttft", "tpot", "e2e"):
            raise good_t.error(
                metric,
                good_t.data[metric],
                "unknown key; a request's bounds can be ttft, tpot or e2e",
            )
        goodput[metric] = good_t.quantity(metric, Dimension.TIME)
    good_t.done()
    for profile, objs in objectives.items():
        if any(o.metric == "goodput" for o in objs) and not goodput:
            raise ScenarioFileError(
                p,
                f"objectives.{profile}.goodput",
                "goodput",
                "a goodput objective needs a [goodput] table of per-request bounds, "
                'e.g. ttft = "500ms" and tpot = "50ms"',
            )

    val_t = top.table("validity")
    validity = Validity(
        schedule_lag_p99_s=val_t.quantity("schedule_lag_p99", Dimension.TIME, default=0.010),
        error_rate=val_t.quantity("error_rate", Dimension.RATIO, default=0.01),
    )
    val_t.done()
    search = _parse_search(top.table("search")) if "search" in top.data else None
    top.done()
    return Scenario(
        name,
        description,
        p,
        server,
        workload,
        objectives,
        validity,
        goodput,
        instances,
        sweep,
        search,
    )


def _parse_instances(t: _Table, workload: Workload) -> dict[str, Mapping[str, Any]]:
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


def _parse_sweep(t: _Table) -> dict[str, tuple[Any, ...]]:
    """``[sweep]``: engine arg -> a non-empty list of values (checked by vLLM's parser later)."""
    sweep: dict[str, tuple[Any, ...]] = {}
    for arg in t.data:
        values = t.get(arg, list, expected="a non-empty list of engine-arg values, e.g. [8, 32]")
        if not values or any(isinstance(v, (dict, list)) for v in values):
            raise t.error(arg, values, "expected a non-empty list of values, e.g. [8, 32, 128]")
        sweep[arg] = tuple(values)
    t.done()
    return sweep


def _parse_search(t: _Table) -> SearchEnvelope:
    rate = t.quantity("max_rate", Dimension.REQUEST_RATE)
    if not rate > 0:
        raise t.error("max_rate", t.data["max_rate"], 'expected a rate > 0, e.g. "8 req/s"')
    limit = t.quantity("ttft_p99", Dimension.TIME, default=None)
    envelope = SearchEnvelope(
        max_prompt_tokens=t.positive_int("max_prompt_tokens", minimum=2),
        max_output_tokens=t.positive_int("max_output_tokens"),
        max_concurrency=t.count("max_concurrency"),
        max_rate=rate,
        requests=t.count("requests", minimum=2),
        ttft_p99_s=limit,
    )
    t.done()
    return envelope


def _parse_workload(t: _Table) -> Workload:
    """``[workload]`` holds one class's keys itself, or one ``[workload.classes.NAME]`` each."""
    if "classes" in t.data:
        classes_t = t.table("classes")
        classes = []
        for name in classes_t.data:
            classes.append(_parse_class(classes_t.table(name, required=True), name))
        if not classes:
            raise t.error("classes", {}, "expected at least one [workload.classes.NAME] table")
        classes_t.done()
    else:
        classes = [_parse_class(t, t.get("class", str, default="default"), done=False)]
    w = Workload(
        api=t.choice("api", ("chat", "completions"), default="chat"),
        classes=tuple(classes),
        warmup_requests=t.count("warmup_requests", default=0, minimum=0),
        seed=t.get("seed", int, default=0),
        timeout_s=t.quantity("timeout", Dimension.TIME, default=120.0),
    )
    if len(classes) > 1:  # each class is bounded; so is their sum
        t.at_most("classes", w.requests + w.warmup_requests, MAX_REQUESTS)
    t.done()
    return w


def _parse_class(t: _Table, name: str, *, done: bool = True) -> TrafficClass:
    arrival = t.choice("arrival", ARRIVALS)
    for k, takes in _ARRIVAL_KEYS.items():
        if k in t.data and arrival not in takes:
            raise t.error(
                k,
                t.data[k],
                f'arrival = "{arrival}" takes no {k}; it belongs to arrival = '
                + " or ".join(f'"{a}"' for a in takes),
            )
    ramp = arrival == "ramp"
    rate = _positive_rate(
        t, "rate", required=arrival in ("poisson", "constant", "gamma", "ramp"), allow_zero=ramp
    )
    rate_end = None
    if ramp:
        rate_end = _positive_rate(t, "rate_end", required=True, allow_zero=True)
        if rate == 0 and rate_end == 0:
            raise t.error("rate_end", "0 req/s", "a ramp from 0 to 0 req/s sends nothing")
    concurrency = t.count("concurrency", default=None)
    if arrival == "closed" and concurrency is None:
        raise t.error("concurrency", None, 'arrival = "closed" needs concurrency = N (streams)')
    burstiness = 1.0
    if arrival == "gamma":
        if "burstiness" in t.data and "cv" in t.data:
            raise t.error("cv", t.data["cv"], "give burstiness or cv, not both")
        for k in ("burstiness", "cv"):
            v = t.get(k, (int, float), default=None, expected="a number > 0")
            if v is not None and not v > 0:
                raise t.error(k, v, "expected a number > 0, e.g. 0.5")
            if v is not None:
                burstiness = float(v) if k == "burstiness" else 1.0 / float(v) ** 2
    burst_size = burst_interval = None
    if arrival == "bursts":
        burst_size = t.count("burst_size")
        burst_interval = t.quantity("burst_interval", Dimension.TIME)
        if not burst_interval > 0:
            raise t.error(
                "burst_interval", t.data["burst_interval"], 'expected a time > 0, e.g. "2s"'
            )
    trace: tuple[TraceEntry, ...] = ()
    if arrival == "trace":
        file = t.get("trace", str, expected='a path to a JSONL file, e.g. "traces/chat.jsonl"')
        trace = load_trace(Path(t.path).parent / file)
        for k in ("prompt_tokens", "output_tokens", "priority"):
            if k in t.data:
                raise t.error(k, t.data[k], "a trace gives each request's lengths; remove it")
        requests = t.count("requests", default=len(trace))
        if requests > len(trace):
            raise t.error("requests", requests, f"the trace has only {len(trace)} requests")
        lengths = PromptLengths(
            min(e.prompt_tokens for e in trace), max(e.prompt_tokens for e in trace)
        )
        output_tokens = max(e.output_tokens for e in trace)
    else:
        pt = t.table("prompt_tokens", required=True)
        lo, hi = pt.positive_int("min"), pt.positive_int("max")
        pt.done()
        if lo > hi:
            raise pt.error("min", lo, f"must be <= max ({hi})")
        lengths = PromptLengths(lo, hi)
        requests = t.count("requests")
        output_tokens = t.positive_int("output_tokens")
    c = TrafficClass(
        name=name,
        arrival=arrival,
        rate=rate,
        concurrency=concurrency,
        requests=requests,
        prompt_tokens=lengths,
        output_tokens=output_tokens,
        priority=t.get("priority", int, default=None),
        background=t.get("background", bool, default=False),
        server=t.get("server", str, default=None),
        rate_end=rate_end,
        burstiness=burstiness,
        burst_size=burst_size,
        burst_interval_s=burst_interval,
        trace=trace,
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


def _positive_rate(t: _Table, k: str, *, required: bool, allow_zero: bool = False) -> float | None:
    arrival = t.data.get("arrival")
    v = t.quantity(k, Dimension.REQUEST_RATE, default=None)
    if v is None and required:
        raise t.error(k, None, f'arrival = "{arrival}" needs {k}, e.g. {k} = "4 req/s"')
    if v is not None and v == 0 and not allow_zero:
        raise t.error(k, t.data[k], 'expected a rate > 0, e.g. "4 req/s"')
    return v  # type: ignore[no-any-return]


def bundled_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


# ---------------------------------------------------------------- profiles


def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    """All profiles in the file, with ``parent =`` inheritance resolved."""
    p = str(path)
    raw = _read_toml(path)
    out: dict[str, Profile] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> Profile:
        if name in out:
            return out[name]
        if name in chain:
            raise ScenarioFileError(
                p, f"{name}.parent", name, f"inheritance loop: {' -> '.join((*chain, name))}"
            )
        data = raw.get(name)
        if not isinstance(data, dict):
            raise ScenarioFileError(p, name, data, "expected a table [NAME] for each profile")
        t = _Table(p, name, data)
        parent_name = t.get("parent", str, default=None)
        if parent_name is not None and parent_name not in raw:
            raise t.error(
                "parent", parent_name, f"no such profile; known: {', '.join(sorted(raw))}"
            )
        base = resolve(parent_name, (*chain, name)) if parent_name else None
        server = dict(base.server) if base else {}
        server.update(t.table("server").data)
        t.used.add("server")
        env = dict(base.env) if base else {}
        env_t = t.table("env")
        for k, v in env_t.data.items():
            env_t.used.add(k)
            if not isinstance(v, str):
                raise env_t.error(k, v, 'expected a string (environment values are text), e.g. "1"')
            env[k] = v
        confidence = t.get("confidence", float, default=base.confidence if base else 0.95)
        if not 0.5 <= confidence < 1:
            raise t.error("confidence", confidence, "expected a level in [0.5, 1), e.g. 0.95")
        cpus = {}
        for k in ("server_cpus", "client_cpus"):
            value = t.get(
                k,
                list,
                default=list(getattr(base, k)) if base else [],
                expected="a list of CPU ids, e.g. [0]",
            )
            if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value):
                raise t.error(k, value, "expected a list of CPU ids (integers >= 0), e.g. [0]")
            cpus[k] = tuple(value)
        obj_t = t.table("objectives")
        objectives = tuple(
            parse_objective(p, obj_t.prefix, k, v) for k, v in obj_t.data.items()
        ) or (base.objectives if base else ())
        obj_t.used.update(obj_t.data)
        prof = Profile(
            name=name,
            description=t.get("description", str, default=base.description if base else ""),
            model=t.get("model", str, default=base.model if base else ...),
            device=t.choice("device", ("cpu", "cuda"), default=base.device if base else "cpu"),
            confidence=confidence,
            inconclusive=t.choice(
                "inconclusive", ("fail", "warn"), default=base.inconclusive if base else "fail"
            ),
            server=server,
            env=env,
            server_cpus=cpus["server_cpus"],
            client_cpus=cpus["client_cpus"],
            objectives=objectives,
            source=p,
        )
        t.done()
        out[name] = prof
        return prof

    for name in raw:
        resolve(name, ())
    return out


def load_profile(name: str, path: Path = PROFILES_FILE) -> Profile:
    profiles = load_profiles(path)
    try:
        return profiles[name]
    except KeyError:
        raise ScenarioFileError(
            str(path),
            "profile",
            name,
            f"no such profile; known: {', '.join(sorted(profiles))} "
            "(choose one with --slo-profile or SLO_PROFILE, or add it to the file)",
        ) from None
