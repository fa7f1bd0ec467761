"""A run's verdicts and statistics as Prometheus metrics: an OpenMetrics file, a Pushgateway push.

Read from the run folder (verdicts.json, each scenario's summary.json, environment.json), so a
cut-short run, a replayed one and one read back later export the same way. prometheus_client
writes the exposition; nothing here formats metric text.

Every family carries the run's labels (run_id, suite_commit, profile, vllm_version, model) and
the scenario's; values are in base units (seconds, tokens per second, requests per second,
ratios), the unit in the name's suffix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest as _openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as _parse

from reports.files import write_atomic
from reports.run_files import ENVIRONMENT, SUMMARY, read_environment, read_summary, read_verdicts
from slo.errors import SuiteError, UnitError
from slo.units import Dimension, dimension_of
from slo.vocabulary import PER_REQUEST_METRICS

METRICS_FILE = "metrics.openmetrics.txt"
JOB = "vllm_slo_suite"
OUTCOMES = ("PASS", "FAIL", "INCONCLUSIVE", "INVALID")
UNIT_SUFFIX = {
    Dimension.TIME: "seconds",
    Dimension.TOKEN_RATE: "tokens_per_second",
    Dimension.REQUEST_RATE: "requests_per_second",
    Dimension.RATIO: "ratio",
}
RUN_LABELS = ("run_id", "suite_commit", "profile", "vllm_version", "model")
VERDICT_LABELS = (*RUN_LABELS, "scenario", "objective", "test")
SCENARIO_LABELS = (*RUN_LABELS, "scenario", "variant")
# summary.json's per-request distributions, all in seconds.
PER_REQUEST = PER_REQUEST_METRICS


# Typed here: prometheus_client leaves these unannotated.
generate_openmetrics: Callable[[CollectorRegistry], bytes] = _openmetrics
parse_openmetrics: Callable[[str], Iterable[Metric]] = _parse


class PushError(SuiteError):
    """The Pushgateway did not take the run's metrics (the run folder still has them)."""


@dataclass(frozen=True)
class RunData:
    """What a run folder holds that becomes metrics."""

    run_id: str
    suite_commit: str
    started_at: float | None
    verdicts: tuple[Mapping[str, Any], ...]
    summaries: tuple[Mapping[str, Any], ...]


