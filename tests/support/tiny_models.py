"""Small model configurations shared by the tests (random init, sized for 2 CPU cores)."""

from __future__ import annotations

from pathlib import Path

#: An OpenCLIP ``local-dir:`` config (``open_clip_config.json``): 32 px ViT and a 2-layer text tower.
TINY_OPEN_CLIP = {
    "model_cfg": {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
    },
    "preprocess_cfg": {},
}


def tiny_hf_clip(folder: Path) -> Path:
    """A tiny random-init Hugging Face CLIP (tokenizer, image processor, weights) saved in ``folder``."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars + [c + "</w>" for c in chars])}
    vocab.update({"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1})
    CLIPTokenizer(vocab=vocab, merges=[]).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    config = CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 24,
            "eos_token_id": vocab["<|endoftext|>"],
            "bos_token_id": vocab["<|startoftext|>"],
            "pad_token_id": vocab["<|endoftext|>"],
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(folder)
    return folder
