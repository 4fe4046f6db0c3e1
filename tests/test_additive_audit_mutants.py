"""The additive audit's designs, pair checks and balance check one function at a time (fast; tiny arrays).

Companions of ``tests/test_additive_audit.py``: every expected array, message and index below is
written out by hand from the docstrings, so a dropped clause of a shape check, a swapped column
or a wrong axis fails here (``benchmarks/mutation_score.py additive_audit`` runs these first).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from clip_cycles.heads.additive_audit import _validate_pairs, additive_audit, comparisons, unbalanced_comparisons


def test_cycle_rows_become_four_weighted_pairs() -> None:
    design = comparisons(np.array([[0, 1, 2, 3], [4, 5, 6, 7]], dtype=np.int32), "cycles", 8, 8, "test design")
    assert design.design == "cycles" and len(design) == 2
    assert design.images.tolist() == [[0, 0, 1, 1], [4, 4, 5, 5]]
    assert design.captions.tolist() == [[2, 3, 2, 3], [6, 7, 6, 7]]
    assert design.weights.tolist() == [1.0, -1.0, -1.0, 1.0]
    assert design.images.dtype == np.int64
    assert design.pairs().tolist() == [[0, 2, 1], [0, 3, 0], [1, 2, 0], [1, 3, 1], [4, 6, 1], [4, 7, 0], [5, 6, 0], [5, 7, 1]]
    # T(s) = s(u1, v1) - s(u1, v2) - s(u2, v1) + s(u2, v2) for s(u, v) = a[u] + b[v]: zero for any a, b.
    a, b = np.arange(8.0) ** 2, np.arange(8.0) * 3.0
    assert design.values(a, b).tolist() == [0.0, 0.0]


def test_hard_negative_rows_become_two_weighted_pairs() -> None:
    design = comparisons([[0, 1, 2], [3, 4, 5]], "hard_negatives", 4, 6, "test design")
    assert design.images.tolist() == [[0, 0], [3, 3]]
    assert design.captions.tolist() == [[1, 2], [4, 5]]
    assert design.weights.tolist() == [1.0, -1.0]
    assert design.pairs().tolist() == [[0, 1, 1], [0, 2, 0], [3, 4, 1], [3, 5, 0]]
    a, b = np.array([10.0, 0.0, 0.0, 20.0]), np.array([0.0, 1.0, 5.0, 0.0, 7.0, 2.0])
    assert design.values(a, b).tolist() == [1.0 - 5.0, 7.0 - 2.0]  # the image's score cancels


@pytest.mark.parametrize(
    ("rows", "design", "shape", "width", "what"),
    [
        (np.zeros((0, 4), dtype=int), "cycles", (0, 4), 4, "(u1, u2, v1, v2)"),
        (np.zeros((2, 3), dtype=int), "cycles", (2, 3), 4, "(u1, u2, v1, v2)"),
        (np.zeros(4, dtype=int), "cycles", (4,), 4, "(u1, u2, v1, v2)"),
        (np.zeros((1, 4, 1), dtype=int), "cycles", (1, 4, 1), 4, "(u1, u2, v1, v2)"),
        (np.zeros((2, 4), dtype=int), "hard_negatives", (2, 4), 3, "(u, v_true, v_false)"),
        (np.zeros((0, 3), dtype=int), "hard_negatives", (0, 3), 3, "(u, v_true, v_false)"),
    ],
)
def test_a_design_of_the_wrong_shape_is_named(rows: np.ndarray, design: str, shape: tuple, width: int, what: str) -> None:
    message = f"train design: empty cycle set or wrong shape {shape}; need (N, {width}) rows {what}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        comparisons(rows, design, 9, 9, "train design")


def test_design_indices_are_checked_by_side_and_row() -> None:
    with pytest.raises(ValueError, match=r"^d: indices must be integers, got dtype float64$"):
        comparisons(np.zeros((1, 4)), "cycles", 9, 9, "d")
    with pytest.raises(ValueError, match=r"^design must be one of \('cycles', 'hard_negatives'\), got 'pairs'$"):
        comparisons([[0, 1, 2, 3]], "pairs", 9, 9, "d")
    cases = [
        ([[0, 1, 0, 1], [0, 3, 0, 1]], 3, 9, r"^d: row 1 has a image index outside \[0, 3\)$"),
        ([[0, 1, 0, 1], [0, 1, 0, 1], [-1, 1, 0, 1]], 3, 9, r"^d: row 2 has a image index outside \[0, 3\)$"),
        ([[0, 1, 0, 5]], 9, 5, r"^d: row 0 has a caption index outside \[0, 5\)$"),
        ([[0, 1, 0, 1], [0, 1, -2, 1]], 9, 5, r"^d: row 1 has a caption index outside \[0, 5\)$"),
    ]
    for rows, n_images, n_captions, message in cases:
        with pytest.raises(ValueError, match=message):
            comparisons(rows, "cycles", n_images, n_captions, "d")
    # The last valid index of each side is accepted.
    assert comparisons([[2, 1, 4, 0]], "cycles", 3, 5, "d").images.tolist() == [[2, 2, 1, 1]]
    with pytest.raises(ValueError, match=r"^d: row 0 has a caption index outside \[0, 4\)$"):
        comparisons([[0, 4, 3]], "hard_negatives", 5, 4, "d")  # v_true 4: a caption, although below n_images


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (np.array([0, 1, 1]), "p: need (N, 3) rows (image, caption, label), got shape (3,)"),
        (np.array([[0, 1], [1, 0]]), "p: need (N, 3) rows (image, caption, label), got shape (2, 2)"),
        (np.zeros((0, 3), dtype=int), "p: need (N, 3) rows (image, caption, label), got shape (0, 3)"),
        (np.zeros((1, 3, 1), dtype=int), "p: need (N, 3) rows (image, caption, label), got shape (1, 3, 1)"),
        (np.array([[0, 0, 1]]), "p: needs both labels (valid 1 and invalid 0) to train or to compute an AUROC"),
        (np.array([[0, 0, 1], [1, 1, 1]]), "p: needs both labels (valid 1 and invalid 0) to train or to compute an AUROC"),
        (np.array([[0, 0, 1], [1, 1, 2]]), "p: labels must be 0 or 1"),
        (np.array([[0, 0, 1], [1, 1, -1]]), "p: labels must be 0 or 1"),
        (np.array([[-1, 0, 1], [1, 1, 0]]), "p: an image or caption index is out of range"),
        (np.array([[0, 0, 1], [3, 1, 0]]), "p: an image or caption index is out of range"),
        (np.array([[0, -1, 1], [1, 1, 0]]), "p: an image or caption index is out of range"),
        (np.array([[0, 0, 1], [1, 5, 0]]), "p: an image or caption index is out of range"),
    ],
)
def test_pair_rows_are_checked_one_condition_at_a_time(pairs: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _validate_pairs(pairs, 3, 5, "p")


def test_valid_pair_rows_pass_as_int64() -> None:
    # The last image (2 of 3) and the last caption (4 of 5); a caption index above n_images is fine.
    checked = _validate_pairs([[2, 4, 1], [0, 3, 0]], 3, 5, "p")
    assert checked.dtype == np.int64 and checked.tolist() == [[2, 4, 1], [0, 3, 0]]


def test_the_pair_checks_guard_the_audit_entry() -> None:
    phi = psi = np.eye(4)
    cycles = np.array([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match=r"^train_pairs: an image or caption index is out of range$"):
        additive_audit(phi, psi, cycles, cycles, epochs=1, train_pairs=[[0, 0, 1], [4, 1, 0]])
    with pytest.raises(ValueError, match=r"^eval_pairs: labels must be 0 or 1$"):
        additive_audit(phi, psi, cycles, cycles, epochs=1, eval_pairs=[[0, 0, 1], [1, 1, 3]])
    with pytest.raises(ValueError, match=r"^validation design: empty cycle set"):
        additive_audit(phi, psi, cycles, cycles, epochs=1, val_cycles=np.zeros((0, 4), dtype=int))


def test_unbalanced_comparisons_are_those_whose_captions_differ() -> None:
    # Hard negatives (u, v_true, v_false): the image's degree is +1 - 1 = 0 always; the two captions have
    # degrees +1 and -1 unless they are the same caption (then 0: a trivially balanced comparison).
    rows = np.array([[0, 1, 1], [0, 1, 2], [3, 2, 2], [1, 0, 3]])
    design = comparisons(rows, "hard_negatives", 4, 4, "d")
    assert unbalanced_comparisons(design).tolist() == [1, 3]
    # Cycles are balanced whatever repeats (u1 == u2 or v1 == v2 included).
    cycles = comparisons([[0, 1, 2, 3], [0, 0, 1, 2], [1, 2, 3, 3]], "cycles", 4, 4, "d")
    assert unbalanced_comparisons(cycles).tolist() == []
