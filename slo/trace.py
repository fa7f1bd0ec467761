"""Request traces to replay: JSONL, one request a line, validated on load.

Each line is an object ``{"timestamp": 0.25, "prompt_tokens": 300, "output_tokens": 64}``:
``timestamp`` is the send time in seconds (any origin; the first request is sent at offset 0),
``prompt_tokens`` and ``output_tokens`` are exact lengths. Optional ``priority`` (an integer) is
sent as vLLM's priority field. Errors name the file, the line, the key and the expected form.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from slo.errors import ScenarioFileError

TRACE_KEYS = ("timestamp", "prompt_tokens", "output_tokens", "priority")


@dataclass(frozen=True)
class TraceEntry:
    offset_s: float
    """Send time from the trace's first request."""
    prompt_tokens: int
    output_tokens: int
    priority: int | None = None


def _int(where: str, key: str, value: object, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise ScenarioFileError(where, key, value, f"expected an integer >= {minimum}")
    return value


def parse_trace(path: str | Path, text: str) -> tuple[TraceEntry, ...]:  # noqa: C901  (one branch per rule, each its own message)
    """Entries in file order, offsets from the smallest timestamp; raises ScenarioFileError."""
    raw: list[tuple[float, int, int, int | None]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ScenarioFileError(where, "", line[:80], f"not a JSON object ({e})") from None
        if not isinstance(row, dict):
            raise ScenarioFileError(
                where,
                "",
                row,
                'expected a JSON object, e.g. {"timestamp": 0.5, "prompt_tokens": 128, '
                '"output_tokens": 32}',
            )
        for k in row:
            if k not in TRACE_KEYS:
                raise ScenarioFileError(
                    where, k, row[k], f"unknown key; known keys: {', '.join(TRACE_KEYS)}"
                )
        for k in TRACE_KEYS[:3]:
            if k not in row:
                raise ScenarioFileError(where, k, None, "missing; every line needs it")
        ts = row["timestamp"]
        if (
            isinstance(ts, bool)
            or not isinstance(ts, int | float)
            or not 0 <= ts < float("inf")  # JSON readers take Infinity and NaN too
        ):
            raise ScenarioFileError(
                where, "timestamp", ts, "expected a number of seconds >= 0, e.g. 12.5"
            )
        priority = row.get("priority")
        if priority is not None and type(priority) is not int:
            raise ScenarioFileError(where, "priority", priority, "expected an integer")
        raw.append(
            (
                float(ts),
                _int(where, "prompt_tokens", row["prompt_tokens"], 1),
                _int(where, "output_tokens", row["output_tokens"], 1),
                priority,
            )
        )
    if not raw:
        raise ScenarioFileError(str(path), "", None, "the trace has no requests (one per line)")
    t0 = min(r[0] for r in raw)
    return tuple(TraceEntry(t - t0, p, o, pr) for t, p, o, pr in raw)


def load_trace(path: str | Path) -> tuple[TraceEntry, ...]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioFileError(
            str(path), "trace", str(path), f"cannot read the trace file ({e.strerror})"
        ) from None
    except UnicodeDecodeError as e:
        raise ScenarioFileError(
            str(path), "trace", str(path), f"not UTF-8 text at byte {e.start}: save it as UTF-8"
        ) from None
    return parse_trace(path, text)
