"""VL-CheckList (Zhao et al., 2022): JSON files ``[[image, {"POS": [...], "NEG": [...]}], ...]`` in many folders.

- fields: per entry, the image path (relative to its source's image folder) and an object with
  ``POS`` (true captions) and ``NEG`` (their negatives), each a non-empty list of strings.
- subsets: one per file, named by its path under the root without ``.json``
  (``Attribute/vaw/color``, ``Object/Location/hake_center``, ``Relation/swig/action``, ...).
- one comparison: (image, positive) over (image, negative), for every POS x NEG pair of an entry;
  a negative equal to its positive (the published files hold a few) is dropped and counted.

The paper's protocol and ours: VL-CheckList's own evaluation (``itc``) scores each entry's first
positive against its first negative and counts a tie as wrong; where an entry holds one of each (as
the published entries we have read do), the two readings give the same comparisons. Here every POS x NEG pair is a comparison
and a tie earns half credit, as everywhere in the audit. A repeated entry is scored each time, as
their loop does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import (
    UNREADABLE,
    Adapter,
    first_dir,
    hard_negative_subset,
    image_item,
    read_json,
    unreadable_subset,
)
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import Open, Text, checked_row

EXPECTS = (
    'VL-CheckList JSON files [[image, {"POS": [...], "NEG": [...]}], ...] anywhere under the root; images optional (images/)'
)


class VlCheckListTexts(Open):
    """The caption lists of one VL-CheckList entry."""

    POS: list[Text] = Field(min_length=1, description="a non-empty list of true captions (non-empty strings)")
    NEG: list[Text] = Field(min_length=1, description="a non-empty list of negative captions (non-empty strings)")


def _entries(path: Path) -> list[Any]:
    data = read_json(path)
    if not isinstance(data, list):
        raise ValueError(
            f'{path}: a VL-CheckList file must be a list of [image, {{"POS": [...], "NEG": [...]}}], got {type(data).__name__}'
        )
    return data


def read_vl_checklist(root: Path) -> list[ComparisonSet]:
    """Every JSON file under ``root`` (recursively; ``images/`` excluded) as a subset."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if "images" not in p.relative_to(root).parts)
    if not files:
        raise FileNotFoundError(f"{root}: no VL-CheckList file; expected {EXPECTS}")
    base = root.parent if root.is_file() else root
    images_dir = first_dir([base / "images"]) or base
    out = []
    for path in files:
        name = path.relative_to(base).with_suffix("").as_posix()
        try:
            entries = _entries(path)
        except UNREADABLE as error:
            # One unreadable file is a row of the report; the other subsets are still read.
            out.append(unreadable_subset(name, error))
            continue
        items = []
        for number, entry in enumerate(entries):
            where = f"entry {number}"
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and entry[0].strip()):
                raise ValueError(f'{path}: {where} must be [image path, {{"POS": [...], "NEG": [...]}}], got {entry!r}')
            texts = checked_row(VlCheckListTexts, entry[1], path, where)
            image = image_item(images_dir, entry[0])
            for i, positive in enumerate(texts.POS):
                for j, negative in enumerate(texts.NEG):
                    items.append(((f"{number}/{i}/{j}", str(number)), image, positive, negative, ()))
        out.append(hard_negative_subset(name, path, items))
    return out


ADAPTER = Adapter("vl_checklist", read_vl_checklist, "VL-CheckList: [[image, {POS, NEG}], ...] per file, many folders", EXPECTS)
