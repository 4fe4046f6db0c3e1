"""A dense THINGS-format root for the task runners (120 categorised concepts in 6 supercategories, 4 without
a category, one without images; 32 px JPEGs coloured by supercategory; pairs JSON with a duplicate and an unknown
concept; the wide-format TSV with quoted definitions). Shared by the evaluation and encoding tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

CATEGORIES = {
    "animal": (200, 40, 40),
    "food": (40, 200, 40),
    "tool": (40, 40, 200),
    "vehicle": (200, 200, 40),
    "plant": (40, 200, 200),
    "clothing": (200, 40, 200),
}
NAMES = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango"
).split()


def write_things_root(root: Path) -> dict[str, Any]:
    """A THINGS-format root in the real formats; returns what the test expects of it."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(0)
    concepts: list[tuple[str, str | None]] = [(f"{c}_{n}", c) for c in CATEGORIES for n in NAMES]
    concepts += [(f"misc_{n}", None) for n in NAMES[:4]]
    ghost = "ghost_thing"  # listed and labelled, but has no image folder
    pairs: list[list[str]] = []
    for concept, category in concepts:
        if category is not None:
            pairs.append([concept, f"{category}_trait"])
    random_attributes = ("is_heavy", "is_shiny", "is_old")
    for attribute in random_attributes:
        for i in rng.choice(len(concepts), size=30, replace=False):
            pairs.append([concepts[int(i)][0], attribute])
    pairs += [[c, "is_rare"] for c, _ in concepts[:3]]  # below min_concepts: dropped and counted
    pairs += [[ghost, "is_heavy"], [ghost, "animal_trait"]]
    pairs.append(list(pairs[0]))  # a duplicate pair
    pairs.append(["unknown_concept", "is_heavy"])  # a concept missing from the list
    (root / "concept_attribute_pairs.json").write_text(json.dumps(pairs))
    (root / "unique_id.txt").write_text("\n".join([c for c, _ in concepts] + [ghost]) + "\n")
    header = ["Word", "Definition", *CATEGORIES]
    lines = ["\t".join(header)]
    for concept, category in [*concepts, (ghost, None)]:
        word = concept.replace("_", " ")
        definition = f'"a ""{word}"" thing,\twith a tab"'
        cells = ["1" if c == category else "" for c in CATEGORIES]
        lines.append("\t".join([word, definition, *cells]))
    (root / "category53_wideFormat.tsv").write_text("\n".join(lines) + "\n")
    (root / "concept_groups.json").write_text(json.dumps([[f"{c}_alpha", f"{c}_bravo"] for c in CATEGORIES]))
    for index, (concept, category) in enumerate(concepts):
        folder = root / "object_images" / concept
        folder.mkdir(parents=True)
        base = np.array(CATEGORIES.get(category or "", (128, 128, 128)))
        for k in range(2):
            color = tuple(int(v) for v in np.clip(base + rng.integers(-30, 31, size=3), 0, 255))
            image = Image.new("RGB", (32, 32), color)
            draw = ImageDraw.Draw(image)
            offset = (index * 3 + k * 5) % 16
            draw.ellipse((offset, offset, offset + 12, offset + 12), fill=(255 - color[0], 255 - color[1], 90))
            image.save(folder / f"{concept}_{k:02d}.jpg", quality=90)
    return {"n_concepts": len(concepts), "ghost": ghost, "random_attributes": random_attributes}
