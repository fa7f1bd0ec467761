"""`pytest --help` is a new user's first command: it must print the suite's options, wherever it
runs (the checkout, or another project where the suite is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.settings import OPTIONS, ROOT
from tests.e2e.helpers import run_pytest


@pytest.mark.parametrize("where", ["checkout", "elsewhere"])
def test_pytest_help_prints_every_option(where: str, tmp_path: Path) -> None:
    cwd = ROOT if where == "checkout" else tmp_path
    proc = run_pytest(["--help"], cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" not in proc.stdout + proc.stderr
    for opt in OPTIONS:
        assert opt.flag in proc.stdout, opt.flag
    assert "(default: 10%)" in proc.stdout
