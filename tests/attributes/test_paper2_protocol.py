"""``clip-cycles splits --protocol paper2`` against an independent rerun of paper 2's released pipeline.

The fixture has the real label sparsity (10-20 positives among 1,854 concepts, near-separable
columns) and paper 2's file formats (tests/support/things_fixture.py). The reimplementation below is
plain scikit-learn, written from the released code's description: per attribute, its folds
(RepeatedStratifiedKFold(5, 2, 70) for random; StratifiedShuffleSplit(5, 0.4, 42) with the
listed concepts moved to train for similarity; the published file's one fold otherwise), one
``LogisticRegression(penalty=None, max_iter=1000, class_weight='balanced')`` per fold, F1 of
``predict_proba > 0.5`` on the test concepts, mean over folds; CS = Pearson of the mcrae++
dominance (raw TSV words, first category marked 1) and F1 minus the random score.
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import RepeatedStratifiedKFold, StratifiedShuffleSplit
from things_fixture import write_sparse_things_root

from clip_cycles.attributes.attribute_probes import attribute_task_metrics
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.paper2_protocol import OneFoldPerAttribute, load_concept_sets, paper2_splitter
from clip_cycles.attributes.splitters import SplitContext, attribute_folds
from clip_cycles.cli import main


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper2") / "things"
    return root, write_sparse_things_root(root)


def released_f1(X: np.ndarray, y: np.ndarray, folds) -> tuple[float, list[float]]:
    """Paper 2's probe on the given folds: mean and per-fold test F1 (percent)."""
    scores = []
    for train, test in folds:
        train, test = np.asarray(train), np.asarray(test)
        if y[train].min() == y[train].max() or not y[test].any():
            scores.append(0.0)  # nothing to learn, or F1 is 0 whatever is predicted
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = LogisticRegression(penalty=None, max_iter=1000, class_weight="balanced").fit(X[train], y[train])
        scores.append(100.0 * f1_score(y[test], clf.predict_proba(X[test])[:, 1] > 0.5, zero_division=0))
    return float(np.mean(scores)), scores


def released_folds(strategy: str, y: np.ndarray, fixture: dict, attribute: str) -> list:
    if strategy == "random":
        return list(RepeatedStratifiedKFold(n_splits=5, n_repeats=2, random_state=70).split(y, y))
    if strategy == "similarity_paper":
        moved = set(fixture["moved"])
        folds = []
        for train, test in StratifiedShuffleSplit(n_splits=5, test_size=0.4, random_state=42).split(y, y):
            folds.append((sorted(set(train) | moved), sorted(set(test) - moved)))
        return folds
    if strategy == "clustering_paper":
        return [fixture["kmeans"][attribute]]
    if strategy == "supercategory_paper":
        entry = fixture["categs"][attribute]
        return [(entry["train_idxs"], entry["test_idxs"])]
    raise AssertionError(strategy)


def released_dominance(root: Path, fixture: dict, attributes: list[str]) -> np.ndarray:
    """Paper 2's CS script: categories of raw TSV words by their first 1, mcrae++ concept sets."""
    supercategories: dict[str, set[str]] = {}
    with open(root / "category53_wideFormat.tsv", encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader)
        for row in reader:
            if "1" in row[2:] and row[0]:
                supercategories.setdefault(header[2:][row[2:].index("1")], set()).add(row[0])
    sets = {d["norm"]: set(d["concepts"]) for d in json.loads((root / "mcrae++.json").read_text())}
    return np.array([max(len(sets[a] & w) for w in supercategories.values()) / len(sets[a]) for a in attributes])


def test_paper2_protocol_reproduces_the_released_pipeline_per_attribute(released, tmp_path):
    root, fixture = released
    out = tmp_path / "out"
    code = main(["splits", "--protocol", "paper2", "--things-root", str(root), "--embeddings", f"m={root / 'model.npz'}",
                 "--split-embeddings", str(root / "split.npz"), "--attributes", "intersect_features.json",
                 "--concept-sets", "mcrae++.json", "--strategies", "random",
                 "--published-split", "clustering_paper=k_means_split.json",
                 "--published-split", "supercategory_paper=categs_split.json",
                 "--published-split", "similarity_paper=similar_idxs.txt", "--k-values", "--out", str(out)])  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["protocol"] == "paper2"
    attributes = [a for a in fixture["listed"] if a in fixture["attributes"]]  # the 211-style list, as the data has it
    assert results["data"]["n_attributes"] == len(attributes) == len(fixture["attributes"]) - 2
    X, labels = fixture["X"], fixture["labels"]
    n = len(fixture["concepts"])
    dominance = released_dominance(root, fixture, attributes)
    grid = results["grid"]["grid"]["m"]
    for strategy in ("random", "similarity_paper", "clustering_paper", "supercategory_paper"):
        run = grid[strategy]["paper2"]
        per_attribute = run["per_attribute"]
        assert sorted(per_attribute) == sorted(attributes)
        selectivity = []
        for a in attributes:
            y = labels[:, fixture["attributes"].index(a)].astype(int)
            mean, per_fold = released_f1(X, y, released_folds(strategy, y, fixture, a))
            assert per_attribute[a]["f1"] == pytest.approx(mean, abs=1e-9), (strategy, a)
            assert per_attribute[a]["f1_per_fold"] == pytest.approx(per_fold, abs=1e-9), (strategy, a)
            selectivity.append(mean - 100.0 * y.sum() / n)
            assert per_attribute[a]["selectivity"] == pytest.approx(selectivity[-1], abs=1e-9)
        assert run["cs"] == pytest.approx(np.corrcoef(dominance, selectivity)[0, 1], abs=1e-12), strategy
        assert run["f1_selectivity"] == pytest.approx(np.mean(selectivity), abs=1e-9)


