"""Scenario files (TOML), validated on load into frozen dataclasses.

A scenario file says what to launch (``[server]``: vLLM engine args under vLLM's own names),
what traffic to send (``[workload]``) and what must hold (``[objectives.<profile>]``).
A profile (``profiles.toml``, slo/profiles.py) says which model and hardware the thresholds were
set for. Every error names the file, the key, the value and the expected form, and is raised
before anything is launched.

The parts: slo/vocabulary.py (metric names, statistics, arrival kinds), slo/toml_table.py (the
key-by-key reader), slo/objectives.py, slo/workload_file.py, slo/profiles.py; the dataclasses
are in slo/schema.py. Their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slo.errors import ScenarioFileError
from slo.objectives import Comparison as Comparison
from slo.objectives import Objective as Objective
from slo.objectives import objective_name as objective_name
from slo.objectives import parse_objective as parse_objective
from slo.profiles import PROFILES_FILE as PROFILES_FILE
from slo.profiles import load_profile as load_profile
from slo.profiles import load_profiles as load_profiles
from slo.schema import Api as Api
from slo.schema import ColdStartSpec as ColdStartSpec
from slo.schema import InconclusivePolicy as InconclusivePolicy
from slo.schema import Profile as Profile
from slo.schema import PromptLengths as PromptLengths
from slo.schema import Scenario as Scenario
from slo.schema import SearchEnvelope as SearchEnvelope
from slo.schema import SharedPrefix as SharedPrefix
from slo.schema import TrafficClass as TrafficClass
from slo.schema import Validity as Validity
from slo.schema import Workload as Workload
from slo.toml_table import Table, read_toml
from slo.units import Dimension
from slo.vocabulary import AGGREGATE_METRICS as AGGREGATE_METRICS
from slo.vocabulary import ARRIVALS as ARRIVALS
from slo.vocabulary import COLD_START_METRICS, GOODPUT_METRICS
from slo.vocabulary import LOWER_IS_BETTER as LOWER_IS_BETTER
from slo.vocabulary import METRICS as METRICS
from slo.vocabulary import PER_REQUEST_METRICS as PER_REQUEST_METRICS
from slo.vocabulary import STATISTICS as STATISTICS
from slo.vocabulary import Arrival as Arrival
from slo.workload_file import MAX_REQUESTS as MAX_REQUESTS
from slo.workload_file import (
    parse_cold_start,
    parse_instances,
    parse_search,
    parse_sweep,
    parse_workload,
)

SCENARIO_DIR = Path(__file__).parent / "scenarios"


def bundled_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a scenario by bundled name (``realtime``) or by path to a TOML file (a ``Path``, a
    name ending in ``.toml``, or one with a folder in it: ``gates/chat.slo``)."""
    path = Path(name_or_path)
    bare = isinstance(name_or_path, str) and path.name == name_or_path
    if bare and path.suffix != ".toml":
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
    top = Table(p, "", read_toml(path))

    meta = top.table("scenario", required=True)
    name = meta.get("name", str, expected="a scenario name")
    description = meta.get("description", str, default="")
    meta.done()

    server_t = top.table("server")
    server = dict(server_t.data)
    server_t.used.update(server)  # engine args are checked against vLLM's own parser later

    workload = parse_workload(top.table("workload", required=True))
    instances = parse_instances(top.table("servers"), workload)
    _check_prefix_caching(
        p, workload, {"server": server, **{f"servers.{k}": v for k, v in instances.items()}}
    )
    sweep = parse_sweep(top.table("sweep"))
    objectives = _objectives(top.table("objectives", required=True), workload)
    goodput = _goodput(top.table("goodput"), objectives)

    val_t = top.table("validity")
    validity = Validity(
        schedule_lag_p99_s=val_t.quantity("schedule_lag_p99", Dimension.TIME, default=0.010),
        error_rate=val_t.quantity("error_rate", Dimension.RATIO, default=0.01),
    )
    val_t.done()
    search = parse_search(top.table("search")) if "search" in top.data else None
    cold = parse_cold_start(top.table("cold_start"), workload) if "cold_start" in top.data else None
    _check_cold_start(p, cold, objectives, instances)
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
        cold,
    )


