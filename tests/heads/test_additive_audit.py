"""The additive audit: shortcut probes learn planted marginal cues, exact cycles hold them at 0.5,
and a hard-negative design fails with a named Theorem 1 witness."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from clip_cycles.heads.additive_audit import additive_audit, average_ranks, fit_additive_probe, pair_auroc


def _planted(seed: int = 0, n: int = 300, dim: int = 8):
    """Features with a marginal shortcut on both sides: feature 0 is +2 on positive-pool images and
    captions, -2 on negative-pool ones; all else is noise. Rows [0, n) positive pool, [n, 2n) negative pool."""
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(2 * n, dim))
    psi = rng.normal(size=(2 * n, dim))
    phi[:n, 0] += 2.0
    phi[n:, 0] -= 2.0
    psi[:n, 0] += 2.0
    psi[n:, 0] -= 2.0
    return phi, psi


def _unblocked_pairs(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    """Positives (pool-0 image, pool-0 caption), negatives (pool-1 image, pool-1 caption): not a block design."""
    pos = np.stack([rng.integers(0, n, count), rng.integers(0, n, count), np.ones(count, dtype=int)], axis=1)
    neg = np.stack([rng.integers(n, 2 * n, count), rng.integers(n, 2 * n, count), np.zeros(count, dtype=int)], axis=1)
    return np.concatenate([pos, neg])


def _cycles(rng: np.random.Generator, n_images: int, n_captions: int, count: int) -> np.ndarray:
    u = np.stack([rng.choice(n_images, 2, replace=False) for _ in range(count)])
    v = np.stack([rng.choice(n_captions, 2, replace=False) for _ in range(count)])
    return np.concatenate([u, v], axis=1)


def test_pair_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, 200).astype(float)  # many ties
    labels = rng.integers(0, 2, 200)
    assert pair_auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_average_ranks_are_bitwise_scipys_and_the_auroc_unchanged():
    from scipy.stats import rankdata

    rng = np.random.default_rng(7)
    for scores in (rng.integers(0, 7, 999).astype(float), rng.normal(size=1000), np.full(5, 2.0), np.array([3.0])):
        expected = rankdata(scores)
        assert np.array_equal(average_ranks(scores), expected)
        labels = (np.arange(scores.size) % 3 == 0).astype(int)
        if 0 < labels.sum() < labels.size:
            positive = labels == 1
            n_pos, n_neg = int(positive.sum()), int((~positive).sum())
            old = float((expected[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))
            assert pair_auroc(scores, labels) == old  # the audit's figure, bit for bit
    # Brute force on a small case: ranks 1, 2.5, 2.5, 4 for [0, 1, 1, 5], in the input order.
    assert average_ranks(np.array([1.0, 5.0, 0.0, 1.0])).tolist() == [2.5, 4.0, 1.0, 2.5]
    assert np.isnan(average_ranks(np.array([1.0, np.nan]))).all()  # NaN propagates, as scipy's default


def test_planted_shortcut_is_learned_yet_exact_cycles_score_one_half():
    n = 300
    phi, psi = _planted(n=n)
    rng = np.random.default_rng(1)
    train_pairs, eval_pairs = _unblocked_pairs(rng, n, 400), _unblocked_pairs(rng, n, 400)
    train_cycles, test_cycles = _cycles(rng, 2 * n, 2 * n, 50), _cycles(rng, 2 * n, 2 * n, 200)
    report = additive_audit(
        phi, psi, train_cycles, test_cycles, epochs=5, lr=1e-2, batch_size=64, train_pairs=train_pairs, eval_pairs=eval_pairs
    )
    assert report.passed, report.failures
    steps = 5 * math.ceil(len(train_pairs) / 64)  # by hand: epochs x batches per epoch
    for name, probe in report.probes.items():
        assert probe.steps_taken == steps, name
        # They learned the planted cue on held-out unblocked pairs ...
        assert probe.pair_auroc >= 0.9, (name, probe.pair_auroc)
        # ... yet exact cycles hold them at one half.
        assert probe.cycle_acc == 0.5, name
    d = report.to_dict()
    assert d["passed"] is True and d["n_unbalanced_comparisons"] == 0 and d["witness"] is None
    assert d["n_train_pairs"] == 800 and d["n_test"] == 200


def test_fitted_probe_separates_the_planted_cue_by_an_independent_auroc():
    n = 300
    phi, psi = _planted(n=n)
    rng = np.random.default_rng(2)
    pairs = _unblocked_pairs(rng, n, 400)
    fit = fit_additive_probe("text_only", phi, psi, pairs, epochs=5, lr=1e-2, batch_size=64)
    assert np.all(fit.image_logit == fit.image_logit[0])  # text-only: only a bias on the image side
    held_out = _unblocked_pairs(rng, n, 400)
    logits = fit.caption_logit[held_out[:, 1]]
    assert roc_auc_score(held_out[:, 2], logits) >= 0.9


def test_hard_negative_design_fails_and_names_the_witness():
    n = 300
    phi, psi = _planted(n=n)
    rng = np.random.default_rng(4)

    # One image, a true caption (positive pool) and a false one (negative pool): not made of cycles.
    def triples(count: int) -> np.ndarray:
        return np.stack([rng.integers(0, n, count), rng.integers(0, n, count), rng.integers(n, 2 * n, count)], axis=1)

    train, test = triples(300), triples(100)
    report = additive_audit(phi, psi, train, test, design="hard_negatives", epochs=5, lr=1e-2, batch_size=64)
    assert not report.passed
    # Independent Theorem 1 computation for comparison 0: the image has degree +1 - 1 = 0,
    # the true caption +1 and the false caption -1; the first largest |degree| is the true caption.
    assert report.n_unbalanced == 100
    assert report.witness == {
        "comparison": 0,
        "side": "caption",
        "vertex": int(test[0, 1]),
        "value": 1.0,
        "score": report.witness["score"],
    }
    assert "witness" in report.failures[0] and f"caption row {test[0, 1]}" in report.failures[0]
    # The text-only probe really solves it (its accuracy is far from one half).
    assert report.probes["text_only"].cycle_acc > 0.9
    assert report.probes["text_only"].pair_auroc > 0.9


def test_cycle_pairs_carry_no_single_side_cue():
    """On cycle pairs matched and swapped sides hold the same images and captions: an image-only or
    text-only score has identical distributions on both sides, so its pooled pair AUROC is exactly 1/2."""
    rng = np.random.default_rng(5)
    phi, psi = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    train, test = _cycles(rng, 40, 40, 60), _cycles(rng, 40, 40, 60)
    report = additive_audit(phi, psi, train, test, epochs=3, batch_size=32)
    assert report.passed
    assert report.probes["image_only"].pair_auroc == 0.5
    assert report.probes["text_only"].pair_auroc == 0.5
    assert all(p.steps_taken == 3 * math.ceil(4 * 60 / 32) for p in report.probes.values())


def test_bad_designs_raise_clear_errors():
    phi = psi = np.zeros((4, 2))
    with pytest.raises(ValueError, match="empty cycle set"):
        additive_audit(phi, psi, np.array([[0, 1, 2, 3]]), np.zeros((0, 4), dtype=int))
    with pytest.raises(ValueError, match="outside"):
        additive_audit(phi, psi, np.array([[0, 1, 2, 3]]), np.array([[0, 9, 2, 3]]))
    with pytest.raises(ValueError, match="design must be one of"):
        additive_audit(phi, psi, np.array([[0, 1, 2, 3]]), np.array([[0, 1, 2, 3]]), design="triplets")
    with pytest.raises(ValueError, match="needs both labels"):
        additive_audit(phi, psi, np.array([[0, 1, 2, 3]]), np.array([[0, 1, 2, 3]]), train_pairs=np.array([[0, 0, 1], [1, 1, 1]]))


def _reference_fit(head: str, phi, psi, pairs, epochs, lr, weight_decay, batch_size, seed):
    """The audit's float64 Adam fit written out by hand (its loop before it moved into heads.training.fit)."""
    use_image, use_text = head in ("image_only", "additive"), head in ("text_only", "additive")
    params = [np.zeros(phi.shape[1]), np.zeros(psi.shape[1]), np.zeros(1)]
    first, second = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    rng, labels, steps = np.random.default_rng(seed), pairs[:, 2].astype(np.float64), 0
    for _ in range(epochs):
        order = rng.permutation(len(pairs))
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            logit = np.full(len(batch), params[2][0])
            if use_image:
                logit += phi[pairs[batch, 0]] @ params[0]
            if use_text:
                logit += psi[pairs[batch, 1]] @ params[1]
            residual = (1.0 / (1.0 + np.exp(-logit)) - labels[batch]) / len(batch)
            grads = [
                phi[pairs[batch, 0]].T @ residual if use_image else np.zeros_like(params[0]),
                psi[pairs[batch, 1]].T @ residual if use_text else np.zeros_like(params[1]),
                np.array([residual.sum()]),
            ]
            steps += 1
            beta1, beta2 = 0.9, 0.999  # (1 - beta1) is not the literal 0.1 in float64: spelled as Adam does
            for i, (p, g) in enumerate(zip(params, grads)):
                g = g + weight_decay * p
                first[i] = beta1 * first[i] + (1 - beta1) * g
                second[i] = beta2 * second[i] + (1 - beta2) * g * g
                p -= lr * (first[i] / (1 - beta1**steps)) / (np.sqrt(second[i] / (1 - beta2**steps)) + 1e-8)
    return params, steps


