"""The level of a paired interval, checked against formulas written out here (dense matrices, scipy's t, a replay).

What is pinned: which quantiles a level asks for (the bootstrap's ``(1 -+ level) / 2`` percentiles, the
two-way interval's ``t_{(1 + level) / 2, df}``), the seed the bootstrap draws from, the two-way variance and
its Bell-McCaffrey degrees of freedom, and the laws every interval keeps (a 95 % interval holds the 90 %
one; swapping A and B negates the difference and swaps the bounds).
"""

from __future__ import annotations

import numpy as np
import pytest
from dense_intervals import dense_interval, dense_variance_and_df
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from clip_cycles.algebra.crossed import (
    crossed_df,
    crossed_group_intervals,
    crossed_mean_intervals,
    crossed_record,
    crossed_variance,
    incidence_codes,
    t_quantile,
    t_two_sided_p,
)
from clip_cycles.algebra.paired import paired_difference


def _dense_variance_and_df(values: np.ndarray, pairs: np.ndarray, weights: np.ndarray, groups: np.ndarray):
    return dense_variance_and_df(values, [tuple(map(str, p)) for p in pairs.tolist()], weights, groups.tolist())


def _design(seed: int, n: int = 36, n_images: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pairs = np.stack([rng.permutation(n_images)[:2] for _ in range(n)])
    return rng.choice([0.0, 0.5, 1.0], size=n), rng.choice([0.0, 0.5, 1.0], size=n), pairs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_way_variance_and_df_match_the_dense_formulas(seed: int) -> None:
    a, b, pairs = _design(seed)
    codes = incidence_codes(pairs, len(a))
    n = len(a)
    variance, df = _dense_variance_and_df(a - b, pairs, np.full(n, 1.0 / n), np.zeros(n, dtype=int))
    assert float(crossed_variance(a - b, codes)[0]) == pytest.approx(variance, rel=1e-10)
    assert crossed_df(codes) == pytest.approx(df, rel=1e-10)
    # Two groups of unequal size, each weighing half (a mean of two families' means).
    groups = (np.arange(n) >= 10).astype(int)
    weights = np.where(groups == 0, 0.5 / 10, 0.5 / (n - 10))
    variance, df = _dense_variance_and_df(a - b, pairs, weights, groups)
    assert float(crossed_variance(a - b, codes, weights, groups)[0]) == pytest.approx(variance, rel=1e-10)
    assert crossed_df(codes, weights, groups) == pytest.approx(df, rel=1e-10)


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_the_two_way_interval_is_diff_plus_minus_scipys_t_quantile_times_se(level: float) -> None:
    a, b, pairs = _design(4)
    n = len(a)
    variance, df = _dense_variance_and_df(a - b, pairs, np.full(n, 1.0 / n), np.zeros(n, dtype=int))
    out = paired_difference(a, b, pairs, level=level)
    half = stats.t.ppf(0.5 + level / 2.0, df) * np.sqrt(variance)
    diff = a.mean() - b.mean()
    assert (out.ci_low, out.ci_high) == pytest.approx((diff - half, diff + half), abs=1e-7)
    assert out.se == pytest.approx(np.sqrt(variance), rel=1e-10) and out.df == pytest.approx(df, rel=1e-10)
    assert out.p_value == pytest.approx(2.0 * stats.t.sf(abs(diff) / np.sqrt(variance), df), abs=1e-7)
    assert out.level == level and out.mean_a == pytest.approx(a.mean()) and out.mean_b == pytest.approx(b.mean())
    assert out.n_images == 12 and out.n_cycles == n


@pytest.mark.parametrize(("probability", "df"), [(0.975, 1.0), (0.95, 3.5), (0.975, 11.0), (0.995, 40.0), (0.9, 2e5)])
def test_t_quantile_and_p_value_are_scipys(probability: float, df: float) -> None:
    # Above NORMAL_DF degrees of freedom the normal quantile stands in (they differ by < 1e-5 there).
    assert t_quantile(probability, df) == pytest.approx(stats.t.ppf(probability, df), abs=1e-6 if df < 1e5 else 1e-5)
    assert t_two_sided_p(1.7, df) == pytest.approx(2.0 * stats.t.sf(1.7, df), abs=1e-6 if df < 1e5 else 1e-5)


@pytest.mark.parametrize("df", [0.05, 0.3, 0.7, 1.0, 2.0, 3.5, 11.0, 29.5, 240.0, 5000.0, 99_000.0])
@pytest.mark.parametrize("probability", [0.5 + 1e-6, 0.6, 0.749, 0.75, 0.9, 0.975, 0.995, 0.9995, 1.0 - 1e-7])
def test_t_quantile_holds_full_precision_in_the_tails_and_below_one_df(probability: float, df: float) -> None:
    # Solved, not read off a grid: relative 1e-9 of scipy's from the centre to 1e-7 in the tail, df 0.05 to 99,000.
    assert t_quantile(probability, df) == pytest.approx(stats.t.ppf(probability, df), rel=1e-9)


@pytest.mark.parametrize("df", [0.3, 1.0, 4.0, 37.5, 2000.0])
@pytest.mark.parametrize("statistic", [0.0, 0.05, 1.0, 2.5, 12.0, 300.0])
def test_t_two_sided_p_holds_full_precision_for_small_p(statistic: float, df: float) -> None:
    # The tail is computed directly (I_{df/(df+t^2)}(df/2, 1/2)), not as 1 - a central probability.
    assert t_two_sided_p(statistic, df) == pytest.approx(2.0 * stats.t.sf(statistic, df), rel=1e-9, abs=1e-300)


def test_incomplete_beta_at_its_ends_and_the_t_at_exactly_normal_df() -> None:
    from scipy import special

    from clip_cycles.algebra.crossed import NORMAL_DF, incomplete_beta

    for a, b in ((0.5, 3.0), (2.0, 0.5), (40.0, 7.5)):
        assert incomplete_beta(a, b, 0.0) == 0.0 and incomplete_beta(a, b, 1.0) == 1.0
        for x in (1e-12, 0.2, 0.5, 0.93, 1.0 - 1e-12):
            assert incomplete_beta(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-10, abs=1e-300)
    # At NORMAL_DF itself the t distribution is still used (only above it the normal stands in).
    assert t_quantile(0.975, NORMAL_DF) == pytest.approx(stats.t.ppf(0.975, NORMAL_DF), rel=1e-10)
    assert t_quantile(0.975, NORMAL_DF) != pytest.approx(stats.norm.ppf(0.975), rel=1e-7)
    assert t_two_sided_p(3.0, NORMAL_DF) == pytest.approx(2.0 * stats.t.sf(3.0, NORMAL_DF), rel=1e-9)
    assert t_two_sided_p(3.0, NORMAL_DF) != pytest.approx(2.0 * stats.norm.sf(3.0), rel=1e-6)


def _replayed_item_bootstrap(a: np.ndarray, b: np.ndarray, items: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The documented draw order, one resample at a time: items drawn with replacement, each weighing its count."""
    labels = sorted(set(items.tolist()))
    code = np.array([labels.index(x) for x in items.tolist()])
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_resamples):
        counts = np.bincount(rng.integers(0, len(labels), size=len(labels)), minlength=len(labels)).astype(float)
        w = counts[code]
        out.append(float(w @ (a - b) / w.sum()))
    return np.array(out)


def _percentile(draws: np.ndarray, q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), written out."""
    ordered = np.sort(draws)
    position = q * (len(ordered) - 1)
    below = int(np.floor(position))
    above = min(below + 1, len(ordered) - 1)
    return float(ordered[below] + (position - below) * (ordered[above] - ordered[below]))


@pytest.mark.parametrize(("level", "seed"), [(0.95, 0), (0.9, 7), (0.5, 123)])
def test_the_item_bootstrap_interval_takes_the_levels_percentiles_of_the_seeded_draws(level: float, seed: int) -> None:
    rng = np.random.default_rng(11)
    items = rng.integers(0, 25, size=60)
    a, b = rng.choice([0.0, 0.5, 1.0], size=60), rng.choice([0.0, 1.0], size=60)
    out = paired_difference(a, b, items, n_resamples=400, level=level, seed=seed)
    draws = _replayed_item_bootstrap(a, b, items, 400, seed)
    alpha = (1.0 - level) / 2.0
    assert out.ci_low == pytest.approx(_percentile(draws, alpha), abs=1e-12)
    assert out.ci_high == pytest.approx(_percentile(draws, 1.0 - alpha), abs=1e-12)
    assert out.se == pytest.approx(float(np.std(draws, ddof=1)), abs=1e-12)
    share = min(float(np.mean(draws <= 0.0)), float(np.mean(draws >= 0.0)))
    assert out.p_value == pytest.approx(min(1.0, 2.0 * share), abs=1e-12)
    assert (out.seed, out.n_resamples, out.level, out.unit) == (seed, 400, level, "items")
    assert out.n_images == len(set(items.tolist()))
    # The seed reaches the draws: another seed gives another interval.
    other = paired_difference(a, b, items, n_resamples=400, level=level, seed=seed + 1)
    assert (other.ci_low, other.ci_high) != (out.ci_low, out.ci_high)


pairs_or_items = st.sampled_from(["pairs", "items"])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), pairs_or_items)
def test_a_95_interval_holds_the_90_interval_and_swapping_sides_mirrors_it(seed: int, design: str) -> None:
    a, b, pairs = _design(seed, n=40, n_images=14)
    ids = pairs if design == "pairs" else pairs[:, 0]
    wide = paired_difference(a, b, ids, n_resamples=300, level=0.95, seed=seed)
    narrow = paired_difference(a, b, ids, n_resamples=300, level=0.90, seed=seed)
    assert wide.ci_low <= narrow.ci_low <= narrow.ci_high <= wide.ci_high
    if design == "pairs":  # diff +- t se: symmetric about the difference
        assert narrow.ci_low <= narrow.diff <= narrow.ci_high
    swapped = paired_difference(b, a, ids, n_resamples=300, level=0.95, seed=seed)
    assert swapped.diff == pytest.approx(-wide.diff, abs=1e-12)
    assert (swapped.ci_low, swapped.ci_high) == pytest.approx((-wide.ci_high, -wide.ci_low), abs=1e-12)
    assert (swapped.mean_a, swapped.mean_b) == (wide.mean_b, wide.mean_a)


