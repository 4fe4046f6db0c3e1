"""``clip-cycles splits`` end to end (synthetic world and THINGS-format files) and the HF split dataset."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.cli import main
from clip_cycles.concept_world import make_concept_world
from clip_cycles.concepts import save_embeddings_npz
from clip_cycles.splitters import SplitContext, attribute_folds, make_splitter

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world():
    return make_concept_world(seed=0)


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
    code = main([
        "splits", "--things-root", str(tmp_path), "--embeddings", f"tiny={tmp_path / 'model.npz'}",
        "--strategies", "random", "supercategory", "llm", "--k-values", "--out", str(out),
    ])
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
    args = ["splits", "--synthetic", "small", "--strategies", "random", "clustering", "supercategory",
            "--k", "16", "--k-values", "8", "400"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    table = results["grid"]["table"]["synthetic"]
    assert table["random"]["cs"]["mean"] > table["clustering"]["cs"]["mean"] > table["supercategory"]["cs"]["mean"]
    ablation = results["k_ablation"]
    assert list(ablation["results"]["synthetic"]) == ["8"]
    assert "400" in ablation["skipped"] and "number of concepts" in ablation["skipped"]["400"]
    for name in ("strategies", "k_ablation"):
        for suffix in (".png", ".svg"):
            assert (tmp_path / "a" / "figures" / f"{name}{suffix}").stat().st_size > 1000
    assert main(["splits", "--synthetic", "small", "--strategies", "supercategory", "--k-values", "8",
                 "--out", str(tmp_path / "b")]) == 0
    assert main(["splits", "--synthetic", "small", "--strategies", "supercategory", "--k-values", "8",
                 "--out", str(tmp_path / "c")]) == 0
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