def test_paper2_splitters_without_published_files(released):
    """Clustering: KMeans(100, random_state=0, default n_init) on the shared split embedding, whole clusters to
    one side, ONE fold per attribute; similarity: the similarity groups moved to train in 5 shuffle splits at 40 %."""
    root, fixture = released
    labels, split_X = fixture["labels"], fixture["split_X"]
    data = ConceptAttributeData(tuple(fixture["concepts"]), tuple(fixture["attributes"]), labels, (None,) * len(labels))
    context = SplitContext(data.concepts, None, None, split_X)
    clusters = KMeans(n_clusters=100, random_state=0).fit_predict(split_X)
    splitter = paper2_splitter("clustering", context)
    assert isinstance(splitter, OneFoldPerAttribute)
    folds = attribute_folds(splitter, fixture["X"], labels, attributes=data.attributes)
    for a, per_attribute in enumerate(folds):
        assert len(per_attribute) == 1
        train, test = per_attribute[0]
        assert not set(clusters[train]) & set(clusters[test])  # whole clusters on one side
        assert 0.1 < len(test) / len(labels) < 0.3
        assert labels[test, a].any() and labels[train, a].any()  # the fold with positives on both sides
    metrics = attribute_task_metrics(fixture["X"], data, "clustering", context=context, protocol="paper2")
    for a, name in enumerate(data.attributes):
        mean, _ = released_f1(fixture["X"], labels[:, a].astype(int), folds[a])
        assert metrics["per_attribute"][name]["f1"] == pytest.approx(mean, abs=1e-9)
    similarity = paper2_splitter("similarity", context)
    assert (similarity.n_splits, similarity.test_size, similarity.random_state) == (5, 0.4, 42)
    assert paper2_splitter("random", context).random_state == 70


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "1"], "fixes its seeds"),
        (["--solver", "lockstep"], "exact probe"),
        (["--fold-assignment", "shared"], "--fold-assignment applies to --protocol project only"),
    ],
)
def test_flags_paper2_cannot_honour_are_refused_with_a_sentence(released, tmp_path, capsys, extra, message):
    root, _ = released
    base = ["splits", "--protocol", "paper2", "--things-root", str(root), "--embeddings", f"m={root / 'model.npz'}",
            "--attributes", "intersect_features.json", "--strategies", "random", "--k-values",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main([*base, *extra]) == 2
    assert message in capsys.readouterr().err


def test_paper2_needs_the_attribute_list_and_concept_sets_need_paper2(released, tmp_path, capsys):
    root, _ = released
    base = ["splits", "--things-root", str(root), "--embeddings", f"m={root / 'model.npz'}", "--strategies", "random",
            "--k-values", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main([*base, "--protocol", "paper2"]) == 2
    assert "intersect_features.json" in capsys.readouterr().err
    assert main([*base, "--concept-sets", "mcrae++.json"]) == 2
    assert "only with --protocol paper2" in capsys.readouterr().err
    # The clustering split of paper 2 needs one shared embedding.
    assert main([*base, "--protocol", "paper2", "--attributes", "intersect_features.json", "--strategies", "clustering"]) == 2
    assert "ONE embedding shared by every model" in capsys.readouterr().err


def test_concept_sets_file_is_validated(tmp_path):
    bad = tmp_path / "mcrae++.json"
    bad.write_text(json.dumps([{"norm": "a", "concepts": "dog"}]))
    with pytest.raises(ValueError, match=r"item 0 \(norm 'a'\): 'concepts' must be a list of strings"):
        load_concept_sets(bad)
    bad.write_text(json.dumps({"a": ["dog"]}))
    with pytest.raises(ValueError, match="expected a JSON list"):
        load_concept_sets(bad)
    with pytest.raises(FileNotFoundError):
        load_concept_sets(tmp_path / "missing.json")


def _task_file(folder: Path, name: str, kwargs: str, experiment: str = "{protocol: paper2}") -> Path:
    (folder / "attributes").mkdir(parents=True, exist_ok=True)
    path = folder / "attributes" / f"{name}.yaml"
    path.write_text(
        f"task: attributes/{name}\ndataset_path: things\noutput_type: attribute_splits\n"
        f"dataset_kwargs: {kwargs}\nexperiment_kwargs: {experiment}\n"
        "metric_list:\n  - {metric: cs, aggregation: mean, higher_is_better: false}\n"
    )
    return path


def test_protocol_paper2_in_a_task_yaml_runs_the_same_pipeline(released, tmp_path):
    """``experiment_kwargs: {protocol: paper2}`` (the clip_benchmark plugin and ``clip-cycles eval`` path)
    gives the released pipeline's per-attribute F1 and CS, with the task's attribute list and concept sets."""
    from clip_cycles.attributes.concepts import align_embeddings, load_embeddings_npz, load_things
    from clip_cycles.evaluation.attribute_runner import attribute_metrics
    from clip_cycles.tasks.registry import TaskRegistry

    root, fixture = released
    kwargs = "{strategy: random, attributes: intersect_features.json, concept_sets: mcrae++.json}"
    _task_file(tmp_path, "things_paper2_random", kwargs)
    task = TaskRegistry([tmp_path]).get("attributes/things_paper2_random")
    assert task.attributes == "intersect_features.json" and task.experiment_kwargs == {"protocol": "paper2"}
    data = load_things(root, attributes=task.attributes)
    data, X = align_embeddings(data, *load_embeddings_npz(root / "model.npz"))
    metrics = attribute_metrics(task, data, X, root, task.seeds)
    assert metrics["protocol"] == "paper2" and list(metrics["per_seed"]) == metrics["seeds"] == ["paper2"]
    run = metrics["per_seed"]["paper2"]
    selectivity = []
    for a in data.attributes:
        y = fixture["labels"][:, fixture["attributes"].index(a)].astype(int)
        mean, _ = released_f1(fixture["X"], y, released_folds("random", y, fixture, a))
        assert run["per_attribute"][a]["f1"] == pytest.approx(mean, abs=1e-9)
        selectivity.append(mean - 100.0 * y.sum() / len(y))
    dominance = released_dominance(root, fixture, list(data.attributes))
    assert metrics["cs"] == pytest.approx(np.corrcoef(dominance, selectivity)[0, 1], abs=1e-12)


def test_a_paper2_task_that_lists_seeds_or_lacks_its_attribute_list_is_refused(released, tmp_path):
    from clip_cycles.attributes.concepts import load_things
    from clip_cycles.evaluation.attribute_runner import attribute_metrics
    from clip_cycles.tasks.registry import TaskRegistry

    root, fixture = released
    path = _task_file(tmp_path, "seeded", "{strategy: random, seeds: [0, 1], attributes: intersect_features.json}")
    with pytest.raises(ValueError, match=r"seeded\.yaml.*dataset_kwargs\.seeds.*protocol paper2 fixes its seeds"):
        TaskRegistry([tmp_path]).get("attributes/seeded")
    path.unlink()
    _task_file(tmp_path, "lockstep", "{strategy: random}", "{protocol: paper2, solver: lockstep}")
    task = TaskRegistry([tmp_path]).get("attributes/lockstep")
    data = load_things(root)
    with pytest.raises(ValueError, match=r"experiment_kwargs\.solver': protocol paper2 fits the exact probe"):
        attribute_metrics(task, data, fixture["X"], root, task.seeds)
    _task_file(tmp_path, "typo", "{strategy: random}", "{protocol: paper3}")
    with pytest.raises(ValueError, match=r"experiment_kwargs\.protocol': 'paper3' is not one of \['project', 'paper2'\]"):
        attribute_metrics(TaskRegistry([tmp_path]).get("attributes/typo"), data, fixture["X"], root, (0,))


def test_a_paper2_task_without_its_attribute_list_is_refused_before_any_encoding(released, tmp_path):
    from types import SimpleNamespace

    from clip_cycles.evaluation.attribute_runner import run_attributes
    from clip_cycles.tasks.registry import TaskRegistry

    root, _ = released
    _task_file(tmp_path, "no_list", "{strategy: random}")
    task = TaskRegistry([tmp_path]).get("attributes/no_list")
    with pytest.raises(ValueError, match=r"no_list\.yaml: field 'dataset_kwargs\.attributes': protocol paper2 scores only"):
        run_attributes([task], SimpleNamespace(dataset_root=root, seeds=(), cache_dir=None))  # type: ignore[arg-type]
