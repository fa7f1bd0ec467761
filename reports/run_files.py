"""The run folder's files: their names, their JSON shapes and the schema version.

Every writer (the plugin, the runner, the merge of parts) and every reader (the reports, replay,
the stored baseline) goes through here, so a field added is added once. The request rows of
``records.jsonl`` are slo/records.py's (``to_row``/``from_row``).

Schema versions: 1, folders written before the version was stamped (no ``schema_version``),
read as they are; 2 stamps ``schema_version`` into environment.json and each summary.json.
A folder from a newer suite is refused with one line that says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.files import write_json
from slo.errors import SuiteError

SCHEMA_VERSION = 2

ENVIRONMENT = "environment.json"
VERDICTS = "verdicts.json"
SERVERS = "servers"
STARTS = f"{SERVERS}/starts.json"
SUMMARY = "summary.json"
RECORDS = "records.jsonl"
SERVER_SERIES = "server_series.jsonl"


def read_json(path: Path) -> Any:
    """``SuiteError`` naming the file, what is wrong with it and the fix."""
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise SuiteError(f"{path}: cannot be read ({e.strerror}): check its permissions") from None
    except ValueError as e:
        raise SuiteError(
            f"{path}: not valid JSON ({e}): the run that wrote it was probably cut short; "
            "render another run, or delete the file to fall back on junit.xml"
        ) from None


def check_schema(raw: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    """``raw`` if this suite reads its schema version (absent: version 1)."""
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise SuiteError(
            f"{path}: run-folder schema version {version!r}, this suite reads 1 to "
            f"{SCHEMA_VERSION}: render it with the suite version that wrote it"
        )
    return raw


def _read_object(path: Path) -> dict[str, Any]:
    """A stamped JSON object; {} when the file is absent."""
    if not path.exists():
        return {}
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise SuiteError(
            f"{path}: expected a JSON object, got {type(raw).__name__}: the suite writes this "
            "file whole, so it was edited by hand; restore it or delete it"
        )
    return dict(check_schema(raw, path))


def _read_list(path: Path) -> list[Any]:
    """A JSON list; [] when the file is absent."""
    if not path.exists():
        return []
    raw = read_json(path)
    if not isinstance(raw, list):
        raise SuiteError(
            f"{path}: expected a list, got {type(raw).__name__}: move the file away to fall "
            "back on junit.xml"
        )
    return raw


# -- environment.json: what the numbers were measured on -------------------------------------


def write_environment(run_dir: Path, environment: Mapping[str, Any]) -> None:
    write_json(run_dir / ENVIRONMENT, {"schema_version": SCHEMA_VERSION, **environment})


def read_environment(run_dir: Path) -> dict[str, Any]:
    return _read_object(run_dir / ENVIRONMENT)


# -- verdicts.json: one row per judged objective, in the order reached -----------------------


def verdict_row(
    scenario: str, test: str, vllm_version: str, model: str, verdict: Mapping[str, Any]
) -> dict[str, Any]:
    """``verdict``: slo/verdict.py's ``Verdict.as_dict()``."""
    return {
        "scenario": scenario,
        "test": test,
        "vllm_version": vllm_version,
        "model": model,
        **verdict,
    }


def write_verdicts(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_json(run_dir / VERDICTS, list(rows))


def read_verdicts(run_dir: Path) -> list[Any]:
    return _read_list(run_dir / VERDICTS)


# -- servers/starts.json: one entry per server start -----------------------------------------


@dataclass(frozen=True)
class ServerStart:
    config: str
    """The config's key (its log is servers/<config>.log)."""
    pid: int
    ready_s: float | None
    started_at: float
    """Epoch seconds, to line the starts up with the run."""
    log: str
    command: tuple[str, ...]


def start_to_row(start: ServerStart) -> dict[str, Any]:
    return {
        "config": start.config,
        "pid": start.pid,
        "ready_s": start.ready_s,
        "started_at": start.started_at,
        "log": start.log,
        "command": list(start.command),
    }


def write_starts(run_dir: Path, starts: Sequence[ServerStart]) -> None:
    write_starts_rows(run_dir, [start_to_row(s) for s in starts])


def write_starts_rows(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows as read back (a merge adds each start's ``part``)."""
    write_json(run_dir / STARTS, list(rows))


def read_starts(run_dir: Path) -> list[dict[str, Any]]:
    return [dict(s) for s in _read_list(run_dir / STARTS) if isinstance(s, Mapping)]


# -- <scenario>/summary.json: one scenario's run ---------------------------------------------


def write_summary(folder: Path, summary: Mapping[str, Any]) -> None:
    write_json(folder / SUMMARY, {"schema_version": SCHEMA_VERSION, **summary})


def read_summary(folder: Path) -> dict[str, Any]:
    """{} when the folder has none."""
    return _read_object(folder / SUMMARY)
