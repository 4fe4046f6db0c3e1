"""Probes and metrics: lockstep L-BFGS equals scikit-learn, F1 selectivity, dominance, CS, leakage, paper orderings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.attributes.attribute_probes import (
    attribute_task_metrics,
    f1_scores,
    f1_selectivity,
    fit_logistic_lockstep,
    fit_logistic_sklearn,
    leakage_score,
    pearson,
    probe_attributes,
    supercategory_dominance,
)
from clip_cycles.attributes.concept_world import make_concept_world
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import RandomSplit, SplitContext, SupercategorySplit, attribute_folds


def _problem(n, d, k, seed, signal):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X[:, :k] * signal + rng.standard_normal((n, k)) > 1.0
    mask = rng.random((n, k)) < 0.8
    return X, y, mask


@pytest.mark.parametrize(
    ("n", "d", "signal"),
    [(120, 5, 1.0), (60, 40, 3.0)],  # non-separable (unique optimum), separable (path-dependent stop)
)
def test_lockstep_reproduces_sklearn_iterates(n, d, signal):
    X, y, mask = _problem(n, d, 4, seed=1, signal=signal)
    ours = fit_logistic_lockstep(X, y, mask, progress=False)
    ref = fit_logistic_sklearn(X, y, mask, progress=False)
    assert np.array_equal(ours.n_iter, ref.n_iter)
    scale = np.abs(ref.coef).max()
    assert np.abs(ours.coef - ref.coef).max() <= 1e-7 * scale
    assert np.abs(ours.intercept - ref.intercept).max() <= 1e-7 * max(1.0, scale)
    assert np.array_equal(X @ ours.coef.T + ours.intercept > 0, X @ ref.coef.T + ref.intercept > 0)


def test_lockstep_respects_max_iter():
    X, y, mask = _problem(100, 6, 3, seed=2, signal=1.0)
    ours = fit_logistic_lockstep(X, y, mask, max_iter=3, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fit_logistic_sklearn(X, y, mask, max_iter=3, progress=False)
    assert ours.n_iter.tolist() == [3, 3, 3] == ref.n_iter.tolist()
    assert np.allclose(ours.coef, ref.coef, rtol=1e-7, atol=1e-10)


def test_single_class_column_is_a_clear_error():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"columns \[0\] have a single class"):
        fit_logistic_lockstep(X, np.zeros((4, 1), bool), np.ones((4, 1), bool), progress=False)


def test_f1_selectivity_and_dominance_by_hand():
    assert f1_selectivity(np.array([0.5]), np.array([25]), 100).tolist() == [25.0]
    labels = np.array([[1, 1], [1, 0], [1, 0], [0, 1], [1, 0]], dtype=bool)
    supers = ["animal", "animal", "tool", None, "tool"]
    # Attribute 0: animal 2, tool 2 of 4 positives -> 0.5. Attribute 1: animal 1 of 2 (one uncategorised) -> 0.5.
    assert supercategory_dominance(labels, supers).tolist() == [0.5, 0.5]
    assert supercategory_dominance(labels[:, :1], ["a", "a", "a", "b", "b"]).tolist() == [0.75]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=30))
def test_f1_matches_sklearn(pairs):
    from sklearn.metrics import f1_score

    truth = np.array([[a] for a, _ in pairs])
    pred = np.array([[b] for _, b in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = f1_score(truth[:, 0], pred[:, 0], zero_division=0.0)
    assert f1_scores(truth, pred)[0] == pytest.approx(expected)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=3, max_size=30))
def test_pearson_matches_numpy(pairs):
    x, y = np.array(pairs).T
    value = pearson(x, y)
    if np.std(x) < 1e-6 or np.std(y) < 1e-6:
        return
    assert value == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)


def test_pearson_ignores_nan_and_degenerate():
    assert np.isnan(pearson(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])))
    assert pearson(np.array([1.0, 2.0, 3.0, np.nan]), np.array([2.0, 4.0, 6.0, 0.0])) == pytest.approx(1.0)


def test_leakage_score_needs_no_labels(world):
    X = world.embeddings
    random = leakage_score(X, list(RandomSplit(random_state=0).split(X)))
    strict = leakage_score(X, list(SupercategorySplit(world.data.supercategories).split(X)), random.threshold)
    assert random.mean_nearest_similarity > strict.mean_nearest_similarity
    assert random.share_above_threshold > strict.share_above_threshold
    twin = np.vstack([X[:5], X[:5]])
    exact = leakage_score(twin, [(np.arange(5), np.arange(5, 10))], threshold=0.999)
    assert exact.mean_nearest_similarity == pytest.approx(1.0) and exact.share_above_threshold == 1.0


def test_probe_attributes_matches_sklearn_solver(world):
    data = ConceptAttributeData(
        world.data.concepts, world.data.attributes[:4], world.data.labels[:, :4], world.data.supercategories
    )
    folds = attribute_folds(RandomSplit(n_repeats=1), world.embeddings, data.labels)
    fast = probe_attributes(world.embeddings, data, folds, progress=False)
    # The default (batched, L2) against one scikit-learn fit per column of the same estimator.
    slow = probe_attributes(world.embeddings, data, folds, solver="sklearn_l2", progress=False)
    assert np.array_equal(fast.f1, slow.f1)
    assert fast.summary() == slow.summary()


def test_zero_positive_attribute_is_named(world):
    labels = world.data.labels[:, :2].copy()
    labels[:, 1] = False
    data = ConceptAttributeData(world.data.concepts, ("a", "empty"), labels, world.data.supercategories)
    with pytest.raises(ValueError, match=r"zero positive concepts cannot be probed: \['empty'\]"):
        probe_attributes(world.embeddings, data, [[(np.arange(10), np.arange(10, 20))]] * 2)


def test_metrics_are_deterministic_and_complete(world):
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups)
    a = attribute_task_metrics(world.embeddings, world.data, "supercategory", 1, context=context, progress=False)
    b = attribute_task_metrics(world.embeddings, world.data, "supercategory", 1, context=context, progress=False)
    assert a == b
    assert {"f1_selectivity", "cs", "mean_f1", "coverage", "leakage", "n_attributes_scored"} <= set(a)
    assert a["coverage"]["n_attribute_folds"] == 10 * len(world.data.attributes)


@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_world_reproduces_paper_orderings(seed):
    """Paper 2, Tables 1-2: CS random > clustering > supercategory; F1 selectivity in the same order."""
    world = make_concept_world(seed=seed)
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups)
    k = round(100 * len(world.data.concepts) / 1854)  # the paper's k=100 of 1,854 concepts, scaled
    metrics = {
        name: attribute_task_metrics(
            world.embeddings,
            world.data,
            name,
            seed,
            context=context,
            progress=False,
            split_params={"n_clusters": k} if name == "clustering" else None,
        )
        for name in ("random", "clustering", "supercategory")
    }
    cs = {n: m["cs"] for n, m in metrics.items()}
    sel = {n: m["f1_selectivity"] for n, m in metrics.items()}
    assert cs["random"] > cs["clustering"] > cs["supercategory"], cs
    assert sel["random"] >= sel["clustering"] >= sel["supercategory"], sel
    assert cs["random"] > 0.3 and sel["supercategory"] > 0  # leaky baseline; strict split still learnable
    leak = {n: m["leakage"]["mean_nearest_train_similarity"] for n, m in metrics.items()}
    assert leak["random"] > leak["clustering"] >= leak["supercategory"] - 0.02, leak


# ------------------------------------------------ independent scikit-learn reference (issue 14)


def _reference_fold_f1(X, y, train, test):
    """Paper 2's probe written out with scikit-learn: fit on train rows only, F1 on test rows only.

    A train side with a single class gives a probe with nothing to learn: negative everywhere.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    if len(np.unique(y[train])) < 2:
        predicted = np.zeros(len(test), dtype=int)
    else:
        model = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=1000)
        model.fit(X[train], y[train])
        predicted = model.predict(X[test])
    return f1_score(y[test], predicted, zero_division=0.0)


