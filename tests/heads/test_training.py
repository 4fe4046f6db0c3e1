"""Trainer and additive audit: planted interactions are learned, additive heads stay at exactly 0.5."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clip_cycles.algebra.contrast import cycle_acc
from clip_cycles.heads.additive_audit import additive_audit
from clip_cycles.heads.score_heads import head_deltas, make_head
from clip_cycles.heads.training import TrainConfig, cycle_acc_validator, train_on_cycles, train_on_pairs

DIM = 8


def planted_task(seed: int = 0, n_images: int = 120, n_captions: int = 120):
    """Features and cycles oriented by a hidden rank-2 bilinear score: (u1, v1), (u2, v2) is the preferred pairing."""
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n_images, DIM))
    psi = rng.normal(size=(n_captions, DIM))
    hidden = rng.normal(size=(DIM, 2)) @ rng.normal(size=(2, DIM))

    def cycles(n: int) -> np.ndarray:
        u = np.stack([rng.choice(n_images, 2, replace=False) for _ in range(n)])
        v = np.stack([rng.choice(n_captions, 2, replace=False) for _ in range(n)])
        delta = np.einsum("ij,jk,ik->i", phi[u[:, 0]] - phi[u[:, 1]], hidden, psi[v[:, 0]] - psi[v[:, 1]])
        v[delta < 0] = v[delta < 0][:, ::-1]
        return np.concatenate([u, v], axis=1)

    return phi, psi, cycles(600), cycles(200), cycles(400)


FAST = TrainConfig(lr=3e-2, weight_decay=1e-4, epochs=12, batch_size=64, seed=0, threads=1)


@pytest.fixture(scope="module")
def task():
    return planted_task()


@pytest.mark.parametrize("name,rank", [("low_rank", 2), ("bilinear", None)])
def test_cycle_loss_learns_a_planted_interaction(task, name, rank):
    phi, psi, train, val, test = task
    head = make_head(name, DIM, DIM, rank=rank, seed=0)
    untrained = cycle_acc(head_deltas(head, phi, psi, test))
    result = train_on_cycles(head, phi, psi, train, val, test, FAST)
    assert result.test_cycle_acc > 0.85
    assert result.test_cycle_acc > untrained + 0.2
    # The kept state is the best validation epoch, and the earliest one among ties.
    vals = [r.val for r in result.history]
    assert result.best_val == max(vals)
    assert result.best_epoch == 1 + vals.index(max(vals))
    assert cycle_acc_validator(phi, psi, val)(result.head) == result.best_val


@pytest.mark.parametrize("name", ["image_only", "text_only", "additive"])
def test_cycle_loss_leaves_additive_heads_at_exactly_half(task, name):
    phi, psi, train, val, test = task
    head = make_head(name, DIM, DIM, seed=0)
    before = {k: v.clone() for k, v in head.state_dict().items()}
    result = train_on_cycles(head, phi, psi, train, val, test, FAST)
    # CycleAcc is exactly 0.5 for ANY additive head (Theorem 1): an identity, so it is not asserted here.
    # What training could get wrong: it must skip every step (zero gradient) and leave the parameters alone.
    assert result.steps_skipped == FAST.epochs * int(np.ceil(len(train) / FAST.batch_size))
    assert all(torch.equal(before[k], v) for k, v in result.head.state_dict().items())


def test_four_entry_bce_moves_additive_heads_but_cycle_acc_stays_half(task):
    phi, psi, train, val, test = task
    head = make_head("additive", DIM, DIM, seed=0)
    before = head.image_weight.detach().clone()
    config = TrainConfig(lr=3e-2, epochs=3, batch_size=64, seed=0, loss="four_entry_bce", threads=1)
    result = train_on_cycles(head, phi, psi, train, val, test, config)
    assert not torch.equal(before, result.head.image_weight)
    assert result.steps_skipped == 0
    # Its CycleAcc stays 0.5 whatever the parameters (Theorem 1): an identity, not asserted.


def test_same_seed_same_parameters_and_results(task):
    phi, psi, train, val, test = task
    runs = [
        train_on_cycles(
            make_head("low_rank", DIM, DIM, rank=2, seed=s),
            phi,
            psi,
            train,
            val,
            test,
            TrainConfig(lr=3e-2, epochs=3, batch_size=64, seed=s, threads=1),
        )
        for s in (5, 5, 6)
    ]
    a, b, c = (r.head.state_dict() for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert runs[0].to_dict() == runs[1].to_dict()
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_train_on_pairs_with_a_validation_function(task):
    phi, psi, train, val, test = task
    # Pairs from the planted cycles: matched pairs positive, swapped pairs negative.
    pos = np.concatenate([train[:, [0, 2]], train[:, [1, 3]]])
    neg = np.concatenate([train[:, [0, 3]], train[:, [1, 2]]])
    pairs = np.concatenate([np.column_stack([pos, np.ones(len(pos), int)]), np.column_stack([neg, np.zeros(len(neg), int)])])
    head = make_head("oe", DIM, DIM, rank=2, seed=0)
    config = TrainConfig(lr=3e-2, epochs=6, batch_size=128, seed=0, loss="pairwise_bce", threads=1)
    result = train_on_pairs(
        head, phi, psi, pairs, config, validate=cycle_acc_validator(phi, psi, val), val_metric="val_cycle_acc", test_cycles=test
    )
    assert result.val_metric == "val_cycle_acc"
    assert result.test_cycle_acc > 0.8
    assert result.to_dict()["tie_tolerance"] == config.tie_tolerance


def test_bad_input_is_named(task):
    phi, psi, train, val, test = task
    head = make_head("bilinear", DIM, DIM, seed=0)
    bad = phi.copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="image_features has a non-finite value in row 7"):
        train_on_cycles(head, bad, psi, train, config=FAST)
    with pytest.raises(ValueError, match="caption_features has width 5 but head 'bilinear' expects 8"):
        train_on_cycles(head, phi, psi[:, :5], train, config=FAST)
    with pytest.raises(ValueError, match="empty cycle set"):
        train_on_cycles(head, phi, psi, np.zeros((0, 4), dtype=int), config=FAST)
    with pytest.raises(ValueError, match="empty cycle set"):
        train_on_cycles(head, phi, psi, train, val_cycles=np.zeros((0, 4), dtype=int), config=FAST)
    with pytest.raises(ValueError, match="cycle 0 repeats its caption"):
        train_on_cycles(head, phi, psi, np.array([[0, 1, 2, 2]]), config=FAST)
    with pytest.raises(ValueError, match="needs a cycle-kind loss"):
        train_on_cycles(head, phi, psi, train, config=TrainConfig(loss="pairwise_bce"))
    with pytest.raises(ValueError, match="needs a pairwise-kind loss"):
        train_on_pairs(head, phi, psi, np.array([[0, 0, 1]]), TrainConfig(loss="cycle"))
    with pytest.raises(ValueError, match=r"pair 1 has an label not in \{0, 1\}"):
        train_on_pairs(head, phi, psi, np.array([[0, 0, 1], [1, 1, 2]]), TrainConfig(loss="pairwise_bce"))
    with pytest.raises(ValueError, match="empty pair set"):
        train_on_pairs(head, phi, psi, np.zeros((0, 3), dtype=int), TrainConfig(loss="pairwise_bce"))
    with pytest.raises(ValueError, match=r"^TrainConfig option --epochs \(epochs\)"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="unknown loss"):
        TrainConfig(loss="mse")


def test_additive_audit_passes_on_complete_blocks(task):
    phi, psi, train, val, test = task
    report = additive_audit(phi, psi, train, test, val_cycles=val, epochs=2, seed=0)
    assert report.passed
    assert set(report.probes) == {"image_only", "text_only", "additive"}
    assert all(p.cycle_acc == 0.5 and p.max_abs_delta <= report.tie_tolerance for p in report.probes.values())
    as_dict = report.to_dict()
    assert as_dict["passed"] is True and as_dict["n_test"] == len(test) and as_dict["tie_tolerance"] == report.tie_tolerance
    with pytest.raises(ValueError, match="empty cycle set"):
        additive_audit(phi, psi, train, np.zeros((0, 4), dtype=int))
