"""The additive audit's designs, pair checks and balance check one function at a time (fast; tiny arrays).

Companions of ``tests/heads/test_additive_audit.py``: every expected array, message and index below is
written out by hand from the docstrings, so a dropped clause of a shape check, a swapped column
or a wrong axis fails here (``benchmarks/mutation_score.py additive_audit`` runs these first).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from clip_cycles.heads.additive_audit import (
    _validate_pairs,
    additive_audit,
    comparisons,
    fit_additive_probe,
    unbalanced_comparisons,
)


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


def _credits(values: np.ndarray, tolerance: float) -> np.ndarray:
    return np.where(values > tolerance, 1.0, np.where(values < -tolerance, 0.0, 0.5))


def _bce(logit: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.log1p(np.exp(-np.abs(logit))) + np.maximum(logit, 0.0) - labels * logit))


@pytest.mark.parametrize("given_eval_pairs", [False, True])
def test_every_report_field_by_hand(given_eval_pairs: bool) -> None:
    """Each probe's figures from the hand-written float64 Adam of tests/heads/test_additive_audit.py and sklearn's AUROC."""
    from sklearn.metrics import roc_auc_score
    from test_additive_audit import _planted, _reference_fit, _unblocked_pairs

    n = 20
    phi, psi = _planted(seed=5, n=n, dim=4)
    rng = np.random.default_rng(8)
    # Hard negatives (u, v_true, v_false); test row 0 repeats its caption (balanced), so the witness is row 1's.
    train = np.stack([rng.integers(0, n, 9), rng.integers(0, n, 9), rng.integers(n, 2 * n, 9)], axis=1)
    test = np.stack([rng.integers(0, n, 6), rng.integers(0, n, 6), rng.integers(n, 2 * n, 6)], axis=1)
    test[0, 2] = test[0, 1]
    val = train[:4]
    eval_pairs = _unblocked_pairs(rng, n, 5) if given_eval_pairs else None
    settings = {"epochs": 2, "seed": 3, "lr": 0.05, "weight_decay": 0.01, "batch_size": 7}
    report = additive_audit(phi, psi, train, test, val, tie_tolerance=0.02, design="hard_negatives",
                            eval_pairs=eval_pairs, **settings)  # fmt: skip
    # Training pairs by hand: (u, v_true, 1) then (u, v_false, 0) per row.
    fit_pairs = np.array([p for u, vt, vf in train for p in ((u, vt, 1), (u, vf, 0))])
    test_pairs = np.array([p for u, vt, vf in test for p in ((u, vt, 1), (u, vf, 0))])
    scored = test_pairs if eval_pairs is None else eval_pairs
    failures = [f"5 of 6 test comparisons are unbalanced (Theorem 1); witness: caption row {test[1, 1]} has signed degree 1 "
                "in comparison 1"]  # fmt: skip
    for head in ("image_only", "text_only", "additive"):
        (w_image, w_text, bias), steps = _reference_fit(head, phi, psi, fit_pairs, 2, 0.05, 0.01, 7, 3)
        image_logit = (phi @ w_image if head != "text_only" else np.zeros(2 * n)) + bias[0]
        caption_logit = psi @ w_text if head != "image_only" else np.zeros(2 * n)
        values = caption_logit[test[:, 1]] - caption_logit[test[:, 2]]  # the image's logit cancels in u's two pairs
        probe = report.probes[head]
        assert probe.head == head and probe.steps_taken == steps == 2 * math.ceil(18 / 7)
        assert probe.cycle_acc == pytest.approx(_credits(values, 0.02).mean(), abs=1e-12)
        assert probe.max_abs_delta == pytest.approx(np.abs(values).max(), abs=1e-12)
        train_logit = image_logit[fit_pairs[:, 0]] + caption_logit[fit_pairs[:, 1]]
        assert probe.train_loss == pytest.approx(_bce(train_logit, fit_pairs[:, 2]), abs=1e-12)
        assert probe.train_pair_auroc == pytest.approx(roc_auc_score(fit_pairs[:, 2], train_logit), abs=1e-12)
        scored_logit = image_logit[scored[:, 0]] + caption_logit[scored[:, 1]]
        assert probe.pair_auroc == pytest.approx(roc_auc_score(scored[:, 2], scored_logit), abs=1e-12)
        assert probe.passed is (probe.cycle_acc == 0.5)
        if not probe.passed:
            failures.append(f"{head}: accuracy {probe.cycle_acc!r} != 0.5 on the test hard_negatives "
                            f"(max |T| {np.abs(values).max():.3g})")  # fmt: skip
    assert report.probes["image_only"].cycle_acc == 0.5  # an image-only score cancels in (u, v) - (u, v')
    assert not report.probes["text_only"].passed
    assert list(report.probes) == ["image_only", "text_only", "additive"]
    assert report.failures == failures
    assert report.witness == {"comparison": 1, "side": "caption", "vertex": int(test[1, 1]), "value": 1.0,
                              "score": f"the additive score that is 1 on caption row {test[1, 1]} and 0 elsewhere"}  # fmt: skip
    assert (report.design, report.n_test, report.n_val, report.n_unbalanced) == ("hard_negatives", 6, 4, 5)
    assert (report.n_train_pairs, report.n_eval_pairs) == (18, len(scored))
    assert (report.epochs, report.seed, report.tie_tolerance) == (2, 3, 0.02)
    label = (
        f"{len(scored)} given unblocked pairs"
        if given_eval_pairs
        else "the 12 evaluated pairs of the test hard_negatives, pooled"
    )
    assert report.eval_pairs == label
    assert not report.passed


def test_a_tie_tolerance_decides_the_probes_verdicts() -> None:
    """The same fits pass under a tolerance wider than every |T| (all ties, 0.5) and fail under 0."""
    n = 20
    from test_additive_audit import _planted

    phi, psi = _planted(seed=1, n=n, dim=3)
    triples = np.array([[i, i, n + i] for i in range(8)])
    strict = additive_audit(phi, psi, triples, triples, design="hard_negatives", epochs=2, batch_size=4, tie_tolerance=0.0)
    wide = max(p.max_abs_delta for p in strict.probes.values())
    loose = additive_audit(phi, psi, triples, triples, design="hard_negatives", epochs=2, batch_size=4, tie_tolerance=wide)
    assert all(p.cycle_acc == 0.5 for p in loose.probes.values()) and loose.tie_tolerance == wide
    assert strict.probes["text_only"].cycle_acc == 1.0  # the planted cue: every true caption above its false one
    assert [f.split(":")[0] for f in strict.failures[1:]] == [h for h in ("image_only", "text_only", "additive")
                                                              if not strict.probes[h].passed]  # fmt: skip
    assert strict.n_val == 0 and loose.n_val == 0  # no validation design given


def test_the_defaults_are_paper_ones_five_epochs_lr_1e3_wd_1e4_batch_512_seed_0() -> None:
    """With every setting left out, the audit fits as the hand-written Adam does with the documented values."""
    from test_additive_audit import _planted, _reference_fit

    n = 300
    phi, psi = _planted(seed=2, n=n, dim=3)
    rng = np.random.default_rng(0)
    rows = np.stack([rng.integers(0, n, 350), rng.integers(0, n, 350), rng.integers(n, 2 * n, 350)], axis=1)  # 700 pairs
    pairs = np.array([p for u, vt, vf in rows for p in ((u, vt, 1), (u, vf, 0))])
    report = additive_audit(phi, psi, rows, rows, design="hard_negatives")
    assert (report.epochs, report.seed) == (5, 0)
    for head in ("text_only", "additive"):
        (w_image, w_text, bias), steps = _reference_fit(head, phi, psi, pairs, 5, 1e-3, 1e-4, 512, 0)
        caption_logit = psi @ w_text
        image_logit = (phi @ w_image if head == "additive" else np.zeros(2 * n)) + bias[0]
        logit = image_logit[pairs[:, 0]] + caption_logit[pairs[:, 1]]
        values = caption_logit[rows[:, 1]] - caption_logit[rows[:, 2]]
        assert report.probes[head].steps_taken == steps == 10  # 5 epochs of 2 batches (512 + 188)
        # The same batches in the same order (another seed, batch size or step would move these far more).
        assert report.probes[head].max_abs_delta == pytest.approx(float(np.max(np.abs(values))), rel=1e-12, abs=0)
        assert report.probes[head].train_loss == pytest.approx(_bce(logit, pairs[:, 2]), rel=1e-12, abs=0)
        fit = fit_additive_probe(head, phi, psi, pairs)  # the probe's own defaults are the same
        assert fit.caption_logit.tobytes() == caption_logit.tobytes() and fit.steps == 10


def test_the_audit_names_each_input_it_refuses() -> None:
    phi = psi = np.eye(4)
    good = np.array([[0, 1, 2, 3]])
    for args, message in (
        ((np.zeros(4), psi, good, good), "image_features must be a 2-D table"),
        ((phi, np.zeros(4), good, good), "caption_features must be a 2-D table"),
        ((phi, psi, np.array([[0, 1, 2]]), good), "train design: empty cycle set or wrong shape (1, 3)"),
        ((phi, psi, good, np.array([[0, 1, 2]])), "test design: empty cycle set or wrong shape (1, 3)"),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            additive_audit(*args, epochs=1)
    with pytest.raises(ValueError, match=r"^train_pairs: need \(N, 3\) rows"):
        additive_audit(phi, psi, good, good, epochs=1, train_pairs=[[0, 1]])
    with pytest.raises(ValueError, match=r"^eval_pairs: need \(N, 3\) rows"):
        additive_audit(phi, psi, good, good, epochs=1, eval_pairs=[[0, 1]])


def test_probe_arguments_are_refused_by_their_sentences_and_a_batch_of_one_is_allowed() -> None:
    rng = np.random.default_rng(0)
    phi, psi = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    pairs = np.array([[0, 0, 1], [1, 2, 0], [2, 1, 1]])
    known = r"\('image_only', 'text_only', 'additive'\)"
    with pytest.raises(ValueError, match=rf"^unknown additive probe 'bilinear'; known: {known}$"):
        fit_additive_probe("bilinear", phi, psi, pairs)
    for epochs, batch_size in ((0, 4), (2, 0), (0, 0)):
        with pytest.raises(
            ValueError, match=r"^TrainConfig option --(epochs|train-batch-size) \((epochs|batch_size)\): .*, got 0 "
        ):
            fit_additive_probe("additive", phi, psi, pairs, epochs=epochs, batch_size=batch_size)
    # Batches of one pair: three steps an epoch, two epochs.
    assert fit_additive_probe("additive", phi, psi, pairs, epochs=2, batch_size=1).steps == 6