def _messy_design(seed: int, n: int = 24, n_images: int = 8) -> list[tuple[str, str]]:
    """Cycles on image pairs with repeats, both orders of a pair, and cycles whose two slots are one image."""
    rng = np.random.default_rng(seed)
    pairs = [tuple(f"i{x}" for x in rng.integers(0, n_images, size=2)) for _ in range(n)]
    pairs[1] = pairs[0]
    pairs[2] = (pairs[0][1], pairs[0][0])
    pairs[3] = ("i0", "i0")
    return pairs


@pytest.mark.parametrize("seed", [3, 4])
def test_mean_intervals_per_column_on_messy_designs_match_the_dense_formula(seed: int) -> None:
    pairs = _messy_design(seed)
    rng = np.random.default_rng(seed)
    values = rng.choice([0.0, 0.5, 1.0], size=(len(pairs), 3))
    records = crossed_mean_intervals(values, np.array(pairs), 0.9)
    assert len(records) == 3
    for column, record in enumerate(records):
        estimate, low, high = dense_interval(values[:, column], pairs, 0.9)
        variance, df = dense_variance_and_df(values[:, column], pairs)
        assert (record["low"], record["high"]) == pytest.approx((low, high), abs=1e-7)
        assert record["se"] == pytest.approx(np.sqrt(variance), rel=1e-9) and record["df"] == pytest.approx(df, rel=1e-9)
        assert (record["level"], record["n_images"], record["unit"]) == (0.9, len({i for p in pairs for i in p}), "images")
        assert record["low"] + record["high"] == pytest.approx(2 * estimate)
    # One image per cycle: the image is the cluster.
    items = [(p[0],) for p in pairs]
    (one,) = crossed_mean_intervals(values[:, 0], np.array([p[0] for p in pairs]), 0.95)
    assert (one["low"], one["high"]) == pytest.approx(dense_interval(values[:, 0], items, 0.95)[1:], abs=1e-7)


