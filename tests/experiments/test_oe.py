"""Cycle OE vs Shortcut OE: the planted marker shortcut, the OE construction, record structure, the shapes world."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from record_vocabulary import assert_one_vocabulary

from clip_cycles.experiments.experiment_data import ExperimentData, FamilyFeatures, planted_experiment_data
from clip_cycles.experiments.oe import METHODS, OESettings, matched_pairs, oe_pairs, run_oe

FAST = {"rank": 4, "epochs": 6, "lr": 1e-2, "batch_size": 64, "seeds": (0, 1), "text_only_epochs": 15}


@pytest.fixture(scope="module")
def marked() -> ExperimentData:
    return planted_experiment_data(
        {"variant": 0},
        dim=16,
        n_train=160,
        n_validation=40,
        n_test=80,
        seeds=(0, 1),
        pool_size=400,
        signal=0.3,
        marker_strength=1.0,
    )


@pytest.fixture(scope="module")
def record(marked: ExperimentData) -> dict:
    return run_oe(marked, OESettings(**FAST))


def test_marker_makes_oe_validation_solvable_by_text_alone(record: dict) -> None:
    text = record["families"]["variant"]["text_only_probe"]
    for seed in ("0", "1"):
        run = text["runs"][seed]
        assert run["oe_val_acc"] >= 0.99  # the shortcut: caption features alone flag the marked negatives
        # Its cycle accuracies are 0.5 for any text-only (additive) probe by Theorem 1: an identity, not asserted.


def test_image_only_shortcut_probe_is_reported_beside_the_text_only_one(record: dict) -> None:
    fam = record["families"]["variant"]
    image = fam["image_only_probe"]
    for seed in ("0", "1"):
        run = image["runs"][seed]
        # Every OE negative (u, marker(v)) shares its image with its positive (u, v): an image-only
        # score gives both the same logit, so each paired comparison is a tie worth exactly one half.
        assert run["oe_val_acc"] == 0.5
        assert run["test_cycle_acc"] == 0.5 and run["val_cycle_acc"] == 0.5
    table = {row["seed"]: row for row in fam["per_seed_table"]}
    assert table[0]["image_only_test_cycle_acc"] == 0.5 and table[0]["image_only_oe_val_acc"] == 0.5
    assert table[0]["text_only_oe_val_acc"] == fam["text_only_probe"]["runs"]["0"]["oe_val_acc"]


def test_oe_record_structure_table_and_per_seed_differences(record: dict) -> None:
    assert record["experiment"] == "oe"
    assert_one_vocabulary(record)
    assert (record["model"], record["pretrained"], record["tie_tolerance"], record["seeds"]) == (
        "planted",
        "synthetic",
        1e-9,
        [0, 1],
    )
    assert record["marker_caption_example"] == "this is an out of distribution negative example: <caption>"
    fam = record["families"]["variant"]
    assert fam["n_cycles"]["0"] == {"test": 80, "train": 160, "validation": 40}
    assert set(fam["methods"]) == set(METHODS)
    table = {row["seed"]: row for row in fam["per_seed_table"]}
    assert sorted(table) == [0, 1]
    for method in METHODS:
        runs = fam["methods"][method]["runs"]
        for seed in ("0", "1"):
            assert table[int(seed)][method] == runs[seed]["test_cycle_acc"]
        accs = [runs[s]["test_cycle_acc"] for s in ("0", "1")]
        assert fam["methods"][method]["test_cycle_acc"]["mean"] == pytest.approx(np.mean(accs))
    assert fam["methods"]["shortcut_oe"]["runs"]["0"]["selected_on"] == "oe_val_acc"
    assert fam["methods"]["cycle_oe"]["runs"]["0"]["selected_on"] == "val_cycle_acc"
    for other in ("shortcut_oe", "four_entry_bce"):
        diff = fam["differences"][f"cycle_oe_minus_{other}"]
        for seed in ("0", "1"):
            assert diff["per_seed"][seed] == table[int(seed)]["cycle_oe"] - table[int(seed)][other]
    # Trained on the planted relation, the cycle-trained OE head beats chance on exact cycles.
    assert fam["methods"]["cycle_oe"]["test_cycle_acc"]["mean"] > 0.6


def test_oe_construction_pairs_positives_with_their_marked_twins(marked: ExperimentData) -> None:
    family = marked.families["variant"]
    pairs = oe_pairs(family, 0, "train")
    positives = matched_pairs(family.split(0, "train"))
    n = len(positives)
    assert pairs.shape == (2 * n, 3)
    np.testing.assert_array_equal(pairs[:n, :2], positives)
    np.testing.assert_array_equal(pairs[:n, 2], 1)
    np.testing.assert_array_equal(pairs[n:, 0], positives[:, 0])
    np.testing.assert_array_equal(pairs[n:, 1], family.marker_rows[positives[:, 1]])
    np.testing.assert_array_equal(pairs[n:, 2], 0)


def test_missing_marked_captions_are_named(marked: ExperimentData) -> None:
    family = marked.families["variant"]
    bare = FamilyFeatures("bare", family.image_features, family.caption_features, family.cycles)
    with pytest.raises(ValueError, match="family 'bare' has no marked captions"):
        run_oe(ExperimentData("m", "p", {"bare": bare}), OESettings(**FAST))
    holes = family.marker_rows.copy()
    first = int(matched_pairs(family.split(0, "train"))[0, 1])
    holes[first] = -1
    holey = FamilyFeatures("holey", family.image_features, family.caption_features, family.cycles, holes)
    with pytest.raises(ValueError, match=f"family 'holey' train: caption row {first} has no marked twin"):
        oe_pairs(holey, 0, "train")


def test_oe_command_encodes_marked_captions_through_the_same_backend(shapes_cycles: Path, tmp_path: Path) -> None:
    from test_probes import write_features_for_folder

    from clip_cycles.cli import main

    features = tmp_path / "features.npz"
    without = write_features_for_folder(shapes_cycles, tmp_path / "bare.npz")
    args = [
        "oe",
        "--task",
        "cycles/shapes_strict_size",
        "--model-type",
        "features",
        "--dataset-root",
        str(shapes_cycles),
        "--out",
        str(tmp_path / "out"),
        "--epochs",
        "1",
        "--rank",
        "2",
        "--text-only-epochs",
        "2",
        "--seeds",
        "0",
        "--min-cycles",
        "5",
        "--no-cache",
    ]
    # A backend that cannot encode the marked captions is an error that names the missing caption.
    assert main([*args, "--model", str(without)]) == 2
    write_features_for_folder(shapes_cycles, features, markers=True)
    assert main([*args, "--model", str(features)]) == 0
    record = json.loads((tmp_path / "out" / "oe.json").read_text())
    fam = record["families"]["shapes_strict_size"]
    assert fam["available"], fam
    assert "test_cycle_acc" in fam["text_only_probe"]  # its value is 0.5 by Theorem 1 (an identity)
    assert (tmp_path / "out" / "oe_comparison.svg").is_file()
