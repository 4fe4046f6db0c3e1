"""Coverage of the crossed-design interval measured on simulated worlds with a known truth.

Each regime of issue 53 (noise-dominated, mixed, image-dominated) is simulated at a small and a
large design (30 cycles on 20 images; 300 cycles on 100 images); the truth (mean credit over fresh
images and noise) is exactly 0.5. A 95 % interval must cover it at 0.95 within three binomial
standard deviations of the coverage estimate over the worlds drawn. The product-weight image
bootstrap the project used before fails the same check in the noise-dominated regime (it covers
about 0.99 there), which the last test shows, so the check can tell a calibrated interval from it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from clip_cycles.algebra.coverage import REGIMES, coverage, crossed_world
from clip_cycles.algebra.crossed import crossed_df, crossed_mean_intervals, crossed_variance, incidence_codes, t_quantile

LEVEL = 0.95
N_WORLDS = 300
#: Three binomial standard deviations of a coverage estimated on N_WORLDS worlds.
TOLERANCE = 3.0 * math.sqrt(LEVEL * (1.0 - LEVEL) / N_WORLDS)
DESIGNS = [(30, 20), (300, 100)]


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize(("n_cycles", "n_images"), DESIGNS)
def test_the_two_way_interval_covers_at_its_level(regime: str, n_cycles: int, n_images: int) -> None:
    found = coverage(regime, n_cycles, n_images, N_WORLDS, LEVEL, seed=7)
    assert abs(found["two_way"] - LEVEL) <= TOLERANCE, found
    assert 0.8 <= found["two_way_se_over_sd"] <= 1.2, found


def test_the_old_product_weight_bootstrap_fails_the_same_check_when_noise_dominates() -> None:
    found = coverage("noise-dominated", 300, 100, N_WORLDS, LEVEL, seed=7, bootstrap_resamples=200)
    assert found["bootstrap"] > LEVEL + TOLERANCE, found  # conservative: what issue 53 measured
    assert abs(found["two_way"] - LEVEL) <= TOLERANCE, found


def _brute_force(values: np.ndarray, images: np.ndarray) -> float:
    """sum over ordered pairs of cycles sharing an image of e_c e_c' / n^2 (residuals from the mean), no correction."""
    n = values.size
    e = (values - values.mean()) / n
    share = np.array([[len(set(images[i]) & set(images[j])) > 0 for j in range(n)] for i in range(n)], dtype=float)
    return float(e @ share @ e)


def test_the_variance_counts_every_dependent_pair_once() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=40)
    images = rng.integers(0, 12, size=(40, 2))
    images[:5] = [[1, 2], [2, 1], [1, 2], [3, 3], [4, 5]]  # repeated pairs (either order) and a one-image cycle
    codes = incidence_codes(images, 40)
    one_hot = np.ones((40, 1))
    share = np.array([[len(set(images[i]) & set(images[j])) > 0 for j in range(40)] for i in range(40)], dtype=float)
    expected_raw = _brute_force(values, images)
    # The small-sample factor: the raw sum's expectation under independent cycles, sigma^2 (1/n - D / n^3).
    dependent = (one_hot.T @ share @ one_hot).item()
    factor = (1 / 40) / (1 / 40 - dependent / 40**3)
    assert expected_raw > 0
    assert crossed_variance(values, codes)[0] == pytest.approx(factor * expected_raw, rel=1e-12)


def test_a_negative_two_way_sum_falls_back_to_the_pair_clustered_variance() -> None:
    # A chain of four cycles, each sharing an image with the next, residuals alternating in sign:
    # the two-way sum is 4 e^2 - 2 * 3 e^2 < 0, so the pair-clustered (here: iid) sum is used.
    values = np.array([1.0, 0.0, 1.0, 0.0])
    images = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])
    assert _brute_force(values, images) < 0
    # Small-sample factor: (1/4) / (1/4 - D / 4^3) with D = 4 + 2 * 3 dependent ordered pairs.
    factor = 0.25 / (0.25 - 10 / 64)
    iid = float((((values - values.mean()) / 4) ** 2).sum())
    assert crossed_variance(values, incidence_codes(images, 4))[0] == pytest.approx(factor * iid, rel=1e-12)


def test_the_degrees_of_freedom_match_the_dense_bell_mccaffrey_formula() -> None:
    rng = np.random.default_rng(5)
    n, n_images = 60, 25
    images = rng.integers(0, n_images, size=(n, 2))
    codes = incidence_codes(images, n)
    groups = rng.integers(0, 3, size=n)
    weights = np.array([0.1, 0.2, 0.05])[groups]
    incidence = np.zeros((n, int(codes.max()) + 1))
    incidence[np.arange(n), codes[:, 0]] = incidence[np.arange(n), codes[:, 1]] = 1.0
    share = (incidence @ incidence.T > 0).astype(float)
    one_hot = np.eye(3)[groups]
    centre = np.eye(n) - one_hot @ np.diag(1 / one_hot.sum(axis=0)) @ one_hot.T
    q = centre @ (weights[:, None] * share * weights[None, :]) @ centre
    dense = np.trace(q) ** 2 / (q * q).sum()
    assert crossed_df(codes, weights, groups) == pytest.approx(min(dense, int(codes.max())), rel=1e-10)


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062047), (5, 2.5705818), (19, 2.0930241), (1000, 1.9623391)])
def test_t_quantiles_match_the_tables(df: float, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-6)


def test_intervals_are_recorded_with_method_unit_and_se() -> None:
    credit, images = crossed_world(np.random.default_rng(0), 200, 60, 0.5, 1.0)
    (ci,) = crossed_mean_intervals(credit, images, LEVEL)
    assert ci["method"] == "two-way image-cluster robust, t (Bell-McCaffrey df)" and ci["unit"] == "images"
    assert ci["n_images"] == len(np.unique(images)) and ci["df"] <= ci["n_images"] - 1
    assert ci["high"] - ci["low"] == pytest.approx(2 * t_quantile(0.975, ci["df"]) * ci["se"])
    assert ci["low"] < credit.mean() < ci["high"]