def test_a_cancelled_two_way_sum_falls_back_to_the_one_way_sum() -> None:
    for seed in range(200):  # a design whose two-way sum is not positive (shared images, opposite residuals)
        pairs = _messy_design(seed, n=8, n_images=5)
        values = np.random.default_rng(seed).choice([0.0, 1.0], size=8)
        u = (values - values.mean()) / 8
        shared = np.array([[float(bool(set(a) & set(b))) for b in pairs] for a in pairs])
        if values.std() > 0 and u @ shared @ u <= 0:
            break
    else:
        pytest.fail("no design with a cancelled two-way sum found")
    variance, _ = dense_variance_and_df(values, pairs)
    assert variance > 0
    assert float(crossed_variance(values, incidence_codes(np.array(pairs), 8))[0]) == pytest.approx(variance, rel=1e-9)


def test_group_intervals_each_group_and_the_pooled_mean_of_group_means() -> None:
    rng = np.random.default_rng(12)
    sizes = (10, 25, 16)
    images = [np.array(_messy_design(s, n=n, n_images=9)) for s, n in zip((5, 6, 7), sizes)]
    groups = [rng.choice([0.0, 0.5, 1.0], size=(n, 2)) for n in sizes]
    per_group, pooled = crossed_group_intervals(groups, images, 0.95)
    for values, labels, records in zip(groups, images, per_group):
        pairs = [tuple(p) for p in labels.tolist()]
        for column in range(2):
            _, low, high = dense_interval(values[:, column], pairs, 0.95)
            assert (records[column]["low"], records[column]["high"]) == pytest.approx((low, high), abs=1e-7)
    pairs = [tuple(p) for labels in images for p in labels.tolist()]
    group_of = [g for g, n in enumerate(sizes) for _ in range(n)]
    weights = [1.0 / (3 * sizes[g]) for g in group_of]
    for column in range(2):
        values = np.concatenate([v[:, column] for v in groups])
        estimate, low, high = dense_interval(values, pairs, 0.95, weights, group_of)
        assert estimate == pytest.approx(np.mean([v[:, column].mean() for v in groups]))
        assert (pooled[column]["low"], pooled[column]["high"]) == pytest.approx((low, high), abs=1e-7)
        assert pooled[column]["n_images"] == len({i for p in pairs for i in p})


