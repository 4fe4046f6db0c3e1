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

from clip_cycles.attributes.concepts import (
    CATEGORY_TSV_NAMES,
    ConceptAttributeData,
    ConceptImages,
    align_embeddings,
    assign_supercategories,
    concept_embeddings_from_images,
    concept_embeddings_from_texts,
    concept_texts,
    find_concept_images,
    load_supercategory_tsv,
)
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import ModelSpec, encode


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
    paths = images.paths if isinstance(images, ConceptImages) else images
    root_path = Path(root) if root is not None else None
    items = {
        _image_key(Path(p), root_path): ImageItem(key=_image_key(Path(p), root_path), path=Path(p))
        for c in paths
        for p in paths[c]
    }
    if not items:
        raise ValueError("no concept image to embed: every concept has an empty image list")
    encoded = encode(
        list(items.values()),
        [],
        spec,
        feature_cache_dir=cache_dir,
        batch_size=batch_size,
        num_workers=num_workers,
        skip_bad_images=skip_bad_images,
    )
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
    encoded = encode([], list(texts.values()), spec, feature_cache_dir=cache_dir, batch_size=batch_size)
    table = np.asarray(encoded.caption_features, dtype=np.float64)

    def lookup(batch: list[str]) -> np.ndarray:
        return table[[encoded.caption_rows[t] for t in batch]]

    return concept_embeddings_from_texts(texts, lookup, batch_size=max(1, len(texts)))


def _in_root(root: Path, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else root / path


def embed_concepts(
    root: str | Path,
    data: ConceptAttributeData,
    spec: ModelSpec,
    cache_dir: str | Path | None = None,
    source: str = "image",
    categories: str | Path | None = None,
    min_concepts: int = 10,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
) -> tuple[ConceptAttributeData, np.ndarray, dict[str, Any]]:
    """Concept embeddings of a THINGS root for the model ``spec``, through the feature cache.

    ``source`` is ``image`` (mean image embedding over ``object_images/<concept>/*.jpg``),
    ``name`` (text embedding of "a photo of a <name>") or ``definition`` (the same plus
    the definition from the category TSV; concepts without one keep the name only).
    Concepts without images (``concept_without_images``) or whose images all failed
    (``concept_without_embedding``) are dropped and recorded in the returned data's
    ``skipped``; attributes falling below ``min_concepts`` positives are dropped the same way.

    Returns
    -------
    (data restricted to embedded concepts, (n, d) float64 matrix in data order, info for the report)
    """
    root = Path(root)
    info: dict[str, Any] = {"embedding": source}
    if source == "image":
        images = find_concept_images(root, data.concepts)
        if images.missing:
            keep = np.array([c in images.paths for c in data.concepts])
            data = data.restrict(keep, min_concepts, reason="concept_without_images")
            if not data.attributes:
                raise ValueError(
                    f"{root}: after dropping {len(images.missing)} concepts without images under "
                    f"object_images/, no attribute keeps {min_concepts} positive concepts"
                )
        paths = {c: images.paths[c] for c in data.concepts}
        info["n_images"] = int(sum(len(p) for p in paths.values()))
        ids, matrix = concept_image_embeddings(
            paths, spec, cache_dir, root=root, batch_size=batch_size, num_workers=num_workers, skip_bad_images=skip_bad_images
        )
    elif source in ("name", "definition"):
        definitions = None
        if source == "definition":
            candidates = [_in_root(root, categories)] if categories else [root / n for n in CATEGORY_TSV_NAMES]
            tsv = next((p for p in candidates if p.is_file()), None)
            if tsv is None:
                raise FileNotFoundError(
                    f"concept definitions need the category TSV; none of {[str(p) for p in candidates]} exists"
                )
            definitions = assign_supercategories(data.concepts, load_supercategory_tsv(tsv)).definitions
            info["n_concepts_without_definition"] = int(sum(not d for d in definitions))
        texts = concept_texts(data.concepts, definitions)
        ids, matrix = concept_text_embeddings(texts, spec, cache_dir, batch_size=batch_size)
    else:
        raise ValueError(f"unknown concept embedding source {source!r}; use image, name or definition")
    data, X = align_embeddings(data, ids, matrix, min_concepts)
    info["dim"] = int(X.shape[1])
    return data, X, info
