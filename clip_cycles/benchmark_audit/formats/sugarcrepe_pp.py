"""SugarCrepe++ (Dumpala et al., 2024): per subset a JSON of items with two positives and one negative.

- fields: ``filename`` (COCO val2017 image), ``caption`` and ``caption2`` (two true captions with
  different words), ``negative_caption``; the file is a list of items or ``{id: item}``.
- subsets: ``replace_att``, ``replace_obj``, ``replace_rel``, ``swap_att``, ``swap_obj`` (files in
  the root or ``data/``).
- one comparison (the image-text task, ITT): (image, positive) over (image, negative), one per
  positive; an item is right in ITT when both are.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, first_dir, hard_negative_subset, image_item, present, read_records
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

SUBSETS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
EXPECTS = (
    f"SugarCrepe++ files ({', '.join(s + '.json' for s in SUBSETS)}) in the root or data/; images optional (val2017/ or images/)"
)


class SugarCrepePPItem(Open):
    """One SugarCrepe++ item: an image, two positive captions and a negative."""

    filename: Text = Field(description=f"{TEXT}: the COCO val2017 image file")
    caption: Text = Field(description=f"{TEXT}: the first positive caption")
    caption2: Text = Field(description=f"{TEXT}: the second positive caption")
    negative_caption: Text = Field(description=f"{TEXT}: the negative caption")


def read_sugarcrepe_pp(root: Path) -> list[ComparisonSet]:
    """Each subset file: two comparisons per item (caption vs negative, caption2 vs negative)."""
    folder = root if any(present(root / f"{s}.json") for s in SUBSETS) else root / "data"
    images_dir = first_dir([root / "val2017", root / "images"]) or root
    out = []
    for subset in SUBSETS:
        path = folder / f"{subset}.json"
        if not present(path):
            continue
        items = []
        for number, row in enumerate(read_records(path)):
            item_id = str(row.get("_id", row.get("id", number))) if isinstance(row, dict) else str(number)
            where = f"item {item_id}"
            if not isinstance(row, dict) or "_bad" in row:  # a list (or object) of non-objects
                raise ValueError(f"{path}: {where} must be an object with filename, caption, caption2, negative_caption")
            item = checked_row(SugarCrepePPItem, row, path, where)
            image = image_item(images_dir, item.filename)
            for k, positive in enumerate((item.caption, item.caption2)):
                items.append(((f"{item_id}/p{k + 1}", item_id), image, positive, item.negative_caption, ()))
        out.append(hard_negative_subset(subset, path, items))
    if not out:
        raise FileNotFoundError(f"{root}: no SugarCrepe++ file found; expected {EXPECTS}")
    return out


ADAPTER = Adapter("sugarcrepe_pp", read_sugarcrepe_pp, "SugarCrepe++: one image, two positives, one negative", EXPECTS)
