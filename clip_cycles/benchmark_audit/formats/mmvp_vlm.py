"""MMVP-VLM (Tong et al., 2024): ``Questions.csv`` (``Question ID``, ``Type``, ``Statement``), rows in pairs.

- fields: ``Question ID`` (the image ``<Type>/<Question ID>.jpg``), ``Type`` (one of nine visual
  patterns), ``Statement`` (true of its own image); rows 2k and 2k+1 are one pair of "CLIP-blind" images.
- subsets: one per ``Type`` (``Orientation and Direction``, ``Color and Appearance``, ...).
- one comparison: as Winoground, each pair's two text and two image comparisons; the pair is an exact
  cycle (MMVP-VLM counts a pair right when both images pick their own statement: the text comparisons).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import Adapter, block_subset, first_dir, image_item, present, read_csv_rows
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

EXPECTS = (
    "MMVP-VLM's Questions.csv (Question ID, Type, Statement) in the root or MMVP_VLM/; "
    "images optional (<Type>/<id>.jpg, also under images/)"
)
ID, TYPE, STATEMENT = "Question ID", "Type", "Statement"


class MmvpRow(Open):
    """One row of Questions.csv: an image's id, its visual pattern and its statement."""

    question_id: Text = Field(alias=ID, description=f"{TEXT}: the image id")
    type: Text = Field(alias=TYPE, description=f"{TEXT}: the visual pattern")
    statement: Text = Field(alias=STATEMENT, description=f"{TEXT}: the statement true of the image")


def read_mmvp_vlm(root: Path) -> list[ComparisonSet]:
    """Questions.csv: one subset of 2x2 blocks per visual pattern."""
    table = (
        root
        if root.is_file()
        else next((p for p in (root / "Questions.csv", root / "MMVP_VLM" / "Questions.csv") if present(p)), None)
    )
    if table is None:
        raise FileNotFoundError(f"{root}: no MMVP-VLM table; expected {EXPECTS}")
    images_dir = first_dir([table.parent / "images", table.parent / "MLLM_VLM Images"]) or table.parent
    rows = list(enumerate(read_csv_rows(table), 2))
    if len(rows) % 2:
        raise ValueError(f"{table}: line {rows[-1][0]}: rows come in pairs (one per image), the last row has no partner")
    checked = [(number, checked_row(MmvpRow, row, table, f"line {number}")) for number, row in rows]
    blocks: dict[str, list] = {}
    for (n0, first), (n1, second) in zip(checked[::2], checked[1::2]):
        if first.type != second.type:
            raise ValueError(
                f"{table}: line {n1}: field 'Type' must equal line {n0}'s ({first.type!r}) in a pair, got {second.type!r}"
            )
        image_0 = image_item(images_dir, f"{first.type}/{first.question_id}.jpg")
        image_1 = image_item(images_dir, f"{second.type}/{second.question_id}.jpg")
        blocks.setdefault(first.type, []).append(
            (f"{first.question_id}-{second.question_id}", image_0, image_1, first.statement, second.statement, ())
        )
    return [block_subset(name, table, found) for name, found in blocks.items()]


ADAPTER = Adapter("mmvp_vlm", read_mmvp_vlm, "MMVP-VLM: pairs of statements over pairs of images, nine patterns", EXPECTS)
