"""``clip-cycles splits`` end to end (synthetic world and THINGS-format files) and the HF split dataset."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from record_vocabulary import assert_one_vocabulary

from clip_cycles.attributes.concepts import save_embeddings_npz
from clip_cycles.attributes.splitters import SplitContext, attribute_folds, make_splitter
from clip_cycles.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    """``clip-cycles`` with the fast lockstep probe for ``splits`` unless a test names a solver: these tests
    are about the grid, its files and flags; the exact default solver has tests of its own
    (tests/attributes/test_paper2_protocol.py), and the two solvers' agreement is benchmarked."""
    if argv[:1] == ["splits"] and "--solver" not in argv and "--protocol" not in argv:
        argv = [*argv, "--solver", "lockstep"]
    return cli_main(argv)


def write_things_root(root: Path, world) -> None:
    """The synthetic world in the real THINGS formats, with the usual defects planted."""
    data = world.data
    (root / "unique_id.txt").write_text("\n".join(data.concepts) + "\n")
    pairs = [[c, a] for j, a in enumerate(data.attributes) for c, has in zip(data.concepts, data.labels[:, j]) if has]
    pairs += [pairs[0], ["unicorn", data.attributes[0]], ["dragon", "breathes_fire"]]
    (root / "concept_attribute_pairs.json").write_text(json.dumps(pairs))
    categories = sorted({s for s in data.supercategories if s})
    lines = ["\t".join(["Word", "Definition", *categories])]
    for concept, super_ in zip(data.concepts, data.supercategories):
        cells = ["1" if c == super_ else "" for c in categories]
        lines.append("\t".join([concept, f'"definition of {concept}, with\ttab"', *cells]))
    (root / "category53_wideFormat.tsv").write_text("\n".join(lines) + "\n")


