"""The on-disk feature cache: round trip, atomic shards, corrupt entries detected and dropped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.encoding.feature_cache import FeatureNamespace, namespaces_for, read_manifest, write_manifest
from clip_cycles.fingerprints import stable_repr, text_hash

DESC = {"kind": "image", "model": {"backend": "test", "model": "m"}, "preprocessing": "p", "precision": "fp32"}


def _features(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)


def test_round_trip_in_a_fresh_process_view(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    items = [f"item{i}" for i in range(5)]
    feats = _features(5)
    ns.put(items[:3], feats[:3])
    ns.put(items[3:], feats[3:])
    fresh = FeatureNamespace(tmp_path, DESC)  # reads the shards from disk
    found, missing = fresh.lookup(items + ["other"])
    assert missing == ["other"]
    np.testing.assert_array_equal(np.stack([found[i] for i in items]), feats)
    assert fresh.stats.shards_read == 2 and fresh.stats.hits == 5 and fresh.stats.misses == 1
    assert json.loads((ns.directory / "namespace.json").read_text()) == DESC
    assert not [p for p in ns.directory.iterdir() if ".tmp-" in p.name]


def test_namespace_depends_on_every_key_part(tmp_path: Path) -> None:
    names = set()
    for change in (
        {},
        {"preprocessing": "q"},
        {"precision": "amp"},
        {"kind": "text"},
        {"model": {"backend": "test", "model": "m2"}},
    ):
        names.add(FeatureNamespace(tmp_path, {**DESC, **change}).name)
    assert len(names) == 5


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_shard_is_detected_deleted_and_reported(tmp_path: Path, damage: str) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    good = ns.put(["a", "b"], _features(2, 1))
    bad = ns.put(["c", "d"], _features(2, 2))
    data = bad.read_bytes()
    if damage == "truncate":
        bad.write_bytes(data[: len(data) - 9])
    elif damage == "flip":
        bad.write_bytes(data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:])
    else:
        bad.write_bytes(b"not a safetensors file")
    fresh = FeatureNamespace(tmp_path, DESC)
    with pytest.warns(UserWarning, match="corrupt shard"):
        found, missing = fresh.lookup(["a", "b", "c", "d"])
    assert sorted(found) == ["a", "b"] and missing == ["c", "d"]
    assert fresh.stats.corrupt_shards == [str(bad)]
    assert good.exists() and not bad.exists()


def test_leftover_temporary_files_are_ignored(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a"], _features(1))
    (ns.directory / "x.safetensors.tmp-1-2").write_bytes(b"half written")
    found, missing = FeatureNamespace(tmp_path, DESC).lookup(["a"])
    assert list(found) == ["a"] and missing == []


def test_non_finite_features_are_refused(tmp_path: Path) -> None:
    feats = _features(2)
    feats[1, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        FeatureNamespace(tmp_path, DESC).put(["a", "b"], feats)


def test_manifest_and_stable_repr(tmp_path: Path) -> None:
    model = {"backend": "open_clip", "model": "m", "seed": 0}
    assert read_manifest(tmp_path, model) is None
    write_manifest(tmp_path, model, {"image": "T", "text": "K", "precision": "fp32"})
    assert read_manifest(tmp_path, model)["preprocessing"]["image"] == "T"
    spaces = namespaces_for(tmp_path, model, {"image": "T", "text": "K", "precision": "fp32"})
    assert spaces["image"].name != spaces["text"].name

    def local() -> None: ...

    assert "0x" not in stable_repr([local]) and stable_repr([local]) == stable_repr([local])
    assert text_hash("a") != text_hash("b")
