"""Our Winoground block scores agree exactly with clip_benchmark's image_caption_selection."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.algebra.contrast import block_scores_from_embeddings
from clip_cycles.algebra.winoground import winoground_scores


def test_tie_semantics_follow_first_index_argmax() -> None:
    # Block 0: row 0 ties and goes to caption 0 (correct). Block 1: row 1 ties and
    # goes to caption 0 (wrong), while both columns are decided correctly.
    blocks = np.array([[[1.0, 1.0], [0.0, 1.5]], [[1.0, 0.0], [0.3, 0.3]]])
    scores = winoground_scores(blocks)
    np.testing.assert_array_equal(scores.text_correct, [True, False])
    np.testing.assert_array_equal(scores.image_correct, [True, True])
    np.testing.assert_array_equal(scores.group_correct, [True, False])


def test_bad_blocks_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"shape \(N, 2, 2\)"):
        winoground_scores(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="non-finite"):
        winoground_scores(np.full((1, 2, 2), np.nan))


def tiny_open_clip(tmp_path: Path):
    import open_clip
    import torch

    config = {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 8},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    (tmp_path / "cc-wino-tiny.json").write_text(json.dumps(config))
    open_clip.add_model_config(tmp_path / "cc-wino-tiny.json")
    torch.manual_seed(0)
    model, _, transform = open_clip.create_model_and_transforms("cc-wino-tiny", pretrained=None)
    model.eval()
    return model, transform, open_clip.get_tokenizer("cc-wino-tiny")


def test_agrees_with_clip_benchmark_image_caption_selection(tmp_path: Path) -> None:
    import torch
    import torch.nn.functional as F
    from clip_benchmark.metrics import image_caption_selection
    from PIL import Image

    model, transform, tokenizer = tiny_open_clip(tmp_path)
    rng = np.random.default_rng(0)
    pictures = [Image.fromarray(rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)) for _ in range(12)]
    words = ["red", "blue", "cube", "ball", "left", "right", "big", "small"]
    captions = [" ".join(rng.choice(words, size=4)) for _ in range(12)]
    cycles = np.array([[i, (i + 1 + k) % 12, i, (i + 3 + k) % 12] for k in range(3) for i in range(12)])

    instances = [
        (torch.stack([transform(pictures[u1]), transform(pictures[u2])]), [captions[v1], captions[v2]])
        for u1, u2, v1, v2 in cycles
    ]

    def collate(batch):
        return torch.stack([images for images, _ in batch]), [texts for _, texts in batch]

    loader = torch.utils.data.DataLoader(instances, batch_size=8, collate_fn=collate)
    theirs = image_caption_selection.evaluate(model, loader, tokenizer, "cpu", amp=False)

    with torch.no_grad():
        image_features = F.normalize(model.encode_image(torch.stack([transform(p) for p in pictures])), dim=-1)
        caption_features = F.normalize(model.encode_text(tokenizer(captions)), dim=-1)
    blocks = block_scores_from_embeddings(image_features.numpy(), caption_features.numpy(), cycles)
    ours = winoground_scores(blocks)
    # clip_benchmark averages in float32: compare the exact counts of correct blocks.
    n = len(cycles)
    assert ours.text_correct.sum() == round(theirs["text_acc"] * n)
    assert ours.image_correct.sum() == round(theirs["image_acc"] * n)
    assert ours.group_correct.sum() == round(theirs["acc"] * n)
    # The comparison must be informative: not every block right or every block wrong.
    assert 0 < ours.text_correct.sum() < len(cycles)


def test_scores_from_embeddings_with_ties_equal_a_direct_computation() -> None:
    """Integer embeddings make exact ties common; each block is decided by the first-index argmax rule."""
    rng = np.random.default_rng(0)
    phi = rng.integers(-1, 2, size=(12, 3)).astype(np.float64)
    psi = rng.integers(-1, 2, size=(15, 3)).astype(np.float64)
    u = np.stack([rng.choice(12, size=2, replace=False) for _ in range(400)])
    v = np.stack([rng.choice(15, size=2, replace=False) for _ in range(400)])
    cycles = np.concatenate([u, v], axis=1)
    scores = winoground_scores(block_scores_from_embeddings(phi, psi, cycles))
    text, image = [], []
    for u1, u2, v1, v2 in cycles.tolist():
        s11, s12, s21, s22 = phi[u1] @ psi[v1], phi[u1] @ psi[v2], phi[u2] @ psi[v1], phi[u2] @ psi[v2]
        text.append(s11 >= s12 and s22 > s21)
        image.append(s11 >= s21 and s22 > s12)
    ties = sum(phi[a] @ psi[c] == phi[a] @ psi[d] or phi[b] @ psi[c] == phi[b] @ psi[d] for a, b, c, d in cycles.tolist())
    assert ties > 50  # the fixture really exercises ties
    np.testing.assert_array_equal(scores.text_correct, text)
    np.testing.assert_array_equal(scores.image_correct, image)
    np.testing.assert_array_equal(scores.group_correct, np.logical_and(text, image))
    assert scores.to_dict() == {"text_acc": np.mean(text), "image_acc": np.mean(image),
                                "group_acc": np.mean(np.logical_and(text, image))}  # fmt: skip
    assert 0 < np.mean(text) < 1 and np.mean(text) != np.mean(image)
