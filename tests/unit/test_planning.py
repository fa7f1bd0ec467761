"""How many requests a verdict needs: the INCONCLUSIVE message's figure and --slo-headroom."""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from slo.planning import requests_for_pass_at, requests_needed
from slo.quantile import _ranks, min_samples_to_bound_upper
from tests.unit.builders import obj


def test_a_tail_that_never_reaches_the_threshold_needs_only_a_bounded_interval() -> None:
    assert requests_needed(0.99, 0.95, 0.0, 1.0, below=True) == min_samples_to_bound_upper(
        0.99, 0.95
    )
    # Clustering that halves the information doubles the requests.
    assert requests_needed(0.99, 0.95, 0.0, 2.0, below=True) == 2 * min_samples_to_bound_upper(
        0.99, 0.95
    )


def test_the_plan_passes_with_the_stated_probability() -> None:
    # 0.5% of requests over the threshold of a p99: the planned size PASSes with >= 90%
    # probability (independent requests), a tenth fewer requests would not reliably.
    need = requests_needed(0.99, 0.95, 0.005, 1.0, below=True)
    assert need is not None
    _, up = _ranks(need, 0.99, 0.95)
    assert up is not None
    assert binom.cdf(need - up, need, 0.005) >= 0.9
    assert need > 368
    closer = requests_needed(0.99, 0.95, 0.008, 1.0, below=True)
    assert closer is not None and closer > need


def test_a_fraction_on_the_wrong_side_cannot_be_planned() -> None:
    assert requests_needed(0.99, 0.95, 0.02, 1.0, below=True) is None
    assert requests_needed(0.99, 0.95, 0.005, 1.0, below=False) is None
    fail = requests_needed(0.99, 0.95, 0.03, 1.0, below=False)
    assert fail is not None and fail < 600


def test_headroom_rescales_the_measured_shape() -> None:
    rng = np.random.default_rng(3)
    values = tuple(rng.lognormal(0, 0.39, 600) / 20)
    p99 = obj("ttft p99", "<= 200ms")
    near = requests_for_pass_at(p99, values, 1.0, 0.95, headroom=0.95)
    far = requests_for_pass_at(p99, values, 1.0, 0.95, headroom=0.5)
    assert near is not None and far is not None and near > far >= 368
    assert (
        requests_for_pass_at(obj("output_throughput", ">= 1 tok/s"), values, 1, 0.95, 0.8) is None
    )
