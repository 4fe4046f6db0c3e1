"""BiVLC (Miranda et al., 2024; HF ``imirandam/BiVLC``): Parquet rows ``image, caption, negative_caption, negative_image``.

- fields: ``image`` and ``negative_image`` are ``datasets`` Image structs ``{bytes, path}`` (or a file
  name under ``images/``); ``caption`` is true of ``image``, ``negative_caption`` of ``negative_image``;
  ``type`` and ``subtype`` (SugarCrepe's ``replace`` / ``swap`` / ``add`` and ``obj`` / ``att`` / ``rel``),
  where present, become tags ``type=`` / ``subtype=``.
- subsets: one per split, named by the Parquet file's stem up to its shard suffix (``test-00000-of-00001``
  is ``test``); a split in several shards is one subset.
- one row is one 2x2 block and one exact cycle: (image, caption) and (negative_image, negative_caption)
  valid, the two swaps invalid; as Winoground, its two text and two image comparisons. A row repeating
  an image or a caption is dropped and counted. BiVLC's negative captions are SugarCrepe's, so the
  bag-of-words ties SugarCrepe's swap subsets carry are in its text comparisons too.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, block_subset, first_dir, image_from_value, read_records
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row
from clip_cycles.data.sources.images import ImageItem

EXPECTS = (
    "BiVLC Parquet files (the hub's data/test-*.parquet) with columns image, caption, negative_caption, "
    "negative_image, images as {bytes, path}; in the root or data/"
)
#: A hub shard suffix: ``test-00000-of-00002`` belongs to split ``test``.
SHARD = re.compile(r"-\d{5}-of-\d{5}$")
#: Columns read as tags, where present.
TAG_FIELDS = ("type", "subtype")


class BivlcRow(Open):
    """One BiVLC row: two images and their two captions (images read by the adapter)."""

    image: object = Field(description="the positive image: {bytes, path} or a file name")
    caption: Text = Field(description=f"{TEXT}: the caption of image")
    negative_caption: Text = Field(description=f"{TEXT}: the caption of negative_image")
    negative_image: object = Field(description="the negative image: {bytes, path} or a file name")


def split_name(path: Path) -> str:
    """The split a Parquet file holds: its stem without a hub shard suffix."""
    return SHARD.sub("", path.stem)


def _image(value: object, images_dir: Path, where: str, table: Path, field: str) -> ImageItem:
    item = image_from_value(value, images_dir, where, table, field)
    if item.data is not None:
        # A key stable under re-sharding and re-export: the split, the row's id and the column.
        return ImageItem(key=f"{where}/{field}", data=item.data)
    return item


def read_bivlc(root: Path) -> list[ComparisonSet]:
    """Every Parquet file under ``root`` (or ``root/data``), grouped by split: a subset of 2x2 blocks each."""
    files = [root] if root.is_file() else sorted(root.glob("*.parquet")) or sorted((root / "data").glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{root}: no BiVLC file; expected {EXPECTS}")
    images_dir = first_dir([root / "images"]) if root.is_dir() else None
    splits: dict[str, list[Path]] = {}
    for path in files:
        splits.setdefault(split_name(path), []).append(path)
    out = []
    for split, paths in splits.items():
        blocks = []
        for path in paths:
            for number, row in enumerate(read_records(path)):
                where = f"{path.stem} row {number}"
                checked = checked_row(BivlcRow, row, path, f"row {number}")
                base = images_dir or path.parent
                first = _image(checked.image, base, where, path, "image")
                second = _image(checked.negative_image, base, where, path, "negative_image")
                tags = tuple(f"{name}={row[name]}" for name in TAG_FIELDS if row.get(name) not in (None, ""))
                blocks.append((f"{path.stem}/{number}", first, second, checked.caption, checked.negative_caption, tags))
        out.append(block_subset(split, paths[0], blocks))
    return out


ADAPTER = Adapter("bivlc", read_bivlc, "BiVLC: Parquet rows image, caption, negative_caption, negative_image", EXPECTS)