def _check_prefix_caching(
    path: str, workload: Workload, tables: dict[str, Mapping[str, Any]]
) -> None:
    """``enable_prefix_caching`` in an engine-args table must not contradict
    ``[workload] prefix_cache``: "off" turns caching off itself, "warm" needs it on."""
    clash = {"off": True, "warm": False}.get(workload.prefix_cache)
    for table, args in tables.items():
        if clash is not None and args.get("enable_prefix_caching") is clash:
            raise ScenarioFileError(
                path,
                f"{table}.enable_prefix_caching",
                clash,
                f'contradicts [workload] prefix_cache = "{workload.prefix_cache}": delete the '
                "engine arg (the suite sets it from prefix_cache) or change prefix_cache",
            )


def _check_cold_start(
    path: str,
    cold: ColdStartSpec | None,
    objectives: Mapping[str, tuple[Objective, ...]],
    instances: Mapping[str, Any],
) -> None:
    """Cold-start objectives need the ``[cold_start]`` table, and it needs one of them: the
    restarts are costly, so they happen only for an objective that is judged on them."""
    named = [
        (profile, o) for profile, objs in objectives.items() for o in objs
        if o.metric in COLD_START_METRICS
    ]  # fmt: skip
    if cold is None and named:
        profile, o = named[0]
        raise ScenarioFileError(
            path,
            f'objectives.{profile}."{o.name}"',
            o.name,
            "a cold-start objective needs a [cold_start] table: starts = N (server starts, "
            "one value each) and requests = K (the first requests after each start)",
        )
    if cold is not None and not named:
        raise ScenarioFileError(
            path,
            "cold_start",
            {"starts": cold.starts, "requests": cold.requests},
            "no profile has a startup or ttft_cold objective, so the starts would be judged by "
            'nothing: add one (e.g. "startup p50" = "<= 60s") or delete the table',
        )
    if cold is not None and instances:
        raise ScenarioFileError(
            path,
            "cold_start",
            {"starts": cold.starts, "requests": cold.requests},
            "cold starts are measured on one server, and this scenario has [servers.NAME] "
            "instances: measure them in a scenario with one [server]",
        )


def _objectives(t: Table, workload: Workload) -> dict[str, tuple[Objective, ...]]:
    """``[objectives.PROFILE]`` tables; a ``class=NAME`` must name a class of the workload."""
    objectives: dict[str, tuple[Objective, ...]] = {}
    for profile, table in t.data.items():
        t.used.add(profile)
        if not isinstance(table, dict) or not table:
            raise t.error(
                profile, table, 'expected a table of objectives, e.g. "ttft p99" = "<= 800ms"'
            )
        objectives[profile] = tuple(
            parse_objective(t.path, t.key(profile), k, v) for k, v in table.items()
        )
    class_names = {c.name for c in workload.classes}
    for profile, objs in objectives.items():
        for o in objs:
            if o.request_class is not None and o.request_class not in class_names:
                raise ScenarioFileError(
                    t.path,
                    f'objectives.{profile}."{o.name}"',
                    o.request_class,
                    "no such request class in [workload]; classes: "
                    + ", ".join(sorted(class_names)),
                )
    return objectives


def _goodput(t: Table, objectives: dict[str, tuple[Objective, ...]]) -> dict[str, Any]:
    """``[goodput]``: per-request bounds; required where an objective is on goodput."""
    goodput = {}
    for metric in t.data:
        if metric not in GOODPUT_METRICS:
            raise t.error(
                metric,
                t.data[metric],
                "unknown key; a request's bounds can be " + _or_list(GOODPUT_METRICS),
            )
        goodput[metric] = t.quantity(metric, Dimension.TIME)
    t.done()
    for profile, objs in objectives.items():
        if any(o.metric == "goodput" for o in objs) and not goodput:
            raise ScenarioFileError(
                t.path,
                f"objectives.{profile}.goodput",
                "goodput",
                "a goodput objective needs a [goodput] table of per-request bounds, "
                'e.g. ttft = "500ms" and tpot = "50ms"',
            )
    return goodput


def _or_list(names: tuple[str, ...]) -> str:
    """``ttft, tpot or e2e``."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
