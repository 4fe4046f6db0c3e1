"""The image bootstrap (``bootstrap_image_means``, ``image_bootstrap_ci``, ``image_codes``) replayed by plain loops.

Each resample is redrawn here one at a time from the same generator: counts per image by a
dict, a cycle's weight the product of its images' counts, a resample with no weight skipped.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from clip_cycles.algebra import bootstrap
from clip_cycles.algebra.bootstrap import bootstrap_image_means, image_bootstrap_ci, image_codes


def _plain_image_means(values, images, n_resamples: int, seed: int) -> np.ndarray:
    """Resample-by-resample: labels coded in sorted order, one draw of n_images per resample, empty ones redrawn."""
    labels = sorted({label for row in images for label in row})
    code = {label: i for i, label in enumerate(labels)}
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n_resamples:
        counts = Counter(int(i) for i in rng.integers(0, len(labels), size=len(labels)))
        weights = []
        for row in images:
            w = 1.0
            for label in row:
                w *= counts[code[label]]
            weights.append(w)
        total = sum(weights)
        if total == 0:
            continue
        out.append([sum(w * v[c] for w, v in zip(weights, values)) / total for c in range(len(values[0]))])
    return np.array(out)


def _quantile(sorted_values, q: float) -> float:
    position = q * (len(sorted_values) - 1)
    below = int(position)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (position - below) * (sorted_values[above] - sorted_values[below])


def test_one_image_per_cycle_replays_a_plain_loop() -> None:
    rng = np.random.default_rng(5)
    values = rng.choice([0.0, 0.5, 1.0], size=(23, 2)).tolist()
    images = [(label,) for label in rng.choice(["img_c", "img_a", "img_b", "img_d", "img_e"], size=23)]
    got = bootstrap_image_means(values, [row[0] for row in images], n_resamples=60, seed=4)
    np.testing.assert_allclose(got, _plain_image_means(values, images, 60, 4), rtol=0, atol=1e-12)


def test_two_images_per_cycle_weigh_by_the_product_and_redraw_empty_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    # Three images, each cycle on two of them: drawing one image three times keeps no cycle (redrawn).
    values = [[1.0], [0.0], [0.5], [1.0]]
    images = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "c")]
    want = _plain_image_means(values, images, 120, 13)
    # Block sizes that split the resamples and the redraws differently give the same numbers.
    for block_values in (bootstrap._BLOCK_VALUES, 7, 1):
        monkeypatch.setattr(bootstrap, "_BLOCK_VALUES", block_values)
        got = bootstrap_image_means(values, np.array(images), n_resamples=120, seed=13)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # The redraws happened: a plain loop that did not skip would have differed.
    rng = np.random.default_rng(13)
    empty = sum(len(set(rng.integers(0, 3, size=3).tolist())) == 1 for _ in range(120))
    assert empty > 0


def test_interval_is_the_percentiles_of_the_image_means_with_unit_image() -> None:
    rng = np.random.default_rng(8)
    values = rng.random((30, 2))
    ids = rng.integers(0, 9, size=30)
    means = _plain_image_means(values.tolist(), [(int(i),) for i in ids], 200, 3)
    cis = image_bootstrap_ci(values, ids, n_resamples=200, level=0.8, seed=3)
    assert len(cis) == 2
    for c, ci in enumerate(cis):
        column = sorted(means[:, c])
        assert ci["low"] == pytest.approx(_quantile(column, 0.1), abs=1e-12)
        assert ci["high"] == pytest.approx(_quantile(column, 0.9), abs=1e-12)
        assert {k: ci[k] for k in ("level", "n_resamples", "seed", "method", "unit")} == {
            "level": 0.8,
            "n_resamples": 200,
            "seed": 3,
            "method": "percentile",
            "unit": "image",
        }
    with pytest.raises(ValueError, match=r"^level must lie strictly between 0 and 1, got 1.0$"):
        image_bootstrap_ci(values, ids, level=1.0)
    with pytest.raises(ValueError, match=r"^level must lie strictly between 0 and 1, got 0$"):
        image_bootstrap_ci(values, ids, level=0)


def test_image_codes_sort_labels_and_refuse_bad_shapes() -> None:
    codes = image_codes(["b", "a", "c", "a"], 4)
    assert codes.dtype == np.int64 and codes.tolist() == [[1], [0], [2], [0]]
    pairs = image_codes([[30, 10], [10, 20]], 2)
    assert pairs.tolist() == [[2, 0], [0, 1]]
    for bad, n, shape in (([1, 2, 3], 2, "(3,)"), (np.zeros((2, 0)), 2, "(2, 0)"), (np.zeros((2, 2, 2)), 2, "(2, 2, 2)")):
        with pytest.raises(
            ValueError, match=rf"^image_ids: expected \({n},\) or \({n}, m\) labels, got shape " + re.escape(shape) + "$"
        ):
            image_codes(bad, n)


def test_image_bootstrap_refuses_bad_counts() -> None:
    for count in (0, True, 2.5, -1):
        with pytest.raises(ValueError, match=r"^n_resamples must be a positive integer, got "):
            bootstrap_image_means([1.0, 0.0], [0, 1], n_resamples=count)
    # One resample and numpy integers are allowed.
    assert bootstrap_image_means([1.0, 0.0], [0, 1], n_resamples=np.int64(1), seed=2).shape == (1, 1)
    (constant,) = image_bootstrap_ci([1.0, 1.0], [0, 1], n_resamples=5)
    assert constant["low"] == constant["high"] == 1.0


def test_exact_pattern_path_bounds() -> None:
    """The counts-per-pattern path is taken exactly where its sums stay exact: half-integers, no -0.0,
    max |2 v| * n below 2**50, at most 256 distinct rows."""
    patterns, inverse = bootstrap._exact_patterns(np.array([[1.0, 0.5], [0.0, 0.5], [1.0, 0.5], [-0.5, 0.0]]))
    assert patterns.tolist() == [[-0.5, 0.0], [0.0, 0.5], [1.0, 0.5]]
    assert inverse.dtype == np.int64 and inverse.shape == (4,) and inverse.tolist() == [2, 1, 2, 0]
    assert bootstrap._exact_patterns(np.array([[0.25], [1.0]])) is None
    assert bootstrap._exact_patterns(np.array([[-0.0], [1.0]])) is None
    # 2 * 2**48 = 2**49 per value, times 2 cycles: 2**50, the first count refused; one cycle fewer passes.
    assert bootstrap._exact_patterns(np.array([[2.0**48], [0.5]])) is None
    assert bootstrap._exact_patterns(np.array([[2.0**48]])) is not None
    assert bootstrap._exact_patterns(np.array([[2.0**47], [0.5]])) is not None
    assert bootstrap._exact_patterns(np.array([[2.0**48, 0.0], [0.5, 0.0]])) is None
    assert bootstrap._exact_patterns(np.array([[2.0**47, 0.0], [0.5, 0.0]])) is not None
    rows = np.arange(256, dtype=np.float64)[:, None] / 2
    assert bootstrap._exact_patterns(rows)[0].shape == (256, 1)
    assert bootstrap._exact_patterns(np.vstack([rows, [[200.0]]])) is None


def test_half_integer_groups_take_the_pattern_path(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    original = bootstrap._exact_patterns
    monkeypatch.setattr(bootstrap, "_exact_patterns", lambda array: seen.append(original(array)) or seen[-1])
    bootstrap.bootstrap_means([[0.0, 0.5, 1.0], [1.0, 1.0]], n_resamples=3, seed=0)
    assert len(seen) == 2 and all(found is not None for found in seen)


def test_levels_at_the_edges_are_refused_by_percentile_intervals() -> None:
    means = np.array([[0.1], [0.2], [0.3]])
    for level in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"^level must lie strictly between 0 and 1, got "):
            bootstrap.percentile_intervals(means, level, 3, 0)
    (ci,) = bootstrap.percentile_intervals(means, 0.5, 3, 4)
    assert ci["low"] == pytest.approx(0.15, abs=1e-15) and ci["high"] == pytest.approx(0.25, abs=1e-15)


def test_a_resample_of_total_weight_one_is_kept() -> None:
    # Cycles on (a, b) and (c, d): drawing a, b, c, c gives the first cycle weight 1, the second 0; kept.
    values, images = [[1.0], [0.0]], [("a", "b"), ("c", "d")]
    want = _plain_image_means(values, images, 150, 21)
    rng = np.random.default_rng(21)
    totals = []
    for _ in range(150):
        counts = np.bincount(rng.integers(0, 4, size=4), minlength=4)
        totals.append(counts[0] * counts[1] + counts[2] * counts[3])
    assert 1 in totals  # the case is drawn
    np.testing.assert_allclose(bootstrap_image_means(values, np.array(images), 150, seed=21), want, rtol=0, atol=1e-12)


def test_a_set_whose_resamples_never_keep_a_cycle_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class FirstImageOnly:
        def integers(self, low, high, size):
            return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr(bootstrap.np.random, "default_rng", lambda seed: FirstImageOnly())
    message = r"^image bootstrap: almost every resample kept no cycle; the cycles share too few images$"
    with pytest.raises(ValueError, match=message):
        bootstrap_image_means([[1.0], [0.0]], np.array([("a", "b"), ("a", "b")]), n_resamples=3)
