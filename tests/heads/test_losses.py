"""Losses: values, registry, and why the cycle loss (unlike four-entry BCE) ignores additive shifts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clip_cycles.heads.losses import LOSSES, cycle_loss, four_entry_bce, get_loss, pairwise_bce
from clip_cycles.heads.score_heads import make_head


def test_cycle_loss_is_mean_softplus_of_minus_delta():
    delta = torch.tensor([-2.0, 0.0, 3.5], dtype=torch.float64)
    expected = np.mean(np.log1p(np.exp(-delta.numpy())))
    assert float(cycle_loss(delta)) == pytest.approx(expected, rel=1e-12)


def test_four_entry_bce_targets_diagonal():
    blocks = torch.tensor([[[2.0, -1.0], [0.5, 1.5]]], dtype=torch.float64)
    p = 1 / (1 + np.exp(-blocks.numpy()[0]))
    target = np.eye(2)
    expected = -np.mean(target * np.log(p) + (1 - target) * np.log(1 - p))
    assert float(four_entry_bce(blocks)) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match=r"shape \(B, 2, 2\)"):
        four_entry_bce(torch.zeros(3, 4))


def test_pairwise_bce_values_and_shape_check():
    scores = torch.tensor([1.0, -2.0], dtype=torch.float64)
    labels = torch.tensor([1, 0])
    expected = np.mean([np.log1p(np.exp(-1.0)), np.log1p(np.exp(-2.0))])
    assert float(pairwise_bce(scores, labels)) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="differ in shape"):
        pairwise_bce(scores, torch.ones(3))


def test_registry_names_and_kinds():
    assert {name: spec.kind for name, spec in LOSSES.items()} == {
        "cycle": "cycle",
        "four_entry_bce": "cycle",
        "pairwise_bce": "pairwise",
    }
    with pytest.raises(ValueError, match="unknown loss 'hinge'.*cycle"):
        get_loss("hinge")


def test_four_entry_bce_rewards_additive_shifts_the_cycle_loss_ignores():
    rng = np.random.default_rng(0)
    batch = [torch.from_numpy(rng.normal(size=(16, 5)).astype(np.float32)) for _ in range(4)]
    head = make_head("additive", 5, 5, seed=0)
    assert not get_loss("cycle").fn(head, *batch).requires_grad
    bce = get_loss("four_entry_bce").fn(head, *batch)
    bce.backward()
    grads = [p.grad for p in head.parameters()]
    assert any(g is not None and float(g.abs().sum()) > 0 for g in grads)
    # A pure bias shift moves the four-entry BCE but not the cycle loss of an interaction head.
    oe = make_head("oe", 5, 5, rank=2, seed=0)
    before_bce = float(get_loss("four_entry_bce").fn(oe, *batch).detach())
    before_cycle = float(get_loss("cycle").fn(oe, *batch).detach())
    with torch.no_grad():
        oe.bias.fill_(4.0)
    assert float(get_loss("four_entry_bce").fn(oe, *batch).detach()) != pytest.approx(before_bce)
    assert float(get_loss("cycle").fn(oe, *batch).detach()) == before_cycle
