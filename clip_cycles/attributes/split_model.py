"""The split embedding of ``clip-cycles splits`` from a model instead of an npz file.

Paper 2 clusters (and measures similarity on) Swin-V2 image embeddings of the concepts
for every probed model. ``--split-model-type hf_vision --split-model <Swin-V2 id or
folder>`` (or ``timm``, or any embedding backend) embeds the THINGS root's concepts with
that model, through the same feature cache and mean-image-embedding rule as the probed
models (:func:`clip_cycles.evaluation.runners.embed_concepts`), and hands the matrix to the
split context in place of ``--split-embeddings``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from clip_cycles.attributes.concept_features import embed_concepts
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.settings import resolve_cache_dir


def add_split_model_arguments(group: Any) -> None:
    """``--split-model-type``, ``--split-model``, ``--split-pretrained`` on a parser or argument group."""
    group.add_argument("--split-model-type", default="hf_vision",
                       help="backend of --split-model (timm, hf_vision or any embedding backend)")
    group.add_argument("--split-model", default=None,
                       help="model whose concept image embeddings make the clustering/similarity splits "
                            "(instead of --split-embeddings)")
    group.add_argument("--split-pretrained", default=None, help="pretrained tag, revision or checkpoint of --split-model")


def split_embeddings_from_model(args: argparse.Namespace, data: Any) -> tuple[tuple[str, ...], np.ndarray]:
    """Concept ids and mean image embeddings of ``data``'s concepts under ``--split-model``."""

    if getattr(args, "split_embeddings", None):
        raise ValueError("give either --split-embeddings or --split-model, not both")
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    spec = ModelSpec(backend=args.split_model_type, model=args.split_model, pretrained=args.split_pretrained,
                     device=device, seed=args.seed, amp=args.amp, model_cache_dir=args.model_cache_dir)
    cache = None if args.no_cache else resolve_cache_dir(args.cache_dir)
    embedded, matrix, info = embed_concepts(args.things_root, data, spec, cache, "image", args.categories,
                                            args.min_concepts, args.encode_batch_size, args.num_workers,
                                            args.skip_bad_images)
    print(f"split embeddings: {len(embedded.concepts)} concepts with {args.split_model_type}:{args.split_model} "
          f"(dim {info['dim']})")
    return tuple(embedded.concepts), matrix


__all__ = ["add_split_model_arguments", "split_embeddings_from_model"]