def test_records_and_refusals_at_the_edges() -> None:
    assert crossed_record(0.7, 0.1, 1, 3.0, 0.95)["low"] == crossed_record(0.7, 0.1, 1, 3.0, 0.95)["high"] == 0.7
    wide = crossed_record(0.7, 0.1, 2, 3.0, 0.95)
    assert wide["high"] - 0.7 == pytest.approx(stats.t.ppf(0.975, 3.0) * 0.1, abs=1e-7) and wide["se"] == 0.1
    assert crossed_df(incidence_codes(np.array([["a", "a"], ["a", "a"]]), 2)) == 1.0  # one image: no spread to count
    for probability, df in ((0.5, 3.0), (1.0, 3.0), (0.975, 0.0), (0.975, -1.0)):
        with pytest.raises(ValueError, match=r"^t_quantile: need 0.5 < probability < 1 and df > 0"):
            t_quantile(probability, df)
    with pytest.raises(ValueError, match=r"^t_two_sided_p: df must be positive"):
        t_two_sided_p(1.0, 0.0)
    assert t_two_sided_p(float("inf"), 4.0) == 0.0 and t_two_sided_p(0.0, 4.0) == pytest.approx(1.0)
    assert t_two_sided_p(0.5, 2e5) == pytest.approx(2.0 * stats.norm.sf(0.5), abs=1e-12)
    assert t_quantile(0.975, 2e5) == pytest.approx(stats.norm.ppf(0.975), abs=1e-12)
    with pytest.raises(ValueError, match=r"^image_ids: expected \(2,\) or \(2, 2\) labels, got shape \(2, 3\)"):
        incidence_codes(np.array([["a", "b", "c"], ["a", "b", "c"]]), 2)
    assert incidence_codes(np.array(["b", "a", "b"]), 3).tolist() == [[1], [0], [1]]
    with pytest.raises(ValueError, match=r"^weights and groups must have one entry per cycle \(3\)"):
        crossed_variance(np.ones(3), incidence_codes(np.array(["a", "b", "c"]), 3), weights=np.ones(2))
    with pytest.raises(ValueError, match=r"^weights and groups must have one entry per cycle \(3\)"):
        crossed_df(incidence_codes(np.array(["a", "b", "c"]), 3), groups=[0, 1])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        crossed_mean_intervals(np.ones(3), np.array(["a", "b", "c"]), 1.0)
    with pytest.raises(ValueError, match="non-empty finite"):
        crossed_mean_intervals(np.array([1.0, np.nan]), np.array(["a", "b"]), 0.95)


