"""Cola (Ray et al., 2023), multi-object matching: a JSON list of ``[image_1, caption_1, image_2, caption_2]``.

- fields: per entry, two images (URLs or file names; the file looked up under ``images/`` by its last
  path component) and their captions; both captions use the same objects and attributes.
- subsets: one per JSON file under the root (``COLA_multiobjects_matching_benchmark``, ...).
- one comparison: as Winoground, each entry's two text and two image comparisons; the entry is an
  exact cycle (image_1, image_2, caption_1, caption_2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clip_cycles.benchmark_audit.adapters import Adapter, block_subset, first_dir, read_json
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.data.sources.images import ImageItem

EXPECTS = "Cola JSON files [[image_1, caption_1, image_2, caption_2], ...] in the root; images optional (images/)"


def _image(images_dir: Path, value: str) -> ImageItem:
    name = value.rstrip("/").rsplit("/", 1)[-1]
    return ImageItem(key=value, path=images_dir / name)


def _entry(entry: Any, path: Path, number: int) -> tuple[str, str, str, str]:
    if not (isinstance(entry, list) and len(entry) == 4):
        raise ValueError(f"{path}: entry {number} must be [image_1, caption_1, image_2, caption_2], got {entry!r}")
    for k, field in enumerate(("image_1", "caption_1", "image_2", "caption_2")):
        if not (isinstance(entry[k], str) and entry[k].strip()):
            raise ValueError(
                f"{path}: entry {number}: field {field!r} (position {k}) must be a non-empty string, got {entry[k]!r}"
            )
    return entry[0], entry[1], entry[2], entry[3]


def read_cola(root: Path) -> list[ComparisonSet]:
    """Every JSON file in ``root``: a subset of 2x2 blocks."""
    files = [root] if root.is_file() else sorted(root.glob("*.json")) or sorted((root / "data").glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{root}: no Cola file; expected {EXPECTS}")
    base = root.parent if root.is_file() else root
    images_dir = first_dir([base / "images"]) or base
    out = []
    for path in files:
        data = read_json(path)
        if not isinstance(data, list):
            raise ValueError(
                f"{path}: a Cola file must be a list of [image_1, caption_1, image_2, caption_2], got {type(data).__name__}"
            )
        blocks = []
        for number, entry in enumerate(data):
            image_1, caption_1, image_2, caption_2 = _entry(entry, path, number)
            blocks.append((str(number), _image(images_dir, image_1), _image(images_dir, image_2), caption_1, caption_2, ()))
        out.append(block_subset(path.stem, path, blocks))
    return out


ADAPTER = Adapter("cola", read_cola, "Cola multi-object matching: [image_1, caption_1, image_2, caption_2] blocks", EXPECTS)
