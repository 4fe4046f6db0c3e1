"""The two-way image-cluster interval written out with dense n x n matrices: a second formula for tests.

Independent of :mod:`clip_cycles.algebra.crossed`'s sparse sums: ``K[c, c'] = 1`` when cycles c and c'
share an image, ``C`` centres within groups, ``Q = C W K W C``. The variance is
``sum(w^2) / max(tr Q, sum(w^2) / G) * raw`` with ``raw = u' K u`` (``u = W C y``), or the one-way sum over
image pairs when ``raw`` cancels; the t quantile's df is ``min(G - 1, max(tr(Q)^2 / tr(Q^2), 1))``
(``G - 1`` when ``Q`` vanishes).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats


def dense_variance_and_df(
    values: Sequence[float],
    images: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    groups: Sequence[object] | None = None,
) -> tuple[float, float]:
    """(variance, df) of ``sum_c w_c y_c`` over cycles on ``images`` (two labels each)."""
    y = np.asarray(values, dtype=np.float64)
    n = y.size
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=np.float64)
    g = [0] * n if groups is None else list(groups)
    shared = np.array([[float(bool(set(images[i]) & set(images[j]))) for j in range(n)] for i in range(n)])
    same_pair = np.array([[float(sorted(images[i]) == sorted(images[j])) for j in range(n)] for i in range(n)])
    size = {label: g.count(label) for label in g}
    centre = np.eye(n) - np.array([[float(g[i] == g[j]) / size[g[i]] for j in range(n)] for i in range(n)])
    u = w * (centre @ y)
    raw, one_way = float(u @ shared @ u), float(u @ same_pair @ u)
    q = centre @ np.diag(w) @ shared @ np.diag(w) @ centre
    n_images = len({label for pair in images for label in pair})
    total = float((w**2).sum())
    factor = total / max(float(np.trace(q)), total / n_images)
    variance = factor * (raw if raw > 1e-9 * one_way else one_way)
    if n_images < 2:  # one cluster: the df is a placeholder (the interval has no width)
        return variance, 1.0
    squared = float(np.trace(q @ q))
    bell_mccaffrey = float(np.trace(q)) ** 2 / squared if squared > 0 else float(n_images - 1)
    return variance, float(min(n_images - 1, max(bell_mccaffrey, 1.0)))


def dense_interval(
    values: Sequence[float],
    images: Sequence[Sequence[str]],
    level: float = 0.95,
    weights: Sequence[float] | None = None,
    groups: Sequence[object] | None = None,
) -> tuple[float, float, float]:
    """(estimate, low, high): ``estimate +- t_{(1 + level) / 2, df} se`` with scipy's t quantile."""
    y = np.asarray(values, dtype=np.float64)
    w = np.full(y.size, 1.0 / y.size) if weights is None else np.asarray(weights, dtype=np.float64)
    variance, df = dense_variance_and_df(y, images, w, groups)
    estimate = float(w @ y)
    half = float(stats.t.ppf(0.5 + level / 2.0, df)) * float(np.sqrt(variance))
    return estimate, estimate - half, estimate + half
