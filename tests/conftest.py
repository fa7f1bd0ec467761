"""Harness tests. Fast ones (tests/unit) start no server; tests/e2e start real vLLM (marker e2e)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Derandomized and without deadlines in CI, where the machine is shared and noisy.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

ROOT = Path(__file__).resolve().parent.parent

# In-process runs of the plugin's hooks (tests/unit/test_plugin_hooks.py).
pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(ROOT / "tests" / "e2e"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def sigterm_default() -> Iterator[None]:
    """SIGTERM left at its default for the inner run, and put back as it was after it."""
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