@pytest.mark.parametrize("head", ["image_only", "text_only", "additive"])
def test_fit_through_the_shared_loop_equals_the_hand_written_float64_adam(head):
    n = 300
    phi, psi = _planted(n=n)
    pairs = _unblocked_pairs(np.random.default_rng(6), n, 350)
    fit = fit_additive_probe(head, phi, psi, pairs, epochs=4, lr=1e-2, weight_decay=1e-3, batch_size=64, seed=9)
    (w_image, w_text, bias), steps = _reference_fit(head, phi, psi, pairs, 4, 1e-2, 1e-3, 64, 9)
    assert fit.steps == steps == 4 * math.ceil(700 / 64)
    # Bit for bit: the same batches in the same order and the same float64 operations.
    expected_image = (phi @ w_image if head != "text_only" else np.zeros(2 * n)) + bias[0]
    expected_caption = psi @ w_text if head != "image_only" else np.zeros(2 * n)
    assert fit.image_logit.tobytes() == expected_image.tobytes()
    assert fit.caption_logit.tobytes() == expected_caption.tobytes()


def test_probes_fitted_together_give_the_reports_of_independent_hand_written_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit fits its three probes in one loop (one flat Adam array); each probe's report equals that of
    the probe fitted alone by the hand-written reference, bit for bit, on its own and on other training pairs."""
    from clip_cycles.heads import additive_audit as module

    rng = np.random.default_rng(5)
    phi, psi = rng.normal(size=(40, 6)), rng.normal(size=(50, 6))
    train = np.stack(
        [rng.integers(0, 20, 300), rng.integers(20, 40, 300), rng.integers(0, 25, 300), rng.integers(25, 50, 300)], 1
    )
    test = train[:120]
    together = [module.additive_audit(phi, psi, t, test, seed=3, batch_size=64).to_dict() for t in (train, test)]

    def one_by_one(heads, phi, psi, pairs, epochs, lr, weight_decay, batch_size, seed):
        fits = {}
        for head in heads:
            (w_image, w_text, bias), steps = _reference_fit(head, phi, psi, pairs, epochs, lr, weight_decay, batch_size, seed)
            image_logit = (phi @ w_image if head != "text_only" else np.zeros(phi.shape[0])) + bias[0]
            caption_logit = psi @ w_text if head != "image_only" else np.zeros(psi.shape[0])
            logit = image_logit[pairs[:, 0]] + caption_logit[pairs[:, 1]]
            loss = float(np.mean(np.logaddexp(0.0, logit) - pairs[:, 2] * logit))
            fits[head] = module.ProbeFit(image_logit, caption_logit, steps, loss)
        return fits

    monkeypatch.setattr(module, "fit_additive_probes", one_by_one)
    alone = [module.additive_audit(phi, psi, t, test, seed=3, batch_size=64).to_dict() for t in (train, test)]
    assert together == alone
    monkeypatch.undo()
    pairs = module.comparisons(train, "cycles", 40, 50, "t").pairs()
    joint = module.fit_additive_probes(module.ADDITIVE_PROBES, phi, psi, pairs, seed=3, batch_size=64)
    for name in module.ADDITIVE_PROBES:  # fitted on other pairs: its own train AUROC, recomputed from its fit
        fit = module.fit_additive_probe(name, phi, psi, pairs, seed=3, batch_size=64)
        assert joint[name].image_logit.tobytes() == fit.image_logit.tobytes()
        assert joint[name].caption_logit.tobytes() == fit.caption_logit.tobytes()
        expected = module.pair_auroc(fit.image_logit[pairs[:, 0]] + fit.caption_logit[pairs[:, 1]], pairs[:, 2])
        assert together[0]["probes"][name]["train_pair_auroc"] == expected
        unseen = (
            fit.caption_logit if name == "image_only" else fit.image_logit - fit.image_logit[0] if name == "text_only" else None
        )
        if unseen is not None:
            assert not unseen.any()  # the side a probe does not see stays exactly zero
    with pytest.raises(ValueError, match="unknown additive probe 'bilinear'"):
        module.fit_additive_probes(("additive", "bilinear"), phi, psi, pairs)
