"""Interaction diagnostics: what part of a score the cycle contrast can see.

- ``double_centering``: S = m + r 1^T + 1 c^T + I with row effects r, column effects
  c and interaction I (rows and columns of I sum to zero), and the share of the
  variance of S each part explains. Delta of any complete block depends on I only.
- Proposition 1 (population pairing gap): for unfiltered cycles built from two
  iid valid pairs, E[Delta] = 2 (E_P[s] - E_R[s]) with R = mu x nu the independent
  recombination of the pair distribution's marginals. ``pairing_gap`` estimates
  the gap by random recombination, ``check_pairing_identity`` compares it with
  the mean Delta of sampled unfiltered cycles, and ``exact_pairing_gap`` /
  ``exact_expected_delta`` compute both sides exactly on a finite population.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from clip_cycles.algebra.contrast import ScoreFunction, as_float64_vector, cycle_contrast


def _score_matrix(scores: object) -> np.ndarray:
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"score matrix must be 2-D (images x captions), got shape {matrix.shape}")
    if matrix.size == 0:
        raise ValueError(f"score matrix is empty (shape {matrix.shape})")
    bad = ~np.isfinite(matrix)
    if bad.any():
        row, col = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"score matrix has a non-finite value at row {row}, column {col}")
    return matrix


@dataclass
class InteractionDecomposition:
    """S = grand_mean + row_effects[:, None] + column_effects[None, :] + interaction.

    Sums of squares are over all cells; the three parts are orthogonal, so
    ``row_ss + column_ss + interaction_ss == total_ss`` (up to rounding) and the
    shares sum to 1. A constant matrix has total_ss 0; its shares are all 0.
    """

    grand_mean: float
    row_effects: np.ndarray
    column_effects: np.ndarray
    interaction: np.ndarray
    total_ss: float
    row_ss: float
    column_ss: float
    interaction_ss: float

    @property
    def shares(self) -> dict[str, float]:
        """Fraction of the total sum of squares explained by rows, columns and interaction."""
        if self.total_ss == 0.0:
            return {"row": 0.0, "column": 0.0, "interaction": 0.0}
        return {
            "row": self.row_ss / self.total_ss,
            "column": self.column_ss / self.total_ss,
            "interaction": self.interaction_ss / self.total_ss,
        }

    def reconstruct(self) -> np.ndarray:
        """The score matrix rebuilt from its four parts."""
        return self.grand_mean + self.row_effects[:, None] + self.column_effects[None, :] + self.interaction

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no full arrays)."""
        return {
            "shape": list(self.interaction.shape),
            "grand_mean": self.grand_mean,
            "total_ss": self.total_ss,
            "row_ss": self.row_ss,
            "column_ss": self.column_ss,
            "interaction_ss": self.interaction_ss,
            "shares": self.shares,
        }


def double_centering(scores: object) -> InteractionDecomposition:
    """Decompose an images x captions score matrix into mean, row, column and interaction parts."""
    matrix = _score_matrix(scores)
    grand = float(matrix.mean())
    row_means = matrix.mean(axis=1)
    col_means = matrix.mean(axis=0)
    rows = row_means - grand
    cols = col_means - grand
    interaction = matrix - row_means[:, None] - col_means[None, :] + grand
    n_rows, n_cols = matrix.shape
    return InteractionDecomposition(
        grand_mean=grand,
        row_effects=rows,
        column_effects=cols,
        interaction=interaction,
        total_ss=float(((matrix - grand) ** 2).sum()),
        row_ss=float(n_cols * (rows**2).sum()),
        column_ss=float(n_rows * (cols**2).sum()),
        interaction_ss=float((interaction**2).sum()),
    )