def test_things_root_end_to_end_reports_skips(tmp_path, world):
    write_things_root(tmp_path, world)
    keep = np.ones(len(world.data.concepts), dtype=bool)
    keep[[3, 4]] = False  # two concepts lack embeddings
    ids = [c for c, k in zip(world.data.concepts, keep) if k]
    save_embeddings_npz(tmp_path / "model.npz", ids, world.embeddings[keep])
    out = tmp_path / "out"
    code = main(
        [
            "splits",
            "--things-root",
            str(tmp_path),
            "--embeddings",
            f"tiny={tmp_path / 'model.npz'}",
            "--strategies",
            "random",
            "supercategory",
            "llm",
            "--k-values",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    skipped = results["data"]["skipped"]
    assert skipped["duplicate_pair"] == 1 and skipped["pair_unknown_concept"] == 2
    assert results["data"]["skipped_names"]["pair_unknown_concept"] == ["dragon", "unicorn"]
    assert skipped["concept_without_embedding"] == 2
    assert results["data"]["n_concepts"] == len(world.data.concepts) - 2
    assert "llm" in results["grid"]["unavailable"]  # no --groups file
    table = results["grid"]["table"]["tiny"]
    assert table["random"]["cs"]["mean"] > table["supercategory"]["cs"]["mean"]
    markdown = (out / "results.md").read_text()
    assert "Table 1: F1 selectivity" in markdown and "| tiny |" in markdown and "llm split needs" in markdown


def test_changed_tsv_header_exits_with_message(tmp_path, world, capsys):
    write_things_root(tmp_path, world)
    tsv = tmp_path / "category53_wideFormat.tsv"
    tsv.write_text(tsv.read_text().replace("Word\tDefinition", "Word\tGloss", 1))
    save_embeddings_npz(tmp_path / "m.npz", world.data.concepts, world.embeddings)
    code = main(["splits", "--things-root", str(tmp_path), "--embeddings", str(tmp_path / "m.npz"), "--out", str(tmp_path / "o")])
    assert code == 2
    assert "category53_wideFormat.tsv: header starts" in capsys.readouterr().err


def test_missing_input_and_nan_embeddings_exit_cleanly(tmp_path, world, capsys):
    assert main(["splits", "--out", str(tmp_path / "o")]) == 2
    assert "give --things-root" in capsys.readouterr().err
    write_things_root(tmp_path, world)
    bad = world.embeddings.copy()
    bad[5, 0] = np.nan
    save_embeddings_npz(tmp_path / "m.npz", world.data.concepts, bad)
    args = ["splits", "--things-root", str(tmp_path), "--embeddings", str(tmp_path / "m.npz"), "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert "NaN or inf for 1 concepts: 'concept00005'" in capsys.readouterr().err


def test_synthetic_grid_k_ablation_figures_and_determinism(tmp_path):
    args = [
        "splits",
        "--synthetic",
        "small",
        "--strategies",
        "random",
        "clustering",
        "supercategory",
        "--k",
        "16",
        "--k-values",
        "8",
        "400",
    ]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    assert_one_vocabulary(results)
    table = results["grid"]["table"]["synthetic"]
    assert table["random"]["cs"]["mean"] > table["clustering"]["cs"]["mean"] > table["supercategory"]["cs"]["mean"]
    ablation = results["k_ablation"]
    assert list(ablation["results"]["synthetic"]) == ["8"]
    assert "400" in ablation["skipped"] and "number of concepts" in ablation["skipped"]["400"]
    for name in ("strategies", "k_ablation"):
        for suffix in (".png", ".svg"):
            assert (tmp_path / "a" / "figures" / f"{name}{suffix}").stat().st_size > 1000
    assert (
        main(["splits", "--synthetic", "small", "--strategies", "supercategory", "--k-values", "8", "--out", str(tmp_path / "b")])
        == 0
    )
    assert (
        main(["splits", "--synthetic", "small", "--strategies", "supercategory", "--k-values", "8", "--out", str(tmp_path / "c")])
        == 0
    )
    for name in ("results.json", "results.md", "figures/strategies.svg", "figures/k_ablation.svg", "figures/strategies.png"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "c" / name).read_bytes(), name


def _builder():
    spec = importlib.util.spec_from_file_location("things_split_builder", REPO / "hf_datasets/things_attribute_splits/build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hf_dataset_loads_per_strategy_with_seed_splits(tmp_path, world):
    import datasets

    builder = _builder()
    context = SplitContext(world.data.concepts, world.data.supercategories, world.llm_groups, world.embeddings)
    info = builder.build(world.data, world.embeddings, context, tmp_path, ("clustering", "supercategory"), (0, 1))
    assert info["strategies"] == ["clustering", "supercategory"]
    loaded = datasets.load_dataset(str(tmp_path), "clustering")
    assert sorted(loaded) == ["seed0", "seed1"]
    rows = loaded["seed1"]
    assert len(rows) == 10 * len(world.data.attributes)
    folds = attribute_folds(make_splitter("clustering", context, 1), world.embeddings, world.data.labels)
    first = rows[0]
    assert first["attribute"] == world.data.attributes[0] and (first["repeat"], first["fold"]) == (0, 0)
    assert first["test_concepts"] == [world.data.concepts[i] for i in folds[0][0][1]]
    assert not set(first["train_concepts"]) & set(first["test_concepts"])
    assert len(first["train_concepts"]) + len(first["test_concepts"]) == len(world.data.concepts)
    card = (tmp_path / "README.md").read_text()
    assert "config_name: clustering" in card and "path: data/supercategory/seed1.parquet" in card
    assert "config_name: random" not in card  # the header lists only what was built


# ------------------------------------------------ THINGS files as published, paper 2's split files


def _things_run(tmp_path, *extra):
    from things_fixture import ATTRIBUTES, LISTED_ATTRIBUTES, write_published_splits, write_things_root

    info = write_things_root(tmp_path)
    listed = [a for a in sorted(ATTRIBUTES) if a in LISTED_ATTRIBUTES]
    published = write_published_splits(tmp_path, listed, len(info["concepts"]))
    out = tmp_path / "out"
    code = main(
        [
            "splits",
            "--things-root",
            str(tmp_path),
            "--embeddings",
            f"a={tmp_path / 'model_a.npz'}",
            "--embeddings",
            f"b={tmp_path / 'model_b.npz'}",
            "--split-embeddings",
            "a",
            "--attributes",
            "attributes.json",
            "--min-concepts",
            "5",
            "--k",
            "8",
            "--k-values",
            "--seeds",
            "0",
            "1",
            "--strategies",
            "random",
            "similarity",
            "clustering",
            "supercategory",
            "--published-split",
            "supercategory_paper=supercategory_splits.json",
            "--published-split",
            "kmeans_paper=kmeans_splits.json",
            "--published-split",
            "similarity_paper=similarity_moves.txt",
            *extra,
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return info, published, listed, json.loads((out / "results.json").read_text())


def test_things_format_every_strategy_scores_the_same_attributes(tmp_path):
    info, published, listed, results = _things_run(tmp_path)
    assert results["data"]["n_attributes"] == len(listed) == 5
    assert results["data"]["skipped_names"]["attribute_not_in_list"] == ["is_green"]
    assert results["data"]["skipped_names"]["listed_attribute_not_in_data"] == ["not_in_data"]
    assert results["data"]["notes"]["category_totals_row"] is True
    strategies = [
        "random",
        "similarity",
        "clustering",
        "supercategory",
        "supercategory_paper",
        "kmeans_paper",
        "similarity_paper",
    ]
    for model in ("a", "b"):
        table = results["grid"]["table"][model]
        assert sorted(table) == sorted(strategies)
        for strategy in strategies:
            assert table[strategy]["n_attributes_scored"] == [5, 5], (model, strategy)
            per_seed = results["grid"]["grid"][model][strategy]
            for seed in ("0", "1"):
                coverage = per_seed[seed]["coverage"]
                assert coverage["n_degenerate_folds"] == table[strategy]["n_degenerate_folds"][int(seed)]
                assert coverage["n_attribute_folds"] == 5 * per_seed[seed]["n_folds"]
        # One split embedding for every model: model a's.
        assert table["clustering"]["split_embedding"] == "a" and table["similarity"]["split_embedding"] == "a"
        assert table["random"]["split_embedding"] == "not used by this strategy"
    # Both models see the same clustering folds, hence the same degenerate counts.
    grid = results["grid"]["grid"]
    assert grid["a"]["clustering"]["0"]["coverage"] == grid["b"]["clustering"]["0"]["coverage"]
    summary = results["published_splits"]["supercategory_paper"]
    assert summary["file_attributes_not_in_data"] == ["attribute_not_in_data"]
    # Concept 0 is left out of every train list: on neither side wherever the test list lacks it too.
    expected = sum(0 not in published["supercategory"][a]["test_idxs"] for a in listed)
    assert summary["n_concept_folds_on_neither_side"] == expected > 0
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "Degenerate folds" in markdown and "| a | kmeans_paper |" in markdown


def test_published_split_files_give_exactly_their_folds(tmp_path):
    from sklearn.model_selection import StratifiedShuffleSplit
    from things_fixture import write_published_splits, write_things_root

    from clip_cycles.attributes.concepts import load_concept_list, load_things
    from clip_cycles.attributes.splitters import load_published_split

    info = write_things_root(tmp_path)
    data = load_things(tmp_path, min_concepts=5, attributes="attributes.json")
    concepts = load_concept_list(tmp_path / "unique_id.txt")
    expected = write_published_splits(tmp_path, list(data.attributes), len(concepts))
    context = SplitContext(
        data.concepts,
        data.supercategories,
        published={
            "super": load_published_split(
                "super", tmp_path / "supercategory_splits.json", concepts, data.concepts, data.attributes
            ),
            "kmeans": load_published_split("kmeans", tmp_path / "kmeans_splits.json", concepts, data.concepts, data.attributes),
            "moves": load_published_split("moves", tmp_path / "similarity_moves.txt", concepts, data.concepts),
        },
    )
    X = info["embeddings"]
    for name, file_folds in (("super", expected["supercategory"]), ("kmeans", expected["kmeans"])):
        folds = attribute_folds(make_splitter(name, context, 0), X, data.labels, attributes=data.attributes)
        for a, attribute in enumerate(data.attributes):
            entry = file_folds[attribute]
            train, test = (entry["train_idxs"], entry["test_idxs"]) if isinstance(entry, dict) else entry
            assert len(folds[a]) == 1
            assert folds[a][0][0].tolist() == train and folds[a][0][1].tolist() == test
    moved = set(expected["moved"])
    folds = attribute_folds(make_splitter("moves", context, 3), X, data.labels, attributes=data.attributes)
    for a in range(len(data.attributes)):
        y = data.labels[:, a].astype(int)
        reference = StratifiedShuffleSplit(n_splits=10, test_size=0.2, random_state=3).split(X, y)
        for (train, test), (ref_train, ref_test) in zip(folds[a], reference):
            assert test.tolist() == sorted(set(ref_test) - moved)
            assert train.tolist() == sorted(set(ref_train) | (set(ref_test) & moved))
            assert not moved & set(test.tolist())


def test_published_split_errors_name_the_problem(tmp_path, capsys):
    from things_fixture import write_things_root

    from clip_cycles.attributes.splitters import load_published_split

    info = write_things_root(tmp_path)
    concepts = info["concepts"]
    (tmp_path / "bad.json").write_text(json.dumps({"is_alive": {"train_idxs": [0, 1], "test_idxs": [999]}}))
    with pytest.raises(ValueError, match=r"bad\.json: is_alive fold 0 test: concept index 999 is outside"):
        load_published_split("x", tmp_path / "bad.json", concepts, concepts)
    (tmp_path / "moves.txt").write_text("1 2 x\n")
    with pytest.raises(ValueError, match=r"moves\.txt: line 1: 'x' is not an integer"):
        load_published_split("x", tmp_path / "moves.txt", concepts, concepts)
    # A file without one of the data's attributes: the CLI names it and says what to do.
    (tmp_path / "partial.json").write_text(
        json.dumps({"is_alive": {"train_idxs": list(range(40)), "test_idxs": list(range(40, 58))}})
    )
    code = main(
        [
            "splits",
            "--things-root",
            str(tmp_path),
            "--embeddings",
            f"a={tmp_path / 'model_a.npz'}",
            "--min-concepts",
            "5",
            "--strategies",
            "random",
            "--published-split",
            "p=partial.json",
            "--k-values",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    assert "no folds for attribute 'has_wheels'" in capsys.readouterr().err


def test_builder_writes_published_splits_as_configs(tmp_path):
    import pyarrow.parquet as pq
    from things_fixture import write_published_splits, write_things_root

    info = write_things_root(tmp_path)
    listed = ["has_wheels", "is_alive", "is_edible", "is_metal", "is_small"]
    published = write_published_splits(tmp_path, listed, len(info["concepts"]))
    out = tmp_path / "ds"
    assert (
        _builder().main(
            [
                "--things-root",
                str(tmp_path),
                "--embeddings",
                f"a={tmp_path / 'model_a.npz'}",
                "--attributes",
                "attributes.json",
                "--min-concepts",
                "5",
                "--strategies",
                "random",
                "--seeds",
                "0",
                "--published-split",
                "supercategory_paper=supercategory_splits.json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    build_info = json.loads((out / "build_info.json").read_text())
    assert build_info["strategies"] == ["random", "supercategory_paper"]
    assert build_info["fold_assignment"] == "per_attribute" and build_info["split_embedding"] == "a"
    rows = pq.read_table(out / "data" / "supercategory_paper" / "seed0.parquet").to_pylist()
    concepts = info["concepts"]
    assert [r["attribute"] for r in rows] == listed
    for row in rows:
        entry = published["supercategory"][row["attribute"]]
        assert row["test_concepts"] == [concepts[i] for i in entry["test_idxs"]]
        assert row["train_concepts"] == [concepts[i] for i in entry["train_idxs"]]


def test_bad_split_inputs_are_clear_errors(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    from things_fixture import write_things_root

    from clip_cycles.attributes.concepts import load_things
    from clip_cycles.attributes.splitters import SupercategorySplit, load_published_split
    from clip_cycles.evaluation.attribute_runner import _split_embeddings

    info = write_things_root(tmp_path)
    concepts = info["concepts"]
    (tmp_path / "overlap.json").write_text(json.dumps({"is_alive": {"train_idxs": [0, 1, 2], "test_idxs": [2, 3]}}))
    with pytest.raises(ValueError, match=r"'is_alive' fold 0: 1 concepts are in both train and test \(first: 'animal_0'\)"):
        load_published_split("x", tmp_path / "overlap.json", concepts, concepts)
    base = [
        "splits",
        "--things-root",
        str(tmp_path),
        "--embeddings",
        f"a={tmp_path / 'model_a.npz'}",
        "--min-concepts",
        "5",
        "--k-values",
        "--out",
        str(tmp_path / "o"),
    ]
    for extra, message in (
        (["--published-split", "noequals"], "expected NAME=FILE"),
        (["--published-split", "random=overlap.json"], "'random' is already a strategy"),
        (["--published-split", "p=missing.json"], "published split file"),
    ):
        assert main([*base, *extra]) == 2
        assert message in capsys.readouterr().err, extra
    with pytest.raises(ValueError, match=r"^SplitterOptions option --fold-assignment \(fold_assignment\): .*'mixed'"):
        SupercategorySplit(["a", "b"], fold_assignment="mixed")
    with pytest.raises(ValueError, match="multi_category='middle' is not one of"):
        load_things(tmp_path, min_concepts=5, multi_category="middle")
    # The runner's split embedding must cover every concept.
    data = load_things(tmp_path, min_concepts=5)
    np.savez(tmp_path / "partial.npz", concepts=np.array(concepts[:-2]), embeddings=np.zeros((len(concepts) - 2, 3)))
    monkeypatch.delenv("CLIP_CYCLES_SPLIT_EMBEDDINGS", raising=False)
    with pytest.raises(ValueError, match=r"partial\.npz lack 2 concepts \(first: \['thing_6', 'thing_7'\]\)"):
        _split_embeddings(SimpleNamespace(split_embeddings="partial.npz"), data, tmp_path)