def _reference_dominance(labels, supercategories):
    out = []
    for a in range(labels.shape[1]):
        positive = [s for s, has in zip(supercategories, labels[:, a]) if has]
        counts = [positive.count(c) for c in set(s for s in positive if s is not None)]
        out.append(max(counts, default=0) / len(positive))
    return np.array(out)


def _tiny_fixture(seed=0):
    """60 concepts in 6-d, 5 attributes of different prevalence, 4 categories plus uncategorised concepts."""
    rng = np.random.default_rng(seed)
    n, d = 60, 6
    X = rng.standard_normal((n, d))
    supers = [None if i % 7 == 0 else f"cat{i % 4}" for i in range(n)]
    labels = np.zeros((n, 5), dtype=bool)
    for a, rate in enumerate((0.15, 0.25, 0.35, 0.45, 0.55)):
        score = X[:, a] + 0.9 * rng.standard_normal(n) + (np.array([s == "cat1" for s in supers]) * (a % 2))
        labels[np.argsort(-score)[: int(rate * n)], a] = True
    data = ConceptAttributeData(tuple(f"c{i:02d}" for i in range(n)), tuple(f"attr{a}" for a in range(5)), labels, tuple(supers))
    return X, data


def test_random_split_metrics_match_a_few_line_sklearn_reference():
    """Fitting uses train rows only, F1 uses test rows only, CS correlates dominance with selectivity."""
    from sklearn.model_selection import RepeatedStratifiedKFold

    X, data = _tiny_fixture()
    labels = data.labels.astype(int)
    metrics = attribute_task_metrics(X, data, "random", 4, solver="sklearn", progress=False)
    f1 = np.array(
        [
            [
                _reference_fold_f1(X, labels[:, a], train, test)
                for train, test in RepeatedStratifiedKFold(n_splits=5, n_repeats=2, random_state=4).split(X, labels[:, a])
            ]
            for a in range(labels.shape[1])
        ]
    )
    selectivity = 100 * f1.mean(axis=1) - 100 * labels.sum(axis=0) / len(labels)
    dominance = _reference_dominance(data.labels, data.supercategories)
    assert metrics["f1_selectivity"] == pytest.approx(selectivity.mean(), abs=1e-9)
    assert metrics["mean_f1"] == pytest.approx(100 * f1.mean(), abs=1e-9)
    assert metrics["cs"] == pytest.approx(np.corrcoef(dominance, selectivity)[0, 1], abs=1e-9)
    # The fixture separates the bugs: in-sample F1 and CS against mean F1 would differ.
    assert abs(np.corrcoef(dominance, f1.mean(axis=1))[0, 1] - metrics["cs"]) > 0.05


