"""Coverage of mean intervals on simulated crossed worlds with a known truth: numpy only, no I/O.

A world: ``n_images`` images, each with an effect ``a_i ~ N(0, image_sd^2)``; ``n_cycles`` cycles,
each on two distinct images drawn uniformly; a cycle's credit is 1 when ``a_u1 + a_u2 + e_c > 0``
with ``e_c ~ N(0, noise_sd^2)`` its own noise, else 0. The truth, the mean credit over fresh
images and noise, is exactly 0.5. The regimes of issue 53 (noise-dominated, mixed,
image-dominated) are settings of the two sds (:data:`REGIMES`). A paired difference of two
models on the same cycles is the noise-dominated case (what the images add cancels), so its
calibration is the first row's.

:func:`coverage` draws ``n_worlds`` worlds and returns the fraction whose interval holds 0.5,
for the two-way image-cluster interval (:mod:`clip_cycles.algebra.crossed`) and for the
product-weight image bootstrap it replaces (:func:`clip_cycles.algebra.bootstrap.bootstrap_image_means`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clip_cycles.algebra.bootstrap import bootstrap_image_means
from clip_cycles.algebra.crossed import crossed_mean_intervals

#: (image_sd, noise_sd) of each regime.
REGIMES: dict[str, tuple[float, float]] = {
    "noise-dominated": (0.1, 1.0),
    "mixed": (0.5, 1.0),
    "image-dominated": (1.0, 0.3),
}
#: The truth of every simulated world: the credit's mean over fresh images and noise.
TRUTH = 0.5


def crossed_world(
    rng: np.random.Generator, n_cycles: int, n_images: int, image_sd: float, noise_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """One world's per-cycle credits ``(n_cycles,)`` and images ``(n_cycles, 2)`` (module docstring)."""
    effects = rng.normal(0.0, image_sd, size=n_images)
    first = rng.integers(0, n_images, size=n_cycles)
    second = (first + 1 + rng.integers(0, n_images - 1, size=n_cycles)) % n_images
    latent = effects[first] + effects[second] + rng.normal(0.0, noise_sd, size=n_cycles)
    return (latent > 0.0).astype(np.float64), np.column_stack([first, second])


def coverage(
    regime: str,
    n_cycles: int,
    n_images: int,
    n_worlds: int,
    level: float = 0.95,
    seed: int = 0,
    bootstrap_resamples: int = 0,
) -> dict[str, Any]:
    """The fraction of ``n_worlds`` worlds whose interval holds :data:`TRUTH`, per method.

    ``bootstrap_resamples`` > 0 also measures the product-weight bootstrap with that many
    resamples. Returns ``{"regime", "n_cycles", "n_images", "n_worlds", "level", "two_way",
    "bootstrap"?, "two_way_se_over_sd"}``: the last is the mean estimated se over the sd of the
    worlds' means (1.0 when the se is right on average).
    """
    image_sd, noise_sd = REGIMES[regime]
    rng = np.random.default_rng(seed)
    alpha = (1.0 - level) / 2.0
    hits, boot_hits, means, ses = 0, 0, [], []
    for world in range(n_worlds):
        credit, images = crossed_world(rng, n_cycles, n_images, image_sd, noise_sd)
        (ci,) = crossed_mean_intervals(credit, images, level)
        hits += ci["low"] <= TRUTH <= ci["high"]
        means.append(credit.mean())
        ses.append(ci["se"])
        if bootstrap_resamples:
            drawn = bootstrap_image_means(credit, images, bootstrap_resamples, seed=world)[:, 0]
            low, high = np.quantile(drawn, [alpha, 1.0 - alpha])
            boot_hits += low <= TRUTH <= high
    out: dict[str, Any] = {
        "regime": regime,
        "n_cycles": n_cycles,
        "n_images": n_images,
        "n_worlds": n_worlds,
        "level": level,
        "two_way": hits / n_worlds,
        "two_way_se_over_sd": float(np.mean(ses) / np.std(means, ddof=1)),
    }
    if bootstrap_resamples:
        out["bootstrap"] = boot_hits / n_worlds
    return out
