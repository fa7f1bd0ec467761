"""Cold-start scenario (slo/scenarios/cold-start.toml): the server started several times, each
start timed to ready and its first requests' TTFT measured; one test per objective."""

from __future__ import annotations

import pytest

from fixtures.scenario_fixtures import SloCheck
from slo.scenario import Objective

pytestmark = [pytest.mark.cold_start, pytest.mark.scenario("cold-start")]


def test_objective(slo_check: SloCheck, objective: Objective) -> None:
    slo_check(objective)