def test_degenerate_folds_score_zero_like_the_reference():
    """Whole categories to one side: folds without positives on a side score F1 = 0 and stay in the mean."""
    X, data = _tiny_fixture(1)
    labels = data.labels.copy()
    labels[:, 0] = [s == "cat2" for s in data.supercategories]  # lives in one category only
    data = ConceptAttributeData(data.concepts, data.attributes, labels, data.supercategories)
    splitter = SupercategorySplit(data.supercategories, n_splits=3, n_repeats=1, random_state=0)
    folds = attribute_folds(splitter, X, data.labels)
    result = probe_attributes(X, data, folds, solver="sklearn", progress=False)
    y = data.labels.astype(int)
    expected = np.array([[_reference_fold_f1(X, y[:, a], tr, te) for tr, te in folds[a]] for a in range(5)])
    assert np.allclose(result.f1, expected, atol=1e-12)
    assert (expected[0] == 0).all() and result.coverage.degenerate[0].all()
    summary = result.summary()
    assert summary["n_attributes_scored"] == 5
    expected_sel = 100 * expected.mean(axis=1) - 100 * y.sum(axis=0) / len(y)
    assert summary["f1_selectivity"] == pytest.approx(expected_sel.mean(), abs=1e-9)


def test_per_fold_cs_and_per_attribute_results_by_hand():
    """CS of each fold alone, the fold noise and the per-attribute rows, against numpy on a hand-made result."""
    from clip_cycles.attributes.attribute_probes import AttributeProbeResult
    from clip_cycles.attributes.splitters import coverage_report

    rng = np.random.default_rng(4)
    k, n_folds, n = 6, 4, 50
    f1 = rng.uniform(0.1, 0.9, (k, n_folds))
    f1[2, 1] = 0.0  # a degenerate fold
    positives = np.array([10, 12, 15, 11, 20, 13])
    labels = np.zeros((n, k), dtype=bool)
    for a, p in enumerate(positives):
        labels[:p, a] = True
    folds = [[(np.arange(10, n), np.arange(10))] * n_folds for _ in range(k)]
    folds[2] = [folds[2][0], (np.arange(n), np.arange(0)), *folds[2][2:]]
    coverage = coverage_report(labels, folds, tuple(f"a{i}" for i in range(k)))
    mean_f1 = f1.mean(axis=1)
    chance = 100.0 * positives / n
    selectivity = 100.0 * mean_f1 - chance
    dominance = rng.uniform(0.2, 1.0, k)
    result = AttributeProbeResult(
        tuple(f"a{i}" for i in range(k)), f1, mean_f1, selectivity, dominance, coverage, np.ones((k, n_folds))
    )
    spread = result.cs_spread()
    expected = [np.corrcoef(dominance, 100.0 * f1[:, f] - chance)[0, 1] for f in range(n_folds)]
    assert spread["cs_per_fold"] == pytest.approx(expected, abs=1e-12)
    assert spread["cs_per_fold_mean"] == pytest.approx(np.mean(expected), abs=1e-12)
    assert spread["cs_per_fold_sd"] == pytest.approx(np.std(expected, ddof=1), abs=1e-12)
    assert spread["cs_of_mean_f1"] == pytest.approx(np.corrcoef(dominance, selectivity)[0, 1], abs=1e-12)
    assert spread["f1_fold_sd"] == pytest.approx(np.mean([100.0 * np.std(row, ddof=1) for row in f1]), abs=1e-12)
    rows = result.per_attribute()
    assert list(rows) == [f"a{i}" for i in range(k)]
    assert rows["a2"]["f1_per_fold"] == pytest.approx(list(100.0 * f1[2]))
    assert rows["a2"]["f1"] == pytest.approx(100.0 * f1[2].mean()) and rows["a2"]["n_degenerate_folds"] == 1
    assert rows["a4"]["selectivity_per_fold"] == pytest.approx(list(100.0 * f1[4] - chance[4]))
    assert rows["a4"]["selectivity"] == pytest.approx(selectivity[4]) and rows["a4"]["dominance"] == dominance[4]
