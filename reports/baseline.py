"""A stored baseline to compare a run against: a run folder or a pytest-benchmark JSON file.

A run folder gives every objective's estimate as that run judged it (verdicts.json or
junit.xml), else recomputes it from its records. pytest-benchmark's JSON (``benchmark.json``
of a run folder, or a file from ``--benchmark-autosave`` storage) gives the per-request samples
of ttft, tpot, itl and e2e per scenario, and the run's throughputs in ``extra_info``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.run_folder import RunFolder, load_run
from slo.errors import BaselineError, SuiteError
from slo.regression import Machine, machine_of, point_estimate
from slo.scenario import Objective, objective_name
from slo.stats import samples_only, summarize
from slo.verdict import evaluate
from slo.vocabulary import PER_REQUEST_METRICS

PER_REQUEST = PER_REQUEST_METRICS


@dataclass(frozen=True)
class Baseline:
    path: Path
    kind: str
    """``run folder`` or ``pytest-benchmark JSON``."""
    machine: Machine
    estimates: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(scenario label, objective name) -> estimate, where the run judged that objective."""
    samples: Mapping[tuple[str, str, str | None], tuple[float, ...]] = field(default_factory=dict)
    """(scenario label, metric, request class or None) -> per-request samples (failed: +inf)."""
    aggregates: Mapping[tuple[str, str, str | None], float] = field(default_factory=dict)
    """(scenario label, metric, request class or None) -> one number per run (throughput)."""
    intervals: Mapping[tuple[str, str], tuple[float, float, float, float]] = field(
        default_factory=dict
    )
    """(scenario label, objective name) -> (lower, estimate, upper, confidence) as judged."""

    def value(
        self, scenario: str, metric: str, statistic: str | None, request_class: str | None
    ) -> float | None:
        """The baseline's value of this statistic, or None if it did not record it."""
        name = objective_name(metric, statistic, request_class)
        if (scenario, name) in self.estimates:
            return self.estimates[(scenario, name)]
        if statistic is None:
            return self.aggregates.get((scenario, metric, request_class))
        values = self.samples.get((scenario, metric, request_class))
        return point_estimate(values, statistic) if values else None

    def interval(
        self, scenario: str, objective: Objective, confidence: float, profile: str
    ) -> tuple[float, float, float, float] | None:
        """(lower, estimate, upper, confidence) of the objective's statistic in the baseline:
        its stored verdict's interval, else one judged again from its stored samples."""
        stored = self.intervals.get((scenario, objective.name))
        if stored is not None and all(math.isfinite(v) for v in stored):
            return stored
        if objective.statistic is None:
            return None
        values = self.samples.get((scenario, objective.metric, objective.request_class))
        if not values:
            return None
        summary = samples_only(objective.metric, tuple(values), objective.request_class)
        v = evaluate(objective, summary, confidence=confidence, profile=profile)
        return v.lower, v.estimate, v.upper, v.confidence


def load_baseline(path: Path) -> Baseline:
    """``BaselineError`` naming the path, what it is not, and what to pass instead."""
    if path.is_dir():
        try:
            return _from_run(load_run(path))
        except BaselineError:
            raise
        except SuiteError as e:
            raise BaselineError(f"--slo-baseline {path}: {e}") from None
    if path.is_file():
        return _from_benchmark_json(path)
    raise BaselineError(
        f"--slo-baseline {path} does not exist: pass an earlier run folder (slo-runs/...) "
        "or a pytest-benchmark JSON file (its benchmark.json, or one from .benchmarks/)"
    )


def _from_run(run: RunFolder) -> Baseline:
    estimates = {
        (v.scenario, v.name): v.estimate for v in run.verdicts if not math.isnan(v.estimate)
    }
    intervals = {
        (v.scenario, v.name): (v.ci_lower, v.estimate, v.ci_upper, v.confidence)
        for v in run.verdicts
        if v.ci_lower != v.ci_upper
    }
    samples: dict[tuple[str, str, str | None], tuple[float, ...]] = {}
    aggregates: dict[tuple[str, str, str | None], float] = {}
    for sc in run.scenarios:
        for cls in (None, *sc.classes):
            s = summarize(sc.records, request_class=cls)
            if s.n == 0:
                continue
            for metric in PER_REQUEST:
                samples[(sc.label, metric, cls)] = s.samples(metric)
            for metric in ("request_throughput", "output_throughput", "error_rate"):
                aggregates[(sc.label, metric, cls)] = s.aggregate(metric)
    return Baseline(
        path=run.path,
        kind="run folder",
        machine=machine_of(run.environment, run.vllm_version),
        estimates=estimates,
        samples=samples,
        aggregates=aggregates,
        intervals=intervals,
    )


def _from_benchmark_json(path: Path) -> Baseline:
    try:
        data: Any = json.loads(path.read_text())
        entries = data["benchmarks"]
        assert isinstance(entries, list)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        raise BaselineError(
            f"--slo-baseline {path}: not a pytest-benchmark JSON file ({type(e).__name__}: {e}); "
            "pass a run folder or the benchmark.json a suite run wrote"
        ) from None
    samples: dict[tuple[str, str, str | None], tuple[float, ...]] = {}
    aggregates: dict[tuple[str, str, str | None], float] = {}
    estimates: dict[tuple[str, str], float] = {}
    version = None
    for b in entries:
        extra = b.get("extra_info") or {}
        metric = extra.get("metric") or b.get("param")
        scenario = b.get("group")
        if not metric or not scenario:
            continue  # some other benchmark in the same file
        version = version or extra.get("vllm_version")
        stats = b.get("stats") or {}
        if stats.get("data"):
            failed = int(extra.get("failed_requests") or 0)
            samples[(scenario, metric, None)] = (
                *(float(v) for v in stats["data"]),
                *([math.inf] * failed),
            )
        else:
            # Saved without its samples (autosave without --benchmark-save-data): only what
            # pytest-benchmark summarised is there, and only with no failed request mixed in.
            if not extra.get("failed_requests"):
                for statistic, key in (("p50", "median"), ("mean", "mean"), ("max", "max")):
                    if key in stats:
                        estimates[(scenario, f"{metric} {statistic}")] = float(stats[key])
        for agg in ("request_throughput", "output_throughput"):
            if isinstance(extra.get(agg), (int, float)):
                aggregates[(scenario, agg, None)] = float(extra[agg])
    cpu = (data.get("machine_info") or {}).get("cpu") or {}
    machine = Machine(
        cpu=str(cpu.get("brand_raw") or "not recorded"),
        gpus=None,
        vllm_version=str(version or "not recorded"),
    )
    return Baseline(path, "pytest-benchmark JSON", machine, estimates, samples, aggregates)
