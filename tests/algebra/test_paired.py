"""Paired differences over images: identities of the statistic, the unit resampled, and the evidence rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.algebra.bootstrap import bootstrap_image_means, image_bootstrap_ci
from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES, VERDICTS, paired_difference, verdict_of

credits = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=60)


def _inputs(a: list[float], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = len(a)
    b = rng.choice([0.0, 0.5, 1.0], size=n)
    ids = rng.integers(0, max(2, n // 2), size=(n, 2))
    return np.asarray(a), b, ids


@settings(max_examples=40, deadline=None)
@given(credits, st.integers(0, 10_000))
def test_identical_inputs_differ_by_exactly_zero(a: list[float], seed: int) -> None:
    x, _, ids = _inputs(a, seed)
    out = paired_difference(x, x, ids, n_resamples=200, seed=seed)
    assert (out.diff, out.ci_low, out.ci_high) == (0.0, 0.0, 0.0)


@settings(max_examples=40, deadline=None)
@given(credits, st.integers(0, 10_000))
def test_swapping_a_and_b_negates_the_difference_and_mirrors_the_interval(a: list[float], seed: int) -> None:
    x, y, ids = _inputs(a, seed)
    ab = paired_difference(x, y, ids, n_resamples=200, seed=seed)
    ba = paired_difference(y, x, ids, n_resamples=200, seed=seed)
    assert ba.diff == pytest.approx(-ab.diff, abs=1e-12)
    assert (ba.ci_low, ba.ci_high) == pytest.approx((-ab.ci_high, -ab.ci_low), abs=1e-12)
    swapped = {VERDICTS[0]: VERDICTS[1], VERDICTS[1]: VERDICTS[0]}
    assert ba.verdict == swapped.get(ab.verdict, ab.verdict)


@settings(max_examples=40, deadline=None)
@given(credits, st.integers(0, 10_000), st.sampled_from([-1.0, 0.25, 3.0]))
def test_adding_a_constant_to_a_shifts_difference_and_interval(a: list[float], seed: int, shift: float) -> None:
    x, y, ids = _inputs(a, seed)
    base = paired_difference(x, y, ids, n_resamples=200, seed=seed)
    moved = paired_difference(x + shift, y, ids, n_resamples=200, seed=seed)
    assert moved.diff == pytest.approx(base.diff + shift, abs=1e-12)
    assert (moved.ci_low, moved.ci_high) == pytest.approx((base.ci_low + shift, base.ci_high + shift), abs=1e-9)


def test_cycles_sharing_an_image_are_resampled_together() -> None:
    # 40 cycles on 4 images, 10 each with the same credit: resampling images can only give the 4 image means'
    # averages, so the interval is wide; resampling cycles one by one would make it much narrower.
    values = np.repeat([0.0, 1.0, 0.0, 1.0], 10)
    ids = np.repeat(["a", "b", "c", "d"], 10)
    means = bootstrap_image_means(values, ids, n_resamples=500, seed=1)
    assert set(np.round(means[:, 0] * 4).tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0}  # a quarter per drawn image
    one_per_cycle = bootstrap_image_means(values, np.arange(40), n_resamples=500, seed=1)
    assert np.std(means) > 2.5 * np.std(one_per_cycle)
    (ci,) = image_bootstrap_ci(values, ids, n_resamples=500, seed=1)
    assert ci["unit"] == "image" and ci["low"] <= 0.25 and ci["high"] >= 0.75


def test_a_cycle_weighs_as_the_product_of_its_images_draws() -> None:
    # Cycle 0 on images (x, y), cycle 1 on (x, z): a resample drawing x twice and y once gives weights 2 and 0.
    values = np.array([1.0, 0.0, 0.5])
    ids = np.array([["x", "y"], ["x", "z"], ["y", "z"]])
    means = bootstrap_image_means(values, ids, n_resamples=300, seed=3)[:, 0]
    rng = np.random.default_rng(3)
    expected = []
    while len(expected) < 300:  # an independent replay of the documented draw order
        counts = np.bincount(rng.integers(0, 3, size=3), minlength=3).astype(float)
        w = np.array([counts[0] * counts[1], counts[0] * counts[2], counts[1] * counts[2]])
        if w.sum() > 0:
            expected.append(float(w @ values / w.sum()))
    np.testing.assert_allclose(means, expected, rtol=0, atol=1e-15)


def test_below_the_minimum_of_evidence_the_verdict_says_so() -> None:
    rng = np.random.default_rng(0)
    n = MIN_CYCLES
    ids = np.arange(n) % MIN_IMAGES
    a, b = np.ones(n), np.zeros(n)
    assert paired_difference(a, b, ids).verdict == VERDICTS[0]
    assert paired_difference(b, a, ids).verdict == VERDICTS[1]
    assert paired_difference(a[:-1], b[:-1], ids[:-1]).verdict == "too few comparisons"
    assert paired_difference(a, b, ids % (MIN_IMAGES - 1)).verdict == "too few comparisons"
    noise = rng.integers(0, 2, n).astype(float)
    assert paired_difference(noise, noise[::-1], ids).verdict == "within noise"


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="one length"):
        paired_difference([1.0, 0.0], [1.0], [0, 1])
    with pytest.raises(ValueError, match="image_ids"):
        paired_difference([1.0, 0.0], [1.0, 1.0], [0, 1, 2])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([np.nan, 0.0], [1.0, 1.0], [0, 1])


def test_two_image_cycles_get_the_two_way_interval_and_one_image_items_the_cluster_bootstrap() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.choice([0.0, 1.0], size=120), rng.choice([0.0, 1.0], size=120)
    pairs = rng.integers(0, 40, size=(120, 2))
    crossed = paired_difference(a, b, pairs)
    assert crossed.interval_method == "two-way image-cluster robust, t (Bell-McCaffrey df)" and crossed.unit == "images"
    assert crossed.n_resamples == 0 and crossed.se > 0 and 1 <= crossed.df <= crossed.n_images - 1
    assert crossed.as_dict()["method"] == crossed.interval_method
    # The interval is diff +- t se, and the p-value is the t test's: called exactly when the interval excludes 0.
    half = (crossed.ci_high - crossed.ci_low) / 2
    assert crossed.ci_low + half == pytest.approx(crossed.diff)
    assert (crossed.p_value < 0.05) == (crossed.ci_low > 0 or crossed.ci_high < 0)
    items = paired_difference(a, b, pairs[:, 0], n_resamples=300, seed=2)
    assert items.interval_method == "cluster bootstrap, percentile" and items.unit == "items" and items.n_resamples == 300


def test_credits_of_any_numeric_type_one_cycle_and_the_recorded_fields() -> None:
    # Booleans (correct / not) are credits too: they are read as floats, never subtracted as booleans.
    ids = np.arange(40) % 20
    a, b = np.arange(40) % 2 == 0, np.arange(40) % 4 == 0
    out = paired_difference(a, b, ids, n_resamples=50)
    assert out.diff == pytest.approx(0.5 - 0.25) and (out.mean_a, out.mean_b) == (0.5, 0.25)
    pairs = np.column_stack([ids, (ids + 1) % 20])
    assert paired_difference(a, b, pairs).diff == pytest.approx(0.25)
    # One cycle is a comparison too (too few to call), the empty set is not.
    one = paired_difference([1.0], [0.0], [["u", "v"]])
    assert (one.n_cycles, one.n_images, one.diff, one.verdict) == (1, 2, 1.0, VERDICTS[3])
    with pytest.raises(ValueError, match="non-empty"):
        paired_difference([], [], np.empty((0, 2)))
    # The two-way interval draws nothing: it records 0 resamples and seed 0 whatever was asked.
    two_way = paired_difference(a, b, pairs, n_resamples=77, seed=5)
    assert (two_way.n_resamples, two_way.seed, two_way.df > 0) == (0, 0, True)
    items = paired_difference(a, b, ids, n_resamples=77, seed=5)
    assert (items.n_resamples, items.seed, items.df) == (77, 5, 0.0)


def test_the_bootstrap_se_with_one_or_two_draws() -> None:
    ids = np.arange(40) % 20
    a, b = (np.arange(40) % 3 == 0).astype(float), np.zeros(40)
    assert paired_difference(a, b, ids, n_resamples=1).se == 0.0  # one draw: no spread, not nan
    two = paired_difference(a, b, ids, n_resamples=2, seed=3)
    draws = bootstrap_image_means(np.column_stack([a, b]), ids, n_resamples=2, seed=3)
    assert two.se == pytest.approx(abs(draws[0, 0] - draws[1, 0]) / np.sqrt(2.0), abs=1e-15)


def test_the_p_value_counts_draws_exactly_at_zero_on_both_sides() -> None:
    # Three items, differences -1, 0, +1: many resamples land exactly on 0 (and p must count them on both sides).
    a, b, ids = np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0]), np.array([0, 1, 2])
    out = paired_difference(a, b, ids, n_resamples=500, seed=4)
    draws = bootstrap_image_means(np.column_stack([a, b]), ids, n_resamples=500, seed=4)
    diff = draws[:, 0] - draws[:, 1]
    below, above = int((diff <= 0).sum()), int((diff >= 0).sum())
    assert (diff == 0).sum() > 50
    assert out.p_value == pytest.approx(min(1.0, 2.0 * min(below, above) / 500), abs=1e-12)
    # All draws above 0: p = 2 x 0; a difference that is exactly 0 with no spread: p = 1 (two-way), 0 when not 0.
    assert paired_difference(np.ones(30), np.zeros(30), np.arange(30) % 20, n_resamples=100).p_value == 0.0
    pairs = np.column_stack([np.arange(30) % 20, (np.arange(30) + 3) % 20])
    assert paired_difference(np.ones(30), np.ones(30), pairs).p_value == 1.0
    assert paired_difference(np.ones(30), np.zeros(30), pairs).p_value == 0.0


def test_an_interval_touching_zero_is_within_noise_and_bad_levels_and_values_are_refused() -> None:
    assert verdict_of(100, 50, 0.0, 0.3, MIN_CYCLES, MIN_IMAGES) == "within noise"
    assert verdict_of(100, 50, -0.3, 0.0, MIN_CYCLES, MIN_IMAGES) == "within noise"
    assert verdict_of(100, 50, 1e-12, 0.3, MIN_CYCLES, MIN_IMAGES) == "A above B"
    assert verdict_of(100, 50, -0.3, -1e-12, MIN_CYCLES, MIN_IMAGES) == "B above A"
    assert verdict_of(MIN_CYCLES, MIN_IMAGES, 0.1, 0.3, MIN_CYCLES, MIN_IMAGES) == "A above B"
    assert verdict_of(MIN_CYCLES, MIN_IMAGES - 1, 0.1, 0.3, MIN_CYCLES, MIN_IMAGES) == "too few comparisons"
    for level in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"^level must lie strictly between 0 and 1, got "):
            paired_difference([1.0, 0.0], [0.0, 0.0], [0, 1], level=level)
    with pytest.raises(ValueError, match=r"^paired_difference: per-cycle values must be finite$"):
        paired_difference([1.0, 0.0], [np.inf, 0.0], [0, 1])
