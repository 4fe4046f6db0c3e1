"""VALSE (Parcalabescu et al., 2022): one JSON per piece, ``{id: {image_file, caption, foils, dataset, ...}}``.

- fields: ``image_file`` (the image, under the piece's source dataset folder), ``caption`` (the
  caption or declarative statement), ``foils`` (a list of foils; a single ``foil`` string is read too);
  ``dataset`` becomes a tag; other keys (``mturk``, ``classes``, ...) are kept but not read.
- subsets: one per JSON file (its stem: ``existence``, ``plurals``, ``counting-hard``, ``relations``,
  ``actant-swap``, ``coreference-standard``, ``foil-it``, ...), in the root or ``data/``.
- one comparison: (image, caption) over (image, foil), one per foil.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, first_dir, hard_negative_subset, image_item, read_records
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

EXPECTS = (
    "VALSE's piece files (existence.json, plurals.json, counting-*.json, relations.json, ...) in the root or data/; "
    "images optional (images/)"
)


class ValseItem(Open):
    """One VALSE instance: an image, its caption and the foils."""

    image_file: Text = Field(description=f"{TEXT}: the image file")
    caption: Text = Field(description=f"{TEXT}: the caption or declarative statement")
    foils: list[Text] = Field(min_length=1, description="a list of at least one foil (non-empty strings)")


def _row(row: dict) -> dict:
    if "foils" not in row and isinstance(row.get("foil"), str):
        return {**row, "foils": [row["foil"]]}
    return row


def read_valse(root: Path) -> list[ComparisonSet]:
    """Every piece file under ``root`` (or ``root/data``) as a subset of caption-vs-foil comparisons."""
    folder = root if any(root.glob("*.json")) else root / "data"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if root.is_file():
        files, folder = [root], root.parent
    if not files:
        raise FileNotFoundError(f"{root}: no VALSE piece file; expected {EXPECTS}")
    images_dir = first_dir([root / "images", folder / "images"]) or folder
    out = []
    for path in files:
        items = []
        for number, row in enumerate(read_records(path)):
            item_id = str(row.get("_id", number))
            where = f"item {item_id}"
            if "_bad" in row:
                raise ValueError(f"{path}: {where} must be an object with image_file, caption, foils")
            item = checked_row(ValseItem, _row(row), path, where)
            tags = [f"dataset={row['dataset']}"] if row.get("dataset") else []
            image = image_item(images_dir, item.image_file)
            for k, foil in enumerate(item.foils):
                items.append(((f"{item_id}/{k}", item_id), image, item.caption, foil, tags))
        out.append(hard_negative_subset(path.stem, path, items))
    return out


ADAPTER = Adapter("valse", read_valse, "VALSE: one JSON per piece, image_file, caption and foils", EXPECTS)
