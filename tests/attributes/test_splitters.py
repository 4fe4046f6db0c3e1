"""The five concept splitters: scikit-learn cross-validator conventions, group rules, coverage, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.attributes.splitters import (
    STRATEGIES,
    ClusterSplit,
    GroupingSplit,
    RandomSplit,
    SimilaritySplit,
    SplitContext,
    StrategyUnavailable,
    SupercategorySplit,
    attribute_folds,
    concept_groups_to_ids,
    coverage_report,
    load_concept_groups,
    make_splitter,
    nearest_neighbours,
)


def all_splitters(world):
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups)
    return {
        name: make_splitter(name, context, seed=3, **({"n_clusters": 16} if name == "clustering" else {})) for name in STRATEGIES
    }


def check_folds(folds, n):
    for train, test in folds:
        assert train.dtype.kind == "i" and test.dtype.kind == "i"
        assert len(np.intersect1d(train, test)) == 0
        assert np.array_equal(np.union1d(train, test), np.arange(n))
        assert len(test) > 0 and len(train) > 0


def test_registry_has_the_five_paper_strategies():
    assert set(STRATEGIES) >= {"random", "llm", "similarity", "clustering", "supercategory"}


@pytest.mark.parametrize("name", ["random", "llm", "similarity", "clustering", "supercategory"])
def test_cross_validator_conventions(world, name):
    X = world.embeddings
    y = world.data.labels[:, 0].astype(int)
    splitter = all_splitters(world)[name]
    folds = list(splitter.split(X, y))
    assert len(folds) == splitter.get_n_splits() == 10
    check_folds(folds, len(X))
    again = list(all_splitters(world)[name].split(X, y))
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    # Within a repeat, test folds are disjoint; they cover every concept except those the
    # strategy forces into train (llm groups, similarity groups).
    always_train = set(range(len(X))).intersection(*[set(tr.tolist()) for tr, _ in folds])
    for r in range(2):
        tests = np.concatenate([t for _, t in folds[5 * r : 5 * r + 5]])
        assert len(np.unique(tests)) == len(tests)
        assert set(tests.tolist()) == set(range(len(X))) - always_train
    assert bool(always_train) == (name in ("llm", "similarity"))


def test_seed_changes_the_split(world):
    a = list(RandomSplit(random_state=0).split(world.embeddings))
    b = list(RandomSplit(random_state=1).split(world.embeddings))
    assert not all(np.array_equal(x[1], z[1]) for x, z in zip(a, b))


@pytest.mark.parametrize("name", ["random", "clustering", "supercategory"])
def test_cross_val_score_accepts_splitters(world, name):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    splitter = all_splitters(world)[name]
    y = world.data.labels[:, 0].astype(int)
    scores = cross_val_score(LogisticRegression(max_iter=200), world.embeddings, y, cv=splitter)
    assert scores.shape == (10,) and np.all((scores >= 0) & (scores <= 1))


def test_random_split_stratifies_on_y(world):
    y = world.data.labels[:, 3].astype(int)
    for _train, test in RandomSplit().split(world.embeddings, y):
        assert abs(y[test].mean() - y.mean()) < 0.05


def test_cluster_split_keeps_clusters_whole(world):
    splitter = ClusterSplit(n_clusters=16, random_state=0)
    labels = splitter.cluster_labels(world.embeddings)
    for train, test in splitter.split(world.embeddings):
        assert not set(labels[train]) & set(labels[test])
        assert abs(len(test) / len(labels) - 0.2) < 0.12  # target test fraction 1/n_splits


def test_supercategory_split_keeps_categories_whole_and_singletons_spread(world):
    supers = world.data.supercategories
    for train, test in SupercategorySplit(supers, random_state=0).split(world.embeddings):
        named_train = {supers[i] for i in train} - {None}
        named_test = {supers[i] for i in test} - {None}
        assert not named_train & named_test
    missing = np.array([s is None for s in supers])
    tests = [np.isin(np.flatnonzero(missing), t).mean() for _, t in SupercategorySplit(supers).split(world.embeddings)]
    # Uncategorised concepts spread over the folds instead of moving as one block.
    for repeat in (tests[:5], tests[5:]):
        assert abs(sum(repeat) - 1.0) < 1e-9 and sum(share > 0 for share in repeat) >= 3 and max(repeat) < 0.6


def test_supercategory_rules_train_and_group(world):
    supers = world.data.supercategories
    missing = np.flatnonzero([s is None for s in supers])
    for _, test in SupercategorySplit(supers, unassigned="train").split(world.embeddings):
        assert not np.isin(missing, test).any()
    sides = [np.isin(missing, test) for _, test in SupercategorySplit(supers, unassigned="group").split(world.embeddings)]
    assert all(s.all() or not s.any() for s in sides)
    with pytest.raises(ValueError, match="unassigned='nope' is not a rule"):
        SupercategorySplit(supers, unassigned="nope")


def test_grouping_split_sends_groups_to_train(world):
    group_ids, unknown = concept_groups_to_ids(
        [list(g) for g in world.llm_groups] + [["ghost", "concept00001"]], world.data.concepts
    )
    assert unknown == ("ghost",)
    grouped = np.flatnonzero(group_ids >= 0)
    assert len(grouped) == 2 * len(world.llm_groups)
    for _, test in GroupingSplit(group_ids).split(world.embeddings):
        assert not np.isin(grouped, test).any()


def test_groups_sharing_a_concept_merge():
    ids, _ = concept_groups_to_ids([["a", "b"], ["b", "c"], ["d", "e"]], ["a", "b", "c", "d", "e", "f"])
    assert ids[0] == ids[1] == ids[2] != ids[3] == ids[4] and ids[5] == -1


def test_similarity_split_forces_top_pairs_to_train(world):
    X = world.embeddings
    nearest, sim = nearest_neighbours(X)
    top = int(np.argmax(sim))
    splitter = SimilaritySplit(n_groups=10)
    for _, test in splitter.split(X):
        assert top not in test and nearest[top] not in test
    forced_fraction = SimilaritySplit()._concept_groups(X, None)[1].mean()
    assert 0.2 < forced_fraction < 0.7  # the paper: ~40% of concepts in the 600 groups


def test_load_concept_groups_json_and_text(tmp_path):
    (tmp_path / "g.json").write_text('[["cup", "mug"], ["sofa", "couch"]]')
    (tmp_path / "g.txt").write_text("cup, mug\n\nsofa,couch\n")
    assert (
        load_concept_groups(tmp_path / "g.json") == load_concept_groups(tmp_path / "g.txt") == [["cup", "mug"], ["sofa", "couch"]]
    )
    (tmp_path / "bad.json").write_text('{"cup": "mug"}')
    with pytest.raises(ValueError, match="JSON list of lists"):
        load_concept_groups(tmp_path / "bad.json")


def test_bad_input_is_caught_before_sklearn(world):
    X = world.embeddings
    with pytest.raises(ValueError, match=r"k=1000 clusters is more than the 300 concepts"):
        list(ClusterSplit(n_clusters=1000).split(X))
    bad = X.copy()
    bad[7, 2] = np.nan
    for splitter in (RandomSplit(), ClusterSplit(n_clusters=5), SupercategorySplit(world.data.supercategories)):
        with pytest.raises(ValueError, match=r"NaN or inf in 1 rows \(first: \[7\]\)"):
            list(splitter.split(bad))
    with pytest.raises(ValueError, match="zero positive"):
        list(RandomSplit().split(X, np.zeros(len(X), dtype=int)))
    with pytest.raises(ValueError, match="split each attribute separately"):
        list(RandomSplit().split(X, world.data.labels))
    with pytest.raises(ValueError, match="only 3 splittable groups"):
        list(SupercategorySplit(["a", "b", "c"] * 100, unassigned="train").split(X))
    with pytest.raises(StrategyUnavailable, match="concept groups"):
        make_splitter("llm", SplitContext(world.data.concepts), 0)
    with pytest.raises(ValueError, match="unknown split strategy 'nope'"):
        make_splitter("nope", SplitContext(world.data.concepts), 0)


def _no_test_positive(labels, folds):
    """Independent count: folds whose test side holds no positive of the attribute."""
    return sum(int(not labels[test].any()) for _, test in folds)


def test_degenerate_folds_are_counted_not_dropped():
    # Attribute 0 lives only in group A: a group split can never have it on both sides.
    labels = np.zeros((20, 2), dtype=bool)
    labels[:4, 0] = True
    labels[::3, 1] = True
    groups = ["A"] * 4 + [f"g{i}" for i in range(16)]
    X = np.random.default_rng(0).standard_normal((20, 3))
    folds = attribute_folds(SupercategorySplit(groups, n_splits=4, n_repeats=1), X, labels)
    report = coverage_report(labels, folds, ("only_in_A", "spread"))
    # Group A is the test side of exactly one of 4 folds: 1 fold without train positives, 3 without test ones.
    assert report.no_positive_in_train.tolist() == [1, 0] and report.no_positive_in_test.tolist()[0] == 3
    assert report.degenerate[0].all() and not report.degenerate[1].any()
    summary = report.summary()
    assert summary["n_degenerate_folds"] == 4 and summary["attributes_with_degenerate_folds"] == ["only_in_A"]
    assert summary["n_attribute_folds"] == 8 and summary["n_fitted_attribute_folds"] == 4


def test_per_attribute_folds_bring_positives_to_both_sides():
    """7 groups hold positives, 5 folds: per attribute every fold gets a test positive; one shared partition need not."""
    rng = np.random.default_rng(1)
    n_groups = 40
    groups = np.repeat(np.arange(n_groups), 5)
    X = rng.standard_normal((len(groups), 3))
    labels = np.zeros((len(groups), 6), dtype=bool)
    for a in range(6):
        for g in rng.choice(n_groups, size=7, replace=False):
            labels[groups == g, a] = True
    names = [str(g) for g in groups]
    per_attribute = attribute_folds(SupercategorySplit(names, random_state=0), X, labels)
    shared = attribute_folds(SupercategorySplit(names, random_state=0, fold_assignment="shared"), X, labels)
    for a in range(6):
        for train, test in per_attribute[a]:
            assert not set(groups[train]) & set(groups[test])
            assert labels[test, a].any() and labels[train, a].any()
    assert sum(_no_test_positive(labels[:, a], shared[a]) for a in range(6)) > 0
    assert all(f is shared[0] for f in shared), "the shared option is one partition for every attribute"


@pytest.mark.parametrize("name", ["llm", "similarity", "clustering", "supercategory"])
def test_per_attribute_never_more_degenerate_than_shared(world, name):
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups)
    params = {"n_clusters": 16} if name == "clustering" else {}
    labels = world.data.labels
    counts = {}
    for assignment in ("per_attribute", "shared"):
        splitter = make_splitter(name, context, 0, fold_assignment=assignment, **params)
        folds = attribute_folds(splitter, world.embeddings, labels)
        counts[assignment] = sum(_no_test_positive(labels[:, a], folds[a]) for a in range(labels.shape[1]))
        for per_attribute in folds:
            check_folds(per_attribute, len(labels))
    assert counts["per_attribute"] <= counts["shared"]


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=5, max_size=25),
    n_splits=st.integers(2, 5),
    seed=st.integers(0, 2**16),
)
def test_group_folds_partition_property(sizes, n_splits, seed):
    """Any grouping: folds are disjoint, covering, groups never straddle, every concept tested once per repeat."""
    groups = np.repeat(np.arange(len(sizes)), sizes).astype(str).tolist()
    if len(sizes) < n_splits:
        return
    X = np.random.default_rng(seed).standard_normal((len(groups), 2))
    folds = list(SupercategorySplit(groups, n_splits=n_splits, n_repeats=2, random_state=seed).split(X))
    check_folds(folds, len(groups))
    g = np.array(groups)
    for train, test in folds:
        assert not set(g[train]) & set(g[test])
    for r in range(2):
        tested = np.sort(np.concatenate([t for _, t in folds[r * n_splits : (r + 1) * n_splits]]))
        assert np.array_equal(tested, np.arange(len(groups)))


def test_attribute_folds_equal_per_attribute_split_calls(world):
    """The batched path (groups computed once) gives exactly the folds of split(X, y) per attribute."""
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups)
    for name in ("clustering", "supercategory", "llm"):
        splitter = make_splitter(name, context, 2, **({"n_clusters": 16} if name == "clustering" else {}))
        folds = attribute_folds(splitter, world.embeddings, world.data.labels)
        for a in (0, 5):
            direct = list(splitter.split(world.embeddings, world.data.labels[:, a].astype(int)))
            assert len(direct) == len(folds[a]) == 10
            for (train, test), (train2, test2) in zip(direct, folds[a]):
                assert np.array_equal(train, train2) and np.array_equal(test, test2), name
