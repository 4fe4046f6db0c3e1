"""Bootstrap confidence intervals over cycles: numpy only, no I/O.

A cycle is the unit of resampling: each resample draws as many cycles as the set holds,
with replacement, from ``numpy.random.default_rng(seed)``, and the interval is the
percentile interval of the resampled means. Several per-cycle columns (CycleAcc credit,
text/image/group correctness) share the same draws, so their intervals come from one
bootstrap. Several groups (one per seed) are resampled each within itself and the
statistic is the mean of the group means, the pooled mean that the result records report.

Every interval is recorded as ``{"low", "high", "level", "n_resamples", "seed",
"method": "percentile", "unit": "cycle"}`` (:func:`bootstrap_ci`).

Cycles that share an image are not independent: :func:`bootstrap_image_means` and
:func:`image_bootstrap_ci` resample images instead (``"unit": "image"``), and
:mod:`clip_cycles.algebra.paired` uses the same draws for paired differences.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: Resamples per interval: the percentile ends then move by well under 0.01 between seeds on a few hundred cycles.
DEFAULT_N_RESAMPLES = 1000
#: Coverage of the recorded intervals.
DEFAULT_LEVEL = 0.95
#: Generator seed of the recorded intervals (recorded beside each one).
DEFAULT_BOOTSTRAP_SEED = 0
#: Most draws one block of resamples holds at once (16 MB of int64 indices, as much again of counts).
_BLOCK_VALUES = 2_000_000
#: Most distinct rows a group may have for the counts-per-row-pattern path of :func:`bootstrap_means`.
_MAX_PATTERNS = 256


def _as_groups(groups: Sequence[object]) -> list[np.ndarray]:
    """Each group as a float64 (n_cycles, n_columns) array; all groups with the same columns."""
    if len(groups) == 0:
        raise ValueError("bootstrap needs at least one group of per-cycle values")
    arrays = []
    for g, values in enumerate(groups):
        array = np.asarray(values, dtype=np.float64)
        if array.ndim == 1:
            array = array[:, None]
        if array.ndim != 2 or array.shape[0] == 0:
            raise ValueError(f"bootstrap group {g}: expected a non-empty (n_cycles,) or (n_cycles, k) array, got {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"bootstrap group {g}: per-cycle values must be finite")
        arrays.append(array)
    if len({a.shape[1] for a in arrays}) != 1:
        raise ValueError(f"bootstrap groups have different numbers of columns: {[a.shape[1] for a in arrays]}")
    return arrays


def _exact_patterns(array: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows of ``array`` and each cycle's index into them, when resampled sums are exact.

    Per-cycle values that are multiples of 0.5 (credits 1 / 0.5 / 0, correctness 0 / 1) make
    every sum of drawn values exact in float64, whatever the order of the additions: a
    resample's sum over its cycles then equals the sum over the distinct rows weighted by how
    often each was drawn, bit for bit. None (the general path) for other values, negative
    zeros, or more than :data:`_MAX_PATTERNS` distinct rows.
    """
    doubled = array * 2.0
    if not np.array_equal(doubled, np.rint(doubled)) or (np.signbit(array) & (array == 0)).any():
        return None
    if float(np.abs(doubled).max()) * array.shape[0] >= 2.0**50:  # every partial sum stays an exact half-integer
        return None
    patterns, inverse = np.unique(array, axis=0, return_inverse=True)
    if patterns.shape[0] > _MAX_PATTERNS:
        return None
    return patterns, inverse.reshape(-1).astype(np.int64)


def bootstrap_group_means(
    groups: Sequence[object], n_resamples: int = DEFAULT_N_RESAMPLES, seed: int = DEFAULT_BOOTSTRAP_SEED
) -> list[np.ndarray]:
    """Each group's (n_resamples, k) resampled means, the groups drawn one after another from one generator.

    Draw order (what makes a result reproducible from its recorded seed): for each group in
    order, for each resample in turn, ``rng.integers(0, n_group, size=n_group)``; that is,
    one ``rng.integers(0, n_group, size=(n_resamples, n_group))`` per group. The first
    group's means are therefore those of that group bootstrapped alone with the same seed.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    arrays = _as_groups(groups)
    rng = np.random.default_rng(seed)
    n_resamples, width = int(n_resamples), arrays[0].shape[1]
    out = []
    for array in arrays:
        n = array.shape[0]
        means = np.empty((n_resamples, width), dtype=np.float64)
        # Blocks of resamples, each one draw (consecutive draws of one group equal a single
        # draw of all its resamples, so blocking does not change the numbers), turned into
        # how often each cycle was drawn, so that a block's sums are one matrix product (a
        # generator call and a mean per resample were most of a warm evaluation).
        block = max(1, _BLOCK_VALUES // n)
        exact = _exact_patterns(array)
        for start in range(0, n_resamples, block):
            stop = min(n_resamples, start + block)
            draws = rng.integers(0, n, size=(stop - start, n))
            if exact is not None:
                # Few distinct rows with exact sums: count the draws per row pattern (a small, cached
                # table) instead of per cycle, and weight the patterns; the same numbers, about half the time.
                patterns, inverse = exact
                width_p = patterns.shape[0]
                codes = inverse[draws]
                codes += (np.arange(stop - start) * width_p)[:, None]
                counts = np.bincount(codes.ravel(), minlength=(stop - start) * width_p).reshape(stop - start, width_p)
                means[start:stop] = (counts.astype(np.float64)[:, :, None] * patterns[None, :, :]).sum(axis=1) / n
                continue
            draws += (np.arange(stop - start) * n)[:, None]
            counts = np.bincount(draws.ravel(), minlength=(stop - start) * n).reshape(stop - start, n)
            means[start:stop] = (counts.astype(np.float64) @ array) / n
        out.append(means)
    return out


def pooled_means(group_means: Sequence[np.ndarray]) -> np.ndarray:
    """The mean over groups of :func:`bootstrap_group_means`' output, added in group order (as recorded)."""
    total = np.zeros_like(group_means[0])
    for means in group_means:
        total += means
    return total / len(group_means)