@dataclass
class PairingGap:
    """E_P[s] over observed pairs, E_R[s] over independent recombinations, and their gap."""

    joint_mean: float
    recombined_mean: float
    recombined_se: float
    n_pairs: int
    n_recombined: int
    seed: int

    @property
    def gap(self) -> float:
        """E_P[s] - E_R[s]: how much the score prefers the observed pairing."""
        return self.joint_mean - self.recombined_mean

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "joint_mean": self.joint_mean,
            "recombined_mean": self.recombined_mean,
            "recombined_se": self.recombined_se,
            "gap": self.gap,
            "n_pairs": self.n_pairs,
            "n_recombined": self.n_recombined,
            "seed": self.seed,
        }


def _pair_indices(image_idx: object, caption_idx: object) -> tuple[np.ndarray, np.ndarray]:
    u = np.asarray(image_idx)
    v = np.asarray(caption_idx)
    if u.ndim != 1 or v.ndim != 1 or u.shape != v.shape:
        raise ValueError(f"image_idx and caption_idx must be 1-D of equal length, got {u.shape} and {v.shape}")
    if u.shape[0] == 0:
        raise ValueError("empty pair sample: at least one valid pair is needed")
    for name, idx in (("image_idx", u), ("caption_idx", v)):
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"{name} must hold integers, got dtype {idx.dtype}")
        if (idx < 0).any():
            i = int(np.flatnonzero(idx < 0)[0])
            raise ValueError(f"{name}[{i}] is negative ({int(idx[i])})")
    return u.astype(np.int64), v.astype(np.int64)


def _scores(score_fn: ScoreFunction, u: np.ndarray, v: np.ndarray, what: str) -> np.ndarray:
    values = as_float64_vector(score_fn(u, v), f"score_fn output for {what}")
    if values.shape[0] != u.shape[0]:
        raise ValueError(f"score_fn returned {values.shape[0]} scores for {u.shape[0]} {what}")
    return values


def pairing_gap(
    score_fn: ScoreFunction, image_idx: object, caption_idx: object, n_recombined: int | None = None, seed: int = 0
) -> PairingGap:
    """Estimate E_P[s] - E_R[s] from a sample of valid pairs (image_idx[i], caption_idx[i]).

    E_P is the mean score of the observed pairs. E_R is estimated on ``n_recombined``
    (default: 10 x the sample size) pairs whose image and caption are drawn
    independently, with replacement, from the sample: exactly the product of the
    sample's marginals. ``score_fn(image_idx, caption_idx)`` is vectorized.
    """
    u, v = _pair_indices(image_idx, caption_idx)
    n = u.shape[0]
    m = 10 * n if n_recombined is None else int(n_recombined)
    if m < 2:
        raise ValueError(f"n_recombined must be at least 2, got {m}")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=m)
    b = rng.integers(0, n, size=m)
    joint = _scores(score_fn, u, v, "observed pairs")
    recombined = _scores(score_fn, u[a], v[b], "recombined pairs")
    return PairingGap(
        joint_mean=float(joint.mean()),
        recombined_mean=float(recombined.mean()),
        recombined_se=float(recombined.std(ddof=1) / math.sqrt(m)),
        n_pairs=n,
        n_recombined=m,
        seed=seed,
    )


def unfiltered_cycle_deltas(
    score_fn: ScoreFunction, image_idx: object, caption_idx: object, n_cycles: int, seed: int = 0
) -> np.ndarray:
    """Delta of ``n_cycles`` unfiltered cycles, each from two pairs drawn iid (with replacement).

    Unfiltered means no predicate and no distinctness condition: a draw may repeat a
    pair (its Delta is then 0), exactly as in Proposition 1's population.
    """
    u, v = _pair_indices(image_idx, caption_idx)
    if n_cycles < 1:
        raise ValueError(f"n_cycles must be positive, got {n_cycles}")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, u.shape[0], size=n_cycles)
    j = rng.integers(0, u.shape[0], size=n_cycles)
    return cycle_contrast(
        _scores(score_fn, u[i], v[i], "s11"),
        _scores(score_fn, u[i], v[j], "s12"),
        _scores(score_fn, u[j], v[i], "s21"),
        _scores(score_fn, u[j], v[j], "s22"),
    )


