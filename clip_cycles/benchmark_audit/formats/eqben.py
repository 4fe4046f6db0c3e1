"""EqBen (Wang et al., 2023): JSON lists of ``{image0, caption0, image1, caption1}`` (``ann_json_finegrained_random.json``).

- fields: ``image0`` / ``image1`` (image paths relative to the image folder, e.g. ``eqbenag/...``),
  ``caption0`` / ``caption1`` (caption_i is true of image_i).
- subsets: one per JSON file under the root, by its stem; the image path's first folder
  (``eqbenag``, ``eqbenkubric_cnt``, ``eqbensd``, ...) is kept as a tag ``source=``.
- one comparison: as Winoground, each sample's two text and two image comparisons; the sample is
  an exact cycle.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, block_subset, first_dir, image_item, read_records
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

EXPECTS = "EqBen annotation JSON files (lists of image0, caption0, image1, caption1) in the root; images optional (images/)"


class EqBenSample(Open):
    """One EqBen sample: two images and their two captions."""

    image0: Text = Field(description=f"{TEXT}: the first image path")
    caption0: Text = Field(description=f"{TEXT}: the caption of image0")
    image1: Text = Field(description=f"{TEXT}: the second image path")
    caption1: Text = Field(description=f"{TEXT}: the caption of image1")


def read_eqben(root: Path) -> list[ComparisonSet]:
    """Every JSON file in ``root``: a subset of 2x2 blocks."""
    files = [root] if root.is_file() else sorted(root.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{root}: no EqBen file; expected {EXPECTS}")
    base = root.parent if root.is_file() else root
    images_dir = first_dir([base / "images"]) or base
    out = []
    for path in files:
        blocks = []
        for number, row in enumerate(read_records(path)):
            sample = checked_row(EqBenSample, row, path, f"sample {number}")
            source = sample.image0.split("/")[0] if "/" in sample.image0 else ""
            tags = (f"source={source}",) if source else ()
            first, second = image_item(images_dir, sample.image0), image_item(images_dir, sample.image1)
            blocks.append((str(number), first, second, sample.caption0, sample.caption1, tags))
        out.append(block_subset(path.stem, path, blocks))
    return out


ADAPTER = Adapter("eqben", read_eqben, "EqBen: image0, caption0, image1, caption1 blocks", EXPECTS)