def bootstrap_means(
    groups: Sequence[object], n_resamples: int = DEFAULT_N_RESAMPLES, seed: int = DEFAULT_BOOTSTRAP_SEED
) -> np.ndarray:
    """The (n_resamples, k) resampled pooled means: per resample, each group's cycles drawn with replacement
    (the draw order of :func:`bootstrap_group_means`), the groups' means averaged. With one group
    (a single seed) this is the order of the resample-by-resample loop."""
    return pooled_means(bootstrap_group_means(groups, n_resamples, seed))


def percentile_intervals(means: np.ndarray, level: float, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """The recorded interval of each column of resampled means (see :func:`bootstrap_ci`)."""
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    alpha = (1.0 - float(level)) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return [
        {
            "low": float(lo),
            "high": float(hi),
            "level": float(level),
            "n_resamples": int(n_resamples),
            "seed": int(seed),
            "method": "percentile",
            "unit": "cycle",
        }
        for lo, hi in zip(low, high)
    ]


def bootstrap_ci(
    groups: Sequence[object],
    n_resamples: int = DEFAULT_N_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> list[dict[str, Any]]:
    """Percentile bootstrap intervals of the pooled mean (mean over groups of each group's mean), one per column.

    Parameters
    ----------
    groups:
        One array per group (seed): ``(n_cycles,)`` or ``(n_cycles, k)`` per-cycle values
        (credits 1 / 0.5 / 0, or 0/1 correctness). Every group has the same ``k``.
    n_resamples, level, seed:
        Number of resamples, coverage (0 < level < 1) and the ``numpy.random.default_rng`` seed.

    Returns
    -------
    ``k`` records ``{"low", "high", "level", "n_resamples", "seed", "method": "percentile",
    "unit": "cycle"}``; low and high are the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles (numpy's default linear interpolation) of the resampled means.
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return percentile_intervals(bootstrap_means(groups, n_resamples, seed), level, n_resamples, seed)


def image_codes(image_ids: Any, n_cycles: int) -> np.ndarray:
    """Each cycle's images as codes 0..n_images-1: an ``(n_cycles, m)`` int64 array (``m`` images per cycle).

    ``image_ids`` is ``(n_cycles,)`` (one image or cluster label per cycle) or ``(n_cycles, m)``
    (a cycle's images, e.g. ``image_0`` and ``image_1``); labels are any values numpy can sort.
    """
    labels = np.asarray(image_ids)
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[0] != n_cycles or labels.shape[1] == 0:
        raise ValueError(f"image_ids: expected ({n_cycles},) or ({n_cycles}, m) labels, got shape {np.shape(image_ids)}")
    codes = np.unique(labels.ravel(), return_inverse=True)[1]
    return codes.reshape(labels.shape).astype(np.int64)


def bootstrap_image_means(
    values: object, image_ids: object, n_resamples: int = DEFAULT_N_RESAMPLES, seed: int = DEFAULT_BOOTSTRAP_SEED
) -> np.ndarray:
    """The (n_resamples, k) resampled means of per-cycle ``values`` when images, not cycles, are resampled.

    Each resample draws as many images as the cycles use, with replacement, from
    ``numpy.random.default_rng(seed)`` (``rng.integers(0, n_images, size=n_images)`` per resample).
    A cycle enters with the product of its images' draw counts as its weight (with one image
    per cycle: that image's count; with two: the multiway "pigeonhole" bootstrap of crossed
    designs), so every cycle that shares an image moves with it; the resampled mean is the
    weighted mean. A resample that keeps no cycle (weight 0 everywhere; possible only with
    two or more images per cycle) is drawn again from the same stream.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    array = _as_groups([values])[0]
    codes = image_codes(image_ids, array.shape[0])
    n_images = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    n_resamples = int(n_resamples)
    means = np.empty((n_resamples, array.shape[1]), dtype=np.float64)
    block = max(1, _BLOCK_VALUES // max(n_images, array.shape[0]))
    filled = 0
    for _ in range(100 * n_resamples):  # a bound on redraws: far beyond what a usable set needs
        if filled == n_resamples:
            break
        size = min(block, n_resamples - filled)
        draws = rng.integers(0, n_images, size=(size, n_images))
        draws += (np.arange(size) * n_images)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * n_images).reshape(size, n_images).astype(np.float64)
        weights = counts[:, codes[:, 0]]
        for column in range(1, codes.shape[1]):
            weights = weights * counts[:, codes[:, column]]
        totals = weights.sum(axis=1)
        kept = totals > 0
        got = int(kept.sum())
        means[filled : filled + got] = (weights[kept] @ array) / totals[kept][:, None]
        filled += got
    if filled < n_resamples:
        raise ValueError("image bootstrap: almost every resample kept no cycle; the cycles share too few images")
    return means


def image_bootstrap_ci(
    values: object,
    image_ids: object,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> list[dict[str, Any]]:
    """Percentile intervals of the mean of each column of ``values``, resampling images (:func:`bootstrap_image_means`).

    Recorded like :func:`bootstrap_ci`, with ``"unit": "image"``.
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    means = bootstrap_image_means(values, image_ids, n_resamples, seed)
    return [{**ci, "unit": "image"} for ci in percentile_intervals(means, level, n_resamples, seed)]
