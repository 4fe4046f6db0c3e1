"""Interaction diagnostics: double centering, and Proposition 1 (E[Delta] = 2 x pairing gap)."""

from __future__ import annotations

import math

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


# --------------------------------------------------------------------------- field by field, by hand


def _stdev(values: list[float]) -> float:
    """Sample standard deviation (n - 1), by hand."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))


def test_double_centering_of_a_rectangular_matrix_by_hand():
    # 2 x 3, rows and columns of different effect: sums of squares worked out with plain loops.
    rows_, cols_ = [[1.0, 2.0, 6.0], [3.0, 4.0, 9.0]], 3
    grand = sum(map(sum, rows_)) / 6
    row_means = [sum(r) / cols_ for r in rows_]
    col_means = [(rows_[0][j] + rows_[1][j]) / 2 for j in range(cols_)]
    total = sum((x - grand) ** 2 for r in rows_ for x in r)
    row_ss = cols_ * sum((m - grand) ** 2 for m in row_means)
    col_ss = 2 * sum((m - grand) ** 2 for m in col_means)
    inter = [[rows_[i][j] - row_means[i] - col_means[j] + grand for j in range(cols_)] for i in range(2)]
    inter_ss = sum(x**2 for r in inter for x in r)
    parts = double_centering(rows_)
    assert parts.grand_mean == pytest.approx(grand)
    np.testing.assert_allclose(parts.row_effects, [m - grand for m in row_means])
    np.testing.assert_allclose(parts.column_effects, [m - grand for m in col_means])
    np.testing.assert_allclose(parts.interaction, inter)
    summary = parts.to_dict()
    assert set(summary) == {"shape", "grand_mean", "total_ss", "row_ss", "column_ss", "interaction_ss", "shares"}
    assert summary["shape"] == [2, 3]
    assert summary["grand_mean"] == pytest.approx(grand)
    assert (summary["total_ss"], summary["row_ss"], summary["column_ss"], summary["interaction_ss"]) == pytest.approx(
        (total, row_ss, col_ss, inter_ss)
    )
    assert summary["shares"] == pytest.approx({"row": row_ss / total, "column": col_ss / total, "interaction": inter_ss / total})
    assert 0 < summary["shares"]["row"] != summary["shares"]["column"] > 0  # both effects present, of different size


def test_pairing_gap_fields_replay_the_recorded_draws():
    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(6, 6))
    u, v = np.array([0, 1, 2, 3, 4]), np.array([5, 4, 3, 2, 1])
    score = lambda a, b: matrix[a, b]  # noqa: E731
    m, seed = 13, 21
    draws = np.random.default_rng(seed)
    a, b = draws.integers(0, 5, size=m), draws.integers(0, 5, size=m)
    recombined = [float(matrix[u[i], v[j]]) for i, j in zip(a, b)]
    joint = sum(float(matrix[i, j]) for i, j in zip(u, v)) / 5
    gap = pairing_gap(score, u, v, n_recombined=m, seed=seed)
    expected = {
        "joint_mean": joint,
        "recombined_mean": sum(recombined) / m,
        "recombined_se": _stdev(recombined) / math.sqrt(m),
        "gap": joint - sum(recombined) / m,
        "n_pairs": 5,
        "n_recombined": m,
        "seed": seed,
    }
    assert gap.to_dict() == pytest.approx(expected, abs=1e-12)
    assert set(gap.to_dict()) == set(expected)
    # The default is ten recombinations per observed pair.
    assert pairing_gap(score, u, v).n_recombined == 50


def test_pairing_identity_check_fields_replay_the_recorded_draws():
    rng = np.random.default_rng(8)
    matrix = rng.normal(size=(4, 4))
    u, v = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    score = lambda a, b: matrix[a, b]  # noqa: E731
    n_cycles, m, seed = 2, 6, 3  # two cycles: the smallest count with a standard error
    draws = np.random.default_rng(seed)
    i, j = draws.integers(0, 4, size=n_cycles), draws.integers(0, 4, size=n_cycles)
    deltas = [float(matrix[u[p], v[p]] + matrix[u[q], v[q]] - matrix[u[p], v[q]] - matrix[u[q], v[p]]) for p, q in zip(i, j)]
    np.testing.assert_allclose(unfiltered_cycle_deltas(score, u, v, n_cycles, seed), deltas, atol=1e-12)
    gap = pairing_gap(score, u, v, m, seed + 1)  # the gap's stream is seed + 1 (checked field by field above)
    delta_se = _stdev(deltas) / math.sqrt(n_cycles)
    twice_gap_se = 2 * gap.recombined_se
    z = (sum(deltas) / n_cycles - 2 * gap.gap) / math.sqrt(delta_se**2 + twice_gap_se**2)
    check = check_pairing_identity(score, u, v, n_cycles=n_cycles, n_recombined=m, seed=seed, z_max=abs(z) * 0.999)
    summary = check.to_dict()
    assert set(summary) == {"mean_delta", "delta_se", "twice_gap", "twice_gap_se", "z", "z_max", "consistent", "n_cycles", "gap"}
    assert summary["mean_delta"] == pytest.approx(sum(deltas) / n_cycles, abs=1e-12)
    assert summary["delta_se"] == pytest.approx(delta_se, abs=1e-12) and delta_se > 0
    assert summary["twice_gap"] == pytest.approx(2 * gap.gap, abs=1e-12)
    assert summary["twice_gap_se"] == pytest.approx(twice_gap_se, abs=1e-12)
    assert summary["z"] == pytest.approx(z, rel=1e-9) and z != 0
    assert summary["z_max"] == abs(z) * 0.999 and summary["consistent"] is False  # |z| just above z_max
    assert summary["n_cycles"] == n_cycles and summary["gap"] == gap.to_dict()
    just = check_pairing_identity(score, u, v, n_cycles=n_cycles, n_recombined=m, seed=seed, z_max=abs(check.z))
    assert just.consistent  # |z| == z_max (the z checked above) is still consistent
    # One cycle has no standard error: 0, not a NaN from ddof=1.
    one = check_pairing_identity(score, u, v, n_cycles=1, n_recombined=m, seed=seed)
    assert one.delta_se == 0.0 and one.n_cycles == 1


def test_pairing_identity_z_at_zero_difference_and_zero_error():
    # A score with no pairing preference: every Delta and the gap are 0, so z is 0 however small the errors.
    flat = check_pairing_identity(lambda a, b: np.zeros(len(a)), np.arange(3), np.arange(3), n_cycles=5, n_recombined=4)
    assert flat.z == 0.0 and flat.consistent
    # A difference with no standard error at all is infinitely many errors away: one cycle (no Delta
    # error) and recombinations that all score the same. Find such a seed by replaying the draws here.
    matrix = np.array([[1.0, 0.0], [0.0, 0.0]])
    score = lambda a, b: matrix[a, b]  # noqa: E731
    idx = np.arange(2)
    for seed in range(200):
        draws = np.random.default_rng(seed)
        p, q = draws.integers(0, 2, size=1)[0], draws.integers(0, 2, size=1)[0]
        gap_draws = np.random.default_rng(seed + 1)
        a, b = gap_draws.integers(0, 2, size=2), gap_draws.integers(0, 2, size=2)
        recombined = matrix[a, b]
        delta = 1.0 if p != q else 0.0
        if recombined[0] == recombined[1] and delta != 2 * (0.5 - recombined.mean()):
            break
    else:
        pytest.fail("no seed among 200 gives one cycle and equal recombined scores")
    check = check_pairing_identity(score, idx, idx, n_cycles=1, n_recombined=2, seed=seed)
    assert check.delta_se == 0.0 and check.twice_gap_se == 0.0
    assert check.mean_delta == delta and check.twice_gap == 2 * (0.5 - recombined.mean())
    assert check.z == math.inf  # |z| is what the check reads; the sign of an infinite z is not recorded
    assert not check.consistent


def test_exact_sides_of_the_identity_by_hand():
    matrix = np.array([[5.0, 1.0, 0.0], [2.0, 7.0, 3.0]])
    u, v = np.array([0, 1]), np.array([0, 1])
    # E_P = (5 + 7) / 2; E_R = mean of S[u_i, v_j] over i, j = (5 + 1 + 2 + 7) / 4.
    assert exact_pairing_gap(matrix, u, v) == pytest.approx(6.0 - 15 / 4)
    # Ordered pairs (0,0), (1,1) give 0; (0,1) and (1,0) give 5 + 7 - 1 - 2 = 9 each: mean 18 / 4.
    assert exact_expected_delta(matrix, u, v) == pytest.approx(18 / 4)
    # The last valid row and column are in range; one past is refused, naming the index.
    assert exact_pairing_gap(matrix, np.array([1]), np.array([2])) == 0.0
    with pytest.raises(ValueError, match=r"^caption_idx\[1\] = 3 is out of range for a score matrix of shape \(2, 3\)$"):
        exact_expected_delta(matrix, np.array([0, 1]), np.array([0, 3]))
    with pytest.raises(ValueError, match=r"^image_idx\[0\] = 2 is out of range"):
        exact_pairing_gap(matrix, np.array([2]), np.array([0]))


def test_pair_and_count_arguments_are_checked_with_a_sentence():
    idx = np.arange(3)
    score = lambda a, b: np.asarray(a, dtype=float) - b  # noqa: E731
    assert pairing_gap(score, idx, idx, n_recombined=2).n_recombined == 2  # the smallest count with an error
    with pytest.raises(ValueError, match=r"^n_recombined must be at least 2, got 1$"):
        pairing_gap(score, idx, idx, n_recombined=1)
    assert unfiltered_cycle_deltas(score, idx, idx, 1).shape == (1,)
    with pytest.raises(ValueError, match=r"^n_cycles must be positive, got 0$"):
        unfiltered_cycle_deltas(score, idx, idx, 0)
    with pytest.raises(ValueError, match=r"^image_idx must hold integers, got dtype float64$"):
        pairing_gap(score, idx.astype(float), idx)
    with pytest.raises(ValueError, match=r"^caption_idx must hold integers, got dtype float64$"):
        pairing_gap(score, idx, idx.astype(float))
    with pytest.raises(ValueError, match=r"^image_idx\[1\] is negative \(-4\)$"):
        pairing_gap(score, np.array([0, -4, 1]), idx)
    with pytest.raises(ValueError, match=r"^image_idx and caption_idx must be 1-D of equal length, got \(3,\) and \(1, 3\)$"):
        pairing_gap(score, idx, idx[None, :])
    with pytest.raises(ValueError, match=r"^image_idx and caption_idx must be 1-D of equal length, got \(1, 3\) and \(3,\)$"):
        pairing_gap(score, idx[None, :], idx)
    with pytest.raises(ValueError, match=r"^empty pair sample: at least one valid pair is needed$"):
        pairing_gap(score, idx[:0], idx[:0])
    with pytest.raises(ValueError, match=r"^score_fn returned 2 scores for 3 observed pairs$"):
        pairing_gap(lambda a, b: np.zeros(2), idx, idx)
    with pytest.raises(ValueError, match=r"^score_fn output for s11 has a non-finite value"):
        unfiltered_cycle_deltas(lambda a, b: np.full(len(a), np.inf), idx, idx, 2)
    with pytest.raises(ValueError, match=r"^score matrix must be 2-D \(images x captions\), got shape \(3,\)$"):
        double_centering(np.zeros(3))
    with pytest.raises(ValueError, match=r"^score matrix is empty \(shape \(0, 3\)\)$"):
        double_centering(np.zeros((0, 3)))


def test_defaults_are_the_recorded_ones():
    """Defaults are part of what makes a result reproducible: seed 0 (the gap on seed 1), 100 000 cycles, z_max 4."""
    values = np.arange(16, dtype=np.float64).reshape(4, 4) ** 1.5
    score = lambda a, b: values[a, b]  # noqa: E731
    u, v = np.array([0, 1, 2, 3]), np.array([2, 0, 3, 1])
    draws = np.random.default_rng(0)
    i, j = draws.integers(0, 4, size=7), draws.integers(0, 4, size=7)
    expected = [values[u[p], v[p]] + values[u[q], v[q]] - values[u[p], v[q]] - values[u[q], v[p]] for p, q in zip(i, j)]
    np.testing.assert_allclose(unfiltered_cycle_deltas(score, u, v, 7), expected, atol=1e-12)
    assert pairing_gap(score, u, v).seed == 0
    check = check_pairing_identity(score, u, v)
    assert (check.n_cycles, check.z_max, check.gap.seed) == (100_000, 4.0, 1)


@pytest.mark.parametrize("bad_call", [0, 1, 2, 3])
def test_a_non_finite_score_names_its_cycle_term(bad_call):
    """The four score calls of an unfiltered cycle are s11, s12, s21, s22, in that order; a bad one is named."""
    calls = []

    def score(a, b):
        calls.append(len(a))
        return np.full(len(a), np.inf if len(calls) - 1 == bad_call else 1.0)

    label = ("s11", "s12", "s21", "s22")[bad_call]
    with pytest.raises(ValueError, match=rf"^score_fn output for {label} has a non-finite value \(inf\) at index 0$"):
        unfiltered_cycle_deltas(score, np.arange(3), np.arange(3), 4)


def test_a_missing_score_is_a_non_finite_value_not_a_numpy_type_error():
    with pytest.raises(ValueError, match=r"^score matrix has a non-finite value at row 0, column 1$"):
        double_centering([[1.0, None], [2.0, 3.0]])
    with pytest.raises(ValueError, match=r"^score matrix has a non-finite value at row 1, column 0$"):
        exact_pairing_gap([[1.0, 0.0], [None, 3.0]], np.array([0]), np.array([0]))


def test_a_bad_score_of_the_recombined_pairs_is_named():
    """pairing_gap scores the observed pairs first, then the recombined ones; a bad second call names the latter."""

    def bad_second_call(values_of_second_call):
        calls = []

        def score(a, b):
            calls.append(len(a))
            return np.zeros(len(a)) if len(calls) == 1 else values_of_second_call(len(a))

        return score

    short = bad_second_call(lambda n: np.zeros(1))
    with pytest.raises(ValueError, match=r"^score_fn returned 1 scores for 6 recombined pairs$"):
        pairing_gap(short, np.arange(3), np.arange(3), n_recombined=6)
    missing = bad_second_call(lambda n: np.full(n, np.nan))
    with pytest.raises(ValueError, match=r"^score_fn output for recombined pairs has a non-finite value \(nan\) at index 0$"):
        pairing_gap(missing, np.arange(3), np.arange(3))
