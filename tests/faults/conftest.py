"""Fixtures of the fault tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.injector import FaultInjector


@pytest.fixture
def injector() -> Iterator[FaultInjector]:
    """A fault injector for one test; it must not itself have failed."""
    with FaultInjector() as inj:
        yield inj
    assert inj.errors == [], "the fault injector itself failed"
