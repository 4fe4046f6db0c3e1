"""Image-only backends (timm, hf_vision) on tiny random-init models saved by the test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from things_runner_root import write_things_root
from tiny_vision_models import write_tiny_hf_vision, write_tiny_timm_vit


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("vision_models")
    return {"timm": str(write_tiny_timm_vit(root / "timm_vit")), "hf_vision": str(write_tiny_hf_vision(root / "dino"))}


@pytest.fixture(scope="module")
def things(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("things_vision")
    write_things_root(root)
    return root


def _pixels(seed: int = 0):
    import torch

    return torch.from_numpy(np.random.default_rng(seed).normal(size=(3, 3, 32, 32)).astype(np.float32))


def test_timm_embeddings_are_the_models_pooled_features(models: dict[str, str]) -> None:
    import timm
    import torch
    from safetensors.torch import load_file, save_file

    from clip_cycles.encoding.backends import load_model

    model, transform, tokenizer = load_model("timm", models["timm"], None)
    assert tokenizer is None and "32" in repr(transform)
    reference = timm.create_model(
        "vit_tiny_patch16_224", img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=0
    )
    reference.load_state_dict(load_file(str(Path(models["timm"]) / "model.safetensors")))
    reference.eval()
    with torch.no_grad():
        expected = reference(_pixels())  # num_classes=0: the pooled pre-logits features
        got = model.encode_image(_pixels())
    assert got.shape == (3, 32)
    torch.testing.assert_close(got, expected)
    # A checkpoint file for a timm model name; one of another shape is refused by name.
    with pytest.raises(ValueError, match="does not fit timm model"):
        load_model("timm", "vit_tiny_patch16_224", str(Path(models["timm"]) / "model.safetensors"))
    torch.manual_seed(1)
    full = timm.create_model("vit_tiny_patch16_224", num_classes=0).eval()
    save_file(full.state_dict(), str(Path(models["timm"]).parent / "full.safetensors"))
    by_name, _, _ = load_model("timm", "vit_tiny_patch16_224", str(Path(models["timm"]).parent / "full.safetensors"))
    big = torch.nn.functional.interpolate(_pixels(), size=224)
    with torch.no_grad():
        torch.testing.assert_close(by_name.encode_image(big), full(big))
    with pytest.raises(ValueError, match="unknown timm model"):
        load_model("timm", "no_such_model_xyz", None)


def test_hf_vision_embedding_is_the_dinov2_pooled_cls(models: dict[str, str]) -> None:
    import torch
    from transformers import Dinov2Model

    from clip_cycles.encoding.backends import load_model

    model, _, _ = load_model("hf_vision", models["hf_vision"], None)
    reference = Dinov2Model.from_pretrained(models["hf_vision"]).eval()
    with torch.no_grad():
        expected = reference(pixel_values=_pixels()).last_hidden_state[:, 0]  # the normed CLS token
        got = model.encode_image(_pixels())
    torch.testing.assert_close(got, expected)


def test_cycle_task_with_an_image_only_model_is_a_clear_error(
    models: dict[str, str], shapes_cycles: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from clip_cycles.cli import main

    for backend in ("timm", "hf_vision"):
        code = main(
            [
                "eval",
                "--task",
                "cycles/shapes_box_left_right",
                "--model-type",
                backend,
                "--model",
                models[backend],
                "--dataset-root",
                str(shapes_cycles),
                "--no-cache",
                "--device",
                "cpu",
                "--output",
                str(tmp_path / "r.json"),
                "--seeds",
                "0",
                "--num-workers",
                "0",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2
        assert f"model backend '{backend}'" in err and "image embeddings only" in err
    assert not (tmp_path / "r.json").exists()


def test_splits_runs_with_timm_and_hf_vision_split_embeddings(models: dict[str, str], things: Path, tmp_path: Path) -> None:
    from clip_cycles.attributes.concept_features import embed_concepts
    from clip_cycles.attributes.concepts import load_things
    from clip_cycles.cli import main
    from clip_cycles.encoding.encoder import ModelSpec

    common = [
        "splits",
        "--things-root",
        str(things),
        "--strategies",
        "random",
        "clustering",
        "--k",
        "20",
        "--k-values",
        "--num-workers",
        "0",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--device",
        "cpu",
        "--model-type",
        "timm",
        "--model",
        models["timm"],
        "--model-name",
        "vit",
    ]
    assert main([*common, "--out", str(tmp_path / "own")]) == 0
    assert (
        main([*common, "--split-model-type", "hf_vision", "--split-model", models["hf_vision"], "--out", str(tmp_path / "model")])
        == 0
    )
    # The same DINOv2 concept embeddings handed over as an npz file.
    data, X, _ = embed_concepts(
        things, load_things(things), ModelSpec("hf_vision", models["hf_vision"], None), None, num_workers=0
    )
    np.savez(tmp_path / "dino.npz", concepts=np.asarray(data.concepts), embeddings=X)
    assert main([*common, "--split-embeddings", str(tmp_path / "dino.npz"), "--out", str(tmp_path / "npz")]) == 0
    own, model, npz = (
        json.loads((tmp_path / x / "results.json").read_text())["grid"]["grid"]["vit"] for x in ("own", "model", "npz")
    )
    assert own["random"] == model["random"]  # the random split ignores embeddings
    assert own["clustering"] != model["clustering"]  # the clustering split follows the split model
    # Same numbers; each result names where its split embedding came from.
    assert model["clustering"]["0"].pop("split_embedding") == f"hf_vision:{models['hf_vision']}"
    assert npz["clustering"]["0"].pop("split_embedding") == str(tmp_path / "dino.npz")
    assert model == npz
