"""The suite's one exceptions module.

Every error names the value at fault, the rule it broke and how to fix it.
"""

from __future__ import annotations


class SuiteError(Exception):
    """Base class: a problem the user can fix; shown without a traceback."""


class ScenarioFileError(SuiteError):
    """A scenario / SLO / profile file is malformed or invalid."""

    def __init__(self, path: str, key: str, value: object, expected: str) -> None:
        self.path = path
        self.key = key
        self.value = value
        self.expected = expected
        super().__init__(f"{path}: key {key!r} = {value!r}: {expected}")


class NoObjectivesError(ScenarioFileError):
    """A scenario with no objectives for the selected profile (not calibrated on that hardware).

    Raised when its tests run, not at collection: a ``-m`` selection that leaves the scenario
    out must not fail because of it.
    """


class UnitError(SuiteError):
    """A threshold or quantity with a missing or unknown unit."""


class EngineArgError(SuiteError):
    """An engine arg the installed vLLM does not accept (unknown, removed or bad value)."""


class VllmNotInstalledError(SuiteError):
    """No usable vLLM for the interpreter that is to run the server."""


class VllmVersionError(VllmNotInstalledError):
    """A vLLM release older than the suite supports."""


class ServerStartError(SuiteError):
    """vLLM did not become healthy: exited, or timed out."""


class ServerDiedError(SuiteError):
    """vLLM exited while a workload was running against it."""


class ModelError(SuiteError):
    """A model name or folder that cannot be served."""


class WorkloadError(SuiteError):
    """A workload that cannot be built (e.g. a prompt length the model cannot take)."""


class RecordError(SuiteError, ValueError):
    """A stored request record (a row of records.jsonl) that cannot be read back.

    Also a ValueError, so readers that report bad lines with their line number catch it.
    """


class MetricsError(SuiteError):
    """A server's Prometheus /metrics text that cannot be parsed."""


class RegressionLimitError(SuiteError):
    """A --slo-regression value that is no positive percentage."""


class BaselineError(SuiteError):
    """A --slo-baseline that is neither a run folder nor a pytest-benchmark JSON file."""


class MixOverLimitError(SuiteError):
    """A prompt mix of a worst-case search whose TTFT p99 is over the scenario's [search] limit."""


class GpuAssignmentError(SuiteError):
    """Fewer GPUs than the pytest-xdist workers' servers need, or a GPU list that cannot be read."""


class EndpointError(SuiteError):
    """A deployed endpoint or its metrics URL that cannot be used as given."""


class ReportMergeError(SuiteError):
    """Per-worker run folders that cannot be merged into one (e.g. one scenario in two)."""
