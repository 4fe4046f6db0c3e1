"""Concept embeddings from any model backend, through the shared encoder and feature cache.

Paper 2's concept embedding is the mean of the model's image embeddings over the
concept's images; a text alternative embeds the concept's name or definition. Both go
through :func:`clip_cycles.encoding.encoder.encode`, so every image and text is encoded once,
cached on disk and reused by later runs and other experiments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from clip_cycles.attributes.concepts import ConceptImages, concept_embeddings_from_images, concept_embeddings_from_texts


def _image_key(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path.resolve())


def concept_image_embeddings(
    images: ConceptImages | Mapping[str, Sequence[Path]],
    spec: Any,
    cache_dir: str | Path | None = None,
    root: str | Path | None = None,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Mean image embedding per concept for the model ``spec`` (an ``encoder.ModelSpec``).

    Parameters
    ----------
    images:
        Image paths per concept (e.g. ``concepts.find_concept_images(root, concepts)``).
    cache_dir:
        Feature cache root (None: encode without caching).
    root:
        Images are keyed by their path relative to ``root`` (stable across machines).

    Returns
    -------
    (concept ids with at least one usable image, their mean embeddings in float64).
    """
    from clip_cycles.encoding.encoder import ImageItem, encode

    paths = images.paths if isinstance(images, ConceptImages) else images
    root_path = Path(root) if root is not None else None
    items = {_image_key(Path(p), root_path): ImageItem(key=_image_key(Path(p), root_path), path=Path(p))
             for c in paths for p in paths[c]}
    if not items:
        raise ValueError("no concept image to embed: every concept has an empty image list")
    encoded = encode(list(items.values()), [], spec, feature_cache_dir=cache_dir, batch_size=batch_size,
                     num_workers=num_workers, skip_bad_images=skip_bad_images)
    table = np.asarray(encoded.image_features, dtype=np.float64)
    rows = encoded.image_rows
    # Skipped (bad) images are absent from image_rows: drop them from their concept, and
    # let the concepts left without images fall out (the caller counts them).
    usable = {c: [Path(p) for p in paths[c] if _image_key(Path(p), root_path) in rows] for c in paths}

    def lookup(batch: list[Path]) -> np.ndarray:
        return table[[rows[_image_key(p, root_path)] for p in batch]]

    return concept_embeddings_from_images(usable, lookup, batch_size=max(1, len(items)))


def concept_text_embeddings(
    texts: Mapping[str, str], spec: Any, cache_dir: str | Path | None = None, batch_size: int = 64
) -> tuple[tuple[str, ...], np.ndarray]:
    """Text embedding per concept (its name or definition, see ``concepts.concept_texts``) for ``spec``."""
    from clip_cycles.encoding.encoder import encode

    encoded = encode([], list(texts.values()), spec, feature_cache_dir=cache_dir, batch_size=batch_size)
    table = np.asarray(encoded.caption_features, dtype=np.float64)

    def lookup(batch: list[str]) -> np.ndarray:
        return table[[encoded.caption_rows[t] for t in batch]]

    return concept_embeddings_from_texts(texts, lookup, batch_size=max(1, len(texts)))
