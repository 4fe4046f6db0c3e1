"""Probe rank sweeps: structure, exact additive 0.5, determinism, factorized evaluation, bad input, shapes world."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_vocabulary import assert_one_vocabulary

from clip_cycles.algebra.contrast import bilinear_deltas
from clip_cycles.experiments.experiment_data import (
    ExperimentData,
    FamilyFeatures,
    load_experiment_data,
    marker_caption,
    planted_experiment_data,
    save_experiment_data,
)
from clip_cycles.experiments.probes import ProbeSettings, factorized_deltas, run_probes, train_probe

FAST = {"epochs": 8, "lr": 1e-2, "batch_size": 64, "seeds": (0, 1)}


@pytest.fixture(scope="module")
def planted() -> ExperimentData:
    return planted_experiment_data(
        {"strict_a": 0, "strict_b": 1, "small": 2},
        dim=16,
        n_train=160,
        n_validation=40,
        n_test=80,
        seeds=(0, 1),
        pool_size=400,
        signal=0.3,
        cycle_counts={"small": (160, 7, 80)},
    )


@pytest.fixture(scope="module")
def probe_record(planted: ExperimentData) -> dict:
    return run_probes(planted, ProbeSettings(ranks=(1, 4), audit_epochs=2, **FAST))


def test_probe_record_structure_audit_and_unavailable(probe_record: dict) -> None:
    record = probe_record
    assert record["experiment"] == "probe"
    assert_one_vocabulary(record)
    assert (record["model"], record["pretrained"], record["tie_tolerance"], record["seeds"]) == (
        "planted",
        "synthetic",
        1e-9,
        [0, 1],
    )
    assert record["family_order"] == ["strict_a", "strict_b", "small"]
    assert record["families"]["small"] == {
        "available": False,
        "unavailable_reason": "seed 0 split 'validation' has 7 cycles (minimum 20)",
    }
    assert record["unavailable"] == {"small": "seed 0 split 'validation' has 7 cycles (minimum 20)"}
    assert set(record["n_cycles"]) == {"strict_a", "strict_b"}
    for name in ("strict_a", "strict_b"):
        fam = record["families"][name]
        assert fam["n_cycles"] == {
            "0": {"test": 80, "train": 160, "validation": 40},
            "1": {"test": 80, "train": 160, "validation": 40},
        }
        assert set(fam["probes"]) == {"diagonal", "bilinear", "low_rank_r1", "low_rank_r4"}
        for probe in fam["probes"].values():
            accs = [probe["runs"][s]["test_cycle_acc"] for s in ("0", "1")]
            assert probe["mean"] == pytest.approx(np.mean(accs))
            assert probe["sd"] == pytest.approx(np.std(accs, ddof=1))
            assert all(0.0 <= a <= 1.0 for a in accs)
        assert fam["rank_sweep"]["ranks"] == [1, 4]
        assert fam["rank_sweep"]["mean"] == [fam["probes"]["low_rank_r1"]["mean"], fam["probes"]["low_rank_r4"]["mean"]]
        # Theorem 1 through the whole path: every additive probe scores exactly one half.
        audit = fam["additive_audit"]
        assert audit["passed"] is True
        for seed_report in audit["per_seed"].values():
            assert {p: v["cycle_acc"] for p, v in seed_report["probes"].items()} == {
                "image_only": 0.5,
                "text_only": 0.5,
                "additive": 0.5,
            }
        # The planted direction is found by the full bilinear probe, not by the additive ones.
        assert fam["probes"]["bilinear"]["mean"] > 0.75


def test_train_probe_is_deterministic_and_selects_best_epoch(planted: ExperimentData) -> None:
    family = planted.families["strict_a"]
    first = train_probe(family, 1, "low_rank", 4, epochs=5, lr=1e-2, batch_size=64)
    second = train_probe(family, 1, "low_rank", 4, epochs=5, lr=1e-2, batch_size=64)
    assert first.val_history == second.val_history
    a1, b1 = first.head.bilinear_export()["factors"]
    a2, b2 = second.head.bilinear_export()["factors"]
    assert a1.tobytes() == a2.tobytes() and b1.tobytes() == b2.tobytes()
    assert first.best_val == max(first.val_history)
    assert first.best_epoch == first.val_history.index(max(first.val_history)) + 1


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.booleans())
def test_factorized_deltas_equal_contrast_bilinear_deltas(seed: int, rank: int, full: bool) -> None:
    rng = np.random.default_rng(seed)
    phi, psi = rng.standard_normal((7, 6)), rng.standard_normal((9, 6))
    index = np.stack([rng.choice(7, 2, replace=False).tolist() + rng.choice(9, 2, replace=False).tolist() for _ in range(11)])
    if full:
        export = {"matrix": rng.standard_normal((6, 6))}
    else:
        export = {"factors": (rng.standard_normal((6, rank)), rng.standard_normal((6, rank)))}
    np.testing.assert_allclose(
        factorized_deltas(phi, psi, index, export), bilinear_deltas(phi, psi, index, **export), rtol=1e-12, atol=1e-12
    )


def test_mismatched_feature_dimensions_are_named(planted: ExperimentData) -> None:
    base = planted.families["strict_a"]
    other = FamilyFeatures("wide", np.ones((400, 24), np.float32), np.ones((400, 24), np.float32), base.cycles)
    data = ExperimentData("planted", "synthetic", {"strict_a": base, "wide": other})
    with pytest.raises(ValueError, match=r"differ between families 'strict_a' \(image 16, caption 16\) and 'wide'"):
        run_probes(data, ProbeSettings(ranks=(1,), **FAST))


def test_npz_round_trip_keeps_tables_cycles_and_identity(planted: ExperimentData, tmp_path: Path) -> None:
    path = save_experiment_data(planted, tmp_path / "f.npz")
    back = load_experiment_data(path)
    assert back.identity() == planted.identity()
    assert list(back.families) == list(planted.families)
    for name, fam in planted.families.items():
        np.testing.assert_array_equal(back.families[name].image_features, fam.image_features)
        for seed in fam.cycles:
            for split in fam.cycles[seed]:
                np.testing.assert_array_equal(back.families[name].split(seed, split), fam.split(seed, split))
    with np.load(path, allow_pickle=False) as npz:  # shared tables are stored once
        assert sum(k.startswith("table_") for k in npz.files) == 2


def write_features_for_folder(folder: Path, out: Path, dim: int = 16, markers: bool = False) -> Path:
    """A 'features'-backend file with random features for every image and caption of a built folder."""
    import pyarrow.parquet as pq

    images, captions = set(), set()
    for path in sorted((folder / "data").rglob("*.parquet")):
        table = pq.read_table(path, columns=["image_0", "image_1", "caption_0", "caption_1"]).to_pydict()
        images.update(table["image_0"] + table["image_1"])
        captions.update(table["caption_0"] + table["caption_1"])
    caption_keys = sorted(captions) + ([marker_caption(c) for c in sorted(captions)] if markers else [])
    rng = np.random.default_rng(0)
    np.savez(
        out,
        image_features=rng.standard_normal((len(images), dim)).astype(np.float32),
        caption_features=rng.standard_normal((len(caption_keys), dim)).astype(np.float32),
        image_keys=np.array(sorted(images)),
        caption_keys=np.array(caption_keys),
    )
    return out


def test_probe_command_end_to_end_on_shapes_world(shapes_cycles: Path, tmp_path: Path) -> None:
    from clip_cycles.cli import main

    features = write_features_for_folder(shapes_cycles, tmp_path / "features.npz")
    out = tmp_path / "results"
    code = main(
        [
            "probe",
            "--task",
            "cycles/shapes_strict_size",
            "cycles/shapes_box_size",
            "--model-type",
            "features",
            "--model",
            str(features),
            "--dataset-root",
            str(shapes_cycles),
            "--out",
            str(out),
            "--epochs",
            "2",
            "--ranks",
            "1",
            "2",
            "--min-cycles",
            "5",
            "--no-cache",
        ]
    )
    assert code == 0
    record = json.loads((out / "probe.json").read_text())
    assert record["model"] == str(features) and record["tie_tolerance"] == 1e-9
    for name, fam in record["families"].items():
        if fam["available"]:
            assert fam["additive_audit"]["passed"], name
            assert set(fam["probes"]) >= {"low_rank_r1", "low_rank_r2"}
        else:
            assert fam["unavailable_reason"]
    assert (out / "report.md").is_file()
    for stem in ("strict_relation_bars", "rank_sweep"):
        assert (out / f"{stem}.png").stat().st_size > 0 and (out / f"{stem}.svg").stat().st_size > 0
