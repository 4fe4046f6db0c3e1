"""Score heads: registry, deterministic init, exact zero contrast of additive heads, factorization."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, bilinear_deltas, cycle_acc, deltas_from_score_fn
from clip_cycles.heads.losses import cycle_loss
from clip_cycles.heads.score_heads import HEADS, head_deltas, make_head, score_pairs

ADDITIVE = ("image_only", "text_only", "additive")
INTERACTION = ("diagonal", "bilinear", "low_rank", "oe")
RANK = {"low_rank": 3, "oe": 3}


def random_cycles(rng: np.random.Generator, n: int, n_images: int, n_captions: int) -> np.ndarray:
    u = np.stack([rng.choice(n_images, size=2, replace=False) for _ in range(n)])
    v = np.stack([rng.choice(n_captions, size=2, replace=False) for _ in range(n)])
    return np.concatenate([u, v], axis=1)


def perturbed(head, rng: np.random.Generator, scale: float):
    """The head with every parameter replaced by random values (trained heads are not at init)."""
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, scale, size=tuple(p.shape))))
    return head


def test_registry_holds_every_head_class():
    assert set(ADDITIVE + INTERACTION) <= set(HEADS)
    for name in ADDITIVE:
        assert HEADS[name].additive
    for name in INTERACTION:
        assert not HEADS[name].additive


def test_make_head_rejects_bad_requests():
    with pytest.raises(ValueError, match="unknown score head 'nope'"):
        make_head("nope", 4, 4)
    with pytest.raises(ValueError, match="low_rank.*needs a positive integer rank"):
        make_head("low_rank", 4, 4)
    with pytest.raises(ValueError, match="additive.*takes no rank"):
        make_head("additive", 4, 4, rank=2)
    with pytest.raises(ValueError, match="diagonal.*equal image and caption widths"):
        make_head("diagonal", 4, 5)
    with pytest.raises(ValueError, match="image_dim"):
        make_head("bilinear", 0, 5)


@pytest.mark.parametrize("name", ADDITIVE + INTERACTION)
def test_init_depends_only_on_seed(name):
    a = make_head(name, 6, 6, rank=RANK.get(name), seed=7)
    torch.manual_seed(123)  # the global generator must not matter
    b = make_head(name, 6, 6, rank=RANK.get(name), seed=7)
    c = make_head(name, 6, 6, rank=RANK.get(name), seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].abs().sum() > 0)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(ADDITIVE),
    seed=st.integers(0, 2**31 - 1),
    scale=st.floats(1e-3, 1e2),
    dims=st.tuples(st.integers(1, 9), st.integers(1, 9)),
)
def test_additive_heads_have_exactly_zero_contrast_and_gradient(name, seed, scale, dims):
    rng = np.random.default_rng(seed)
    head = perturbed(make_head(name, *dims, seed=seed % 1000), rng, scale).double()
    phi = rng.normal(0, scale, size=(12, dims[0]))
    psi = rng.normal(0, scale, size=(15, dims[1]))
    cycles = random_cycles(rng, 20, 12, 15)
    t = [torch.from_numpy(x) for x in (phi[cycles[:, 0]], phi[cycles[:, 1]], psi[cycles[:, 2]], psi[cycles[:, 3]])]
    delta = head.cycle_delta(*t)
    assert torch.count_nonzero(delta) == 0
    loss = cycle_loss(delta)
    # Zero gradient by construction: the loss does not depend on any parameter.
    assert not loss.requires_grad
    assert float(loss) == pytest.approx(np.log(2.0))
    # The honest path (four float64 logits per block) scores exactly 0.5 through the tie tolerance.
    deltas = head_deltas(head, phi, psi, cycles)
    assert np.abs(deltas).max() <= DEFAULT_TIE_TOLERANCE
    assert cycle_acc(deltas) == 0.5
    # And the cycle loss on those logits has a numerically zero gradient.
    for p in head.parameters():
        p.grad = None
    forward_delta = (head(t[0], t[2]) - head(t[0], t[3])) + (head(t[1], t[3]) - head(t[1], t[2]))
    cycle_loss(forward_delta).backward()
    for p in head.parameters():
        assert p.grad is None or float(p.grad.abs().max()) <= 1e-9 * (1 + scale**2)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_images=st.integers(2, 30), n_captions=st.integers(2, 30))
def test_any_additive_score_has_cycle_acc_exactly_half(seed, n_images, n_captions):
    rng = np.random.default_rng(seed)
    a = rng.normal(0, 10 ** rng.uniform(-3, 3), size=n_images)
    b = rng.normal(0, 10 ** rng.uniform(-3, 3), size=n_captions)
    cycles = random_cycles(rng, 25, n_images, n_captions)
    deltas = deltas_from_score_fn(lambda u, v: a[u] + b[v], cycles)
    assert cycle_acc(deltas) == 0.5


@pytest.mark.parametrize("name", INTERACTION)
def test_bilinear_contrast_matches_forward_and_export(name):
    rng = np.random.default_rng(3)
    head = perturbed(make_head(name, 5, 5, rank=RANK.get(name), seed=1), rng, 0.7).double()
    phi, psi = rng.normal(size=(10, 5)), rng.normal(size=(11, 5))
    cycles = random_cycles(rng, 40, 10, 11)
    t = [torch.from_numpy(x) for x in (phi[cycles[:, 0]], phi[cycles[:, 1]], psi[cycles[:, 2]], psi[cycles[:, 3]])]
    factorized = head.cycle_delta(*t).detach().numpy()
    forward = head_deltas(head, phi, psi, cycles)
    exported = bilinear_deltas(phi, psi, cycles, **head.bilinear_export())
    np.testing.assert_allclose(factorized, forward, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(exported, forward, rtol=1e-10, atol=1e-10)
    assert np.abs(forward).max() > 0.1  # a real interaction, not a vacuous match


def test_oe_contrast_ignores_its_additive_heads():
    rng = np.random.default_rng(0)
    oe = make_head("oe", 6, 6, rank=2, seed=4)
    low = make_head("low_rank", 6, 6, rank=2, seed=4)
    with torch.no_grad():
        oe.image_weight.add_(5.0)
        oe.caption_weight.sub_(3.0)
        oe.bias.fill_(9.0)
    batch = [torch.from_numpy(rng.normal(size=(8, 6)).astype(np.float32)) for _ in range(4)]
    assert torch.equal(oe.cycle_delta(*batch), low.cycle_delta(*batch))
    cycle_loss(oe.cycle_delta(*batch)).backward()
    assert oe.image_weight.grad is None and oe.caption_weight.grad is None and oe.bias.grad is None
    assert oe.image_factor.grad is not None and float(oe.image_factor.grad.abs().sum()) > 0


def test_score_pairs_is_float64_and_leaves_head_untouched():
    head = make_head("low_rank", 4, 4, rank=2, seed=0)
    phi = np.random.default_rng(1).normal(size=(3, 4))
    before = {k: v.clone() for k, v in head.state_dict().items()}
    scores = score_pairs(head, phi, phi, np.array([0, 1, 2]), np.array([2, 1, 0]))
    assert scores.dtype == np.float64 and scores.shape == (3,)
    assert all(p.dtype == torch.float32 for p in head.parameters())
    assert all(torch.equal(before[k], v) for k, v in head.state_dict().items())


def test_scoring_rejects_bad_input():
    head = make_head("bilinear", 4, 3, seed=0)
    phi, psi = np.ones((5, 4)), np.ones((6, 3))
    bad = phi.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="image_features has a non-finite value in row 2"):
        score_pairs(head, bad, psi, np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="caption_features has width 4 but head 'bilinear' expects 3"):
        score_pairs(head, phi, np.ones((6, 4)), np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match=r"caption_idx\[1\] = 6 is out of range"):
        score_pairs(head, phi, psi, np.array([0, 1]), np.array([0, 6]))
    with pytest.raises(ValueError, match="empty pair set"):
        score_pairs(head, phi, psi, np.array([], dtype=int), np.array([], dtype=int))
    with pytest.raises(ValueError, match="empty cycle set"):
        head_deltas(head, phi, psi, np.zeros((0, 4), dtype=int))
    with pytest.raises(ValueError, match="cycle 0 repeats its image"):
        head_deltas(head, phi, psi, np.array([[1, 1, 0, 2]]))


def test_float32_feature_tables_score_like_float64() -> None:
    from clip_cycles.heads.score_heads import head_deltas, make_head

    rng = np.random.default_rng(7)
    phi = rng.normal(size=(12, 6)).astype(np.float32)
    psi = rng.normal(size=(15, 6)).astype(np.float32)
    cycles = np.array([[0, 1, 0, 1], [2, 5, 3, 9], [11, 4, 14, 2]])
    head = make_head("low_rank", 6, 6, rank=2, seed=0)
    np.testing.assert_array_equal(
        head_deltas(head, phi, psi, cycles), head_deltas(head, phi.astype(np.float64), psi.astype(np.float64), cycles)
    )
