"""The minimum-cycle rule applies to the split being read: zero-shot scoring needs only its split,
probe experiments need train, validation and test."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.data.folder.build import build_coco_folder
from clip_cycles.data.folder.reader import open_built_folder
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.zero_shot import evaluate_tasks
from clip_cycles.experiments.experiment_data import screen_families
from clip_cycles.tasks.loading import load_task_data
from clip_cycles.tasks.registry import expand_tasks

MIN = 30  # strict_size on the 300-image shapes world, seed 0: validation is short of it, test is not


@pytest.fixture(scope="module")
def folder(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = build_coco_folder(shapes_world, tmp_path_factory.mktemp("short") / "cycles", ["strict_size"], seeds=[0],
                               min_cycles=MIN)  # fmt: skip
    return out


def test_short_validation_leaves_the_test_split_usable(folder: Path) -> None:
    entry = json.loads((folder / "build_info.json").read_text())["families"]["strict_size"]
    counts = entry["counts"]["0"]
    assert counts["validation"] < MIN <= counts["test"]  # the premise, from the counts themselves
    assert entry["available"] is False
    assert entry["available_splits"] == [s for s in ("train", "validation", "test") if counts[s] >= MIN]
    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    built = open_built_folder(folder)
    zero_shot = load_task_data(task, built, seeds=[0], with_audit=False)
    assert zero_shot.unavailable is None and len(zero_shot.splits[0]["test"].cycle_ids) == counts["test"]
    # With the audit, train/validation are wanted too: validation is short, so the audit is not run.
    audited = load_task_data(task, built, seeds=[0], with_audit=True)
    assert audited.unavailable is None and "validation" not in audited.splits[0]
    assert "split 'validation' is unavailable" in audited.audit_unavailable


def _tiny(tmp_path: Path) -> ModelSpec:
    config = tmp_path / "tiny"
    config.mkdir(exist_ok=True)
    (config / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    return ModelSpec("open_clip", f"local-dir:{config}", None, seed=0)


def test_zero_shot_audit_fits_on_the_scored_split_and_needs_nothing_else(folder: Path, tmp_path: Path) -> None:
    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    assert task.audit_fit == "scored"
    (record,), encoded = evaluate_tasks([task], _tiny(tmp_path), folder, tmp_path / "cache", tmp_path / "data",
                                        num_workers=0, seeds=[0])  # fmt: skip
    metrics = record["metrics"]
    counts = json.loads((folder / "build_info.json").read_text())["families"]["strict_size"]["counts"]["0"]
    assert metrics["n_cycles"] == counts["test"] and 0.0 <= metrics["cycle_acc"] <= 1.0
    audit = metrics["additive_audit"]["per_seed"]["0"]
    assert metrics["additive_audit"]["passed"] is True and audit["fit_split"] == "test"
    # Only the test split's items were encoded: its unique images, counted from the Parquet file by hand.
    import pyarrow.parquet as pq

    table = pq.read_table(folder / "data" / "strict_size" / "seed0" / "test.parquet").to_pydict()
    assert len(encoded.image_rows) == len(set(table["image_0"]) | set(table["image_1"]))


def test_an_audit_fit_on_a_short_train_split_is_reported_unavailable(folder: Path, tmp_path: Path) -> None:
    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    task = replace(task, audit_fit="train")
    (record,), _ = evaluate_tasks([task], _tiny(tmp_path), folder, tmp_path / "cache", tmp_path / "data",
                                  num_workers=0, seeds=[0])  # fmt: skip
    metrics = record["metrics"]
    counts = json.loads((folder / "build_info.json").read_text())["families"]["strict_size"]["counts"]["0"]
    assert metrics["n_cycles"] == counts["test"] and 0.0 <= metrics["cycle_acc"] <= 1.0
    assert metrics["additive_audit"]["available"] is False and metrics["additive_audit"]["passed"] is None
    assert "validation" in metrics["additive_audit"]["unavailable_reason"]


def test_probe_experiments_keep_the_rule_for_train_and_validation(folder: Path) -> None:
    import numpy as np

    from clip_cycles.experiments.experiment_data import ExperimentData, FamilyFeatures

    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    audited = load_task_data(task, open_built_folder(folder), seeds=[0], with_audit=True)
    # As the experiment loader records it: the family is unavailable with the short split named.
    data = ExperimentData(
        model="m",
        pretrained="",
        families={},
        tie_tolerance=1e-9,
        unavailable={"strict_size": audited.audit_unavailable},
        source="t",
    )
    usable, unavailable = screen_families(data, [0], MIN)
    assert usable == {} and "validation" in unavailable["strict_size"]
    # And a family whose splits are all read but one is short is screened out by the count.
    phi = np.zeros((4, 2))
    short = {0: {"train": np.zeros((MIN, 4), int), "validation": np.zeros((MIN - 1, 4), int),
                 "test": np.zeros((MIN, 4), int)}}  # fmt: skip
    data = ExperimentData(
        model="m",
        pretrained="",
        families={"f": FamilyFeatures("f", phi, phi, short, None, 0)},
        tie_tolerance=1e-9,
        unavailable={},
        source="t",
    )
    usable, unavailable = screen_families(data, [0], MIN)
    assert usable == {} and unavailable["f"] == f"seed 0 split 'validation' has {MIN - 1} cycles (minimum {MIN})"


# --------------------------------------------------------------------------- setting the rule without a flag


def test_raw_root_builds_take_the_minimum_from_the_environment(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from clip_cycles.settings import MIN_CYCLES_ENV
    from clip_cycles.tasks.loading import resolve_dataset_roots

    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    cache = tmp_path / "datasets"
    monkeypatch.setenv(MIN_CYCLES_ENV, str(MIN))
    built = resolve_dataset_roots([task], shapes_world, cache)[task.name]
    info = json.loads((built.root / "build_info.json").read_text())
    assert info["min_cycles"] == MIN
    entry = info["families"]["strict_size"]
    counts = entry["counts"]["0"]
    assert counts["validation"] < MIN <= counts["test"]  # the premise, as in the folder above
    # The reason says how to set the rule where no flag can: the environment variable.
    assert entry["available"] is False and f"{MIN_CYCLES_ENV}=N" in info["unavailable"]["strict_size"]
    caplog.set_level(logging.INFO, logger="clip_cycles")  # the build decisions are INFO notes
    # The same rule again: the cached build is reused; another rule: rebuilt, and the reason says so.
    resolve_dataset_roots([task], shapes_world, cache)
    assert "building" not in caplog.text
    monkeypatch.delenv(MIN_CYCLES_ENV)
    rebuilt = resolve_dataset_roots([task], shapes_world, cache)[task.name]
    assert f"the cached build used --min-cycles {MIN}, this run asks for 20" in caplog.text
    assert json.loads((rebuilt.root / "build_info.json").read_text())["min_cycles"] == 20


def test_a_built_folder_keeps_its_rule_and_refuses_another(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clip_cycles.settings import MIN_CYCLES_ENV
    from clip_cycles.tasks.loading import resolve_dataset_roots

    (task,) = expand_tasks(["cycles/shapes_strict_size"])
    monkeypatch.setenv(MIN_CYCLES_ENV, "5")
    with pytest.raises(ValueError, match=rf"{MIN_CYCLES_ENV}=5 .* built with --min-cycles {MIN}; rebuild it"):
        resolve_dataset_roots([task], folder, tmp_path / "datasets")
    monkeypatch.setenv(MIN_CYCLES_ENV, str(MIN))  # the folder's own rule: accepted
    assert resolve_dataset_roots([task], folder, tmp_path / "datasets")[task.name].root == folder


def test_experiments_use_the_minimum_the_folder_was_built_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clip_cycles.experiments.experiment_data import (
        ExperimentData,
        load_experiment_data,
        resolve_min_cycles,
        save_experiment_data,
    )
    from clip_cycles.settings import MIN_CYCLES_ENV

    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    built = ExperimentData(model="m", pretrained="", families={}, built_min_cycles=MIN)
    unknown = ExperimentData(model="m", pretrained="", families={})
    assert resolve_min_cycles(None, built) == MIN  # not the default 20
    assert load_experiment_data(save_experiment_data(built, tmp_path / "f.npz")).built_min_cycles == MIN  # --features keeps it
    assert resolve_min_cycles(None, unknown) == 20  # planted data, older npz files
    assert resolve_min_cycles(7, built) == 7  # a flag or experiment_kwargs wins
    monkeypatch.setenv(MIN_CYCLES_ENV, "9")
    assert resolve_min_cycles(None, built) == 9 and resolve_min_cycles(7, built) == 7
