"""Atomic report files: an interrupted write leaves the old complete file or none."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reports.files import partial_path, publish, write_atomic, write_json

ROOT = Path(__file__).resolve().parents[2]


def test_an_interrupted_write_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "verdicts.json"
    write_json(path, {"version": 1})

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C between writing the bytes and the rename

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_json(path, {"version": 2, "pad": "x" * 100_000})
    assert json.loads(path.read_text()) == {"version": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.json"]
    with pytest.raises(KeyboardInterrupt):
        write_json(tmp_path / "new.json", {"version": 1})
    assert not (tmp_path / "new.json").exists()


_WRITER = """
import sys
from pathlib import Path
from reports.files import write_json
path = Path(sys.argv[1])
i = 1
write_json(path, {"version": i, "rows": [i] * 200_000})
print("ready", flush=True)
while True:
    i += 1
    # Each version is large, so a kill often lands in the middle of writing one.
    write_json(path, {"version": i, "rows": [i] * 200_000})
"""


def test_a_killed_writer_leaves_a_complete_file(tmp_path: Path) -> None:
    """SIGKILL (no cleanup at all) at several moments: the file always parses whole."""
    for n in range(4):
        path = tmp_path / f"run{n}" / "summary.json"
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(0.05 + 0.1 * n)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        data = json.loads(path.read_text())
        assert data["rows"] == [data["version"]] * 200_000
        # Only hidden temporary files may be left beside it, never under the real name.
        assert all(p.name.startswith(".summary.json.") for p in path.parent.iterdir() if p != path)


def test_files_get_the_mode_open_would_give(tmp_path: Path) -> None:
    path = tmp_path / "signoff.html"
    write_atomic(path, b"<html></html>")
    (tmp_path / "plain.html").write_bytes(b"<html></html>")
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain.html").stat().st_mode)
    assert mode & stat.S_IRGRP  # readable beyond the owner under umask 022/002


def test_writing_leaves_the_process_umask_alone(tmp_path: Path) -> None:
    # os.umask sets the mask for every thread of the process, even when only reading it; in a
    # fresh interpreter, so the module's import is seen too.
    code = (
        "import os, sys\n"
        "def no_umask(mask): raise AssertionError('os.umask called')\n"
        "os.umask = no_umask\n"
        "from pathlib import Path\n"
        "from reports.files import write_atomic\n"
        "write_atomic(Path(sys.argv[1]), b'{}')\n"
    )
    path = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert path.read_bytes() == b"{}"


def test_publish_moves_a_finished_partial_file_into_place(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    assert publish(path) is False and not path.exists()
    partial_path(path).write_text("<testsuites/>")
    assert partial_path(path).name == ".junit.xml.partial"
    assert publish(path) is True
    assert path.read_text() == "<testsuites/>" and not partial_path(path).exists()
