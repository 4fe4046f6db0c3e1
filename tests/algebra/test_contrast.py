"""The cycle contrast and CycleAcc: invariances, exact half ties, gathering, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from clip_cycles.algebra.contrast import (
    DEFAULT_TIE_TOLERANCE,
    bilinear_deltas,
    block_scores_from_embeddings,
    cycle_acc,
    cycle_contrast,
    cycle_credits,
    deltas_from_blocks,
    deltas_from_embeddings,
    deltas_from_score_fn,
    validate_cycles,
)

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


def random_cycles(rng: np.random.Generator, n: int, n_images: int, n_captions: int) -> np.ndarray:
    u = np.stack([rng.choice(n_images, size=2, replace=False) for _ in range(n)])
    v = np.stack([rng.choice(n_captions, size=2, replace=False) for _ in range(n)])
    return np.concatenate([u, v], axis=1)


def deltas_of_matrix(scores: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    # By hand, not through cycle_contrast: the tests that compare against it must not share its arithmetic.
    u1, u2, v1, v2 = cycles.T
    scores = np.asarray(scores, dtype=np.float64)
    return scores[u1, v1] + scores[u2, v2] - scores[u1, v2] - scores[u2, v1]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=2, max_value=7),
    st.integers(min_value=2, max_value=7),
    st.integers(min_value=0, max_value=2**32 - 1),
    finite,
)
def test_delta_is_invariant_to_row_and_column_effects(n_images: int, n_captions: int, seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_images, n_captions))
    a = rng.normal(size=n_images) * scale
    b = rng.normal(size=n_captions) * scale
    cycles = random_cycles(rng, 20, n_images, n_captions)
    base = deltas_of_matrix(scores, cycles)
    shifted = deltas_of_matrix(scores + a[:, None] + b[None, :], cycles)
    magnitude = np.abs(scores).max() + np.abs(a).max() + np.abs(b).max()
    np.testing.assert_allclose(shifted, base, rtol=0, atol=1e-12 * max(1.0, magnitude) * 4)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.integers(min_value=2, max_value=9), elements=finite),
    arrays(np.float64, st.integers(min_value=2, max_value=9), elements=finite),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_any_additive_score_has_cycle_acc_exactly_half(a: np.ndarray, b: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cycles = random_cycles(rng, 30, len(a), len(b))
    additive = a[:, None] + b[None, :]
    assert cycle_acc(deltas_of_matrix(additive, cycles)) == 0.5


def test_credits_follow_the_fixed_absolute_tolerance() -> None:
    tol = DEFAULT_TIE_TOLERANCE
    delta = np.array([1.0, -1.0, 0.0, tol, -tol, 2 * tol, -2 * tol])
    np.testing.assert_array_equal(cycle_credits(delta), [1, 0, 0.5, 0.5, 0.5, 1, 0])
    assert cycle_acc(delta) == pytest.approx(3.5 / 7)
    # The tolerance is absolute: scaling all scores up does not widen the tie band.
    assert cycle_acc(np.array([5e-9]), tie_tolerance=1e-9) == 1.0


def test_contrast_matches_definition() -> None:
    delta = cycle_contrast([3.0, 0.0], [1.0, 2.0], [0.5, 1.0], [2.0, 0.0])
    np.testing.assert_array_equal(delta, [3.5, -3.0])


def test_embedding_gathering_agrees_with_blocks_and_score_fn() -> None:
    rng = np.random.default_rng(0)
    phi = rng.normal(size=(40, 16))
    psi = rng.normal(size=(60, 16))
    cycles = random_cycles(rng, 500, 40, 60)
    blocks = block_scores_from_embeddings(phi, psi, cycles)
    u1, u2, v1, v2 = cycles.T
    np.testing.assert_allclose(blocks[:, 0, 1], np.einsum("ij,ij->i", phi[u1], psi[v2]))
    np.testing.assert_allclose(blocks[:, 1, 0], np.einsum("ij,ij->i", phi[u2], psi[v1]))
    from_blocks = deltas_from_blocks(blocks)
    np.testing.assert_allclose(deltas_from_embeddings(phi, psi, cycles), from_blocks, atol=1e-12)
    calls = []

    def score_fn(images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        calls.append(len(images))
        return np.einsum("ij,ij->i", phi[images], psi[captions])

    np.testing.assert_allclose(deltas_from_score_fn(score_fn, cycles), from_blocks, atol=1e-12)
    assert calls == [500, 500, 500, 500]  # vectorized: four calls, not one per cycle


def test_bilinear_factorization_matches_full_scores() -> None:
    rng = np.random.default_rng(1)
    phi = rng.normal(size=(30, 8))
    psi = rng.normal(size=(25, 6))
    a = rng.normal(size=(8, 3))
    b = rng.normal(size=(6, 3))
    m = a @ b.T
    cycles = random_cycles(rng, 200, 30, 25)
    full = phi @ m @ psi.T
    expected = deltas_of_matrix(full, cycles)
    np.testing.assert_allclose(bilinear_deltas(phi, psi, cycles, matrix=m), expected, atol=1e-10)
    np.testing.assert_allclose(bilinear_deltas(phi, psi, cycles, factors=(a, b)), expected, atol=1e-10)


def test_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    import clip_cycles.algebra.contrast as contrast

    rng = np.random.default_rng(2)
    phi, psi = rng.normal(size=(20, 5)), rng.normal(size=(20, 5))
    cycles = random_cycles(rng, 101, 20, 20)
    whole = deltas_from_embeddings(phi, psi, cycles)
    monkeypatch.setattr(contrast, "CHUNK_CYCLES", 7)
    np.testing.assert_array_equal(deltas_from_embeddings(phi, psi, cycles), whole)


@pytest.mark.parametrize(
    ("cycles", "message"),
    [
        (np.zeros((0, 4), dtype=int), "empty cycle set"),
        (np.array([[0, 1, 2, 3], [4, 4, 0, 1]]), "cycle 1 repeats its image"),
        (np.array([[0, 1, 2, 2]]), "cycle 0 repeats its caption"),
        (np.array([[0, 1, 2]]), r"shape \(N, 4\)"),
        (np.array([[0, 1, 2, 3], [0, 1, -1, 3]]), "cycle 1 has a negative index"),
        (np.array([[0.0, 1.0, 2.0, 3.0]]), "must be integers"),
    ],
)
def test_bad_cycle_sets_are_named(cycles: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_cycles(cycles)


def test_out_of_range_and_non_finite_inputs_are_named() -> None:
    phi = np.ones((3, 4))
    psi = np.ones((3, 4))
    with pytest.raises(ValueError, match="cycle 0 has a caption index out of range"):
        deltas_from_embeddings(phi, psi, np.array([[0, 1, 0, 5]]))
    bad = phi.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="image_features has a non-finite value in row 2"):
        deltas_from_embeddings(bad, psi, np.array([[0, 1, 0, 1]]))
    with pytest.raises(ValueError, match="differ in width"):
        deltas_from_embeddings(phi, np.ones((3, 5)), np.array([[0, 1, 0, 1]]))
    with pytest.raises(ValueError, match=r"s12 has a non-finite value \(inf\) at index 1"):
        cycle_contrast([1, 2], [0, np.inf], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="same length"):
        cycle_contrast([1, 2], [0], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="empty cycle set"):
        cycle_acc([])


def test_compiled_and_numpy_paths_agree_for_float32_and_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    import clip_cycles.algebra.contrast as contrast

    rng = np.random.default_rng(3)
    cycles = random_cycles(rng, 300, 50, 70)
    for dtype in (np.float32, np.float64):
        phi = rng.normal(size=(50, 24)).astype(dtype)
        psi = rng.normal(size=(70, 24)).astype(dtype)
        fast = deltas_from_embeddings(phi, psi, cycles)
        numpy_only = contrast._numpy_factorized_deltas(phi, psi, cycles)
        exact = deltas_from_blocks(block_scores_from_embeddings(phi.astype(np.float64), psi.astype(np.float64), cycles))
        np.testing.assert_allclose(fast, numpy_only, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-12)
        assert fast.dtype == np.float64


def direct_blocks(phi: np.ndarray, psi: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """[[s11, s12], [s21, s22]] per cycle, one dot product at a time in float64 (the definition)."""
    out = np.empty((len(cycles), 2, 2))
    for i, (u1, u2, v1, v2) in enumerate(cycles.tolist()):
        for a, u in enumerate((u1, u2)):
            for b, v in enumerate((v1, v2)):
                out[i, a, b] = sum(float(x) * float(y) for x, y in zip(phi[u], psi[v]))
    return out


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_chunked_path_matches_the_definition_with_and_without_numba(monkeypatch: pytest.MonkeyPatch,
                                                                         numba: bool, dtype: type) -> None:  # fmt: skip
    import importlib.util

    import clip_cycles.algebra.contrast as contrast

    if numba and importlib.util.find_spec("numba") is None:
        pytest.skip("numba is not installed")
    # With numba installed the compiled kernel must be there (it is a dependency, not an option).
    assert (contrast._numba_kernel() is not None) or not numba
    if not numba:
        monkeypatch.setattr(contrast, "_numba_kernel", lambda: None)
    calls: list[int] = []
    numpy_path = contrast._numpy_factorized_deltas

    def spy(left: np.ndarray, right: np.ndarray, index: np.ndarray) -> np.ndarray:
        calls.append(len(index))
        return numpy_path(left, right, index)

    monkeypatch.setattr(contrast, "_numpy_factorized_deltas", spy)
    monkeypatch.setattr(contrast, "CHUNK_CYCLES", 7)  # 101 cycles: 14 full chunks and a partial one
    rng = np.random.default_rng(5)
    phi = rng.normal(size=(30, 6)).astype(dtype)
    psi = rng.normal(size=(40, 6)).astype(dtype)
    cycles = random_cycles(rng, 101, 30, 40)
    blocks = direct_blocks(phi, psi, cycles)
    expected = blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0]
    np.testing.assert_allclose(block_scores_from_embeddings(phi, psi, cycles), blocks, rtol=0, atol=1e-12)
    np.testing.assert_allclose(deltas_from_embeddings(phi, psi, cycles), expected, rtol=0, atol=1e-12)
    # The numpy path ran exactly when numba was off (both tables share a dtype, which numba needs).
    assert (calls == [101]) is (not numba) and (calls == []) is numba
    m = rng.normal(size=(6, 6))
    full = direct_blocks(phi.astype(np.float64) @ m, psi, cycles)
    np.testing.assert_allclose(bilinear_deltas(phi, psi, cycles, matrix=m),
                               full[:, 0, 0] + full[:, 1, 1] - full[:, 0, 1] - full[:, 1, 0], rtol=0, atol=1e-10)  # fmt: skip


def test_a_single_cycle_per_chunk_and_the_last_partial_chunk_are_placed_right(monkeypatch: pytest.MonkeyPatch) -> None:
    import clip_cycles.algebra.contrast as contrast

    monkeypatch.setattr(contrast, "_numba_kernel", lambda: None)
    rng = np.random.default_rng(6)
    phi, psi = rng.normal(size=(9, 3)), rng.normal(size=(9, 3))
    cycles = random_cycles(rng, 10, 9, 9)
    blocks = direct_blocks(phi, psi, cycles)
    for chunk in (1, 3, 9, 10, 11):
        monkeypatch.setattr(contrast, "CHUNK_CYCLES", chunk)
        np.testing.assert_allclose(block_scores_from_embeddings(phi, psi, cycles), blocks, rtol=0, atol=1e-12)
        np.testing.assert_allclose(contrast._numpy_factorized_deltas(phi, psi, cycles),
                                   blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0], atol=1e-12)  # fmt: skip


def test_credits_and_acc_against_a_direct_count() -> None:
    rng = np.random.default_rng(7)
    delta = np.concatenate([rng.normal(size=40), np.zeros(5), rng.choice([-1, 1], size=6) * 0.5e-9,
                            rng.choice([-1, 1], size=4) * 2e-9])  # fmt: skip
    for tol in (0.0, 1e-9, 0.3):
        wins = sum(d > tol for d in delta)
        ties = sum(abs(d) <= tol for d in delta)
        assert cycle_acc(delta, tol) == pytest.approx((wins + 0.5 * ties) / len(delta), abs=1e-15)
        np.testing.assert_array_equal(cycle_credits(delta, tol),
                                      [1.0 if d > tol else 0.5 if abs(d) <= tol else 0.0 for d in delta])  # fmt: skip
    with pytest.raises(ValueError, match="tie tolerance"):
        cycle_credits(delta, -1.0)
    with pytest.raises(ValueError, match="tie tolerance"):
        cycle_credits(delta, float("nan"))


def test_the_numba_switch_and_kernel_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import clip_cycles.algebra.contrast as contrast

    if importlib.util.find_spec("numba") is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(contrast, "_NUMBA_KERNEL", None)
    monkeypatch.setenv("CLIP_CYCLES_NO_NUMBA", "1")
    assert contrast._numba_kernel() is None  # the documented switch turns the compiled path off
    monkeypatch.delenv("CLIP_CYCLES_NO_NUMBA")
    kernel = contrast._numba_kernel()
    assert kernel is not None and contrast._numba_kernel() is kernel  # compiled once, then reused


def test_scalars_integers_and_shapes_of_score_vectors() -> None:
    delta = cycle_contrast(1, 0, 0, 2)  # scalars are one cycle; integers become float64
    assert delta.dtype == np.float64 and delta.tolist() == [3.0]
    assert cycle_contrast([1, 2], [0, 0], [0, 0], [0, 0]).dtype == np.float64
    assert cycle_acc(0.25) == 1.0 and cycle_acc(-0.25) == 0.0
    with pytest.raises(ValueError, match=r"delta must be 1-D \(one value per cycle\), got shape \(2, 2\)"):
        cycle_acc(np.ones((2, 2)))


def test_bilinear_inputs_are_validated_with_named_errors() -> None:
    phi, psi = np.ones((3, 4)), np.ones((5, 2))
    m = np.ones((4, 2))
    with pytest.raises(ValueError, match="cycle 0 has a image index out of range"):
        bilinear_deltas(phi, psi, np.array([[0, 3, 0, 1]]), matrix=m)
    with pytest.raises(ValueError, match="cycle 0 has a caption index out of range"):
        bilinear_deltas(phi, psi, np.array([[0, 1, 0, 5]]), matrix=m)
    bad = psi.copy()
    bad[1, 0] = np.inf
    with pytest.raises(ValueError, match="caption_features has a non-finite value in row 1"):
        bilinear_deltas(phi, bad, np.array([[0, 1, 0, 1]]), matrix=m)
    with pytest.raises(ValueError, match="image_features has a non-finite value in row 2"):
        bilinear_deltas(np.where(np.arange(3)[:, None] == 2, np.nan, phi), psi, np.array([[0, 1, 0, 1]]), matrix=m)
    with pytest.raises(ValueError, match=r"give exactly one of matrix \(M\) or factors \(A, B\)"):
        bilinear_deltas(phi, psi, np.array([[0, 1, 0, 1]]))
    with pytest.raises(ValueError, match=r"matrix must have shape \(4, 2\)"):
        bilinear_deltas(phi, psi, np.array([[0, 1, 0, 1]]), matrix=np.ones((2, 4)))
    with pytest.raises(ValueError, match="factors must be A"):
        bilinear_deltas(phi, psi, np.array([[0, 1, 0, 1]]), factors=(np.ones((4, 3)), np.ones((2, 2))))


def test_block_scores_name_their_bad_inputs() -> None:
    phi, psi = np.ones((3, 4)), np.ones((3, 4))
    cycles = np.array([[0, 1, 0, 1]])
    with pytest.raises(ValueError, match="image_features has a non-finite value in row 1"):
        block_scores_from_embeddings(np.where(np.arange(3)[:, None] == 1, np.nan, phi), psi, cycles)
    with pytest.raises(ValueError, match="caption_features has a non-finite value in row 0"):
        block_scores_from_embeddings(phi, np.where(np.arange(3)[:, None] == 0, np.inf, psi), cycles)
    with pytest.raises(ValueError, match="image and caption features differ in width: 4 vs 5"):
        block_scores_from_embeddings(phi, np.ones((3, 5)), cycles)
    with pytest.raises(ValueError, match="cycle 0 has a image index out of range"):
        block_scores_from_embeddings(phi, psi, np.array([[0, 3, 0, 1]]))
    with pytest.raises(ValueError, match="cycle 0 has a caption index out of range"):
        block_scores_from_embeddings(phi, psi, np.array([[0, 1, 0, 3]]))


def test_every_input_error_names_its_input() -> None:
    from clip_cycles.algebra.contrast import validate_features

    cycles = np.array([[0, 1, 0, 1], [1, 0, 1, 0]])
    with pytest.raises(ValueError, match="score_fn output for s12 has 1 values for 2 pairs"):
        deltas_from_score_fn(lambda u, v: np.zeros(1) if (u[0], v[0]) == (0, 1) else np.zeros(2), cycles)
    with pytest.raises(ValueError, match=r"score_fn output for s21 has a non-finite value \(inf\) at index 0"):
        deltas_from_score_fn(lambda u, v: np.full(2, np.inf) if (u[0], v[0]) == (1, 0) else np.zeros(2), cycles)
    with pytest.raises(ValueError, match=r"blocks must have shape \(N, 2, 2\), got \(2, 4\)"):
        deltas_from_blocks(np.zeros((2, 4)))
    assert deltas_from_blocks(np.array([[[3, 1], [1, 0]]])).tolist() == [1.0]
    assert deltas_from_blocks(np.array([[[3, 1], [1, 0]]])).dtype == np.float64
    with pytest.raises(ValueError, match="empty cycle set: no cycle to score"):
        cycle_credits(np.zeros(0))
    phi, psi = np.ones((3, 4)), np.ones((3, 4))
    with pytest.raises(ValueError, match="caption_features has a non-finite value in row 2"):
        deltas_from_embeddings(phi, np.where(np.arange(3)[:, None] == 2, np.nan, psi), cycles)
    with pytest.raises(ValueError, match="cycle 0 has a image index out of range"):
        deltas_from_embeddings(phi, psi, np.array([[0, 3, 0, 1]]))
    assert validate_features(np.ones((2, 2), dtype=np.float32), "t").dtype == np.float32  # float32 stays float32
    assert validate_features(np.ones((2, 2), dtype=np.int64), "t").dtype == np.float64
    m = np.ones((4, 4))
    with pytest.raises(ValueError, match="matrix has a non-finite value in row 0"):
        bilinear_deltas(phi, psi, cycles, matrix=np.where(np.arange(4)[:, None] == 0, np.nan, m))
    for k, name in ((0, "factor A"), (1, "factor B")):
        factors = [np.ones((4, 2)), np.ones((4, 2))]
        factors[k] = np.full((4, 2), np.nan)
        with pytest.raises(ValueError, match=f"{name} has a non-finite value in row 0"):
            bilinear_deltas(phi, psi, cycles, factors=tuple(factors))
    with pytest.raises(ValueError, match="factors must be A"):  # only A's first dimension is wrong
        bilinear_deltas(phi, psi, cycles, factors=(np.ones((3, 2)), np.ones((4, 2))))
    with pytest.raises(ValueError, match="factors must be A"):  # only B's first dimension is wrong
        bilinear_deltas(phi, psi, cycles, factors=(np.ones((4, 2)), np.ones((3, 2))))


def test_messages_name_the_exact_position_and_value() -> None:
    from clip_cycles.algebra.contrast import validate_features

    for k, name in enumerate(("s11", "s12", "s21", "s22")):
        parts = [[0.0], [0.0], [0.0], [0.0]]
        parts[k] = [np.nan]
        with pytest.raises(ValueError, match=rf"^{name} has a non-finite value \(nan\) at index 0$"):
            cycle_contrast(*parts)
    with pytest.raises(ValueError, match=r"^s11, s12, s21, s22 must have the same length, got s11=2, s12=1, s21=2, s22=2$"):
        cycle_contrast([1, 2], [0], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="^empty cycle set: cycle_contrast needs at least one cycle$"):
        cycle_contrast([], [], [], [])
    with pytest.raises(ValueError, match="^empty cycle set: no cycle to score$"):
        cycle_credits([])
    with pytest.raises(ValueError, match="^empty cycle set: at least one cycle is needed$"):
        validate_cycles(np.zeros((0, 4), dtype=int))
    with pytest.raises(ValueError, match=r"^give exactly one of matrix \(M\) or factors \(A, B\)$"):
        bilinear_deltas(np.ones((2, 2)), np.ones((2, 2)), np.array([[0, 1, 0, 1]]))
    with pytest.raises(ValueError, match=r"^t must be a 2-D table \(rows x dims\), got shape \(3,\)$"):
        validate_features(np.ones(3), "t")
    # Out of range in each column alone, after a valid first cycle: the first offending cycle is named.
    for column, what in ((0, "image"), (1, "image"), (2, "caption"), (3, "caption")):
        cycles = np.array([[0, 1, 0, 1], [0, 1, 0, 1]])
        cycles[1, column] = 9
        with pytest.raises(ValueError, match=f"^cycle 1 has a {what} index out of range"):
            validate_cycles(cycles, n_images=5, n_captions=5)
    with pytest.raises(ValueError, match=r"blocks must have shape \(N, 2, 2\), got \(1, 2, 3\)"):
        deltas_from_blocks(np.zeros((1, 2, 3)))
