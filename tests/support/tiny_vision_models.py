"""Tiny random-init image-only and generative models saved to local folders (no downloads).

- :func:`write_tiny_timm_vit`: a 32 px, 2-block timm ViT in timm's ``local-dir`` format;
- :func:`write_tiny_hf_vision`: a 32 px, 2-layer DINOv2 with its image processor;
- :func:`write_tiny_vlm`: a LLaVA-style model (32 px CLIP vision tower, 2-layer Llama)
  with a word-level tokenizer built here, saved with its processor.

Used by the tests and by ``benchmarks/bench_vlm_pairs.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

#: The tiny VLM's vocabulary: every word of the shapes-world captions plus prompt words.
VLM_WORDS = (
    "<pad>",
    "<unk>",
    "<s>",
    "</s>",
    "<image>",
    "Caption:",
    "Describe",
    "image.",
    "USER:",
    "ASSISTANT:",
    "photo",
    "very",
    "clearly",
    "fluent",
    "prior",
    "words",
    "three",
    "is",
    "a",
    "above",
    "an",
    "and",
    "background",
    "below",
    "blue",
    "circle",
    "circle,",
    "cross",
    "cross,",
    "crosses",
    "diamond",
    "diamond,",
    "diamonds",
    "disc",
    "disc,",
    "drawing",
    "exactly",
    "green",
    "hoop",
    "hoop,",
    "image",
    "larger",
    "left",
    "object",
    "of",
    "on",
    "one",
    "orange",
    "picture",
    "plain",
    "plus",
    "polygon",
    "purple",
    "red",
    "rhombus",
    "rhombus,",
    "rhombuses",
    "rhombuses,",
    "right",
    "ring",
    "ring,",
    "round",
    "shows",
    "side",
    "sign",
    "sign,",
    "smaller",
    "square",
    "square,",
    "squares",
    "squares,",
    "star",
    "star,",
    "stars",
    "stars,",
    "symbol",
    "than",
    "the",
    "this",
    "to",
    "triangle",
    "triangle,",
    "triangles",
    "two",
    "with",
    "yellow",
)


def write_tiny_timm_vit(folder: str | Path, seed: int = 0) -> Path:
    """A random-init timm ViT (img 32, patch 8, dim 32, depth 2) as ``config.json`` + ``model.safetensors``."""
    import timm
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    args = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2, "num_classes": 0}
    torch.manual_seed(seed)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, **args)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    config = {
        "architecture": "vit_tiny_patch16_224",
        "num_classes": 0,
        "model_args": args,
        "pretrained_cfg": {
            "input_size": [3, 32, 32],
            "mean": [0.5, 0.5, 0.5],
            "std": [0.5, 0.5, 0.5],
            "crop_pct": 1.0,
            "interpolation": "bicubic",
            "num_classes": 0,
        },
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def write_tiny_hf_vision(folder: str | Path, seed: int = 0) -> Path:
    """A random-init DINOv2 (32 px, patch 8, hidden 32, 2 layers) and its image processor."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    folder = Path(folder)
    torch.manual_seed(seed)
    config = Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8
    )
    Dinov2Model(config).save_pretrained(folder)
    BitImageProcessor(
        size={"shortest_edge": 32},
        crop_size={"height": 32, "width": 32},
        do_center_crop=True,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    ).save_pretrained(folder)
    return folder


def write_tiny_vlm(folder: str | Path, seed: int = 0) -> Path:
    """A random-init LLaVA (CLIP vision 32 px, Llama 2x32) with a word-level tokenizer and its processor."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    folder = Path(folder)
    vocab = {w: i for i, w in enumerate(VLM_WORDS)}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(VLM_WORDS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
