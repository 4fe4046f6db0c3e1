"""The split embedding of ``clip-cycles splits`` from a model instead of an npz file.

Paper 2 clusters (and measures similarity on) Swin-V2 image embeddings of the concepts
for every probed model. ``--split-model-type hf_vision --split-model <Swin-V2 id or
folder>`` (or ``timm``, or any embedding backend) embeds the THINGS root's concepts with
that model, through the same feature cache and mean-image-embedding rule as the probed
models (:func:`clip_cycles.attributes.concept_features.embed_concepts`), and hands the matrix to the
split context in place of ``--split-embeddings``.

The split model's flags are the model flags of every command (declared on
:class:`~clip_cycles.encoding.run_context.ModelOptions`) with the prefix ``split-``, the model's three
only (``SplitInputs.split_model``): device, seed, precision, caches and encoder settings are those of
the probed models (its ``base``, ``SplitInputs.model``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from clip_cycles.attributes.concept_features import embed_concepts
from clip_cycles.attributes.concepts import DEFAULT_MIN_CONCEPTS
from clip_cycles.encoding.run_context import ModelOptions, RunContext

logger = logging.getLogger(__name__)

#: The model flags the split model has of its own (``--split-model-type``, ``--split-model``, ``--split-pretrained``).
SPLIT_MODEL_FIELDS: tuple[str, ...] = ("model_type", "model", "pretrained")
SPLIT_PREFIX = "split-"


def split_embeddings_from_model(
    options: ModelOptions,
    things_root: str | Path,
    data: Any,
    categories: str | None = None,
    min_concepts: int = DEFAULT_MIN_CONCEPTS,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Concept ids and mean image embeddings of ``data``'s concepts under the split model ``options``."""
    context = RunContext.from_options(options)
    embedded, matrix, info = embed_concepts(
        things_root,
        data,
        context.spec,
        context.cache_dir,
        "image",
        categories,
        min_concepts,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
    )
    logger.info(
        "split embeddings: %d concepts with %s:%s (dim %s)",
        len(embedded.concepts),
        options.model_type,
        options.model,
        info["dim"],
    )
    return tuple(embedded.concepts), matrix


__all__ = ["SPLIT_MODEL_FIELDS", "SPLIT_PREFIX", "split_embeddings_from_model"]
