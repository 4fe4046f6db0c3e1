"""Probe metrics and the probe's loss against plain numpy / scikit-learn written in the test.

Expected values are computed here from the definitions: class-balanced weights as
scikit-learn's ``compute_class_weight("balanced")``, the weighted half-binomial loss and
its gradient from the logistic formula, F1 per column, Pearson's r, supercategory
dominance and the nearest-train cosine leakage, each by a few lines of numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.utils.class_weight import compute_class_weight

from clip_cycles.attributes import attribute_probes
from clip_cycles.attributes.attribute_probes import (
    AttributeProbeResult,
    _balanced_weights,
    _loss_gradient,
    f1_scores,
    leakage_score,
    pearson,
    probe_attributes,
    supercategory_dominance,
)
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import coverage_report
from clip_cycles.registry import Registry


def test_balanced_weights_are_sklearns_on_train_rows_and_zero_elsewhere():
    rng = np.random.default_rng(0)
    y = rng.random((30, 3)) < np.array([0.2, 0.5, 0.7])
    mask = rng.random((30, 3)) < 0.7
    weights = _balanced_weights(y, mask)
    for k in range(3):
        rows = mask[:, k]
        expected = compute_class_weight("balanced", classes=np.array([False, True]), y=y[rows, k])
        assert np.allclose(weights[rows, k], np.where(y[rows, k], expected[1], expected[0]), rtol=0, atol=1e-12)
        assert (weights[~rows, k] == 0).all()
    with pytest.raises(ValueError, match=r"probe columns \[1\] have a single class on their train rows"):
        _balanced_weights(np.array([[True, True], [False, True]]), np.ones((2, 2), dtype=bool))
    # One positive (or one negative) on the train rows is enough: weights 3/(2*1) and 3/(2*2).
    one = _balanced_weights(np.array([[True, False], [False, True], [False, True]]), np.ones((3, 2), dtype=bool))
    assert one.tolist() == [[1.5, 1.5], [0.75, 0.75], [0.75, 0.75]]
    listed = ", ".join(str(i) for i in range(10))
    with pytest.raises(ValueError, match=rf"^probe columns \[{listed}\] have a single class on their train rows; "):
        _balanced_weights(np.zeros((3, 11), dtype=bool), np.ones((3, 11), dtype=bool))


def test_loss_and_gradient_are_the_weighted_logistic_ones():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((25, 3))
    y = (rng.random((25, 2)) < 0.4).astype(np.float64)
    weight = rng.random((25, 2)) * (rng.random((25, 2)) < 0.8)
    W = np.array([[3.0, -2.5], [-2.0, 1.5], [1.0, 2.0], [0.0, 0.5]])  # |z| > 3 on both signs: both sigmoid branches
    loss, grad = _loss_gradient(X, y, weight, W)
    for k in range(2):
        z = X @ W[:3, k] + W[3, k]
        assert (z > 3).any() and (z < -3).any()
        expected_loss = np.sum(weight[:, k] * (np.logaddexp(0.0, z) - y[:, k] * z)) / weight[:, k].sum()
        residual = weight[:, k] * (1.0 / (1.0 + np.exp(-z)) - y[:, k]) / weight[:, k].sum()
        assert loss[k] == pytest.approx(expected_loss, rel=1e-12)
        assert np.allclose(grad[:3, k], X.T @ residual, rtol=1e-10, atol=1e-14)
        assert grad[3, k] == pytest.approx(residual.sum(), rel=1e-10, abs=1e-14)


def test_f1_scores_per_column_like_sklearn():
    rng = np.random.default_rng(2)
    truth = rng.random((40, 4)) < np.array([0.1, 0.3, 0.6, 0.0])
    pred = rng.random((40, 4)) < np.array([0.5, 0.2, 0.6, 0.0])
    expected = [f1_score(truth[:, k], pred[:, k], zero_division=0.0) for k in range(4)]
    assert np.allclose(f1_scores(truth, pred), expected, rtol=0, atol=1e-12)


def test_pearson_needs_three_finite_pairs():
    x = np.array([1.0, 2.0, 4.0, np.nan, 5.0])
    y = np.array([2.0, 1.0, 7.0, 3.0, np.inf])
    assert pearson(x, y) == pytest.approx(np.corrcoef([1.0, 2.0, 4.0], [2.0, 1.0, 7.0])[0, 1], abs=1e-12)
    assert np.isnan(pearson(x[[0, 1, 3]], y[[0, 1, 3]]))  # two finite pairs


def test_dominance_edge_cases():
    labels = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [1, 0, 0]], dtype=bool)
    # Attribute 0: a 2 of 3 positives; attribute 1: no positive -> NaN; attribute 2: b holds 1, the None one 1 -> 1/2.
    got = supercategory_dominance(labels, ["a", "a", None, "b"])
    assert got[0] == pytest.approx(2 / 3) and np.isnan(got[1]) and got[2] == pytest.approx(0.5)
    assert np.isnan(supercategory_dominance(labels, [None] * 4)).all()
    assert supercategory_dominance(labels[:, :1] & np.array([[1], [0], [0], [0]], dtype=bool), ["a"] * 4).tolist() == [1.0]
    with pytest.raises(ValueError, match=r"3 supercategories for 4 concepts"):
        supercategory_dominance(labels, ["a", "b", "c"])


def test_leakage_is_the_mean_over_folds_of_nearest_train_cosines():
    X = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0], [-1.0, 0.5]])
    folds = [(np.array([0, 1]), np.array([2, 3])), (np.array([2, 3]), np.array([0]))]
    # Fold 0: concept 2's nearest train cosine is 1/sqrt(2) (to either), concept 3's 0.5/sqrt(1.25) (to 1).
    # Fold 1: concept 0's nearest is 2, 1/sqrt(2).
    c2, c3 = 1 / np.sqrt(2), 0.5 / np.sqrt(1.25)
    score = leakage_score(X, folds, threshold=0.6)
    assert score.mean_nearest_similarity == pytest.approx(((c2 + c3) / 2 + c2) / 2, abs=1e-12)
    assert score.share_above_threshold == pytest.approx((0.5 + 1.0) / 2)  # c2 >= 0.6 > c3
    assert score.as_dict() == {"mean_nearest_train_similarity": score.mean_nearest_similarity,
                               "share_above_threshold": 0.75, "threshold": 0.6}  # fmt: skip
    with pytest.raises(ValueError, match="^a fold has an empty train or test side; leakage is undefined$"):
        leakage_score(X, [(np.array([], dtype=int), np.array([0, 1]))], threshold=0.5)
    # Short vectors (norms below 1) and a test concept pointing exactly like a train one: cosine 1 >= threshold 1.
    small = np.array([[0.2, 0.0], [0.0, 0.1], [0.05, 0.0], [0.03, 0.04]])
    exact = leakage_score(small, [(np.array([0, 1]), np.array([2, 3]))], threshold=1.0)
    assert exact.mean_nearest_similarity == pytest.approx((1.0 + 0.8) / 2, abs=1e-12)  # (0.03, 0.04): 0.8 to (0, 0.1)
    assert exact.share_above_threshold == 0.5
    # Without a threshold: the median over concepts of the cosine to their nearest other concept.
    nearest_other = [max(float(small[i] @ small[j]) / np.linalg.norm(small[i]) / np.linalg.norm(small[j])
                         for j in range(4) if j != i) for i in range(4)]  # fmt: skip
    assert leakage_score(small, [(np.array([0, 1]), np.array([2, 3]))]).threshold == pytest.approx(
        np.median(nearest_other), abs=1e-12
    )


def summary_of(selectivity: list[float], dominance: list[float]) -> dict:
    k = len(selectivity)
    labels = np.ones((4, k), dtype=bool)
    coverage = coverage_report(labels, [[(np.array([0, 1]), np.array([2, 3]))]] * k, tuple(f"a{i}" for i in range(k)))
    mean_f1 = np.linspace(0.1, 0.5, k)
    return AttributeProbeResult(tuple(f"a{i}" for i in range(k)), mean_f1[:, None], mean_f1, np.array(selectivity),
                                np.array(dominance), coverage, np.ones((k, 1))).summary()  # fmt: skip


def test_summary_averages_over_every_attribute():
    summary = summary_of([10.0, -5.0, 4.0, 3.0], [1.0, np.nan, 0.5, 0.25])
    assert set(summary) == {"f1_selectivity", "mean_f1", "cs", "n_attributes", "n_attributes_scored",
                            "n_attributes_cs", "averaged_over", "coverage",
                            "n_probes_not_converged", "probes_not_converged"}  # fmt: skip
    assert summary["f1_selectivity"] == 3.0 and summary["mean_f1"] == pytest.approx(30.0)
    # CS over the three attributes with a finite dominance.
    assert summary["cs"] == pytest.approx(np.corrcoef([1.0, 0.5, 0.25], [10.0, 4.0, 3.0])[0, 1], abs=1e-12)
    assert (summary["n_attributes"], summary["n_attributes_scored"], summary["n_attributes_cs"]) == (4, 4, 3)
    one = summary_of([7.0], [0.5])
    assert one["f1_selectivity"] == 7.0 and one["mean_f1"] == pytest.approx(10.0) and np.isnan(one["cs"])
    none = summary_of([], [])
    assert np.isnan(none["f1_selectivity"]) and np.isnan(none["mean_f1"]) and none["n_attributes"] == 0


def test_probe_attributes_rejects_bad_shapes_and_solvers(monkeypatch: pytest.MonkeyPatch):
    data = ConceptAttributeData(("c0", "c1", "c2", "c3"), ("a",), np.array([[1], [0], [1], [0]], dtype=bool),
                                ("x", "x", "y", "y"))  # fmt: skip
    with pytest.raises(ValueError, match="embeddings have 3 rows for 4 concepts"):
        probe_attributes(np.zeros((3, 2)), data, [[]])
    with pytest.raises(ValueError, match=r"^unknown probe solver 'newton'; registered: batched, lockstep, sklearn, sklearn_l2$"):
        probe_attributes(np.zeros((4, 2)), data, [[]], solver="newton")
    names = tuple(f"z{i}" for i in range(11)) + ("one",)
    labels = np.zeros((4, 12), dtype=bool)
    labels[0, 11] = True  # one positive is enough to be probed
    many = ConceptAttributeData(data.concepts, names, labels, data.supercategories)
    listed = ", ".join(f"'z{i}'" for i in range(10))
    with pytest.raises(ValueError, match=rf"^attributes with zero positive concepts cannot be probed: \[{listed}\]$"):
        probe_attributes(np.zeros((4, 2)), many, [[]] * 12)
    single = ConceptAttributeData(data.concepts, ("one",), labels[:, 11:], data.supercategories)
    assert probe_attributes(np.eye(4)[:, :2], single, [[(np.array([0, 1]), np.array([2, 3]))]], progress=False).f1.shape == (1, 1)

    # A given dominance of the wrong shape is refused before any probe is fitted.
    def no_fits(*args, **kwargs):
        raise AssertionError("a probe was fitted before the dominance was checked")

    solvers: Registry = Registry("probe solver")
    for name in ("batched", "lockstep", "sklearn"):
        solvers.register(name, no_fits)
    monkeypatch.setattr(attribute_probes, "PROBE_SOLVERS", solvers)
    with pytest.raises(ValueError, match=r"^dominance has shape \(2,\) for 1 attributes$"):
        probe_attributes(np.eye(4)[:, :2], single, [[(np.array([0, 1]), np.array([2, 3]))]], dominance=np.zeros(2))
    with pytest.raises(ValueError, match=r"^dominance has shape \(1, 1\) for 1 attributes$"):
        probe_attributes(np.eye(4)[:, :2], single, [[(np.array([0, 1]), np.array([2, 3]))]], dominance=np.zeros((1, 1)))
    monkeypatch.undo()
    given = probe_attributes(np.eye(4)[:, :2], single, [[(np.array([0, 1]), np.array([2, 3]))]], dominance=np.array([0.25]))
    assert given.dominance.tolist() == [0.25]
    # No folds at all: nothing to average, NaN per attribute (not an error).
    assert np.isnan(probe_attributes(np.eye(4)[:, :2], data, [[]], progress=False).mean_f1).all()


def test_probe_attributes_fits_train_rows_and_scores_test_rows_like_sklearn():
    rng = np.random.default_rng(5)
    n = 24
    X = rng.standard_normal((n, 3))
    labels = np.zeros((n, 3), dtype=bool)
    labels[:, 0] = X[:, 0] + 0.8 * rng.standard_normal(n) > 0.3
    labels[:, 1] = X[:, 1] - X[:, 2] + 0.8 * rng.standard_normal(n) > 0.0
    labels[[0, 3, 6, 9], 2] = True  # all in fold 0's test side: every fold of this attribute is degenerate
    supers = tuple(["s0"] * 8 + ["s1"] * 8 + [None] * 8)
    data = ConceptAttributeData(tuple(f"c{i}" for i in range(n)), ("a0", "a1", "a2"), labels, supers)
    folds = [[(np.setdiff1d(np.arange(n), np.arange(k, n, 3)), np.arange(k, n, 3)) for k in range(3)]] * 3
    result = probe_attributes(X, data, folds, solver="sklearn", progress=False)
    expected = np.zeros((3, 3))
    for a in range(3):
        y = labels[:, a].astype(int)
        for f, (train, test) in enumerate(folds[a]):
            if len(np.unique(y[train])) < 2 or y[test].sum() == 0:
                continue  # nothing to learn, or no test positive: F1 = 0
            model = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=1000).fit(X[train], y[train])
            expected[a, f] = f1_score(y[test], model.predict(X[test]), zero_division=0.0)
    assert (expected[:2] > 0).sum() >= 5 and (expected[2] == 0).all()  # the fixture fits real probes
    assert np.allclose(result.f1, expected, rtol=0, atol=1e-12)
    assert np.allclose(result.mean_f1, expected.mean(axis=1), rtol=0, atol=1e-12)
    assert np.allclose(result.selectivity, 100 * expected.mean(axis=1) - 100 * labels.sum(axis=0) / n, atol=1e-9)
    dominance = [max(sum(1 for i in range(n) if labels[i, a] and supers[i] == s) for s in ("s0", "s1"))
                 / labels[:, a].sum() for a in range(3)]  # fmt: skip
    assert np.allclose(result.dominance, dominance)
    assert (result.n_iter[:2] > 0).all() and (result.n_iter[2] == 0).all()
    assert result.attributes == ("a0", "a1", "a2") and result.coverage.fitted.sum() == 6
    # max_iter reaches the solver: one L-BFGS iteration per fitted column.
    assert (probe_attributes(X, data, folds, solver="sklearn", max_iter=1, progress=False).n_iter[:2] == 1).all()


def test_empty_columns_give_their_documented_values_without_a_numpy_warning():
    """0 / 0 never reaches the user as a RuntimeWarning: F1 0 without positives, dominance NaN, F1 NaN without folds."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        none = np.zeros((3, 2), dtype=bool)
        assert f1_scores(none, none).tolist() == [0.0, 0.0]  # no positive and none predicted: 0, like scikit-learn
        labels = np.array([[1, 0], [1, 0], [0, 0]], dtype=bool)
        dominance = supercategory_dominance(labels, ["x", "y", None])
        assert dominance[0] == 0.5 and np.isnan(dominance[1])  # an attribute nobody holds has no dominance
        data = ConceptAttributeData(("c0", "c1", "c2", "c3"), ("a",), np.array([[1], [0], [1], [0]], dtype=bool),
                                    ("x", "x", "y", "y"))  # fmt: skip
        assert np.isnan(probe_attributes(np.eye(4)[:, :2], data, [[]], progress=False).mean_f1).all()
