"""Long-run variance and effective sample size: against arch's HAC estimator and known truth."""

from __future__ import annotations

import numpy as np
import pytest
from arch.covariance.kernel import Bartlett

from slo.dependence import (
    andrews_bandwidth,
    grouped_sums,
    lag1_autocorrelation,
    long_run_variance,
    variance_inflation,
)


@pytest.mark.parametrize("bandwidth", [1.0, 3.0, 7.5, 20.0])
def test_bartlett_sum_agrees_with_arch(bandwidth: float) -> None:
    x = np.random.default_rng(1).standard_normal(500).cumsum() % 3
    ours = float(long_run_variance(x, bandwidth=bandwidth))
    theirs = float(Bartlett(x, bandwidth=bandwidth).cov.long_run[0, 0])
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_many_series_at_once_equal_one_at_a_time() -> None:
    x = np.random.default_rng(2).standard_normal((5, 300))
    together = long_run_variance(x)
    assert together == pytest.approx([float(long_run_variance(row)) for row in x])


def test_variance_inflation_of_an_ar1_approaches_its_truth() -> None:
    # AR(1) with rho 0.6: VIF = (1 + rho) / (1 - rho) = 4.
    rng = np.random.default_rng(3)
    rho, n = 0.6, 20_000
    z = np.empty(n)
    z[0] = rng.standard_normal()
    eps = rng.standard_normal(n) * np.sqrt(1 - rho**2)
    for t in range(1, n):
        z[t] = rho * z[t - 1] + eps[t]
    assert float(variance_inflation(z)) == pytest.approx(4.0, rel=0.15)
    assert float(variance_inflation(rng.standard_normal(n))) == pytest.approx(1.0, abs=0.1)
    assert lag1_autocorrelation(z) == pytest.approx(rho, abs=0.03)


def test_constant_series_and_bandwidth_rule() -> None:
    assert np.isnan(variance_inflation(np.ones(50)))
    assert float(andrews_bandwidth(0.0, 600)) == 0.0
    assert float(andrews_bandwidth(0.9, 600)) > float(andrews_bandwidth(0.5, 600)) > 0


def test_grouped_sums_keep_first_appearance_order() -> None:
    assert grouped_sums([1, 2, 3, 4, 5], [7, 7, 3, 9, 3]).tolist() == [3.0, 8.0, 4.0]
