"""Every count a record reports, on a fixture where it is nonzero, equal to a count made here.

- zero-shot ``dropped_cycles`` (per seed and in total) and ``skipped_bad_images`` with images missing
  from the raw root: the expected numbers are the rows of each seed's Parquet file that name a missing file;
- the probe experiments' ``dropped_cycles`` (train, validation and test of every seed);
- the feature cache's ``stale_tmp_removed``, ``corrupt_shards`` and ``foreign_shards``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.feature_cache import STALE_TMP_SECONDS, FeatureNamespace

TASK = "cycles/shapes_strict_left_right"
FAMILY = "strict_left_right"
SEEDS = (0, 1)
N_MISSING = 3


def _rows(folder: Path, seed: int, split: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(
        folder / "data" / FAMILY / f"seed{seed}" / f"{split}.parquet", columns=["image_0", "image_1"]
    ).to_pylist()


@pytest.fixture(scope="module")
def broken(shapes_cycles: Path, shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A copy of the folder whose raw root lacks the two test images used most by seeds 0 and 1, and a train image."""
    from clip_cycles.data.folder.writer import build_source_fingerprint

    base = tmp_path_factory.mktemp("counts")
    folder, world = base / "built", base / "world"
    shutil.copytree(shapes_cycles, folder)
    shutil.copytree(shapes_world, world)
    uses = Counter(row[k] for seed in SEEDS for row in _rows(folder, seed, "test") for k in ("image_0", "image_1"))
    missing = [name for name, _ in uses.most_common(N_MISSING - 1)]
    # And one train2017 image, so that the probe data drop cycles from train/validation too.
    missing += [Counter(row["image_0"] for row in _rows(folder, 0, "train")).most_common(1)[0][0]]
    for name in missing:
        (world / name).unlink()
    info = json.loads((folder / "build_info.json").read_text())
    # Missing when the folder was built (a root changed after the build is refused as a whole).
    info["source_root"], info["source_fingerprint"] = str(world), build_source_fingerprint("coco", world)
    (folder / "build_info.json").write_text(json.dumps(info))
    return {"folder": folder, "missing": set(missing), "cache": base / "cache"}


def _expected_dropped(broken: dict[str, Any], seed: int, split: str) -> int:
    return sum(1 for row in _rows(broken["folder"], seed, split) if {row["image_0"], row["image_1"]} & broken["missing"])


def test_zero_shot_counts_dropped_cycles_per_seed_and_skipped_images(broken: dict[str, Any], tiny: str) -> None:
    from clip_cycles.evaluation.zero_shot import evaluate

    records, _ = evaluate(
        [TASK],
        ModelSpec("open_clip", tiny, None),
        broken["folder"],
        broken["cache"],
        num_workers=0,
        seeds=SEEDS,
        skip_bad_images=True,
    )
    metrics = records[0]["metrics"]
    expected = {str(s): _expected_dropped(broken, s, "test") for s in SEEDS}
    assert all(v > 0 for v in expected.values())
    assert {s: metrics["per_seed"][s]["dropped_cycles"] for s in expected} == expected
    assert metrics["dropped_cycles"] == sum(expected.values())
    for seed in SEEDS:
        per = metrics["per_seed"][str(seed)]
        assert per["n_cycles"] == len(_rows(broken["folder"], seed, "test")) - expected[str(seed)]
    # Zero-shot reads and encodes the scored split only: the missing test images are skipped and named.
    read = {row[k] for s in SEEDS for row in _rows(broken["folder"], s, "test") for k in ("image_0", "image_1")}
    assert len(read & broken["missing"]) == N_MISSING - 1
    assert metrics["skipped_bad_images"] == N_MISSING - 1 and set(metrics["bad_images"]) == read & broken["missing"]


def test_probe_data_counts_dropped_cycles_over_every_split(broken: dict[str, Any], tiny: str) -> None:
    from clip_cycles.experiments.experiment_data import load_from_tasks

    data = load_from_tasks(
        [TASK],
        ModelSpec("open_clip", tiny, None),
        broken["folder"],
        broken["cache"],
        seeds=SEEDS,
        num_workers=0,
        skip_bad_images=True,
    )
    (family,) = data.families.values()
    by_split = {split: sum(_expected_dropped(broken, s, split) for s in SEEDS) for split in ("train", "validation", "test")}
    assert by_split["train"] + by_split["validation"] > 0 and by_split["test"] > 0
    assert family.dropped_cycles == sum(by_split.values())
    test_rows = {s: len(_rows(broken["folder"], s, "test")) - _expected_dropped(broken, s, "test") for s in SEEDS}
    assert {s: family.split(s, "test").shape[0] for s in SEEDS} == test_rows


# --------------------------------------------------------------------------- feature cache counts


def _namespace(root: Path, name: str = "model-a") -> FeatureNamespace:
    return FeatureNamespace(root, {"kind": "image", "model": {"model": name}})


def test_stale_temporary_files_are_removed_and_counted(tmp_path: Path) -> None:
    cache = _namespace(tmp_path)
    cache.put(["a"], np.ones((1, 2), dtype=np.float32))
    old = time.time() - STALE_TMP_SECONDS - 60
    stale = [cache.directory / f"shard{k}.safetensors.tmp-{k}" for k in range(3)]
    for path in stale:
        path.write_bytes(b"partial")
        os.utime(path, (old, old))
    fresh = cache.directory / "shard9.safetensors.tmp-9"  # a live writer's file: kept
    fresh.write_bytes(b"partial")
    reader = _namespace(tmp_path)
    assert reader.lookup(["a"])[1] == []
    assert reader.stats.stale_tmp_removed == len(stale) and reader.stats.shards_read == 1
    assert not any(p.exists() for p in stale) and fresh.exists()


def test_corrupt_and_foreign_shards_are_counted_and_named(tmp_path: Path) -> None:
    ours, theirs = _namespace(tmp_path, "model-a"), _namespace(tmp_path, "model-b")
    good = ours.put(["a"], np.ones((1, 2), dtype=np.float32))
    bad = ours.put(["b"], np.ones((1, 2), dtype=np.float32))
    bad.write_bytes(bad.read_bytes()[:-3])  # truncated: does not parse or fails its checksum
    copied = []
    for k, item in enumerate(("c", "d")):
        shard = theirs.put([item], np.full((1, 2), k, dtype=np.float32))
        copied.append(ours.directory / f"copied{k}.safetensors")
        shutil.copy(shard, copied[-1])  # another model's features in this model's folder
    reader = _namespace(tmp_path, "model-a")
    with pytest.warns(UserWarning):
        found, missing = reader.lookup(["a", "b", "c", "d"])
    assert set(found) == {"a"} and missing == ["b", "c", "d"]
    assert reader.stats.corrupt_shards == [str(bad)]
    assert sorted(reader.stats.foreign_shards) == sorted(str(p) for p in copied)
    assert reader.stats.shards_read == 1 and good.exists() and not bad.exists()
