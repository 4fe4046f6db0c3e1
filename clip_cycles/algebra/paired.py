"""Paired differences of two scores on the same cycles, with an interval clustered on images: numpy only, no I/O.

Two scores (model vs model, model vs a blind baseline) credited on the same cycles give a
per-cycle difference ``a - b``; its mean is the difference of their CycleAcc. Cycles on two
images (``(n, 2)`` image ids) get the two-way image-cluster robust interval of
:mod:`clip_cycles.algebra.crossed` on the per-cycle differences (what the two scores share
cancels in them); one-image designs (benchmark items: ``(n,)`` ids) keep the plain cluster
bootstrap over items (:func:`clip_cycles.algebra.bootstrap.bootstrap_image_means`, each item's
comparisons drawn together). A difference is called only with the declared minimum of evidence
(:data:`MIN_CYCLES` cycles, :data:`MIN_IMAGES` distinct images) and only when the interval
excludes 0. ``p_value`` (two-sided; the t statistic's, or the bootstrap's percentile p-value) is
what :mod:`clip_cycles.algebra.multiplicity` adjusts when several differences are called together.
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
from clip_cycles.algebra.crossed import crossed_df, crossed_record, crossed_variance, incidence_codes, t_two_sided_p

#: The interval method of one-image designs (benchmark items): a percentile bootstrap resampling items.
CLUSTER_BOOTSTRAP_METHOD = "cluster bootstrap, percentile"

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
    #: The standard error of ``diff`` (the two-way estimate, or the bootstrap draws' sd).
    se: float = 0.0
    #: Degrees of freedom of the t quantile (0 for the bootstrap).
    df: float = 0.0
    #: Two-sided p-value of "no difference" (what a multiplicity adjustment takes).
    p_value: float = 1.0
    #: How the interval was made, and over what unit.
    interval_method: str = ""
    unit: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready fields; ``method`` repeats ``interval_method`` (the name older readers know)."""
        return {**asdict(self), "method": self.interval_method}


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
    """The difference of two scores' mean credit on the same cycles, with its interval (module docstring).

    Parameters
    ----------
    correct_a, correct_b:
        ``(n_cycles,)`` per-cycle credits (1 / 0.5 / 0, or any finite values) of A and B, aligned by cycle.
    image_ids:
        ``(n_cycles,)`` or ``(n_cycles, m)`` image labels of each cycle (see :func:`image_codes`).
    n_resamples, level, seed:
        As in :func:`clip_cycles.algebra.bootstrap.bootstrap_ci`; the resamples and seed serve one-image
        designs only (recorded as 0 for the two-way interval, which draws nothing).
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
    mean_a, mean_b = float(a.mean()), float(b.mean())
    two_images = np.ndim(image_ids) == 2 and np.shape(image_ids)[1] == 2
    if two_images:
        codes = incidence_codes(image_ids, a.shape[0])
        n_images = int(codes.max()) + 1
        se = float(np.sqrt(crossed_variance(a - b, codes)[0]))
        df = crossed_df(codes)
        record = crossed_record(mean_a - mean_b, se, n_images, df, level)
        low, high = record["low"], record["high"]
        p_value = t_two_sided_p((mean_a - mean_b) / se, df) if se > 0.0 else float(mean_a == mean_b)
        method, unit, n_resamples, seed = record["method"], record["unit"], 0, 0
    else:
        n_images = int(image_codes(image_ids, a.shape[0]).max()) + 1
        means = bootstrap_image_means(np.column_stack([a, b]), image_ids, n_resamples, seed)
        resampled = means[:, 0] - means[:, 1]
        alpha = (1.0 - float(level)) / 2.0
        low, high = (float(x) for x in np.quantile(resampled, [alpha, 1.0 - alpha]))
        se, df = float(np.std(resampled, ddof=1)) if resampled.size > 1 else 0.0, 0.0
        # The percentile p-value: twice the smaller share of draws on either side of 0.
        p_value = float(min(1.0, 2.0 * min(np.mean(resampled <= 0.0), np.mean(resampled >= 0.0))))
        method, unit = CLUSTER_BOOTSTRAP_METHOD, "items"
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
        se=se,
        df=float(df),
        p_value=p_value,
        interval_method=method,
        unit=unit,
    )
