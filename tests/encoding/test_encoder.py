"""The deduplicating cached encoder: exact call counts, resume after a fault, corrupt cache, bad inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding import backends
from clip_cycles.encoding.encoder import InjectedFault, ModelSpec, encode
from clip_cycles.settings import FAULT_ENV

TINY = TINY_OPEN_CLIP


class Counting:
    """Wraps a model and counts the rows it encodes; ``corrupt`` makes it misbehave."""

    def __init__(self, inner: Any, corrupt: str | None = None) -> None:
        self.inner, self.corrupt = inner, corrupt
        self.images = self.texts = 0
        self.calls: list[str] = []  # "image"/"text" per encoder call, in order

    def eval(self) -> Counting:
        return self

    def encode_image(self, pixels: Any) -> Any:
        self.images += len(pixels)
        self.calls.append("image")
        out = self.inner.encode_image(pixels)
        if self.corrupt == "nan":
            out[len(out) - 1, 0] = float("nan")
        if self.corrupt == "dims":
            out = out.unsqueeze(1)
        return out

    def encode_text(self, tokens: Any) -> Any:
        self.texts += len(tokens)
        self.calls.append("text")
        return self.inner.encode_text(tokens)


@pytest.fixture(scope="module")
def counting(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A registered backend 'counting_test' over a tiny random open_clip; state in the returned dict."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "open_clip_config.json").write_text(json.dumps(TINY))
    state: dict[str, Any] = {"loads": 0, "models": [], "corrupt": None}

    def loader(model_name: str, pretrained: str | None, cache_dir: str | None, device: str) -> Any:
        model, transform, tokenizer = backends.load_open_clip(f"local-dir:{folder}", None, cache_dir, device)
        state["loads"] += 1
        wrapped = Counting(model, state["corrupt"])
        state["models"].append(wrapped)
        return wrapped, transform, tokenizer

    backends.register_backend("counting_test", loader, replace=True)
    yield state
    backends.BACKENDS.unregister("counting_test")


def _items(world: Path, n: int = 10) -> tuple[list[ImageItem], list[str]]:
    files = sorted((world / "val2017").glob("*.jpg"))[:n]
    items = [ImageItem(f"val2017/{f.name}", f) for f in files]
    # Duplicates as cycles produce them, plus one key whose file has the same bytes as another.
    items = items + items[:4] + [ImageItem("copy/of/first.jpg", data=files[0].read_bytes())]
    captions = [f"a {c} shape number {i % 7}" for i, c in enumerate(["red", "blue", "green"] * 5)]
    return items, captions + captions[:5]


def _spec() -> ModelSpec:
    return ModelSpec("counting_test", "tiny", None, seed=0)


def _run(items: list[ImageItem], captions: list[str], cache: Path | None, state: dict[str, Any], **kw: Any) -> Any:
    before = len(state["models"])
    result = encode(items, captions, _spec(), cache, batch_size=4, num_workers=0, **kw)
    models = state["models"][before:]
    return result, sum(m.images for m in models), sum(m.texts for m in models), len(models)


def test_each_unique_item_is_encoded_once_then_served_from_cache(shapes_world: Path, counting: dict, tmp_path: Path) -> None:
    items, captions = _items(shapes_world)
    result, n_images, n_texts, loads = _run(items, captions, tmp_path / "cache", counting)
    assert (n_images, n_texts, loads) == (10, len(set(captions)), 1)
    stats = result.stats
    assert (stats.unique_images, stats.unique_image_contents, stats.unique_captions) == (11, 10, 15)
    assert (stats.encoded_images, stats.encoded_captions) == (10, 15)
    np.testing.assert_allclose(np.linalg.norm(result.image_features, axis=1), 1.0, rtol=1e-5)
    first, copy = result.image_rows["val2017/" + items[0].path.name], result.image_rows["copy/of/first.jpg"]
    np.testing.assert_array_equal(result.image_features[first], result.image_features[copy])

    again, n_images, n_texts, loads = _run(items, captions, tmp_path / "cache", counting)
    assert (n_images, n_texts, loads) == (0, 0, 0)  # not even loaded
    assert not again.stats.model_loaded and again.stats.cached_images == 10
    np.testing.assert_array_equal(again.image_features, result.image_features)
    np.testing.assert_array_equal(again.caption_features, result.caption_features)

    uncached, *_ = _run(items, captions, None, counting)
    np.testing.assert_allclose(uncached.image_features, result.image_features, atol=1e-6)


def test_interrupted_run_resumes_with_only_the_missing_items(
    shapes_world: Path, counting: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items, captions = _items(shapes_world)
    monkeypatch.setenv(FAULT_ENV, "2")  # stop after two stored batches of 4 images
    with pytest.raises(InjectedFault):
        _run(items, captions, tmp_path / "cache", counting)
    monkeypatch.delenv(FAULT_ENV)
    resumed, n_images, n_texts, _ = _run(items, captions, tmp_path / "cache", counting)
    assert (n_images, n_texts) == (10 - 8, 15)
    assert resumed.stats.cached_images == 8
    clean, *_ = _run(items, captions, None, counting)
    np.testing.assert_allclose(resumed.image_features, clean.image_features, atol=1e-6)


def test_truncated_cache_file_is_recomputed(shapes_world: Path, counting: dict, tmp_path: Path) -> None:
    items, captions = _items(shapes_world)
    first, *_ = _run(items, captions, tmp_path / "cache", counting)
    shards = sorted((tmp_path / "cache" / "features").rglob("*.safetensors"))
    image_shards = [s for s in shards if json.loads((s.parent / "namespace.json").read_text())["kind"] == "image"]
    victim = image_shards[0]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.warns(UserWarning, match="corrupt shard"):
        again, n_images, n_texts, _ = _run(items, captions, tmp_path / "cache", counting)
    assert n_texts == 0 and n_images in (2, 4)  # exactly the truncated batch
    assert again.stats.cache["corrupt_shards"] == [str(victim)]
    np.testing.assert_allclose(again.image_features, first.image_features, atol=1e-6)


def test_bad_images_are_named_or_counted(shapes_world: Path, counting: dict, tmp_path: Path) -> None:
    items, captions = _items(shapes_world, 5)
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    bad = [ImageItem("missing.jpg", tmp_path / "missing.jpg"), ImageItem("broken.jpg", broken)]
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        _run(items + bad, captions, None, counting)
    with pytest.raises(ValueError, match="'broken.jpg'.*cannot be decoded"):
        _run(items + bad[1:], captions, None, counting)
    result, n_images, _, _ = _run(items + bad, captions, tmp_path / "cache", counting, skip_bad_images=True)
    assert sorted(result.stats.bad_images) == ["broken.jpg", "missing.jpg"]
    assert result.stats.to_dict()["skipped_bad_images"] == 2
    assert "broken.jpg" not in result.image_rows and len(result.image_rows) == 6 and n_images == 5


@pytest.mark.parametrize(
    ("corrupt", "message"), [("nan", "NaN or infinite features for image"), ("dims", r"returned \(4, 1, 32\) for a batch of 4")]
)
def test_bad_model_outputs_are_errors(shapes_world: Path, counting: dict, corrupt: str, message: str) -> None:
    items, captions = _items(shapes_world, 4)
    counting["corrupt"] = corrupt
    try:
        with pytest.raises(ValueError, match=message):
            _run(items[:4], captions, None, counting)
    finally:
        counting["corrupt"] = None


def test_features_backend_bypasses_models_and_names_missing_items(tmp_path: Path) -> None:
    path = tmp_path / "f.npz"
    np.savez(
        path,
        image_features=np.eye(3, dtype=np.float32) * 2,
        caption_features=np.ones((2, 3), np.float32),
        image_keys=np.array(["a.jpg", "b.jpg", "c.jpg"]),
        caption_keys=np.array(["x", "y"]),
    )
    spec = ModelSpec("features", str(path), None)
    result = encode([ImageItem("b.jpg"), ImageItem("a.jpg")], ["y", "x", "y"], spec)
    np.testing.assert_allclose(result.image_features, [[0, 1, 0], [1, 0, 0]])
    assert result.caption_rows == {"y": 0, "x": 1}
    with pytest.raises(ValueError, match=r"has no image 'd\.jpg'"):
        encode([ImageItem("d.jpg")], ["x"], spec)
    shutil.rmtree(tmp_path)


def test_default_workers_decode_while_captions_encode_and_change_no_feature(
    shapes_world: Path, counting: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from clip_cycles.encoding import encoder

    items, captions = _items(shapes_world)
    monkeypatch.setattr(encoder, "available_cpus", lambda: 2)  # one decoding worker, as on a 2-core machine
    before = len(counting["models"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # 10 images in batches of 2: five image batches, the one caption batch runs between them.
        overlapped = encode(items, captions, _spec(), tmp_path / "cache", batch_size=2)
    assert not [w for w in caught if "worker" in str(w.message)]
    model = counting["models"][before]
    assert (model.images, model.texts) == (10, 15)
    sequential, *_ = _run(items, captions, None, counting)
    assert overlapped.image_rows == sequential.image_rows and overlapped.caption_rows == sequential.caption_rows
    np.testing.assert_allclose(overlapped.image_features, sequential.image_features, atol=1e-6)
    np.testing.assert_allclose(overlapped.caption_features, sequential.caption_features, atol=1e-6)


def test_first_caption_batch_runs_while_workers_decode_and_features_are_bitwise_equal(
    shapes_world: Path, counting: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.encoding import encoder

    items, captions = _items(shapes_world)
    monkeypatch.setattr(encoder, "available_cpus", lambda: 2)
    monkeypatch.setattr(encoder, "MIN_CAPTION_BATCH", 4)  # 15 captions: four caption batches over five image batches
    before = len(counting["models"])
    overlapped = encode(items, captions, _spec(), tmp_path / "cache", batch_size=2)
    calls = counting["models"][before].calls
    # The main process encodes a caption batch while the worker decodes the first image batch.
    assert calls[0] == "text" and calls.count("text") == 4 and calls.count("image") == 5
    assert calls[:2] == ["text", "image"]
    before = len(counting["models"])
    sequential = encode(items, captions, _spec(), tmp_path / "cache_sequential", batch_size=2, num_workers=0)
    assert counting["models"][before].calls[:5] == ["image"] * 5  # no workers: images first, as before
    assert overlapped.image_rows == sequential.image_rows and overlapped.caption_rows == sequential.caption_rows
    np.testing.assert_array_equal(overlapped.image_features, sequential.image_features)
    np.testing.assert_array_equal(overlapped.caption_features, sequential.caption_features)
