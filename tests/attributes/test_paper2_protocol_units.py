"""Paper 2's protocol point by point on small hand-made inputs (fast; the released pipeline's replay is
test_paper2_protocol.py): which splitter and seeds each strategy takes, the one fold per attribute, the
concept sets file, the first-category rule and supercategory dominance by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.attributes.concepts import ConceptAttributeData, SupercategoryTable
from clip_cycles.attributes.paper2_protocol import (
    OneFoldPerAttribute,
    check_protocol,
    data_concept_sets,
    first_category_words,
    load_concept_sets,
    paper2_cs_inputs,
    paper2_dominance,
    paper2_splitter,
)
from clip_cycles.attributes.splitters import (
    ClusterSplit,
    MovedToTrainSplit,
    RandomSplit,
    SplitContext,
    StrategyUnavailable,
    SupercategorySplit,
    _stratified_group_folds,
    nearest_neighbours,
)

CONCEPTS = tuple(f"c{i}" for i in range(12))


def _context(**changes) -> SplitContext:
    rng = np.random.default_rng(0)
    base = {"concepts": CONCEPTS, "supercategories": tuple("ab"[i % 2] for i in range(12)), "concept_groups": None,
            "split_embeddings": rng.standard_normal((12, 4))}  # fmt: skip
    return SplitContext(**{**base, **changes})


def test_protocols_are_checked_by_name() -> None:
    assert check_protocol("paper2") == "paper2" and check_protocol("project") == "project"
    with pytest.raises(ValueError, match=r"^task.yaml: 'paper3' is not a protocol; use one of \['project', 'paper2'\]$"):
        check_protocol("paper3", "task.yaml")


def test_each_strategy_gets_paper_2s_splitter_and_fixed_seeds() -> None:
    random = paper2_splitter("random", _context())
    assert type(random) is RandomSplit and (random.n_splits, random.n_repeats, random.random_state) == (5, 2, 70)
    llm = paper2_splitter("llm", _context(concept_groups=(("c1", "c3"), ("c5", "c6", "nope"))))
    assert type(llm) is MovedToTrainSplit and llm.moved_rows.tolist() == [1, 3, 5, 6]
    assert (llm.n_splits, llm.test_size, llm.random_state) == (5, 0.4, 42)
    similarity = paper2_splitter("similarity", _context())
    embedding = _context().split_embeddings
    nearest, score = nearest_neighbours(embedding)
    top = np.lexsort((np.arange(12), -score))[: round(600 / 1854 * 12)]
    assert similarity.moved_rows.tolist() == sorted({int(i) for i in top} | {int(nearest[i]) for i in top})
    assert (similarity.n_splits, similarity.test_size, similarity.random_state) == (5, 0.4, 42)
    clustering = paper2_splitter("clustering", _context(), n_clusters=3)
    assert type(clustering) is OneFoldPerAttribute and type(clustering.groups_splitter) is ClusterSplit
    inner = clustering.groups_splitter
    assert (inner.n_clusters, inner.n_init, inner.random_state, clustering.random_state) == (3, None, 0, 0)
    assert np.array_equal(inner.embeddings, embedding)
    assert paper2_splitter("clustering", _context()).groups_splitter.n_clusters == 100
    category = paper2_splitter("supercategory", _context())
    assert (
        type(category.groups_splitter) is SupercategorySplit
        and category.groups_splitter.supercategories == _context().supercategories
    )


def test_strategies_that_cannot_run_say_why() -> None:
    with pytest.raises(StrategyUnavailable, match="llm split needs a concept groups file"):
        paper2_splitter("llm", _context())
    with pytest.raises(StrategyUnavailable, match="no concept group has two known concepts"):
        paper2_splitter("llm", _context(concept_groups=(("c1", "x"), ("y", "z"))))
    for strategy in ("similarity", "clustering"):
        with pytest.raises(ValueError, match=f"protocol paper2: the {strategy} split is made on ONE embedding"):
            paper2_splitter(strategy, _context(split_embeddings=None))
    for missing in (None, (None,) * 12):
        with pytest.raises(StrategyUnavailable, match="supercategory split needs supercategories"):
            paper2_splitter("supercategory", _context(supercategories=missing))
    with pytest.raises(ValueError, match="protocol paper2 has no 'grouping' split"):
        paper2_splitter("grouping", _context())


class _CountingGroups(SupercategorySplit):
    calls = 0

    def _concept_groups(self, X, groups):
        type(self).calls += 1
        return super()._concept_groups(X, groups)


def test_one_fold_per_attribute_is_the_first_fold_with_positives_on_both_sides() -> None:
    categories = tuple("abcdef"[i // 2] for i in range(12))  # six groups of two concepts
    splitter = OneFoldPerAttribute(_CountingGroups(categories), n_splits=3, random_state=4)
    X = np.zeros((12, 2))
    assert splitter.get_n_splits() == 1
    with pytest.raises(ValueError, match="pass that attribute's labels as y"):
        next(splitter.split(X))
    group_of = np.repeat(np.arange(6), 2)
    for positives in ([0, 1], [0, 5, 9], [2, 3, 4, 5], list(range(11))):
        y = np.isin(np.arange(12), positives)
        (train, test), *rest = list(splitter.split(X, y))
        assert rest == []
        folds = list(_stratified_group_folds(group_of, np.zeros(12, dtype=bool), y, 3, 1, 4))
        both = [f for f in folds if y[f[0]].any() and y[f[1]].any()]
        want = both[0] if both else folds[0]
        assert train.tolist() == want[0].tolist() and test.tolist() == want[1].tolist()
        assert not set(group_of[train]) & set(group_of[test])  # whole groups on one side
    assert _CountingGroups.calls == 1  # the groups are computed once for every attribute


def test_concept_sets_file(tmp_path: Path) -> None:
    path = tmp_path / "mcrae.json"
    path.write_text(json.dumps([{"norm": "red", "concepts": ["apple"]}, {"norm": "round", "concepts": ["ball", "apple"]},
                                {"norm": "red", "concepts": ["cherry", "fire_truck"]}]))  # fmt: skip
    assert load_concept_sets(path) == {"red": ("cherry", "fire_truck"), "round": ("ball", "apple")}  # last entry kept
    bad = {
        "a.json": ({"norm": "x"}, "expected a JSON list"),
        "b.json": ([["x"]], "item 0 must be an object with a string 'norm'"),
        "c.json": ([{"norm": "x", "concepts": "apple"}], r"item 0 \(norm 'x'\): 'concepts' must be a list of strings"),
        "d.json": ([{"norm": "x", "concepts": [1]}], r"item 0 \(norm 'x'\): 'concepts' must be a list of strings"),
    }
    for name, (payload, message) in bad.items():
        (tmp_path / name).write_text(json.dumps(payload))
        with pytest.raises(ValueError, match=message):
            load_concept_sets(tmp_path / name)
    (tmp_path / "sets.txt").write_text("red\n")
    with pytest.raises(ValueError, match="a concept sets file is JSON"):
        load_concept_sets(tmp_path / "sets.txt")


def _table() -> SupercategoryTable:
    membership = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0], [0, 1, 1], [1, 0, 0]], dtype=bool)
    words = ("apple", "bat", "cloud", "bat", "pear")
    return SupercategoryTable(words, ("",) * 5, ("food", "animal", "sport"), membership,
                              raw_words=("Apple", "bat", "cloud", "bat", "pear"))  # fmt: skip


def test_first_category_words_and_dominance_by_hand() -> None:
    table = _table()
    # Row 0 counts for food only (its FIRST 1); cloud has no 1; both bats are keyed by one raw Word.
    assert first_category_words(table) == {"food": {"Apple", "pear"}, "animal": {"bat"}}
    sets = {"sweet": ("Apple", "pear", "bat"), "flies": ("bat",), "empty": ()}
    dominance = paper2_dominance(["sweet", "flies", "empty", "unknown"], sets, first_category_words(table))
    np.testing.assert_array_equal(dominance[:2], [2 / 3, 1.0])
    assert np.isnan(dominance[2]) and np.isnan(dominance[3])
    assert paper2_dominance(["x"], {"x": ("nobody",)}, {}).tolist() == [0.0]
    plain = SupercategoryTable(("a", "b"), ("", ""), ("k",), np.array([[1], [1]], dtype=bool))
    assert first_category_words(plain) == {"k": {"a", "b"}}  # no raw words recorded: the words


def test_cs_inputs_from_the_data_or_a_file(tmp_path: Path) -> None:
    table = _table()
    labels = np.array([[1, 0], [1, 1], [0, 0], [1, 0]], dtype=bool)
    data = ConceptAttributeData(("apple", "bat1", "cloud", "pear"), ("sweet", "flies"), labels, (None,) * 4)
    sets = data_concept_sets(data, table)
    assert sets["flies"] == ("bat",) and sets["sweet"][0] == "Apple" and sets["sweet"][2] == "pear"
    inputs = paper2_cs_inputs(data, table, None)
    assert inputs.source == "the data's concepts (no mcrae++ file given)" and inputs.n_attributes_without_set == 0
    path = tmp_path / "sets.json"
    path.write_text(json.dumps([{"norm": "sweet", "concepts": ["pear", "cloud"]}]))
    from_file = paper2_cs_inputs(data, table, path)
    assert from_file.source == str(path) and from_file.n_attributes_without_set == 1
    assert from_file.dominance[0] == 0.5 and np.isnan(from_file.dominance[1])
    summary = from_file.summary()
    assert summary["concept_sets"] == str(path) and summary["n_attributes_without_set"] == 1
    assert "first category marked 1" in summary["rule"]


def test_published_files_under_paper_2s_protocol() -> None:
    from clip_cycles.attributes.paper2_protocol import paper2_published_splitter
    from clip_cycles.attributes.splitters import PublishedSplit

    moves = paper2_published_splitter(PublishedSplit("m", "m.json", "moves", moved_rows=np.array([4, 2, 2])))
    assert type(moves) is MovedToTrainSplit and moves.moved_rows.tolist() == [2, 4]
    assert (moves.n_splits, moves.test_size, moves.random_state) == (5, 0.4, 42)
    empty = paper2_published_splitter(PublishedSplit("m", "m.json", "moves"))
    assert empty.moved_rows.tolist() == [] and empty.moved_rows.dtype == np.int64
    folds = {"red": [(np.array([0, 1]), np.array([2]))]}
    as_is = paper2_published_splitter(PublishedSplit("f", "f.json", "folds", folds_by_attribute=folds))
    assert type(as_is) is not MovedToTrainSplit


def test_defaults_and_sentences_in_full() -> None:
    splitter = OneFoldPerAttribute(SupercategorySplit(tuple("ab" * 6)))
    assert (splitter.n_splits, splitter.n_repeats, splitter.random_state, splitter.fold_assignment) == (5, 1, 0, "per_attribute")
    one_group = paper2_splitter("llm", _context(concept_groups=(("c0", "c1"),)))  # the first group's id is 0
    assert one_group.moved_rows.tolist() == [0, 1]
    with pytest.raises(StrategyUnavailable, match=r"^llm split needs a concept groups file \(--groups\); none was given$"):
        paper2_splitter("llm", _context())
    with pytest.raises(StrategyUnavailable, match=r"^no concept group has two known concepts$"):
        paper2_splitter("llm", _context(concept_groups=(("c1", "x"),)))
    with pytest.raises(
        StrategyUnavailable, match=r"^supercategory split needs supercategories \(a category TSV\); none are known$"
    ):
        paper2_splitter("supercategory", _context(supercategories=None))
    with pytest.raises(
        ValueError, match=r"give --split-embeddings NAME_OR_FILE or --split-model \(dataset_kwargs.split_embeddings in a task\)$"
    ):
        paper2_splitter("clustering", _context(split_embeddings=None))
    with pytest.raises(ValueError, match="split embeddings"):
        paper2_splitter("similarity", _context(split_embeddings=np.ones(12)))
    with pytest.raises(
        ValueError, match=r"^OneFoldPerAttribute assigns one fold per attribute: pass that attribute's labels as y$"
    ):
        next(splitter.split(np.zeros((12, 2))))
    rule = paper2_cs_inputs(
        ConceptAttributeData(("apple",), ("sweet",), np.ones((1, 1), dtype=bool), (None,)), _table(), None
    ).summary()["rule"]
    assert rule == ("dominance = max over categories (first category marked 1, concepts keyed by the raw TSV Word) "
                    "of |attribute's concepts in it| / |attribute's concepts|")  # fmt: skip


def test_a_concept_without_a_table_row_keeps_its_id(tmp_path: Path) -> None:
    labels = np.array([[1], [1]], dtype=bool)
    data = ConceptAttributeData(("apple", "zebra"), ("stripes",), labels, (None, None))
    assert data_concept_sets(data, _table()) == {"stripes": ("Apple", "zebra")}
    with pytest.raises(FileNotFoundError, match="concept sets file \\(mcrae\\+\\+ format\\)"):
        load_concept_sets(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text(json.dumps({"a": 1}))
    with pytest.raises(ValueError, match=r"expected a JSON list of \{'norm': ..., 'concepts': \[...\]\}, got dict$"):
        load_concept_sets(tmp_path / "x.json")
