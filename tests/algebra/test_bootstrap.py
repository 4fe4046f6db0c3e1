"""Bootstrap intervals over cycles: the recorded draws replayed by a plain loop, and coverage on Bernoulli data."""

from __future__ import annotations

import numpy as np
import pytest

from clip_cycles.algebra.bootstrap import bootstrap_ci


def _plain_percentile(sorted_values: list[float], q: float) -> float:
    """numpy's default (linear) quantile, by hand."""
    position = q * (len(sorted_values) - 1)
    below = int(position // 1)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (position - below) * (sorted_values[above] - sorted_values[below])


def test_intervals_replay_a_plain_resample_loop_with_the_same_generator() -> None:
    rng = np.random.default_rng(11)
    seeds = [rng.choice([0.0, 0.5, 1.0], size=n).tolist() for n in (37, 52, 41)]  # three seeds of credits
    n_resamples, level, seed = 300, 0.9, 7
    generator = np.random.default_rng(seed)
    # The recorded order: each seed's resamples in turn, one draw of n cycles per resample.
    means = [[0.0] * n_resamples for _ in seeds]
    for g, credits in enumerate(seeds):
        for r in range(n_resamples):
            draw = generator.integers(0, len(credits), size=len(credits))
            means[g][r] = sum(credits[int(i)] for i in draw) / len(credits)
    pooled = sorted(sum(m[r] for m in means) / len(means) for r in range(n_resamples))
    (ci,) = bootstrap_ci(seeds, n_resamples=n_resamples, level=level, seed=seed)
    assert ci["low"] == pytest.approx(_plain_percentile(pooled, 0.05), abs=1e-12)
    assert ci["high"] == pytest.approx(_plain_percentile(pooled, 0.95), abs=1e-12)
    assert {k: ci[k] for k in ("level", "n_resamples", "seed", "method", "unit")} == {
        "level": 0.9,
        "n_resamples": 300,
        "seed": 7,
        "method": "percentile",
        "unit": "cycle",
    }
    # Columns share the draws: a second column equal to the first gives the same interval.
    two = bootstrap_ci([np.stack([s, s], axis=1) for s in map(np.asarray, seeds)], n_resamples, level, seed)
    assert two[0] == two[1] == ci
    # Another seed draws otherwise; the same seed again gives the same bytes.
    assert bootstrap_ci(seeds, n_resamples, level, seed + 1)[0] != ci
    assert bootstrap_ci(seeds, n_resamples, level, seed)[0] == ci


def test_blocks_of_resamples_do_not_change_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block size that does not divide the resamples (and one resample per block) gives the same means."""
    from clip_cycles.algebra import bootstrap

    rng = np.random.default_rng(3)
    groups = [rng.choice([0.0, 0.5, 1.0], size=(n, 2)) for n in (29, 33)]
    whole = bootstrap.bootstrap_means(groups, n_resamples=70, seed=5)
    for values in (29 * 3, 1):  # blocks of 3 resamples of the first group (70 = 23 * 3 + 1), then of one
        monkeypatch.setattr(bootstrap, "_BLOCK_VALUES", values)
        assert np.array_equal(bootstrap.bootstrap_means(groups, n_resamples=70, seed=5), whole)


def test_coverage_on_simulated_bernoulli_cycles() -> None:
    rng = np.random.default_rng(2024)
    p, n, trials = 0.3, 150, 300
    covered = 0
    for t in range(trials):
        credits = (rng.random(n) < p).astype(float)
        (ci,) = bootstrap_ci([credits], n_resamples=400, level=0.95, seed=t)
        assert ci["low"] <= credits.mean() <= ci["high"]
        covered += ci["low"] <= p <= ci["high"]
    # 95 % nominal; with 300 trials the binomial sd is 1.3 points, and the percentile interval runs a bit short.
    assert 0.90 <= covered / trials <= 0.99


def test_degenerate_and_bad_inputs() -> None:
    (ci,) = bootstrap_ci([[1.0]], n_resamples=50)
    assert ci["low"] == ci["high"] == 1.0
    for bad, match in (
        ([], "at least one group"),
        ([[]], "non-empty"),
        ([[0.0, float("nan")]], "finite"),
        ([np.zeros((3, 2)), np.zeros((3, 1))], "different numbers of columns"),
    ):
        with pytest.raises(ValueError, match=match):
            bootstrap_ci(bad)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([[1.0]], n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([[1.0]], level=1.0)


def test_one_resample_is_allowed_and_bad_counts_or_levels_are_refused() -> None:
    """The edges of the accepted arguments: one resample is a valid (degenerate) bootstrap; a bool, a float
    count, a level of 0 and a None value are refused with a sentence, never a numpy traceback."""
    credits = [0.0, 1.0, 1.0, 0.5, 0.0]
    (ci,) = bootstrap_ci([credits], n_resamples=1, level=0.5, seed=9)
    draw = np.random.default_rng(9).integers(0, len(credits), size=len(credits))
    mean = sum(credits[int(i)] for i in draw) / len(credits)
    assert ci["low"] == pytest.approx(mean, abs=1e-15) and ci["high"] == pytest.approx(mean, abs=1e-15)
    assert ci["n_resamples"] == 1
    for count in (True, 2.5):
        with pytest.raises(ValueError, match=r"^n_resamples must be a positive integer, got "):
            bootstrap_ci([credits], n_resamples=count)
    with pytest.raises(ValueError, match=r"^level must lie strictly between 0 and 1, got 0.0$"):
        bootstrap_ci([credits], level=0.0)
    with pytest.raises(ValueError, match=r"^bootstrap needs at least one group of per-cycle values$"):
        bootstrap_ci([])
    # A missing value (None) is a non-finite credit: a ValueError naming the group, not a TypeError from numpy.
    with pytest.raises(ValueError, match=r"^bootstrap group 1: per-cycle values must be finite$"):
        bootstrap_ci([credits, [1.0, None, 0.0]])


def test_blocks_of_the_count_product_path_replay_a_plain_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values that are not half-integers take the count-product path; its blocks replay the plain seed-major loop."""
    from clip_cycles.algebra import bootstrap

    rng = np.random.default_rng(4)
    groups = [rng.random((n, 2)) for n in (29, 33)]
    n_resamples, seed = 70, 5
    generator = np.random.default_rng(seed)
    expected = np.zeros((n_resamples, 2))
    for values in groups:
        for r in range(n_resamples):
            draw = generator.integers(0, len(values), size=len(values))
            expected[r] += [sum(values[int(i), c] for i in draw) / len(values) for c in range(2)]
    expected /= len(groups)
    for block_values in (bootstrap._BLOCK_VALUES, 29 * 3, 1):  # one block, blocks of 3 (70 = 23 * 3 + 1), of one
        monkeypatch.setattr(bootstrap, "_BLOCK_VALUES", block_values)
        np.testing.assert_allclose(bootstrap.bootstrap_means(groups, n_resamples, seed), expected, rtol=0, atol=1e-12)
