"""Atomic file writes: an interrupted run leaves complete files or none, never a torn one.

Every file of a run folder goes through here. The two that other plugins write (pytest's
junit.xml, pytest-benchmark's benchmark.json) are pointed at a hidden ``.NAME.partial`` path
and renamed into place by ``publish`` once their writer is done.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


def _sync_dir(folder: Path) -> None:
    """Make the rename itself durable (a crash right after it keeps the new name)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _create_hidden(path: Path) -> tuple[int, Path]:
    """A new hidden file beside ``path``. Created with mode 0o666 so the kernel applies the
    process umask, as an ordinary open() would (a report is meant to be shared: CI artifacts, a
    web server); mkstemp's owner-only mode would need the umask, which only os.umask reads, and
    that sets it for every thread."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_hidden(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    _sync_dir(path.parent)


def partial_path(path: Path) -> Path:
    """Where another writer puts ``path`` until ``publish`` renames it into place."""
    return path.with_name(f".{path.name}.partial")


def publish(path: Path) -> bool:
    """Move a finished ``partial_path(path)`` into place; False when there is none."""
    partial = partial_path(path)
    try:
        fd = os.open(partial, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    _sync_dir(path.parent)
    return True


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


ENDING_FILE = "ending.json"
"""How the run ended, written by the plugin when pytest finishes (not after a SIGKILL)."""


@dataclass(frozen=True)
class RunEnding:
    how: str
    """completed, interrupted, stopped early, server died or internal error."""
    reason: str
    exit_status: int

    @property
    def complete(self) -> bool:
        return self.how == "completed"


def write_ending(run_dir: Path, ending: RunEnding) -> None:
    write_json(run_dir / ENDING_FILE, asdict(ending))


def read_ending(run_dir: Path) -> RunEnding | None:
    """The run's ending; None for a run folder without one (older runs, or a killed run)."""
    try:
        raw = json.loads((run_dir / ENDING_FILE).read_text())
        return RunEnding(str(raw["how"]), str(raw["reason"]), int(raw["exit_status"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
