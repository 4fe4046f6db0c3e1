"""The feature cache's shards, namespaces, counts and manifests against values made in the test.

Checksums, namespace names and shard file names are recomputed here with hashlib and
hand-written JSON; crafted shards (foreign, wrong dtype or width, swapped header,
non-finite) are written with safetensors directly and a checksum of the test's own,
so each refusal is seen for its own reason (the mutation score of
``clip_cycles/encoding/feature_cache.py`` rests on this file and ``test_feature_cache.py``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.encoding import feature_cache
from clip_cycles.encoding.feature_cache import (
    STALE_TMP_SECONDS,
    CacheStats,
    FeatureNamespace,
    model_key,
    namespaces_for,
    read_manifest,
    shard_checksum,
    write_manifest,
)
from clip_cycles.encoding.vlm_scores import PairScoreCache
from clip_cycles.outputs import OutputError

DESC = {"kind": "image", "model": {"backend": "test", "model": "m"}, "preprocessing": "p", "precision": "fp32"}
COMPACT = (",", ":")


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=COMPACT, ensure_ascii=False)


def _name(description: Any, length: int = 24) -> str:
    return hashlib.sha256(_json(description).encode()).hexdigest()[:length]


def _checksum(items: list[str], features: np.ndarray, namespace: str | None) -> str:
    header: dict[str, Any] = {"items": items, "shape": list(features.shape), "dtype": str(features.dtype)}
    if namespace is not None:
        header["namespace"] = namespace
    return hashlib.sha256(_json(header).encode() + b"\x00" + np.ascontiguousarray(features).tobytes()).hexdigest()


def _write_shard(path: Path, items: list[str], features: np.ndarray, meta: dict[str, str], tensor: str = "features") -> Path:
    from safetensors.numpy import save

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(save({tensor: features}, metadata=meta))
    return path


def _crafted(ns: FeatureNamespace, items: list[str], features: np.ndarray, meta: dict[str, str | None] | None = None) -> Path:
    """A shard in ``ns``'s folder with the test's own header (fields given as None are left out)."""
    header: dict[str, str | None] = {"items": json.dumps(items), "namespace": ns.name,
                                     "checksum": _checksum(items, features, ns.name)}  # fmt: skip
    header.update(meta or {})
    kept = {k: v for k, v in header.items() if v is not None}
    return _write_shard(ns.directory / "crafted.safetensors", items, features, kept, tensor=ns.tensor)


def _rows(n: int, seed: int = 0, width: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, width)).astype(np.float32)


# --- checksums and names ---------------------------------------------------------------------------------------


def test_shard_checksum_covers_the_header_and_the_bytes() -> None:
    features = _rows(2)
    assert shard_checksum(["a", "b"], features, "ns1") == _checksum(["a", "b"], features, "ns1")
    assert shard_checksum(["a", "b"], features) == _checksum(["a", "b"], features, None)
    assert shard_checksum(["a", "b"], features, "ns1") != shard_checksum(["b", "a"], features, "ns1")
    assert shard_checksum(["a", "b"], features.astype(np.float64), "ns1") == _checksum(
        ["a", "b"], features.astype(np.float64), "ns1"
    )
    wide = np.arange(8, dtype=np.float32).reshape(4, 2)
    assert shard_checksum(list("abcd"), wide.T.T, "x") == _checksum(list("abcd"), wide, "x")
    assert shard_checksum(["a", "b"], wide[:, ::-1][:2], "x") == _checksum(
        ["a", "b"], np.ascontiguousarray(wide[:, ::-1][:2]), "x"
    )
    assert shard_checksum(["a"], np.zeros((1, 8), np.float32)) != shard_checksum(["a"], np.zeros((2, 4), np.float32))


def test_foreign_shard_keeps_a_string_namespace_only() -> None:
    assert feature_cache._ForeignShard("abc").namespace == "abc"
    assert feature_cache._ForeignShard(None).namespace is None
    assert feature_cache._ForeignShard(3).namespace is None
    assert str(feature_cache._ForeignShard("abc")) == "namespace 'abc'"


def test_cache_stats_report_every_count() -> None:
    stats = CacheStats(shards_read=1, hits=2, misses=3, shards_written=4, corrupt_shards=["c"], stale_tmp_removed=5,
                       foreign_shards=["f", "g"])  # fmt: skip
    assert stats.to_dict() == {"shards_read": 1, "hits": 2, "misses": 3, "shards_written": 4, "corrupt_shards": ["c"],
                               "stale_tmp_removed": 5, "foreign_shards": ["f", "g"]}  # fmt: skip
    stats.to_dict()["corrupt_shards"].append("x")
    assert stats.corrupt_shards == ["c"]  # a copy: a report cannot edit the counts


def test_namespace_name_folder_and_marker(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    assert ns.name == _name(DESC)
    assert ns.directory == tmp_path / "features" / _name(DESC)
    ns.put(["a"], _rows(1))
    assert (ns.directory / "namespace.json").read_text(encoding="utf-8") == _json(DESC) + "\n"
    scores = PairScoreCache(tmp_path, DESC)
    assert scores.directory == tmp_path / "pair_scores" / _name(DESC)


def test_namespaces_for_keys_each_kind_by_its_own_preprocessing(tmp_path: Path) -> None:
    model = {"backend": "b", "model": "m"}
    spaces = namespaces_for(tmp_path, model, {"image": "resize", "text": "tok", "precision": "fp16"})
    assert list(spaces) == ["image", "text"]
    assert spaces["image"].description == {"kind": "image", "model": model, "preprocessing": "resize", "precision": "fp16"}
    assert spaces["text"].description == {"kind": "text", "model": model, "preprocessing": "tok", "precision": "fp16"}
    assert spaces["image"].name == _name(spaces["image"].description)
    only = namespaces_for(tmp_path, model, {}, kinds=("text",))
    assert list(only) == ["text"]
    assert only["text"].description == {"kind": "text", "model": model, "preprocessing": None, "precision": None}


# --- put ------------------------------------------------------------------------------------------------------


def test_put_writes_a_shard_named_by_its_items_with_a_checked_header(tmp_path: Path) -> None:
    from safetensors import safe_open

    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(3, width=5).astype(np.float64)  # stored as float32
    path = ns.put(["x", "y", "z"], rows)
    assert path == ns.directory / f"{_name(['x', 'y', 'z'], 32)}.safetensors"
    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata()
        stored = handle.get_tensor("features")
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(stored, rows.astype(np.float32))
    assert meta == {"items": '["x", "y", "z"]', "namespace": ns.name, "checksum": _checksum(["x", "y", "z"], stored, ns.name)}
    assert ns.stats.shards_written == 1
    ns.put(["w"], _rows(1, width=5))
    assert ns.stats.shards_written == 2 and sorted(
        p.name for p in ns.directory.iterdir() if p.suffix == ".safetensors"
    ) == sorted([f"{_name(['x', 'y', 'z'], 32)}.safetensors", f"{_name(['w'], 32)}.safetensors"])


@pytest.mark.parametrize(
    ("items", "rows"),
    [(["a", "b"], np.zeros((3, 2))), (["a"], np.zeros(2)), (["a"], np.zeros((1, 2, 1))), (["a", "b"], np.zeros((2, 3)))],
)
def test_put_refuses_a_batch_that_does_not_fit(items: list[str], rows: np.ndarray, tmp_path: Path) -> None:
    scores = PairScoreCache(tmp_path, DESC)  # rows of width 2
    with pytest.raises(
        ValueError, match=f"pair score cache: batch of shape {re.escape(str(rows.shape))} does not fit {len(items)} items"
    ):
        scores.put(items, rows)
    assert not scores.directory.exists()


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_put_refuses_non_finite_values(value: float, tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(2)
    rows[1, 2] = value
    with pytest.raises(ValueError, match="feature cache: refusing to cache non-finite values"):
        ns.put(["a", "b"], rows)
    assert ns.stats.shards_written == 0


def _disk_full(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_refused_write_names_the_shard_or_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a"], _rows(1))
    monkeypatch.setattr(feature_cache, "atomic_write_bytes", _disk_full)
    shard = ns.directory / f"{_name(['b'], 32)}.safetensors"
    with pytest.raises(OutputError, match=f"no space left on the device while writing {shard}; free space there"):
        ns.put(["b"], _rows(1))
    assert ns.stats.shards_written == 1
    fresh = FeatureNamespace(tmp_path, {**DESC, "kind": "text"})
    with pytest.raises(OutputError, match=f"while writing {fresh.directory}; .*--cache-dir DIR"):
        fresh.put(["b"], _rows(1))
    with pytest.raises(OutputError, match=f"while writing {tmp_path / 'models' / (_name(DESC) + '.json')}; free space there"):
        write_manifest(tmp_path, DESC, {"image": "p"})


# --- load and lookup -----------------------------------------------------------------------------------------------


def test_lookup_counts_hits_and_misses_of_unique_items_in_order(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(3)
    ns.put(["a", "b", "c"], rows)
    fresh = FeatureNamespace(tmp_path, DESC)
    found, missing = fresh.lookup(["z", "b", "a", "b", "y", "z", "x"])
    assert missing == ["z", "y", "x"]
    assert list(found) == ["b", "a"]
    np.testing.assert_array_equal(found["a"], rows[0])
    np.testing.assert_array_equal(found["b"], rows[1])
    assert (fresh.stats.hits, fresh.stats.misses, fresh.stats.shards_read) == (2, 3, 1)
    fresh.lookup(["c", "q"])
    assert (fresh.stats.hits, fresh.stats.misses, fresh.stats.shards_read) == (3, 4, 1)  # shards read once


def test_load_reads_once_and_a_put_after_it_is_served(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a"], _rows(1, 1))
    assert list(ns.load()) == ["a"]
    other = FeatureNamespace(tmp_path, DESC)
    other.put(["b"], _rows(1, 2))  # written by another process after the first load
    assert list(ns.load()) == ["a"] and ns.stats.shards_read == 1
    mine = _rows(1, 3)
    ns.put(["c"], mine)
    np.testing.assert_array_equal(ns.load()["c"], mine[0])
    ns.put(["a"], _rows(1, 4))  # an item already held keeps its first row
    np.testing.assert_array_equal(ns.load()["a"], _rows(1, 1)[0])
    unloaded = FeatureNamespace(tmp_path / "other", DESC)
    unloaded.put(["d"], _rows(1))
    assert unloaded._table is None  # a put does not load the shards


def test_an_item_in_two_shards_is_served_from_the_first_shard_by_name(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    first, second = _rows(2, 5), _rows(2, 6)
    paths = {ns.put(["a", "b"], first): first, ns.put(["b", "a"], second): second}
    winner = paths[min(paths)]
    order = ["a", "b"] if winner is first else ["b", "a"]
    table = FeatureNamespace(tmp_path, DESC).load()
    np.testing.assert_array_equal(table["a"], winner[order.index("a")])
    np.testing.assert_array_equal(table["b"], winner[order.index("b")])


def test_stale_temporaries_are_removed_and_counted_fresh_ones_kept(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a"], _rows(1))
    stale = ns.directory / "x.safetensors.tmp-1-2"
    stale.write_bytes(b"half")
    old = time.time() - STALE_TMP_SECONDS - 5
    os.utime(stale, (old, old))
    almost = ns.directory / "y.safetensors.tmp-1-3"
    almost.write_bytes(b"half")
    recent = time.time() - STALE_TMP_SECONDS + 60
    os.utime(almost, (recent, recent))
    fresh = FeatureNamespace(tmp_path, DESC)
    assert list(fresh.load()) == ["a"]
    assert fresh.stats.stale_tmp_removed == 1 and not stale.exists() and almost.exists()
    assert fresh.stats.corrupt_shards == [] and fresh.stats.shards_read == 1
    assert STALE_TMP_SECONDS == 600.0


def test_other_files_in_the_folder_are_not_shards(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a"], _rows(1))
    (ns.directory / "notes.txt").write_text("mine")
    fresh = FeatureNamespace(tmp_path, DESC)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(fresh.load()) == ["a"]
    assert (ns.directory / "notes.txt").exists() and fresh.stats.corrupt_shards == []
    assert FeatureNamespace(tmp_path / "empty", DESC).load() == {}


def _refused(ns: FeatureNamespace, path: Path, kind: str, words: str) -> None:
    fresh = type(ns)(ns.directory.parent.parent, ns.description)
    with pytest.warns(UserWarning, match=words):
        table = fresh.load()
    assert table == {} and not path.exists() and fresh.stats.shards_read == 0
    listed = fresh.stats.foreign_shards if kind == "foreign" else fresh.stats.corrupt_shards
    other = fresh.stats.corrupt_shards if kind == "foreign" else fresh.stats.foreign_shards
    assert listed == [str(path)] and other == []


def test_a_shard_copied_from_another_namespace_is_refused_as_foreign(tmp_path: Path) -> None:
    mine, theirs = FeatureNamespace(tmp_path, DESC), FeatureNamespace(tmp_path, {**DESC, "precision": "fp16"})
    shard = theirs.put(["a"], _rows(1))
    copied = mine.directory / shard.name
    mine.directory.mkdir(parents=True)
    copied.write_bytes(shard.read_bytes())
    _refused(mine, copied, "foreign", f"feature cache: shard {copied} belongs to namespace {theirs.name}, not {mine.name}; "
             "refused, its items will be re-encoded")  # fmt: skip


def test_a_shard_that_names_no_namespace_is_refused_as_foreign(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(1)
    path = _crafted(ns, ["a"], rows, {"namespace": None, "checksum": _checksum(["a"], rows, None)})
    _refused(ns, path, "foreign", f"shard {path} belongs to no namespace, not {ns.name}")


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("dtype", r"shape \(2, 4\) / dtype float64 does not fit 2 items"),
        ("rows", r"shape \(3, 4\) / dtype float32 does not fit 2 items"),
        ("swapped", r"checksum mismatch \(header or features changed\)"),
        ("nonfinite", "non-finite values"),
        ("no checksum", "'checksum'"),
        ("no items", "'items'"),
        ("tensor name", ".*features.*"),
    ],
)
def test_a_shard_that_does_not_hold_its_header_is_corrupt(case: str, words: str, tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    items, rows = ["a", "b"], _rows(2)
    if case == "dtype":
        path = _crafted(ns, items, rows.astype(np.float64))
    elif case == "rows":
        path = _crafted(ns, items, _rows(3))
    elif case == "swapped":
        path = _crafted(ns, ["b", "a"], rows, {"checksum": _checksum(items, rows, ns.name)})
    elif case == "nonfinite":
        rows[0, 0] = np.inf
        path = _crafted(ns, items, rows)
    elif case == "no checksum":
        path = _crafted(ns, items, rows, {"checksum": None})
    elif case == "no items":
        path = _crafted(ns, items, rows, {"items": None})
    else:
        header = {"items": json.dumps(items), "namespace": ns.name, "checksum": _checksum(items, rows, ns.name)}
        path = _write_shard(ns.directory / "crafted.safetensors", items, rows, header, tensor="other")
    _refused(ns, path, "corrupt", rf"feature cache: corrupt shard {path} \({words}\); its items will be re-encoded$")


def test_a_pair_score_shard_of_the_wrong_width_is_corrupt(tmp_path: Path) -> None:
    scores = PairScoreCache(tmp_path, DESC)
    rows = np.zeros((2, 3), np.float64)
    path = _crafted(scores, ["a", "b"], rows)  # a checksum that holds: only the width is wrong
    _refused(scores, path, "corrupt", r"pair score cache: corrupt shard .*shape \(2, 3\).*; its pairs will be rescored")


def test_a_valid_crafted_shard_is_read(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(2)
    _crafted(ns, ["a", "b"], rows)
    table = FeatureNamespace(tmp_path, DESC).load()
    np.testing.assert_array_equal(np.stack([table["a"], table["b"]]), rows)


# --- manifests ---------------------------------------------------------------------------------------------------------


def test_manifest_round_trip_and_unreadable_manifests(tmp_path: Path) -> None:
    assert model_key(DESC) == _name(DESC)
    path = tmp_path / "models" / f"{_name(DESC)}.json"
    assert read_manifest(tmp_path, DESC) is None
    write_manifest(tmp_path, DESC, {"image": "p", "text": "t"})
    assert path.read_text(encoding="utf-8") == _json({"model": DESC, "preprocessing": {"image": "p", "text": "t"}}) + "\n"
    assert read_manifest(tmp_path, DESC) == {"model": DESC, "preprocessing": {"image": "p", "text": "t"}}
    for text in ("{not json", "[1, 2]", json.dumps({"model": {**DESC, "precision": "fp16"}, "preprocessing": {}})):
        path.write_text(text, encoding="utf-8")
        assert read_manifest(tmp_path, DESC) is None, text
    path.write_bytes(b"\xff\xfe not utf-8")  # a decoding error is a miss, not a traceback
    assert read_manifest(tmp_path, DESC) is None
    good = _json({"model": DESC, "preprocessing": {"image": "p", "text": "t"}})
    path.write_text(good + " " * (feature_cache.MAX_MANIFEST_BYTES - len(good)), encoding="utf-8")  # at the bound: read
    assert read_manifest(tmp_path, DESC) == {"model": DESC, "preprocessing": {"image": "p", "text": "t"}}
    path.write_text(good + " " * (feature_cache.MAX_MANIFEST_BYTES + 1 - len(good)), encoding="utf-8")  # past it: not
    assert read_manifest(tmp_path, DESC) is None
    path.unlink()
    if hasattr(os, "mkfifo"):
        os.mkfifo(path)  # no writer: a plain read would wait forever
        assert read_manifest(tmp_path, DESC) is None
        path.unlink()
    path.mkdir()  # a folder where the file should be: unreadable, not a traceback
    assert read_manifest(tmp_path, DESC) is None


def test_lookup_logs_how_many_items_came_from_the_cache(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    ns.put(["a", "b"], _rows(2))
    caplog.set_level(logging.DEBUG, logger="clip_cycles")
    FeatureNamespace(tmp_path, DESC).lookup(["a", "b", "c", "a", "d", "e"])
    records = [r for r in caplog.records if r.name == "clip_cycles.encoding.feature_cache"]
    assert [r.getMessage() for r in records] == [f"feature cache {ns.directory}: 2 of 5 items from the cache"]
    assert records[0].levelno == logging.DEBUG


def test_every_stale_temporary_is_counted_and_none_ends_the_reading(tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(2)
    ns.put(["a"], rows[:1])
    ns.put(["b"], rows[1:])
    old = time.time() - STALE_TMP_SECONDS - 5
    # Names that sort before every shard (hex digests): each is met before the shards it must not hide.
    for name in ("!a.safetensors.tmp-1-2", "!b.safetensors.tmp-1-3"):
        (ns.directory / name).write_bytes(b"half")
        os.utime(ns.directory / name, (old, old))
    (ns.directory / "!c.safetensors.tmp-1-4").write_bytes(b"in progress")
    fresh = FeatureNamespace(tmp_path, DESC)
    table = fresh.load()
    assert sorted(table) == ["a", "b"] and fresh.stats.shards_read == 2
    assert fresh.stats.stale_tmp_removed == 2
    assert sorted(p.name for p in ns.directory.iterdir() if ".tmp-" in p.name) == ["!c.safetensors.tmp-1-4"]


@pytest.mark.parametrize("kind", ["foreign", "corrupt"])
def test_a_refused_shard_does_not_end_the_reading(kind: str, tmp_path: Path) -> None:
    ns = FeatureNamespace(tmp_path, DESC)
    rows = _rows(2)
    ns.put(["a"], rows[:1])
    ns.put(["b"], rows[1:])
    first = ns.directory / "!first.safetensors"  # sorts before both shards
    if kind == "foreign":
        other = FeatureNamespace(tmp_path, {**DESC, "kind": "text"})
        first.write_bytes(other.put(["z"], _rows(1)).read_bytes())
    else:
        first.write_bytes(b"garbage")
    fresh = FeatureNamespace(tmp_path, DESC)
    with pytest.warns(UserWarning):
        table = fresh.load()
    assert sorted(table) == ["a", "b"] and fresh.stats.shards_read == 2
    refused = fresh.stats.foreign_shards if kind == "foreign" else fresh.stats.corrupt_shards
    assert refused == [str(first)] and not first.exists()


def test_a_shard_is_written_without_fsync_because_every_read_checks_it(tmp_path, monkeypatch) -> None:
    """The namespace marker is durable; the checksummed shards are not synced (a torn one is re-encoded)."""
    from clip_cycles import outputs
    from clip_cycles.encoding.feature_cache import FeatureNamespace

    synced: list[int] = []
    real_fsync = outputs.os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    namespace = FeatureNamespace(tmp_path / "cache", {"kind": "image"})
    namespace.put(["h1"], np.ones((1, 3), dtype=np.float32))
    marker_syncs = len(synced)
    assert marker_syncs >= 1  # the first put writes the namespace marker, durably
    namespace.put(["h2", "h3"], np.zeros((2, 3), dtype=np.float32))
    assert len(synced) == marker_syncs and len(list((tmp_path / "cache").rglob("*.safetensors"))) == 2