@dataclass
class PairingIdentityCheck:
    """Mean Delta of sampled unfiltered cycles against 2 x the estimated pairing gap."""

    mean_delta: float
    delta_se: float
    twice_gap: float
    twice_gap_se: float
    z: float
    z_max: float
    n_cycles: int
    gap: PairingGap

    @property
    def consistent(self) -> bool:
        """True when |mean Delta - 2 gap| is within ``z_max`` combined standard errors."""
        return abs(self.z) <= self.z_max

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "mean_delta": self.mean_delta,
            "delta_se": self.delta_se,
            "twice_gap": self.twice_gap,
            "twice_gap_se": self.twice_gap_se,
            "z": self.z,
            "z_max": self.z_max,
            "consistent": self.consistent,
            "n_cycles": self.n_cycles,
            "gap": self.gap.to_dict(),
        }


def check_pairing_identity(
    score_fn: ScoreFunction,
    image_idx: object,
    caption_idx: object,
    n_cycles: int = 100_000,
    n_recombined: int | None = None,
    seed: int = 0,
    z_max: float = 4.0,
) -> PairingIdentityCheck:
    """Check E[Delta] = 2 x (E_P[s] - E_R[s]) on unfiltered iid cycles from a pair sample.

    The population is the sample's empirical pair distribution; both sides are
    Monte Carlo estimates (independent streams), compared in standard errors.
    """
    deltas = unfiltered_cycle_deltas(score_fn, image_idx, caption_idx, n_cycles, seed)
    gap = pairing_gap(score_fn, image_idx, caption_idx, n_recombined, seed + 1)
    delta_se = float(deltas.std(ddof=1) / math.sqrt(n_cycles)) if n_cycles > 1 else 0.0
    combined = math.hypot(delta_se, 2 * gap.recombined_se)
    diff = float(deltas.mean()) - 2 * gap.gap
    z = 0.0 if diff == 0 else (math.inf if combined == 0 else diff / combined)
    return PairingIdentityCheck(
        mean_delta=float(deltas.mean()),
        delta_se=delta_se,
        twice_gap=2 * gap.gap,
        twice_gap_se=2 * gap.recombined_se,
        z=z,
        z_max=z_max,
        n_cycles=int(n_cycles),
        gap=gap,
    )


def _population(scores: object, image_idx: object, caption_idx: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    matrix = _score_matrix(scores)
    u, v = _pair_indices(image_idx, caption_idx)
    for name, idx, limit in (("image_idx", u, matrix.shape[0]), ("caption_idx", v, matrix.shape[1])):
        over = idx >= limit
        if over.any():
            i = int(np.flatnonzero(over)[0])
            raise ValueError(f"{name}[{i}] = {int(idx[i])} is out of range for a score matrix of shape {matrix.shape}")
    return matrix, u, v


def exact_pairing_gap(scores: object, image_idx: object, caption_idx: object) -> float:
    """E_P[s] - E_R[s] exactly, for P uniform over the listed pairs and a full score matrix.

    E_R averages S over every (image of pair i, caption of pair j), i.e. mu^T S nu.
    """
    matrix, u, v = _population(scores, image_idx, caption_idx)
    joint = matrix[u, v].mean()
    recombined = matrix[np.ix_(u, v)].mean()
    return float(joint - recombined)


def exact_expected_delta(scores: object, image_idx: object, caption_idx: object) -> float:
    """E[Delta] exactly over all ordered pairs (i, j) of listed pairs (unfiltered iid cycles).

    Enumerates every block (u_i, u_j, v_i, v_j), n^2 of them, and averages their contrasts.
    """
    matrix, u, v = _population(scores, image_idx, caption_idx)
    n = u.shape[0]
    i, j = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    deltas = cycle_contrast(matrix[u[i], v[i]], matrix[u[i], v[j]], matrix[u[j], v[i]], matrix[u[j], v[j]])
    return float(deltas.mean())
