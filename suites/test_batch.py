"""Batch scenario (slo/scenarios/batch.toml): one test per objective of the profile."""

from __future__ import annotations

import pytest

from fixtures.scenario_fixtures import SloCheck
from slo.scenario import Objective

pytestmark = [pytest.mark.batch, pytest.mark.scenario("batch")]


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)
