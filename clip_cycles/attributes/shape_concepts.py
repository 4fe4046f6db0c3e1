"""A concept world rendered by the shapes renderer, for attribute splits on real (tiny) model embeddings.

Concepts are shape x colour x size (7 x 6 x 2 = 84), each rendered a few times (one
shape at a random place on a random background). Binary attributes are properties a
person would name ("is round", "has a hole", "is warm-coloured", "is large"); some
follow the shape (the supercategory), some cut across it, as in McRae x THINGS.
Near-duplicate groups (the same shape and colour in both sizes, for some colours)
stand in for the LLM grouping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.data.sources.shape_vocabulary import CATEGORIES
from clip_cycles.data.sources.shapes_world import _BACKGROUNDS, COLOURS, SIZE_RANGES, Shape, render
from clip_cycles.schemas.options import Options


class ShapeConceptOptions(Options):
    """The size of the synthetic concept world, its range declared once."""

    images_per_concept: int = Field(3, ge=1, description="a count >= 1 of images per concept")


#: A concept's supercategory is its shape (12 concepts each), the analogue of a THINGS
#: category such as "dog" grouping its kinds; seven groups allow 5-fold group splits.
SUPERCATEGORY = {name: name for _, name, _ in CATEGORIES}

#: Attribute -> predicate on (shape, colour, size).
ATTRIBUTES: dict[str, object] = {
    "is_round": lambda s, c, z: s in ("circle", "ring"),
    "has_hole": lambda s, c, z: s == "ring",
    "has_corners": lambda s, c, z: s in ("square", "triangle", "diamond", "star", "cross"),
    "is_pointy": lambda s, c, z: s in ("triangle", "diamond", "star"),
    "is_symbol": lambda s, c, z: s in ("star", "cross"),
    "has_right_angles": lambda s, c, z: s in ("square", "cross"),
    "is_warm": lambda s, c, z: c in ("red", "orange", "yellow"),
    "is_primary_colour": lambda s, c, z: c in ("red", "yellow", "blue"),
    "is_large": lambda s, c, z: z == "large",
    "is_large_and_round": lambda s, c, z: z == "large" and s in ("circle", "ring", "diamond"),
}

#: Colours whose concepts come in near-duplicate groups (both sizes of a shape).
GROUPED_COLOURS = ("red", "orange")


@dataclass
class ShapeConceptWorld:
    """Concept ids, their rendered image files, labels and groups."""

    data: ConceptAttributeData
    images: dict[str, list[Path]]
    concept_groups: tuple[tuple[str, ...], ...]


def concept_id(shape: str, colour: str, size: str) -> str:
    """``"small_red_circle"``."""
    return f"{size}_{colour}_{shape}"


def make_shape_concepts(out: str | Path, images_per_concept: int = 3, image_size: int = 64, seed: int = 0) -> ShapeConceptWorld:
    """Render every concept ``images_per_concept`` times under ``out`` and return the world.

    Deterministic for a seed; files are rewritten only when missing.
    """
    ShapeConceptOptions.make(images_per_concept=images_per_concept)
    out = Path(out)
    rng = np.random.default_rng(seed)
    concepts: list[str] = []
    triples: list[tuple[str, str, str]] = []
    images: dict[str, list[Path]] = {}
    for _, shape, _ in CATEGORIES:
        for colour in COLOURS:
            for size in SIZE_RANGES:
                cid = concept_id(shape, colour, size)
                concepts.append(cid)
                triples.append((shape, colour, size))
                folder = out / "object_images" / cid
                folder.mkdir(parents=True, exist_ok=True)
                paths = []
                for k in range(images_per_concept):
                    low, high = SIZE_RANGES[size]
                    side = int(round(rng.uniform(low, high) * image_size))
                    x = int(rng.integers(1, image_size - side))
                    y = int(rng.integers(1, image_size - side))
                    background = _BACKGROUNDS[int(rng.integers(len(_BACKGROUNDS)))]
                    path = folder / f"{cid}_{k:02d}.png"
                    if not path.is_file():
                        render([Shape(shape, colour, size, (x, y, side, side))], image_size, background).save(path)
                    paths.append(path)
                images[cid] = paths
    names = list(ATTRIBUTES)
    labels = np.array([[bool(ATTRIBUTES[a](*t)) for a in names] for t in triples])
    data = ConceptAttributeData(
        concepts=tuple(concepts),
        attributes=tuple(names),
        labels=labels,
        supercategories=tuple(SUPERCATEGORY[t[0]] for t in triples),
    )
    groups = tuple(
        (concept_id(shape, colour, "small"), concept_id(shape, colour, "large"))
        for _, shape, _ in CATEGORIES
        for colour in GROUPED_COLOURS
    )
    return ShapeConceptWorld(data=data, images=images, concept_groups=groups)
