"""A tiny deterministic two-tower model, served to clip_cycles through the backend contract (``BACKEND``).

Image tower: the picture resized to ``image_size`` pixels, average-pooled to a ``grid`` x ``grid``
colour layout, projected to ``embed_dim``. Text tower: a hashed bag of words (each lower-cased
word to one of ``buckets`` rows of an embedding table), averaged. Both projections are random
with a fixed seed, so the model is the same in every process and on every machine, needs no
download and runs on a CPU in seconds. It understands nothing: expect CycleAcc near 0.5. It is
here to show the contract, not to score well.

The towers' settings live in ``towers.json`` beside this file, not in it: that file is what
``cache_fingerprint`` covers, because clip_cycles hashes only this module's own source when it
keys cached features (see docs/backends.md, "Why cache_fingerprint").
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clip_cycles.encoding.backends import Backend

SETTINGS_PATH = Path(__file__).resolve().parent / "towers.json"
#: Values of ``pretrained`` this backend accepts: it has no weights, only seeded random towers.
NO_WEIGHTS = ("", "none", "random")
_WORD = re.compile(r"[a-z0-9]+")


def read_settings(model_name: str) -> dict[str, Any]:
    """The settings of ``model_name`` from ``towers.json``; an unknown name names the known ones."""
    table = json.loads(SETTINGS_PATH.read_text(encoding="utf-8"))
    if model_name not in table:
        raise ValueError(f"example_bow has no model {model_name!r}; known: {', '.join(sorted(table))} ({SETTINGS_PATH})")
    return table[model_name]


class HashedWords:
    """Tokenizer: a list of captions -> a (captions, context_length) int64 tensor of bucket ids, 0 = padding."""

    def __init__(self, buckets: int, context_length: int) -> None:
        self.buckets = buckets
        self.context_length = context_length  # clip_cycles records this attribute in the cache key

    def bucket(self, word: str) -> int:
        # blake2b, not hash(): Python salts str hashes per process, and ids must not change between runs.
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        return 1 + int.from_bytes(digest, "little") % (self.buckets - 1)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        ids = np.zeros((len(texts), self.context_length), dtype=np.int64)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())[: self.context_length]
            ids[row, : len(words)] = [self.bucket(word) for word in words]
        return torch.from_numpy(ids)


class ToPixels:
    """Transform: a PIL image -> a (3, size, size) float32 tensor in [0, 1]."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, image: Any) -> torch.Tensor:
        resized = image.convert("RGB").resize((self.size, self.size))
        array = np.asarray(resized, dtype=np.float32) / 255.0
        return torch.from_numpy(array.transpose(2, 0, 1).copy())

    def __repr__(self) -> str:  # clip_cycles keys cached features by the transform's repr
        return f"ToPixels(size={self.size})"


class TwoTower(torch.nn.Module):
    """``encode_image`` and ``encode_text`` into one ``embed_dim`` space (random, seeded projections)."""

    def __init__(self, embed_dim: int, grid: int, buckets: int, seed: int) -> None:
        super().__init__()
        self.grid = grid
        generator = torch.Generator().manual_seed(seed)
        # Buffers, not parameters: nothing here is trained, and .to(device) still moves them.
        self.register_buffer("image_projection", torch.randn(3 * grid * grid, embed_dim, generator=generator))
        self.register_buffer("word_vectors", torch.randn(buckets, embed_dim, generator=generator))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """(batch, 3, H, W) pixels -> (batch, embed_dim); clip_cycles L2-normalises the rows itself."""
        layout = torch.nn.functional.adaptive_avg_pool2d(pixels, self.grid).flatten(1)
        return layout @ self.image_projection

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, context_length) bucket ids -> (batch, embed_dim): the mean of the words' vectors."""
        present = (tokens > 0).unsqueeze(-1).to(self.word_vectors.dtype)
        summed = (self.word_vectors[tokens] * present).sum(dim=1)
        return summed / present.sum(dim=1).clamp(min=1.0)


def load(model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu") -> tuple:
    """The loader clip_cycles calls: ``(model, transform, tokenizer)`` for ``model_name`` (a key of towers.json).

    ``pretrained`` must say "no weights" (none, random or empty); ``cache_dir`` is unused (nothing is
    downloaded); the model is moved to ``device``.
    """
    if pretrained is not None and pretrained.strip().lower() not in NO_WEIGHTS:
        raise ValueError(f"example_bow has no pretrained weights; pass --pretrained none, not {pretrained!r}")
    settings = read_settings(model_name)
    model = TwoTower(settings["embed_dim"], settings["grid"], settings["buckets"], settings["seed"]).to(device)
    return model, ToPixels(settings["image_size"]), HashedWords(settings["buckets"], settings["context_length"])


def cache_fingerprint(model_name: str, pretrained: str | None) -> dict[str, str]:
    """What else decides the features: the sha256 of towers.json (seed, sizes), which clip_cycles cannot see."""
    return {"towers_json_sha256": hashlib.sha256(SETTINGS_PATH.read_bytes()).hexdigest()}


#: The backend's record, what the entry point names: its loader, what it gives (image and caption
#: embeddings: a two-tower model) and what else its cached features depend on.
BACKEND = Backend(loader=load, capabilities=("image", "text"), cache_fingerprint=cache_fingerprint)
