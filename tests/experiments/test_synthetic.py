"""Synthetic controls (quick size): the qualitative pattern of the paper's Table 1, AUROC, CLI output."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.cli import main
from clip_cycles.experiments.synthetic import (
    QUICK,
    _binding_data,
    auroc,
    make_marginal_shortcut,
    make_pure_interaction,
    run_controls,
)

ADDITIVE = ("image_only", "text_only", "additive")


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / "synthetic.json"
    code = main(["synthetic", "--quick", "--seeds", "0", "--out", str(out)])
    return code, json.loads(out.read_text())


def test_quick_run_shows_the_pattern(quick_result):
    code, result = quick_result
    assert code == 0 and result["passed"] and all(result["checks"].values())
    assert result["tie_tolerance"] == DEFAULT_TIE_TOLERANCE and result["seeds"] == [0] and result["quick"]
    controls = result["controls"]
    pure, shortcut = controls["pure_interaction"]["probes"], controls["marginal_shortcut"]["probes"]
    for name in ADDITIVE:
        assert pure[name]["cycle_acc"]["mean"] == 0.5
        assert abs(pure[name]["auroc"]["mean"] - 0.5) <= 0.05
        assert shortcut[name]["auroc"]["mean"] >= 0.99
        assert shortcut[name]["cycle_acc"]["mean"] == 0.5
    # The interaction is there to be found: a bilinear probe sees it on the same cycles.
    assert pure["bilinear (reference)"]["cycle_acc"]["mean"] > 0.7
    ranks = [controls["rank_sweep"]["probes"][f"low_rank r={r}"]["auroc"]["mean"] for r in (1, 2, 4, 8)]
    assert ranks == sorted(ranks) and ranks[-1] - ranks[0] >= 0.03
    binding = controls["binding"]["probes"]
    # The bag's 0.5 is an identity (both captions of a block are one bag); what can fail is the construction:
    # a block's two scenes must be a binding swap (same bag, different pairs), which the pair-aware encoder sees.
    bag, pair_aware = _binding_data(QUICK, 0, "bag"), _binding_data(QUICK, 0, "pair_aware")
    for split in (bag.train, bag.test):
        np.testing.assert_array_equal(split.caption_features[0::2], split.caption_features[1::2])
    for split in (pair_aware.train, pair_aware.test):
        assert not np.isclose(split.caption_features[0::2], split.caption_features[1::2]).all(axis=1).any()
    assert binding["pair_aware"]["cycle_acc"]["mean"] > 0.9


def test_controls_are_deterministic():
    a = run_controls(QUICK, (1,), ("binding",))
    b = run_controls(QUICK, (1,), ("binding",))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_generators_keep_marginals_and_blocks_as_designed():
    pure = make_pure_interaction(QUICK, 0).train
    pos, neg = pure.pairs[pure.pairs[:, 2] == 1], pure.pairs[pure.pairs[:, 2] == 0]
    # Recombined negatives: the same images and the same captions, never the true pair.
    assert sorted(pos[:, 0]) == sorted(neg[:, 0]) and sorted(pos[:, 1]) == sorted(neg[:, 1])
    assert not (neg[:, 0] == neg[:, 1]).any()
    shortcut = make_marginal_shortcut(QUICK, 0).test
    n = len(shortcut.cycles)
    assert shortcut.cycles[:, :2].max() < n  # cycles use clean positives only
    bag = _binding_data(QUICK, 0, "bag").test
    u1, u2, v1, v2 = bag.cycles.T
    assert np.array_equal(bag.caption_features[v1], bag.caption_features[v2])  # bag captions cannot tell the swap
    pair = _binding_data(QUICK, 0, "pair_aware").test
    assert not np.array_equal(pair.caption_features[v1], pair.caption_features[v2])


def test_auroc_matches_scikit_learn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, size=300).astype(float)
    labels = rng.integers(0, 2, size=300)
    assert auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert auroc(np.ones(10), np.array([0, 1] * 5)) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        auroc(np.ones(3), np.ones(3, dtype=int))
    with pytest.raises(ValueError, match="non-finite value at index 1"):
        auroc(np.array([0.0, np.nan]), np.array([0, 1]))
