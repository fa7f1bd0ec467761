"""`pytest --help` is a new user's first command: it must print the suite's options, wherever it
runs (the checkout, or another project where the suite is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import OPTIONS, ROOT


@pytest.mark.parametrize("where", ["checkout", "elsewhere"])
def test_pytest_help_prints_every_option(where: str, tmp_path: Path) -> None:
    cwd = ROOT if where == "checkout" else tmp_path
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"],
        cwd=cwd,
        # This checkout's code first, as an installed copy would be found elsewhere.
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" not in proc.stdout + proc.stderr
    for opt in OPTIONS:
        assert opt.flag in proc.stdout, opt.flag
    assert "(default: 10%)" in proc.stdout
