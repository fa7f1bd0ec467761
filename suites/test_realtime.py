"""Realtime chat scenario (slo/scenarios/realtime.toml): one test per objective of the profile."""

from __future__ import annotations

import pytest

from fixtures.scenario_fixtures import SloCheck
from slo.scenario import Objective

pytestmark = [pytest.mark.realtime, pytest.mark.scenario("realtime")]


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)