def read_run(run_dir: Path, run_id: str | None = None) -> RunData:
    env = read_environment(run_dir)
    verdicts = read_verdicts(run_dir)
    summaries = []
    for path in sorted(run_dir.glob(f"*/{SUMMARY}")):
        data = read_summary(path.parent)
        if isinstance(data.get("summary"), dict):
            summaries.append(data)
    started = (run_dir / ENVIRONMENT).stat().st_mtime if env else None
    return RunData(
        run_id=run_id or run_dir.name,
        suite_commit=str(env.get("suite_commit") or "unknown"),
        started_at=started,
        verdicts=tuple(v for v in verdicts if isinstance(v, dict)),
        summaries=tuple(summaries),
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _objective_name(v: Mapping[str, Any]) -> str:
    """``ttft p99`` (``class=NAME`` added), not the description with its threshold."""
    metric, stat, cls = v.get("metric"), v.get("statistic"), v.get("request_class")
    if not isinstance(metric, str):
        return str(v.get("objective", "unknown"))
    name = f"{metric} {stat}" if stat else metric
    return f"{name} class={cls}" if cls else name


def _suffix(metric: Any) -> str | None:
    try:
        return UNIT_SUFFIX[dimension_of(str(metric))]
    except UnitError:
        return None


class _Families:
    """Gauge families created on first use, in a stable order."""

    def __init__(self) -> None:
        self.by_name: dict[str, GaugeMetricFamily] = {}

    def add(self, name: str, doc: str, labels: Mapping[str, str], value: float | None) -> None:
        if value is None or math.isnan(value):
            return  # no figure (e.g. an unbounded interval, no samples): no sample
        family = self.by_name.get(name)
        if family is None:
            family = self.by_name[name] = GaugeMetricFamily(name, doc, labels=list(labels))
        family.add_metric(list(labels.values()), value)


class RunCollector:
    """A snapshot of one run folder as metric families (a prometheus_client custom collector)."""

    def __init__(self, data: RunData) -> None:
        self.data = data

    def _run_labels(self, profile: Any, version: Any, model: Any) -> dict[str, str]:
        d = self.data
        return {
            "run_id": d.run_id,
            "suite_commit": d.suite_commit,
            "profile": str(profile or "unknown"),
            "vllm_version": str(version or "unknown"),
            "model": str(model or "unknown"),
        }

    def collect(self) -> Iterator[Metric]:
        families = _Families()
        info: dict[tuple[str, ...], dict[str, str]] = {}
        for v in self.data.verdicts:
            self._verdict(families, v)
        for s in self.data.summaries:
            server = s.get("server")
            server = server if isinstance(server, dict) else {}
            labels = self._run_labels(
                s.get("profile"), server.get("vllm_version"), server.get("model")
            )
            info[tuple(labels.values())] = labels
            self._scenario(families, s, labels)
        for v in self.data.verdicts:
            labels = self._run_labels(v.get("profile"), v.get("vllm_version"), v.get("model"))
            info.setdefault(tuple(labels.values()), labels)
        run_info = InfoMetricFamily("slo_run", "The run: one sample per profile, vLLM and model")
        for labels in info.values():
            run_info.add_metric([], labels)
        if info:
            yield run_info
        if self.data.started_at is not None:
            for labels in info.values():
                families.add(
                    "slo_run_start_timestamp_seconds",
                    "When the run started (Unix time): the run's annotation on a dashboard",
                    labels,
                    self.data.started_at,
                )
        yield from families.by_name.values()

    def _verdict(self, families: _Families, v: Mapping[str, Any]) -> None:
        labels = {
            **self._run_labels(v.get("profile"), v.get("vllm_version"), v.get("model")),
            "scenario": str(v.get("scenario", "unknown")),
            "objective": _objective_name(v),
            "test": str(v.get("test", "")),
        }
        outcome = v.get("outcome")
        for state in OUTCOMES:
            families.add(
                "slo_verdict",
                "The objective's verdict: 1 for the outcome reached, 0 for the others",
                {**labels, "outcome": state},
                1.0 if outcome == state else 0.0,
            )
        families.add(
            "slo_objective_samples",
            "Samples the verdict was reached on",
            labels,
            _number(v.get("n")),
        )
        families.add(
            "slo_objective_confidence_ratio",
            "Confidence level of the verdict's interval",
            labels,
            _number(v.get("confidence")),
        )
        suffix = _suffix(v.get("metric"))
        if suffix is None:
            return
        for key, what in (
            ("estimate", "The objective's statistic as measured"),
            ("ci_lower", "Lower bound of the statistic's confidence interval"),
            ("ci_upper", "Upper bound of the statistic's confidence interval"),
            ("threshold", "The objective's threshold as judged (after --slo-tighten)"),
        ):
            families.add(f"slo_objective_{key}_{suffix}", what, labels, _number(v.get(key)))

    def _scenario(
        self, families: _Families, s: Mapping[str, Any], run_labels: Mapping[str, str]
    ) -> None:
        labels = {
            **run_labels,
            "scenario": str(s.get("scenario", "unknown")),
            "variant": str(s.get("variant") or ""),
        }
        summary: Mapping[str, Any] = s["summary"]
        families.add(
            "slo_run_requests",
            "Measured requests of the workload",
            labels,
            _number(summary.get("requests")),
        )
        families.add(
            "slo_run_failed_requests",
            "Measured requests that failed",
            labels,
            _number(summary.get("errors")),
        )
        families.add(
            "slo_run_error_ratio",
            "Failed share of the measured requests",
            labels,
            _number(summary.get("error_rate")),
        )
        families.add(
            "slo_run_output_throughput_tokens_per_second",
            "Generated tokens per second",
            labels,
            _number(summary.get("output_throughput")),
        )
        families.add(
            "slo_run_request_throughput_requests_per_second",
            "Completed requests per second",
            labels,
            _number(summary.get("request_throughput")),
        )
        families.add(
            "slo_run_workload_seconds",
            "Wall time of the workload",
            labels,
            _number(s.get("workload_s")),
        )
        invalid = s.get("invalid_reasons")
        families.add(
            "slo_run_valid",
            "1 if the run can vouch for its numbers, 0 if INVALID",
            labels,
            None if invalid is None else float(not invalid),
        )
        for metric in PER_REQUEST:
            stats = summary.get(metric)
            if not isinstance(stats, dict):
                continue
            for stat, value in stats.items():
                if stat in ("n", "failed"):
                    continue
                families.add(
                    f"slo_run_{metric}_seconds",
                    f"Client-side {metric} of the measured requests, by statistic",
                    {**labels, "statistic": stat},
                    _number(value),
                )
        server = s.get("server_metrics")
        for name, hist in server.items() if isinstance(server, dict) else ():
            if not (isinstance(hist, dict) and name.startswith("vllm:")):
                continue
            base = "slo_run_vllm_" + name.removeprefix("vllm:")
            hl = {**labels, "histogram": name}
            families.add(
                "slo_run_vllm_observations",
                "Observations of a vLLM histogram over the measured requests",
                hl,
                _number(hist.get("count")),
            )
            if base.endswith("_seconds"):
                for stat in ("mean", "p50", "p99"):
                    value = hist.get(stat)
                    if isinstance(value, list):
                        value = value[0] if value else None  # (estimate, bucket low, high)
                    families.add(
                        base,
                        f"vLLM's {name} over the measured requests, by statistic",
                        {**labels, "statistic": stat},
                        _number(value),
                    )


def _registry(data: RunData) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(data))
    return registry