def test_pair_identity_of_cycles_does_not_collide_and_one_image_designs_keep_their_se() -> None:
    # Codes a..d = 0..3: the pairs (b, b) and (a, d) must stay two pairs (a coarse pair code would merge them).
    pairs = [("b", "b"), ("a", "d"), ("a", "b"), ("c", "d"), ("b", "c"), ("a", "d"), ("b", "b")]
    codes = incidence_codes(np.array(pairs), len(pairs))
    for seed in range(3):
        values = np.random.default_rng(seed).choice([0.0, 0.5, 1.0], size=len(pairs))
        variance, df = dense_variance_and_df(values, pairs)
        assert float(crossed_variance(values, codes)[0]) == pytest.approx(variance, rel=1e-9)
        assert crossed_df(codes) == pytest.approx(df, rel=1e-9)
    # Every cycle on one image: no width (one cluster), but the se is still the formula's.
    single = [("a", "a")] * 4
    values = np.array([1.0, 0.0, 0.5, 1.0])
    (record,) = crossed_mean_intervals(values, np.array(single), 0.95)
    assert record["low"] == record["high"] == pytest.approx(0.625) and record["n_images"] == 1
    assert record["se"] == pytest.approx(np.sqrt(dense_variance_and_df(values, single)[0]), rel=1e-9)


def test_every_cycle_its_own_group_has_g_minus_1_df_and_the_variance_scales_with_the_square() -> None:
    pairs = _messy_design(8, n=10, n_images=6)
    codes = incidence_codes(np.array(pairs), 10)
    n_images = len({i for p in pairs for i in p})
    assert crossed_df(codes, np.full(10, 0.1), np.arange(10)) == float(n_images - 1)  # nothing left to vary
    values = np.random.default_rng(2).choice([0.0, 1.0], size=10)
    for scale in (1e-4, 1.0, 1e3):  # Var(c y) = c^2 Var(y): no absolute threshold hides inside
        scaled = float(crossed_variance(scale * values, codes)[0])
        assert scaled == pytest.approx(scale**2 * float(crossed_variance(values, codes)[0]), rel=1e-9)


def test_degenerate_inputs_are_refused_and_one_cycle_is_an_interval() -> None:
    with pytest.raises(ValueError, match="non-empty finite"):
        crossed_mean_intervals(np.array([]), np.array([]), 0.95)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        crossed_mean_intervals(np.ones(3), np.array(["a", "b", "c"]), 0.0)
    with pytest.raises(ValueError, match=r"^image_ids: expected \(2,\) or \(2, 2\) labels"):
        incidence_codes(np.zeros((2, 2, 1)), 2)
    (one,) = crossed_mean_intervals(np.array([1.0]), np.array([["a", "b"]]), 0.95)
    assert one["low"] <= 1.0 <= one["high"] and one["n_images"] == 2
