"""Paired differences of two scores on the same cycles, with an image bootstrap interval: numpy only, no I/O.

Two scores (model vs model, model vs a blind baseline) credited on the same cycles give a
per-cycle difference ``a - b``; its mean is the difference of their CycleAcc. The interval
resamples images (:func:`clip_cycles.algebra.bootstrap.bootstrap_image_means`): cycles that
share an image move together, and both scores are read on the same draws, so what the two
share cancels. A difference is called only with the declared minimum of evidence
(:data:`MIN_CYCLES` cycles, :data:`MIN_IMAGES` distinct images) and only when the interval
excludes 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from clip_cycles.algebra.bootstrap import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_LEVEL,
    DEFAULT_N_RESAMPLES,
    bootstrap_image_means,
    image_codes,
)

#: Fewest cycles a difference is called on.
MIN_CYCLES = 30
#: Fewest distinct images a difference is called on (the unit the interval resamples).
MIN_IMAGES = 20
#: Every verdict of :func:`paired_difference`, in this order: A's CycleAcc above B's (interval above 0),
#: B's above A's (interval below 0), the interval holds 0, below the minimum of evidence.
VERDICTS: tuple[str, ...] = ("A above B", "B above A", "within noise", "too few comparisons")


@dataclass(frozen=True)
class PairedDifference:
    """``diff`` = mean(a) - mean(b) over ``n_cycles`` cycles on ``n_images`` images, its interval and verdict."""

    n_cycles: int
    n_images: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    level: float
    n_resamples: int
    seed: int
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready fields, with ``method`` and ``unit`` of the interval."""
        return {**asdict(self), "method": "percentile", "unit": "image"}


def verdict_of(n_cycles: int, n_images: int, ci_low: float, ci_high: float, min_cycles: int, min_images: int) -> str:
    """One of :data:`VERDICTS` from the evidence and the interval."""
    if n_cycles < min_cycles or n_images < min_images:
        return VERDICTS[3]
    if ci_low > 0.0:
        return VERDICTS[0]
    if ci_high < 0.0:
        return VERDICTS[1]
    return VERDICTS[2]


def paired_difference(
    correct_a: object,
    correct_b: object,
    image_ids: object,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    min_cycles: int = MIN_CYCLES,
    min_images: int = MIN_IMAGES,
) -> PairedDifference:
    """The difference of two scores' mean credit on the same cycles, with a paired image bootstrap interval.

    Parameters
    ----------
    correct_a, correct_b:
        ``(n_cycles,)`` per-cycle credits (1 / 0.5 / 0, or any finite values) of A and B, aligned by cycle.
    image_ids:
        ``(n_cycles,)`` or ``(n_cycles, m)`` image labels of each cycle (see :func:`image_codes`).
    n_resamples, level, seed:
        As in :func:`clip_cycles.algebra.bootstrap.bootstrap_ci`.
    min_cycles, min_images:
        Below either, the verdict is "too few comparisons" (the interval is still reported).
    """
    a = np.asarray(correct_a, dtype=np.float64)
    b = np.asarray(correct_b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.shape[0] == 0:
        raise ValueError(f"paired_difference: expected two non-empty (n,) arrays of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired_difference: per-cycle values must be finite")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    n_images = int(image_codes(image_ids, a.shape[0]).max()) + 1
    means = bootstrap_image_means(np.column_stack([a, b]), image_ids, n_resamples, seed)
    resampled = means[:, 0] - means[:, 1]
    alpha = (1.0 - float(level)) / 2.0
    low, high = (float(x) for x in np.quantile(resampled, [alpha, 1.0 - alpha]))
    mean_a, mean_b = float(a.mean()), float(b.mean())
    n = int(a.shape[0])
    return PairedDifference(
        n_cycles=n,
        n_images=n_images,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=mean_a - mean_b,
        ci_low=low,
        ci_high=high,
        level=float(level),
        n_resamples=int(n_resamples),
        seed=int(seed),
        verdict=verdict_of(n, n_images, low, high, min_cycles, min_images),
    )