def registry_for(run_dir: Path, run_id: str | None = None) -> CollectorRegistry:
    """The run folder's metrics, e.g. to serve or inspect them."""
    return _registry(read_run(run_dir, run_id))


def check_pushgateway_url(url: str) -> str:
    """The URL as push_to_gateway takes it; SuiteError naming the value and the fix."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as e:
        raise SuiteError(
            f"--slo-pushgateway {url!r}: not a URL ({e}); e.g. http://pushgateway:9091"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SuiteError(
            f"--slo-pushgateway {url!r}: expected the Pushgateway's http:// or https:// root "
            "URL, e.g. http://pushgateway:9091"
        )
    if parts.path.rstrip("/") or parts.query:
        raise SuiteError(
            f"--slo-pushgateway {url!r}: give the root URL without a path (the suite adds "
            f"/metrics/job/{JOB}/...), e.g. {parts.scheme}://{parts.netloc}"
        )
    return url.rstrip("/")


def grouping_key(data: RunData) -> dict[str, str]:
    """One Pushgateway group per profile: a run replaces its profile's previous run, and
    Prometheus' scrapes of the gateway keep the history."""
    profiles = sorted({str(v.get("profile")) for v in data.verdicts if v.get("profile")})
    profiles += sorted(
        {str(s.get("profile")) for s in data.summaries if s.get("profile")} - set(profiles)
    )
    return {"profile": profiles[0] if profiles else "unknown"}


def export(run_dir: Path, pushgateway: str | None = None, run_id: str | None = None) -> Path:
    """Write the run's OpenMetrics file; push it too when a Pushgateway is given.

    Raises PushError when the push fails, after the file is written.
    """
    data = read_run(run_dir, run_id)
    registry = _registry(data)
    path = run_dir / METRICS_FILE
    write_atomic(path, generate_openmetrics(registry))
    if pushgateway:
        try:
            push_to_gateway(
                pushgateway,
                job=JOB,
                registry=registry,
                grouping_key=grouping_key(data),
                timeout=10,
            )
        except OSError as e:  # urllib's URLError and HTTPError are OSErrors
            raise PushError(
                f"--slo-pushgateway {pushgateway}: the push failed ({e}); check the URL and "
                f"that the gateway is up; the run's figures are kept in {path}"
            ) from None
    return path


def metric_names(families: Iterable[Metric]) -> set[str]:
    """Every sample name the families expose (``_bucket``, ``_info`` ... included)."""
    return {sample.name for family in families for sample in family.samples}
