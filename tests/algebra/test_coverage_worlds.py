"""The coverage simulation on a few small worlds, replayed here: the worlds' draws by hand, the two-way interval by the
dense formula, the bootstrap's percentiles by sorting (fast; the calibration itself is test_interval_coverage.py)."""

from __future__ import annotations

import numpy as np
import pytest
from dense_intervals import dense_interval, dense_variance_and_df

from clip_cycles.algebra.bootstrap import bootstrap_image_means
from clip_cycles.algebra.coverage import REGIMES, TRUTH, coverage, crossed_world


def _world_by_hand(rng: np.random.Generator, n_cycles: int, n_images: int, image_sd: float, noise_sd: float):
    effects = rng.normal(0.0, image_sd, size=n_images)
    first = rng.integers(0, n_images, size=n_cycles)
    shift = 1 + rng.integers(0, n_images - 1, size=n_cycles)
    second = (first + shift) % n_images
    noise = rng.normal(0.0, noise_sd, size=n_cycles)
    credit = np.array([1.0 if effects[u] + effects[v] + e > 0 else 0.0 for u, v, e in zip(first, second, noise)])
    return credit, np.column_stack([first, second])


def test_a_world_is_its_documented_draws() -> None:
    for regime, (image_sd, noise_sd) in REGIMES.items():
        credit, images = crossed_world(np.random.default_rng(7), 50, 9, image_sd, noise_sd)
        want_credit, want_images = _world_by_hand(np.random.default_rng(7), 50, 9, image_sd, noise_sd)
        np.testing.assert_array_equal(credit, want_credit, err_msg=regime)
        np.testing.assert_array_equal(images, want_images, err_msg=regime)
        assert (images[:, 0] != images[:, 1]).all() and images.min() >= 0 and images.max() <= 8
        assert credit.dtype == np.float64 and set(credit.tolist()) <= {0.0, 1.0}
    assert REGIMES == {"noise-dominated": (0.1, 1.0), "mixed": (0.5, 1.0), "image-dominated": (1.0, 0.3)}
    assert TRUTH == 0.5


def _quantile(draws: np.ndarray, q: float) -> float:
    ordered = np.sort(draws)
    position = q * (len(ordered) - 1)
    below = int(np.floor(position))
    above = min(below + 1, len(ordered) - 1)
    return float(ordered[below] + (position - below) * (ordered[above] - ordered[below]))


@pytest.mark.parametrize(("regime", "level"), [("image-dominated", 0.5), ("mixed", 0.4)])
def test_coverage_counts_the_worlds_whose_interval_holds_the_truth(regime: str, level: float) -> None:
    n_worlds, n_cycles, n_images = 12, 20, 7
    out = coverage(regime, n_cycles, n_images, n_worlds, level=level, seed=3, bootstrap_resamples=40)
    rng = np.random.default_rng(3)
    hits = boot_hits = 0
    means, ses = [], []
    for world in range(n_worlds):
        credit, images = _world_by_hand(rng, n_cycles, n_images, *REGIMES[regime])
        pairs = [(str(u), str(v)) for u, v in images.tolist()]
        _, low, high = dense_interval(credit, pairs, level)
        hits += low <= 0.5 <= high
        means.append(credit.mean())
        ses.append(np.sqrt(dense_variance_and_df(credit, pairs)[0]))
        drawn = bootstrap_image_means(credit, images, 40, seed=world)[:, 0]
        alpha = (1 - level) / 2
        boot_hits += _quantile(drawn, alpha) <= 0.5 <= _quantile(drawn, 1 - alpha)
    assert out["two_way"] == hits / n_worlds and out["bootstrap"] == boot_hits / n_worlds
    assert 0 < hits < n_worlds and 0 < boot_hits < n_worlds  # a low level: some worlds miss, so the count is tested
    assert out["two_way_se_over_sd"] == pytest.approx(np.mean(ses) / np.std(means, ddof=1), rel=1e-9)
    assert (out["regime"], out["n_cycles"], out["n_images"], out["n_worlds"], out["level"]) == (
        regime, n_cycles, n_images, n_worlds, level)  # fmt: skip
    assert "bootstrap" not in coverage(regime, n_cycles, n_images, 2, level=level, seed=3)


def test_the_defaults_are_a_95_interval_from_seed_0() -> None:
    assert coverage("mixed", 20, 7, 3) == coverage("mixed", 20, 7, 3, level=0.95, seed=0)
    assert coverage("mixed", 20, 7, 3)["level"] == 0.95
    assert coverage("mixed", 20, 7, 3, seed=1)["two_way_se_over_sd"] != coverage("mixed", 20, 7, 3)["two_way_se_over_sd"]
