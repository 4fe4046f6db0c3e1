"""ColorSwap (Burapacheep et al., 2024): rows ``{id, image_1, image_2, caption_1, caption_2, ...}``.

- fields: ``image_1`` / ``image_2`` (a file name, or ``{bytes, path}`` in the hub's Parquet),
  ``caption_1`` / ``caption_2`` (the same words with the colours swapped; caption_i true of image_i);
  ``image_source`` and ``caption_source`` become tags.
- subsets: one, ``colorswap`` (a ``.jsonl``, ``.json`` or ``.parquet`` table in the root or ``data/``).
- one comparison: as Winoground, each row's two text and two image comparisons; the row is an exact cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, block_subset, first_dir, image_from_value, read_records
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

EXPECTS = (
    "a ColorSwap table (.jsonl, .json or .parquet with image_1, image_2, caption_1, caption_2) in the root or data/; "
    "images optional (images/)"
)
TAG_FIELDS = ("image_source", "caption_source")


class ColorSwapRow(Open):
    """One ColorSwap row: two images and two captions with swapped colours."""

    image_1: Any = Field(description="an image file name, or {bytes, path}")
    image_2: Any = Field(description="an image file name, or {bytes, path}")
    caption_1: Text = Field(description=f"{TEXT}: the caption of image_1")
    caption_2: Text = Field(description=f"{TEXT}: the caption of image_2")


def _table(root: Path) -> Path | None:
    if root.is_file():
        return root
    for folder in (root, root / "data"):
        for pattern in ("*.parquet", "*.jsonl", "*.json"):
            found = sorted(folder.glob(pattern))
            if found:
                return found[0]
    return None


def read_colorswap(root: Path) -> list[ComparisonSet]:
    """The ColorSwap table: one subset of 2x2 blocks."""
    table = _table(root)
    if table is None:
        raise FileNotFoundError(f"{root}: no ColorSwap table; expected {EXPECTS}")
    images_dir = first_dir([table.parent / "images", root / "images" if root.is_dir() else table.parent]) or table.parent
    blocks = []
    for number, row in enumerate(read_records(table)):
        block = str(row.get("id", number))
        where = f"row {number} (id {block})"
        checked = checked_row(ColorSwapRow, row, table, where)
        first = image_from_value(checked.image_1, images_dir, where, table, "image_1")
        second = image_from_value(checked.image_2, images_dir, where, table, "image_2")
        tags = tuple(f"{k}={row[k]}" for k in TAG_FIELDS if row.get(k) not in (None, ""))
        blocks.append((block, first, second, checked.caption_1, checked.caption_2, tags))
    return [block_subset("colorswap", table, blocks)]


ADAPTER = Adapter("colorswap", read_colorswap, "ColorSwap: image_1, image_2, caption_1, caption_2 blocks", EXPECTS)
