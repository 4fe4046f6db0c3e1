"""Model backends: open_clip (config, checkpoint weights-only), hf auto classes, precomputed features."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from tiny_models import tiny_hf_clip as _tiny_hf_clip

from clip_cycles.encoding import backends

TINY_OPEN_CLIP = {
    "model_cfg": {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
    },
    "preprocess_cfg": {},
}


@pytest.fixture(scope="module")
def tiny_open_clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tiny_open_clip")
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    return f"local-dir:{folder}"


def _image():
    from PIL import Image

    return Image.fromarray(np.random.default_rng(0).integers(0, 255, (40, 40, 3), dtype=np.uint8))


def test_registry_lists_builtins_and_clip_benchmark_types() -> None:
    names = backends.available_backends()
    assert {"open_clip", "hf", "features", "ja_clip"} <= set(names)
    with pytest.raises(ValueError, match="unknown model backend 'nope'.*open_clip"):
        backends.get_backend("nope")


def test_registered_backend_is_used_and_never_replaced_silently() -> None:
    def loader(model_name, pretrained, cache_dir, device):
        return ("model", model_name, pretrained)

    backends.register_backend("unit_test_backend", loader)
    try:
        assert backends.get_backend("unit_test_backend")("m", "p", None, "cpu") == ("model", "m", "p")
        with pytest.raises(ValueError, match="already registered"):
            backends.register_backend("unit_test_backend", loader)
        with pytest.raises(ValueError, match="already registered"):
            backends.register_backend("open_clip", loader)
    finally:
        backends.BACKENDS.unregister("unit_test_backend")


def test_open_clip_random_init_and_checkpoint_round_trip(tiny_open_clip: str, tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    model, transform, tokenizer = backends.load_model("open_clip", tiny_open_clip, "none")
    pixels = transform(_image()).unsqueeze(0)
    tokens = tokenizer(["a red circle"])
    with torch.no_grad():
        reference = model.encode_image(pixels), model.encode_text(tokens)
    assert reference[0].shape == (1, 32) and reference[1].shape == (1, 32)

    checkpoint = tmp_path / "weights.pt"
    torch.save(model.state_dict(), checkpoint)
    torch.manual_seed(1)  # a different random init, overwritten by the checkpoint
    loaded, _, _ = backends.load_model("open_clip", tiny_open_clip.replace("local-dir:", "local-dir:"), None)
    with torch.no_grad():
        assert not torch.equal(loaded.encode_image(pixels), reference[0])
    # A named OpenCLIP config with a checkpoint path: same numbers as the saved model.
    import open_clip

    config = Path(tiny_open_clip.removeprefix("local-dir:")) / "cycles-test-tiny.json"
    config.write_text(json.dumps(TINY_OPEN_CLIP["model_cfg"]))
    open_clip.add_model_config(config)
    restored, _, _ = backends.load_model("open_clip", "cycles-test-tiny", str(checkpoint))
    with torch.no_grad():
        assert torch.equal(restored.encode_image(pixels), reference[0])
        assert torch.equal(restored.encode_text(tokens), reference[1])


def test_checkpoints_with_pickled_objects_are_refused(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "evil.pt"
    # An arbitrary Python object inside the checkpoint: only a full unpickle could rebuild it.
    torch.save({"state_dict": {"w": torch.zeros(1)}, "extra": Fraction(1, 3)}, path)
    with pytest.raises(ValueError, match="weights-only"):
        backends.load_weights_only(path)


def test_unknown_open_clip_model_is_an_error_not_a_fallback() -> None:
    with pytest.raises(ValueError, match="unknown OpenCLIP model 'ViT-Nope'"):
        backends.load_open_clip("ViT-Nope", None)


def test_hf_backend_loads_a_local_clip_through_auto_classes(tmp_path: Path) -> None:
    import torch
    from transformers import CLIPModel

    folder = _tiny_hf_clip(tmp_path)
    model, transform, tokenizer = backends.load_model("hf", str(folder), None)
    pixels = transform(_image())
    assert tuple(pixels.shape) == (3, 32, 32)
    tokens = tokenizer(["a red circle", "a"])
    assert tuple(tokens.shape) == (2, 24)  # fixed-length padding: batch-independent tokens
    reference = CLIPModel.from_pretrained(folder).eval()
    with torch.no_grad():
        image = model.encode_image(pixels.unsqueeze(0))
        text = model.encode_text(tokens)
        expected_image = reference.get_image_features(pixel_values=pixels.unsqueeze(0))
        expected_text = reference.get_text_features(input_ids=tokens)
    expected_image = getattr(expected_image, "pooler_output", expected_image)
    expected_text = getattr(expected_text, "pooler_output", expected_text)
    assert image.shape == (1, 16) and text.shape == (2, 16)
    torch.testing.assert_close(image, expected_image)
    torch.testing.assert_close(text, expected_text)


def _write_features(path: Path, images: np.ndarray, captions: np.ndarray, image_keys: list[str], caption_keys: list[str]) -> Path:
    if path.suffix == ".npz":
        np.savez(
            path,
            image_features=images,
            caption_features=captions,
            image_keys=np.array(image_keys),
            caption_keys=np.array(caption_keys),
        )
    else:
        from safetensors.numpy import save_file

        save_file(
            {"image_features": images, "caption_features": captions},
            str(path),
            metadata={"image_keys": json.dumps(image_keys), "caption_keys": json.dumps(caption_keys)},
        )
    return path


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_features_backend_looks_up_by_key(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(0)
    images, captions = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
    path = _write_features(tmp_path / f"f{suffix}", images, captions, ["a.jpg", "b.jpg", "c.jpg"], ["x", "y"])
    table, transform, tokenizer = backends.load_model("features", str(path), None)
    np.testing.assert_array_equal(table.lookup_images(["c.jpg", "a.jpg"]), images[[2, 0]])
    np.testing.assert_array_equal(table.lookup_captions(["y"]), captions[[1]])
    with pytest.raises(ValueError, match=r"has no image 'd\.jpg'"):
        table.lookup_images(["d.jpg"])
    with pytest.raises(ValueError, match="has no caption 'z'"):
        table.lookup_captions(["z"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("nan", r"row 1 \('b.jpg'\) has a NaN"),
        ("dims", "image_features have 4 dims but caption_features 5"),
        ("rows", "has 2 rows but 3 keys"),
        ("repeat", "repeats 'a.jpg'"),
    ],
)
def test_bad_features_files_are_named_errors(tmp_path: Path, change: str, message: str) -> None:
    rng = np.random.default_rng(0)
    images, captions = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
    keys = ["a.jpg", "b.jpg", "c.jpg"]
    if change == "nan":
        images[1, 2] = np.nan
    elif change == "dims":
        captions = rng.normal(size=(2, 5)).astype(np.float32)
    elif change == "rows":
        images = images[:2]
    else:
        keys = ["a.jpg", "a.jpg", "c.jpg"]
    path = _write_features(tmp_path / "f.npz", images, captions, keys, ["x", "y"])
    with pytest.raises(ValueError, match=message):
        backends.read_features_file(path)


def test_features_npz_with_object_arrays_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.npz"
    np.savez(
        path,
        image_features=np.zeros((1, 2), np.float32),
        caption_features=np.zeros((1, 2), np.float32),
        image_keys=np.array([{"pickled": 1}], dtype=object),
        caption_keys=np.array(["x"]),
    )
    with pytest.raises(ValueError, match="pickle"):
        backends.read_features_file(path)


def test_a_registered_backend_without_a_tag_is_named_by_its_identity_not_random_init() -> None:
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.page_data import model_name

    def loader(model_name, pretrained, cache_dir, device):
        return ("model", model_name, pretrained)

    backends.register_backend("unit_test_source", loader)
    try:
        source = ModelSpec("unit_test_source", "m", None).source()
        assert source["backend"] == "unit_test_source" and len(source["weights_sha256"]) == 64
        assert model_name("m", "", source["backend"], source["weights_sha256"]) == f"m (weights {source['weights_sha256'][:12]})"
        # A random-init OpenCLIP model names no weights, and is the only one labelled so.
        plain = ModelSpec("open_clip", "ViT-B-32", None).source()
        assert plain == {"backend": "open_clip"}
        assert model_name("ViT-B-32", "", plain["backend"], None) == "ViT-B-32 (random init)"
    finally:
        backends.BACKENDS.unregister("unit_test_source")
