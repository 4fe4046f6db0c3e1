"""Small model configurations shared by the tests (random init, sized for 2 CPU cores)."""

from __future__ import annotations

#: An OpenCLIP ``local-dir:`` config (``open_clip_config.json``): 32 px ViT and a 2-layer text tower.
TINY_OPEN_CLIP = {
    "model_cfg": {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
    },
    "preprocess_cfg": {},
}
