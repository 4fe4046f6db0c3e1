"""The shapes world's vocabulary: its categories and the caption words that name them.

The generator (:mod:`clip_cycles.data.sources.shapes_world`) draws and captions scenes with these
words, and the COCO builder's caption matcher (:mod:`clip_cycles.data.families.coco`) reads
them to recognise the world's synonyms (a "disc" is a ``circle``); neither imports the
other, both import this.
"""

from __future__ import annotations

#: (id, name, supercategory), in COCO ``categories`` order.
CATEGORIES: tuple[tuple[int, str, str], ...] = (
    (1, "circle", "round"),
    (2, "ring", "round"),
    (3, "square", "polygon"),
    (4, "triangle", "polygon"),
    (5, "diamond", "polygon"),
    (6, "star", "symbol"),
    (7, "cross", "symbol"),
)

#: Caption words per category: the first is the category name, the rest synonyms.
SHAPE_WORDS: dict[str, tuple[str, ...]] = {
    "circle": ("circle", "disc"),
    "ring": ("ring", "hoop"),
    "square": ("square",),
    "triangle": ("triangle",),
    "diamond": ("diamond", "rhombus"),
    "star": ("star",),
    "cross": ("cross", "plus sign"),
}
