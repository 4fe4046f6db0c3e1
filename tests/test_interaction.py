"""Interaction diagnostics: double centering, and Proposition 1 (E[Delta] = 2 x pairing gap)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.algebra.contrast import cycle_contrast
from clip_cycles.algebra.interaction import (
    check_pairing_identity,
    double_centering,
    exact_expected_delta,
    exact_pairing_gap,
    pairing_gap,
    unfiltered_cycle_deltas,
)


def block_deltas(matrix: np.ndarray, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    u = np.stack([rng.choice(matrix.shape[0], 2, replace=False) for _ in range(n)])
    v = np.stack([rng.choice(matrix.shape[1], 2, replace=False) for _ in range(n)])
    return u, v


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(2, 12), cols=st.integers(2, 12))
def test_double_centering_is_an_orthogonal_decomposition(seed, rows, cols):
    rng = np.random.default_rng(seed)
    scale = 10 ** rng.uniform(-2, 2)
    scores = rng.normal(0, scale, size=(rows, cols))
    parts = double_centering(scores)
    np.testing.assert_allclose(parts.reconstruct(), scores, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(parts.interaction.sum(axis=0), 0, atol=1e-10 * scale)
    np.testing.assert_allclose(parts.interaction.sum(axis=1), 0, atol=1e-10 * scale)
    assert sum(parts.shares.values()) == pytest.approx(1.0, rel=1e-10)
    # Delta of any complete block sees only the interaction part.
    u, v = block_deltas(scores, rng, 30)
    full = cycle_contrast(scores[u[:, 0], v[:, 0]], scores[u[:, 0], v[:, 1]], scores[u[:, 1], v[:, 0]], scores[u[:, 1], v[:, 1]])
    inter = parts.interaction
    only = cycle_contrast(inter[u[:, 0], v[:, 0]], inter[u[:, 0], v[:, 1]], inter[u[:, 1], v[:, 0]], inter[u[:, 1], v[:, 1]])
    np.testing.assert_allclose(full, only, rtol=1e-9, atol=1e-10 * scale)
    # Adding row and column effects leaves the interaction alone and moves only the other shares.
    shifted = double_centering(scores + rng.normal(size=(rows, 1)) + rng.normal(size=(1, cols)))
    np.testing.assert_allclose(shifted.interaction, parts.interaction, atol=1e-9 * (1 + scale))


def test_shares_of_known_matrices():
    rows_only = double_centering(np.array([[1.0, 1.0], [3.0, 3.0]]))
    assert rows_only.shares == {"row": 1.0, "column": 0.0, "interaction": 0.0}
    checker = double_centering(np.array([[1.0, -1.0], [-1.0, 1.0]]))
    assert checker.shares == {"row": 0.0, "column": 0.0, "interaction": 1.0}
    constant = double_centering(np.full((3, 2), 4.0))
    assert constant.total_ss == 0.0 and constant.shares == {"row": 0.0, "column": 0.0, "interaction": 0.0}
    assert constant.to_dict()["shape"] == [3, 2]


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), log_n=st.integers(0, 5), rows=st.integers(1, 9), cols=st.integers(1, 9))
def test_pairing_identity_holds_exactly_on_a_finite_population(seed, log_n, rows, cols):
    # Integer scores and 2^k pairs: every sum and mean is exact in float64, so equality is exact.
    rng = np.random.default_rng(seed)
    scores = rng.integers(-50, 51, size=(rows, cols)).astype(np.float64)
    n = 2**log_n
    u = rng.integers(0, rows, size=n)
    v = rng.integers(0, cols, size=n)
    assert exact_expected_delta(scores, u, v) == 2 * exact_pairing_gap(scores, u, v)


def test_pairing_identity_on_a_big_sample():
    # Pairs from a coupled Gaussian: E_P[phi.psi] = sum of couplings = 2.0, E_R[phi.psi] = mu.nu.
    rng = np.random.default_rng(0)
    n, d = 20000, 4
    coupling = np.array([0.8, 0.6, 0.4, 0.2])
    phi = rng.normal(size=(n, d)) + 0.5
    psi = coupling * (phi - 0.5) + np.sqrt(1 - coupling**2) * rng.normal(size=(n, d)) - 0.3
    score = lambda a, b: np.einsum("ij,ij->i", phi[a], psi[b]) + 3.0 * phi[a, 0] - psi[b, 1]  # noqa: E731
    idx = np.arange(n)
    check = check_pairing_identity(score, idx, idx, n_cycles=200_000, seed=1)
    assert check.consistent, check.to_dict()
    assert check.mean_delta == pytest.approx(2 * coupling.sum(), abs=0.05)
    assert check.twice_gap == pytest.approx(2 * coupling.sum(), abs=0.05)
    # Sampling noise is what separates the two sides: they agree to a few standard errors, not exactly.
    assert abs(check.mean_delta - check.twice_gap) < 4 * np.hypot(check.delta_se, check.twice_gap_se)
    # A score with no pairing preference has zero gap and zero mean Delta.
    flat = check_pairing_identity(lambda a, b: phi[a, 0] + psi[b, 2], idx, idx, n_cycles=50_000, seed=2)
    assert flat.mean_delta == pytest.approx(0.0, abs=1e-12)
    assert flat.consistent


def test_pairing_gap_is_deterministic_and_validates():
    idx = np.arange(50)
    values = np.random.default_rng(3).normal(size=(50, 50))
    score = lambda a, b: values[a, b]  # noqa: E731
    assert pairing_gap(score, idx, idx, seed=4).to_dict() == pairing_gap(score, idx, idx, seed=4).to_dict()
    with pytest.raises(ValueError, match="empty pair sample"):
        pairing_gap(score, np.array([], dtype=int), np.array([], dtype=int))
    with pytest.raises(ValueError, match="equal length"):
        pairing_gap(score, idx, idx[:3])
    with pytest.raises(ValueError, match=r"caption_idx\[2\] is negative"):
        unfiltered_cycle_deltas(score, idx[:3], np.array([0, 1, -1]), 10)
    with pytest.raises(ValueError, match="non-finite value"):
        pairing_gap(lambda a, b: np.full(len(a), np.nan), idx, idx)
    with pytest.raises(ValueError, match="non-finite value at row 1, column 0"):
        double_centering(np.array([[0.0, 1.0], [np.inf, 2.0]]))
    with pytest.raises(ValueError, match="empty"):
        double_centering(np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"image_idx\[0\] = 5 is out of range"):
        exact_pairing_gap(np.zeros((2, 2)), np.array([5]), np.array([0]))
