"""Splitters and degenerate-fold counts against scikit-learn called directly and against hand counts.

Expected folds come from scikit-learn's own cross-validators (the paper's protocol names
them: repeated stratified k-fold, stratified shuffle split with listed concepts moved to
train); expected coverage counts are worked out by hand in the comments.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.model_selection import (
    RepeatedKFold,
    RepeatedStratifiedKFold,
    ShuffleSplit,
    StratifiedGroupKFold,
    StratifiedShuffleSplit,
)

from clip_cycles.attributes.splitters import (
    DEGENERATE_RULE,
    GroupingSplit,
    MovedToTrainSplit,
    PublishedFolds,
    RandomSplit,
    SimilaritySplit,
    SupercategorySplit,
    attribute_folds,
    concept_groups_to_ids,
    coverage_report,
    leakage_folds,
    nearest_neighbours,
)


def as_lists(folds) -> list[tuple[list[int], list[int]]]:
    return [(np.asarray(train).tolist(), np.asarray(test).tolist()) for train, test in folds]


def test_random_split_is_repeated_stratified_k_fold_per_attribute():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    labels = np.zeros((30, 2), dtype=bool)
    labels[rng.choice(30, 9, replace=False), 0] = True
    labels[rng.choice(30, 14, replace=False), 1] = True
    folds = attribute_folds(RandomSplit(n_splits=3, n_repeats=2, random_state=5), X, labels)
    for a in range(2):
        cv = RepeatedStratifiedKFold(n_splits=3, n_repeats=2, random_state=5)
        expected = [(sorted(tr.tolist()), sorted(te.tolist())) for tr, te in cv.split(X, labels[:, a].astype(int))]
        assert as_lists(folds[a]) == expected
    shared = attribute_folds(RandomSplit(n_splits=3, n_repeats=2, random_state=5, fold_assignment="shared"), X, labels)
    expected = [(sorted(tr.tolist()), sorted(te.tolist())) for tr, te in
                RepeatedKFold(n_splits=3, n_repeats=2, random_state=5).split(X)]  # fmt: skip
    assert as_lists(shared[0]) == as_lists(shared[1]) == expected
    assert repr(RandomSplit(n_splits=3, n_repeats=1, random_state=7)) == (
        "RandomSplit(fold_assignment='per_attribute', n_repeats=1, n_splits=3, random_state=7)"
    )


def test_moved_concepts_go_to_train_in_every_shuffle_split_fold():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 2))
    y = np.array([1] * 8 + [0] * 12)
    moved = [19, 5, 0, 5]  # unsorted, repeated: rows 0, 5, 19
    splitter = MovedToTrainSplit(moved, n_splits=4, test_size=0.25, random_state=3)
    for folds, reference in (
        (splitter.split(X, y), StratifiedShuffleSplit(4, test_size=0.25, random_state=3).split(X, y)),
        (splitter.split(X), ShuffleSplit(4, test_size=0.25, random_state=3).split(X)),
    ):
        expected = []
        for train, test in reference:
            stays = [int(i) for i in test if i not in (0, 5, 19)]
            expected.append((sorted(train.tolist() + [int(i) for i in test if i in (0, 5, 19)]), sorted(stays)))
        assert as_lists(folds) == expected
    assert len(expected) == 4 and any(len(e[1]) < 5 for e in expected)  # the fixture moves rows out of some test
    with pytest.raises(ValueError, match="moved concept rows"):
        list(MovedToTrainSplit([20], n_splits=2).split(X))
    with pytest.raises(ValueError, match="moved concept rows"):
        list(MovedToTrainSplit([-1], n_splits=2).split(X))
    with pytest.raises(ValueError, match="test_size"):
        MovedToTrainSplit([0], test_size=1.0)


def test_coverage_counts_by_hand():
    # 6 concepts, 4 attributes, the same 4 folds for each.
    labels = np.array([[1, 1, 0, 0, 0, 0],   # a0
                       [1, 1, 1, 1, 1, 0],   # a1
                       [0, 0, 0, 0, 0, 1],   # a2
                       [0, 1, 0, 1, 0, 1]],  # a3
                      dtype=bool).T  # fmt: skip
    folds = [([0, 2, 3, 4], [1, 5]), ([2, 3, 4, 5], [0, 1]), ([0, 1, 5], [2, 3, 4]), ([1, 2], [0, 3])]
    report = coverage_report(labels, [folds] * 4, ("a0", "a1", "a2", "a3"))
    # a0: fold 1 has no train positive, fold 2 no test positive.
    # a1: folds 0 and 3 have only positives in train.
    # a2: folds 0 and 3 have no train positive; folds 1, 2, 3 no test positive.
    # a3: every fold has both classes in train and a positive in test.
    assert report.fitted.tolist() == [[True, False, False, True], [False, True, True, False],
                                      [False, False, False, False], [True, True, True, True]]  # fmt: skip
    assert report.no_positive_in_train.tolist() == [1, 0, 2, 0]
    assert report.no_negative_in_train.tolist() == [0, 2, 0, 0]
    assert report.no_positive_in_test.tolist() == [1, 0, 3, 0]
    assert report.summary() == {
        "rule": DEGENERATE_RULE,
        "n_attribute_folds": 16,
        "n_fitted_attribute_folds": 8,
        "n_degenerate_folds": 8,
        "n_folds_no_positive_in_train": 3,
        "n_folds_no_negative_in_train": 2,
        "n_folds_no_positive_in_test": 4,
        "n_attributes_with_degenerate_folds": 3,
        "attributes_with_degenerate_folds": ["a0", "a1", "a2"],
    }
    with pytest.raises(ValueError, match=r"^attributes have different fold counts \[3, 4\]; "
                                         r"every attribute needs the same number of folds$"):  # fmt: skip
        coverage_report(labels, [folds, folds, folds, folds[:3]], ("a0", "a1", "a2", "a3"))
    with pytest.raises(ValueError, match=r"^4 fold lists and 3 names for 4 attributes$"):
        coverage_report(labels, [folds] * 4, ("a0", "a1", "a2"))
    assert coverage_report(labels[:, :0], [], ()).fitted.shape == (0, 0)
    # Attributes with degenerate folds are named, the first 50 of them.
    many = coverage_report(np.zeros((6, 51), dtype=bool), [folds] * 51, tuple(f"x{i}" for i in range(51)))
    assert many.summary()["attributes_with_degenerate_folds"] == [f"x{i}" for i in range(50)]
    assert many.summary()["n_attributes_with_degenerate_folds"] == 51


def test_leakage_folds_are_the_label_free_partition_or_the_distinct_published_folds():
    X = np.random.default_rng(2).standard_normal((9, 2))
    random = RandomSplit(n_splits=3, n_repeats=1, random_state=0)
    expected = [(sorted(tr.tolist()), sorted(te.tolist())) for tr, te in
                RepeatedKFold(n_splits=3, n_repeats=1, random_state=0).split(X)]  # fmt: skip
    assert as_lists(leakage_folds(random, X, [])) == expected
    one = ([0, 1, 2, 3, 4, 5], [6, 7, 8])
    two = ([3, 4, 5, 6, 7, 8], [0, 1, 2])
    empty = ([], [0, 1, 2, 3, 4, 5, 6, 7, 8])
    single = ([0, 1, 2, 3, 4, 5, 6, 7], [8])
    three = ([0, 1, 2, 6, 7, 8], [3, 4, 5])  # only after the empty fold: skipping, not stopping, reaches it
    published = PublishedFolds({"a": [one, two, single], "b": [two, empty, three, one]})
    got = as_lists(leakage_folds(published, X, [[one, two, single], [two, empty, three, one]]))
    # Each distinct fold once; a fold with an empty side has no nearest train concept and is left out.
    assert sorted(got) == sorted([one, two, single, three]) and len(got) == 4


def test_nearest_neighbours_by_hand():
    # Cosines: (0, 1) = 9 / sqrt(82); (1, 2) = 1 / sqrt(82); (0, 2) = (2, 3) = 0; (0, 3) = -1; (1, 3) = -9 / sqrt(82).
    E = np.array([[1.0, 0.0], [9.0, 1.0], [0.0, 2.0], [-3.0, 0.0]])
    nearest, similarity = nearest_neighbours(E)
    assert nearest.tolist() == [1, 0, 1, 2]  # row 3: its best is 0 (row 2), never itself
    assert np.allclose(similarity, [9 / np.sqrt(82), 9 / np.sqrt(82), 1 / np.sqrt(82), 0.0], atol=1e-12)
    with pytest.raises(ValueError, match=r"embedding rows \[2\] are all zero"):
        nearest_neighbours(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"^embedding rows \[1, 2, 3, 4, 5, 6, 7, 8, 9, 10\] are all zero; "
                                         r"cosine undefined$"):  # fmt: skip
        nearest_neighbours(np.vstack([[1.0, 0.0], np.zeros((11, 2))]))


def never_tested(folds) -> set[int]:
    tested = set().union(*(set(np.asarray(test).tolist()) for _, test in folds))
    return set(range(6)) - tested


def test_similarity_split_forces_the_top_pair_of_its_own_embeddings():
    # Split embeddings: rows 0 and 1 nearly identical, the rest spread. X: rows 4 and 5 nearly identical instead.
    angles = np.array([0.0, 0.01, 1.0, 2.0, 3.0, 4.0])
    E = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    X = E[[2, 3, 4, 5, 0, 1]] * np.arange(1, 7)[:, None]
    split = SimilaritySplit(n_groups=1, embeddings=E, n_splits=2, n_repeats=1, fold_assignment="shared")
    assert never_tested(split.split(X)) == {0, 1}
    assert never_tested(SimilaritySplit(n_groups=1, n_splits=2, n_repeats=1, fold_assignment="shared").split(X)) == {4, 5}
    # n_groups=0 forces nothing, whatever the default fraction would give.
    assert never_tested(SimilaritySplit(n_groups=0, embeddings=E, n_splits=2, n_repeats=1).split(X)) == set()
    with pytest.raises(ValueError, match="similarity embeddings have 5 rows for 6 concepts"):
        list(SimilaritySplit(n_groups=1, embeddings=E[:5], n_splits=2).split(X))
    bad = E.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"similarity embeddings has NaN or inf in 1 rows \(first: \[3\]\)"):
        list(SimilaritySplit(n_groups=1, embeddings=bad, n_splits=2).split(X))


def test_group_ids_override_and_singletons_never_join_a_category():
    X = np.random.default_rng(3).standard_normal((6, 2))
    # Constructor groups force 0 and 1 to train; split(groups=) replaces them: 4 and 5 instead.
    grouping = GroupingSplit([0, 0, -1, -1, -1, -1], n_splits=2, n_repeats=1, fold_assignment="shared")
    assert never_tested(grouping.split(X)) == {0, 1}
    assert never_tested(grouping.split(X, groups=[-1, -1, -1, -1, 3, 3])) == {4, 5}
    names = ["a", "a", "b", "b", None, ""]
    splitter = SupercategorySplit(["z"] * 6, n_splits=2, n_repeats=1, fold_assignment="shared")
    # The split's groups, not the constructor's single category (which could not be split in two at all).
    folds = list(splitter.split(X, groups=names))
    for _, test in folds:
        assert {0, 1} & set(test.tolist()) in (set(), {0, 1}) and {2, 3} & set(test.tolist()) in (set(), {2, 3})
    assert len(folds) == 2
    # Same id exactly for the same named category: unassigned concepts (first here, where ids counted from -1 upwards
    # would meet the categories' 0, 1) are singletons of their own, or one extra group under the "group" rule.
    names = [None, "", "a", "a", "b", "b"]
    for rule, unassigned in (("singleton", ["_0", "_1"]), ("group", ["_", "_"])):
        group_of, forced = SupercategorySplit(names, unassigned=rule)._concept_groups(X, None)
        same = group_of[:, None] == group_of[None, :]
        named = np.array(unassigned + names[2:])
        assert (same == (named[:, None] == named[None, :])).all() and not forced.any(), rule


def test_split_sizes_at_the_limit_and_clear_errors():
    X6 = np.zeros((6, 1))
    # Exactly n_splits groups or concepts is enough.
    assert len(list(SupercategorySplit(["a", "a", "b", "b", "c", "c"], n_splits=3, n_repeats=1,
                                       fold_assignment="shared").split(X6))) == 3  # fmt: skip
    assert len(list(RandomSplit(n_splits=3, n_repeats=1).split(np.zeros((3, 1))))) == 3
    with pytest.raises(ValueError, match=r"only 2 splittable groups of concepts for n_splits=3; "
                                         r"use fewer folds, smaller groups or more concepts"):  # fmt: skip
        list(SupercategorySplit(["a", "a", "a", "b", "b", "b"], n_splits=3, fold_assignment="shared").split(X6))
    with pytest.raises(ValueError, match=r"^2 concepts cannot be split into n_splits=3 folds$"):
        list(RandomSplit(n_splits=3).split(np.zeros((2, 1))))
    with pytest.raises(ValueError, match=r"y must be one attribute's label vector of length 6, got shape \(6, 2\); "
                                         r"split each attribute separately"):  # fmt: skip
        list(RandomSplit(n_splits=3).split(X6, np.zeros((6, 2))))
    with pytest.raises(ValueError, match=r"y holds the single class \[1\]: an attribute with zero positive "
                                         r"\(or zero negative\) concepts cannot be split or probed"):  # fmt: skip
        list(RandomSplit(n_splits=3).split(X6, np.ones(6, dtype=int)))
    with pytest.raises(ValueError, match=r"every class has fewer members \(\[2, 2\]\) than n_splits=3"):
        list(RandomSplit(n_splits=3).split(np.zeros((4, 1)), [0, 0, 1, 1]))
    # One class smaller than n_splits, the other as large: split with some test folds lacking it, silently.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(RandomSplit(n_splits=3, n_repeats=1).split(np.zeros((5, 1)), [1, 1, 0, 0, 0]))) == 3
        assert len(list(RandomSplit(n_splits=3, n_repeats=1).split(np.zeros((10, 1)), [1, 1] + [0] * 8))) == 3
    with pytest.raises(ValueError, match=r"^GroupingSplit needs concept groups \(constructor concept_groups= or "
                                         r"split\(groups=\)\)$"):  # fmt: skip
        list(GroupingSplit().split(X6))
    with pytest.raises(ValueError, match=r"concept groups have shape \(5,\), expected \(6,\), one per concept"):
        list(GroupingSplit([-1] * 5).split(X6))
    with pytest.raises(ValueError, match=r"^SupercategorySplit needs supercategories \(constructor or split\(groups=\)\)$"):
        list(SupercategorySplit().split(X6))
    with pytest.raises(ValueError, match=r"5 supercategories for 6 concepts; give one per concept"):
        list(SupercategorySplit(["a"] * 5).split(X6))
    with pytest.raises(ValueError, match=r"^no concept has a supercategory; a supercategory split is impossible$"):
        list(SupercategorySplit([None] * 6).split(X6))


def test_grouped_folds_are_reproducible_from_the_seed():
    names = [f"g{i // 2}" for i in range(24)]  # 12 groups of 2
    X = np.zeros((24, 1))
    runs = [as_lists(SupercategorySplit(names, n_splits=3, n_repeats=2, random_state=4,
                                        fold_assignment="shared").split(X)) for _ in range(3)]  # fmt: skip
    assert runs[0] == runs[1] == runs[2]


def test_per_attribute_group_folds_are_sklearns_stratified_group_k_fold():
    rng = np.random.default_rng(7)
    names = [f"g{i}" for i in rng.integers(0, 9, size=40)] + [None] * 6  # 9 categories, 6 forced to train
    X = rng.standard_normal((46, 2))
    labels = rng.random((46, 2)) < np.array([0.3, 0.6])
    splitter = SupercategorySplit(names, unassigned="train", n_splits=3, n_repeats=2, random_state=11)
    folds = attribute_folds(splitter, X, labels)
    seeds = np.random.default_rng(11).integers(0, 2**31 - 1, size=2).tolist()  # one seed per repeat
    free = np.arange(40)
    for a in range(2):
        expected = []
        for seed in seeds:
            cv = StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=seed)
            for train, test in cv.split(X[:40], labels[:40, a].astype(int), np.array(names[:40])):
                expected.append((sorted(free[train].tolist() + list(range(40, 46))), sorted(free[test].tolist())))
        assert as_lists(folds[a]) == expected
        assert as_lists(splitter.split(X, labels[:, a].astype(int))) == expected


def test_concept_groups_to_ids_merges_and_names_unknown_ids():
    concepts = ["a", "b", "c", "d", "e", "f", "g"]
    group_of, unknown = concept_groups_to_ids([["a", "b"], ["b", "c"], ["e", "f"], ["g", "zz"], ["yy", "d", "xx"]],
                                              concepts)  # fmt: skip
    # {a, b, c} merged through b; {e, f}; g and d alone (their partners unknown): no group.
    assert group_of.tolist() == [0, 0, 0, -1, 1, 1, -1]
    assert unknown == ("xx", "yy", "zz")


def test_splitter_parameters_and_label_vectors_are_checked():
    with pytest.raises(ValueError, match=r"^SplitterOptions option n_splits: must be at least 2 folds, got 1 "):
        RandomSplit(n_splits=1)
    with pytest.raises(ValueError, match=r"^SplitterOptions option n_repeats: must be at least 1 repeat, got 0 "):
        RandomSplit(n_repeats=0)
    with pytest.raises(
        ValueError,
        match=r"^SplitterOptions option --fold-assignment \(fold_assignment\): "
        r"'mixed' is not one of \['per_attribute', 'shared'\]$",
    ):
        RandomSplit(fold_assignment="mixed")
    assert RandomSplit(n_splits=2, n_repeats=1).get_n_splits() == 2 and RandomSplit(4, 3).get_n_splits() == 12
    splitter = SupercategorySplit(["a", "a", "b", "b", "c", "c"], n_splits=2)
    X6 = np.zeros((6, 1))
    with pytest.raises(ValueError, match=r"^y must be one attribute's label vector of length 6, got shape \(5,\); "):
        list(splitter.split(X6, np.zeros(5)))
    with pytest.raises(ValueError, match=r"^y holds the single class \[0\]: an attribute with zero positive "):
        list(splitter.split(X6, np.zeros(6, dtype=int)))
    with pytest.raises(ValueError, match=r"^only 2 splittable groups of concepts for n_splits=3; "):
        list(SupercategorySplit(["a", "a", "a", "b", "b", "b"], n_splits=3).split(X6, [0, 1, 0, 1, 0, 1]))


# --- attribute_folds: shapes, names, and names reaching published folds -----------------------------------------


def test_attribute_folds_refuses_labels_of_the_wrong_shape_and_names_of_the_wrong_count():
    X = np.arange(12, dtype=float).reshape(6, 2)
    labels = np.array([[1, 0], [0, 1], [1, 0], [0, 1], [1, 1], [0, 0]], dtype=bool)
    splitter = RandomSplit(n_splits=2, n_repeats=1, random_state=0)
    with pytest.raises(ValueError, match=r"^labels have shape \(6,\); expected \(6, n_attributes\)$"):
        attribute_folds(splitter, X, labels[:, 0])
    with pytest.raises(ValueError, match=r"^labels have shape \(5, 2\); expected \(6, n_attributes\)$"):
        attribute_folds(splitter, X, labels[:5])
    with pytest.raises(ValueError, match="^3 attribute names for 2 label columns$"):
        attribute_folds(splitter, X, labels, attributes=["a", "b", "c"])


def test_attribute_names_select_each_attributes_published_folds():
    X = np.zeros((6, 2))
    labels = np.array([[1, 0], [0, 1], [1, 0], [0, 1], [1, 1], [0, 0]], dtype=bool)
    # Written by hand: different folds per attribute, so a swap or an index-based lookup shows.
    by_name = {"red": [(np.array([0, 1, 2, 3]), np.array([4, 5]))], "round": [(np.array([2, 3, 4, 5]), np.array([0, 1]))]}
    folds = attribute_folds(PublishedFolds(by_name, "file.json"), X, labels, attributes=["round", "red"])
    assert [[(tr.tolist(), te.tolist()) for tr, te in f] for f in folds] == [[([2, 3, 4, 5], [0, 1])], [([0, 1, 2, 3], [4, 5])]]
    with pytest.raises(ValueError, match="no folds for attribute 'square'"):
        attribute_folds(PublishedFolds(by_name, "file.json"), X, labels, attributes=["red", "square"])


def test_a_single_class_label_vector_is_refused_by_its_whole_sentence() -> None:
    """The label check of the grouped and stratified splitters (not only RandomSplit's own) names the class."""
    from clip_cycles.attributes.splitters import _check_label_vector

    sentence = r"^y holds the single class \[0\]: an attribute with zero positive \(or zero negative\) concepts "
    sentence += r"cannot be split or probed$"
    with pytest.raises(ValueError, match=sentence):
        _check_label_vector(np.zeros(5, dtype=int), 5)
    with pytest.raises(ValueError, match=r"^y must be one attribute's label vector of length 5, got shape \(4,\); "):
        _check_label_vector(np.zeros(4, dtype=int), 5)
    assert _check_label_vector([0, 1, 1, 0, 1], 5).tolist() == [0, 1, 1, 0, 1]
