"""CREPE (Ma et al., 2023): productivity and systematicity CSVs of Visual Genome regions and hard negatives.

- fields (CREPE's ``crepe_params.py`` defaults): ``image_id`` (the Visual Genome image, ``<id>.jpg`` in
  ``VG_100K/`` or ``VG_100K_2/``), ``caption``, ``hard_negs`` (a Python list literal of hard negatives,
  read with :func:`ast.literal_eval`, never evaluated), and the region ``x``, ``y``, ``width``,
  ``height`` (the image is cropped to it, as CREPE does; a row without a box uses the whole image).
- subsets: one per CSV anywhere under the root, named by its stem
  (``prod_vg_hard_negs_swap_all``, ``syst_vg_hard_negs_seen_compounds_in_laion``, ...).
- one comparison: (region, caption) over (region, hard negative), one per hard negative (CREPE's
  own metric ranks the caption among all of them; a rank-1 item wins every comparison).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, hard_negative_subset, read_csv_rows
from clip_cycles.benchmark_audit.design import ComparisonSet, CroppedImageItem
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row
from clip_cycles.data.sources.images import ImageItem

EXPECTS = (
    "CREPE CSV files (image_id, caption, hard_negs, x, y, width, height) anywhere under the root; "
    "images optional (VG_100K/, VG_100K_2/ or images/)"
)
BOX = ("x", "y", "width", "height")


class CrepeRow(Open):
    """One CREPE row, after ``hard_negs`` is parsed: a region's caption and its hard negatives."""

    image_id: Text = Field(description=f"{TEXT}: the Visual Genome image id")
    caption: Text = Field(description=f"{TEXT}: the true caption")
    hard_negs: list[Text] = Field(min_length=1, description="a list literal of at least one hard negative (non-empty strings)")


def _parsed(row: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    text = row.get("hard_negs")
    if not isinstance(text, str):
        return row  # checked_row names the missing field
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as error:
        raise ValueError(
            f"{path}: {where}: field 'hard_negs' must be a list literal of strings, got {text!r} ({error})"
        ) from error
    return {**row, "hard_negs": value}


def _image(row: dict[str, Any], image_id: str, folders: list[Path], path: Path, where: str) -> ImageItem:
    name = f"{image_id}.jpg"
    file = next((f / name for f in folders if (f / name).is_file()), folders[0] / name)
    if not all(str(row.get(k) or "").strip() for k in BOX):
        return ImageItem(key=name, path=file)
    try:
        box = tuple(float(row[k]) for k in BOX)
    except ValueError as error:
        raise ValueError(f"{path}: {where}: fields {', '.join(BOX)} must be numbers, got {[row[k] for k in BOX]}") from error
    if box[2] <= 0 or box[3] <= 0:
        raise ValueError(f"{path}: {where}: fields 'width' and 'height' must be positive, got {box[2]:g}, {box[3]:g}")
    return CroppedImageItem(key=f"{name}#box={','.join(f'{v:g}' for v in box)}", path=file, box=box)  # type: ignore[arg-type]


def read_crepe(root: Path) -> list[ComparisonSet]:
    """Every CSV under ``root``: a subset of caption-vs-hard-negative comparisons on cropped regions."""
    files = [root] if root.is_file() else sorted(root.rglob("*.csv"))
    if not files:
        raise FileNotFoundError(f"{root}: no CREPE file; expected {EXPECTS}")
    base = root.parent if root.is_file() else root
    folders = [f for f in (base / "VG_100K", base / "VG_100K_2", base / "images") if f.is_dir()] or [base]
    out = []
    for path in files:
        items = []
        for number, row in enumerate(read_csv_rows(path), 2):
            where = f"line {number}"
            item = checked_row(CrepeRow, _parsed(row, path, where), path, where)
            image = _image(row, item.image_id, folders, path, where)
            for k, negative in enumerate(item.hard_negs):
                items.append(((f"{number}/{k}", str(number)), image, item.caption, negative, ()))
        out.append(hard_negative_subset(path.stem, path, items))
    return out


ADAPTER = Adapter("crepe", read_crepe, "CREPE: productivity / systematicity CSVs, a caption and its hard negatives", EXPECTS)
