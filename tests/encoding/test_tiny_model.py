"""cycles-tiny: the shipped checkpoint, its clear errors, and deterministic resumable training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.encoding.tiny_model import (
    CARD_PATH,
    REBUILD_COMMAND,
    WEIGHTS_PATH,
    CheckpointError,
    check_shipped_checkpoint,
    load_tiny_model,
    sha256_of,
    train_tiny,
)


def test_shipped_checkpoint_matches_its_card() -> None:
    card = json.loads(CARD_PATH.read_text())
    assert check_shipped_checkpoint() == WEIGHTS_PATH
    assert card["sha256"] == sha256_of(WEIGHTS_PATH)
    assert WEIGHTS_PATH.stat().st_size <= 20 * 1024 * 1024
    assert card["model"] == "cycles-tiny" and card["pretrained"] == "shapes"


def test_shipped_checkpoint_scores_coarse_object_well_above_chance(shapes_cycles: Path, tmp_path: Path) -> None:
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate

    spec = ModelSpec(backend="open_clip", model="cycles-tiny", pretrained="shapes")
    records, encoded = evaluate(
        ["cycles/shapes_coarse_object", "cycles/shapes_strict_left_right"],
        spec,
        dataset_root=shapes_cycles,
        cache_dir=tmp_path / "cache",
    )
    metrics = {r["dataset"]: r["metrics"] for r in records}
    coarse = metrics["cycles/shapes_coarse_object"]
    assert coarse["cycle_acc"] >= 0.8, coarse
    assert coarse["additive_audit"]["passed"] is True
    # Left/right is not in the training captions: the model must not look good there.
    assert metrics["cycles/shapes_strict_left_right"]["cycle_acc"] < coarse["cycle_acc"]
    assert encoded.stats.encoded_images > 0


def test_open_clip_resolves_the_tag_offline() -> None:
    import open_clip

    from clip_cycles.encoding.tiny_model import register_tiny_model

    register_tiny_model()
    model, _, preprocess = open_clip.create_model_and_transforms("cycles-tiny", pretrained="shapes")
    from safetensors.torch import load_file

    shipped = load_file(str(WEIGHTS_PATH))
    key = "text_projection"
    assert np.array_equal(model.state_dict()[key].half().numpy(), shipped[key].numpy())


def test_missing_and_corrupt_checkpoints_name_the_rebuild_command(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not found") as missing:
        check_shipped_checkpoint(tmp_path / "nope.safetensors")
    assert REBUILD_COMMAND in str(missing.value)
    corrupt = tmp_path / WEIGHTS_PATH.name
    shutil.copyfile(WEIGHTS_PATH, corrupt)
    shutil.copyfile(CARD_PATH, tmp_path / CARD_PATH.name)
    with open(corrupt, "r+b") as handle:
        handle.seek(200)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(CheckpointError, match="corrupt") as bad:
        check_shipped_checkpoint(corrupt)
    assert REBUILD_COMMAND in str(bad.value)
    truncated = tmp_path / "truncated" / WEIGHTS_PATH.name
    truncated.parent.mkdir()
    truncated.write_bytes(WEIGHTS_PATH.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="cannot load"):
        load_tiny_model(truncated)


def test_training_is_deterministic_and_resumes_to_the_same_weights(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    world = {"n_images": 40, "seed": 5, "image_size": 64}
    straight = train_tiny(tmp_path / "a", tmp_path / "work_a", steps=4, batch_size=8, world=world, checkpoint_every=2)
    again = train_tiny(tmp_path / "b", tmp_path / "work_b", steps=4, batch_size=8, world=world, checkpoint_every=2)
    assert straight["sha256"] == again["sha256"]
    # Interrupted after 2 steps (checkpointed), then resumed to 4: the same weights.
    stopped = train_tiny(
        tmp_path / "c", tmp_path / "work_c", steps=4, batch_size=8, world=world, checkpoint_every=3, stop_after=2
    )
    assert stopped == {"interrupted_at": 2}
    state = json.loads((tmp_path / "work_c" / "state.json").read_text())
    assert state["step"] == 2
    resumed = train_tiny(tmp_path / "c", tmp_path / "work_c", steps=4, batch_size=8, world=world, checkpoint_every=3)
    a = load_file(str(tmp_path / "a" / WEIGHTS_PATH.name))
    c = load_file(str(tmp_path / "c" / WEIGHTS_PATH.name))
    assert a.keys() == c.keys()
    assert all(np.array_equal(a[k].numpy(), c[k].numpy()) for k in a)
    assert resumed["training"]["steps"] == 4


def test_a_failed_weights_write_leaves_the_previous_checkpoint_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from clip_cycles import outputs

    world = {"n_images": 40, "seed": 5, "image_size": 64}
    out = tmp_path / "out"
    train_tiny(out, tmp_path / "work_a", steps=2, batch_size=8, world=world, checkpoint_every=2)
    weights = out / WEIGHTS_PATH.name
    before = weights.read_bytes()
    real_write = outputs._write_new_file

    def full_disk_for_the_weights(path: Path, data: bytes, durable: bool = True) -> None:
        if path.name.startswith(WEIGHTS_PATH.name):
            real_write(path, data[: len(data) // 2], durable)  # half of the new checkpoint reaches the disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data, durable)

    monkeypatch.setattr(outputs, "_write_new_file", full_disk_for_the_weights)
    with pytest.raises(outputs.OutputError, match=f"no space left on the device while writing {weights}"):
        train_tiny(out, tmp_path / "work_b", steps=3, batch_size=8, world={**world, "seed": 6}, checkpoint_every=3)
    assert weights.read_bytes() == before  # the old checkpoint, whole
    assert sorted(p.name for p in out.iterdir()) == sorted([WEIGHTS_PATH.name, CARD_PATH.name])  # no temporary left
