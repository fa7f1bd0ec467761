"""Atomic file writes: an interrupted run leaves complete files or none, never a torn one."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _jsonable(value: Any) -> Any:
    """JSON has no infinity: write it as null (failed requests) rather than emit invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(_jsonable(value), indent=2, sort_keys=False).encode() + b"\n")


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    write_atomic(path, b"".join(json.dumps(_jsonable(r)).encode() + b"\n" for r in rows))
