"""NaturalBench (Li et al., NeurIPS 2024; HF ``BaiqiL/NaturalBench``): two images, two questions, four answers.

- Parquet (the hub's ``data/train-*.parquet``): ``Image_0``, ``Image_1`` (``datasets`` Image structs
  ``{bytes, path}``), ``Question_0``, ``Question_1``, the four answers ``Image_0_Question_0``,
  ``Image_1_Question_0``, ``Image_0_Question_1``, ``Image_1_Question_1`` and the question type
  (``Question Type`` or ``Question_Type``: ``yes_no`` / ``multiple_choice``); ``Source``, where present,
  becomes a tag ``source=``. A yes/no row whose two questions are each answered "yes" on a different
  image is one 2x2 block: each image with the question true of it. A multiple-choice row (its
  answers are option letters, not statements) and a yes/no row whose "yes" answers do not pair the
  questions with the images one to one are dropped and counted.
- NaturalBench-Retrieval (the hub's ``NaturalBench-Retrieval.zip``, unpacked): ``metadata.json``, a list
  of ``{index, image_0, image_1, caption_0, caption_1}``, images under ``images/``; each entry one block.
- subsets: ``retrieval`` for the retrieval form; one per Parquet split (``train-00000-of-00002`` is
  ``train``). NaturalBench's group score (question and image both right) is Winoground's group, a
  cycle-correct rate; CycleAcc is reported beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import (
    UNREADABLE,
    Adapter,
    block_subset,
    first_dir,
    image_from_value,
    image_item,
    present,
    read_json,
    read_records,
    unreadable_subset,
)
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.formats.bivlc import split_name
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row
from clip_cycles.data.sources.images import ImageItem

EXPECTS = (
    "NaturalBench Parquet files (the hub's data/train-*.parquet) with columns Image_0, Image_1, Question_0, "
    "Question_1, Image_0_Question_0, Image_1_Question_0, Image_0_Question_1, Image_1_Question_1 and Question Type, "
    "in the root or data/; or NaturalBench-Retrieval's metadata.json with images/ (in the root or NaturalBench-Retrieval/)"
)
#: The answer columns: (image, question) -> column.
ANSWERS = {(i, q): f"Image_{i}_Question_{q}" for i in (0, 1) for q in (0, 1)}
#: The question-type column, as the hub spells it in one release or the other.
TYPE_FIELDS = ("Question Type", "Question_Type")
YES_NO = "yes_no"
RETRIEVAL = "retrieval"


class NaturalBenchRow(Open):
    """One NaturalBench Parquet row: two images, two questions, the answer of each question on each image."""

    Image_0: object = Field(description="the first image: {bytes, path} or a file name")
    Image_1: object = Field(description="the second image: {bytes, path} or a file name")
    Question_0: Text = Field(description=f"{TEXT}: the first question")
    Question_1: Text = Field(description=f"{TEXT}: the second question")
    Image_0_Question_0: Text = Field(description=f"{TEXT}: the answer of Question_0 on Image_0")
    Image_1_Question_0: Text = Field(description=f"{TEXT}: the answer of Question_0 on Image_1")
    Image_0_Question_1: Text = Field(description=f"{TEXT}: the answer of Question_1 on Image_0")
    Image_1_Question_1: Text = Field(description=f"{TEXT}: the answer of Question_1 on Image_1")


class NaturalBenchRetrievalItem(Open):
    """One entry of NaturalBench-Retrieval's ``metadata.json``: two images and their two captions."""

    image_0: Text = Field(description=f"{TEXT}: the first image file under images/")
    image_1: Text = Field(description=f"{TEXT}: the second image file under images/")
    caption_0: Text = Field(description=f"{TEXT}: the caption of image_0")
    caption_1: Text = Field(description=f"{TEXT}: the caption of image_1")


def _image(value: object, base: Path, where: str, table: Path, field: str) -> ImageItem:
    item = image_from_value(value, base, where, table, field)
    if item.data is not None:
        return ImageItem(key=f"{where}/{field}", data=item.data)  # stable under re-sharding (as bivlc)
    return item


def _question_type(row: dict[str, Any]) -> str | None:
    return next((str(row[name]) for name in TYPE_FIELDS if row.get(name) not in (None, "")), None)


def pairing(checked: NaturalBenchRow) -> tuple[int, int] | None:
    """``(question of Image_0, question of Image_1)`` when each question is "yes" on exactly one image and the
    two on different images; None otherwise (the row is no 2x2 block)."""
    yes = {key: getattr(checked, column).strip().lower() == "yes" for key, column in ANSWERS.items()}
    for first, second in ((0, 1), (1, 0)):
        # Image_0 with question `first` only, Image_1 with question `second` only.
        if yes[(0, first)] and yes[(1, second)] and not yes[(0, second)] and not yes[(1, first)]:
            return first, second
    return None


def _parquet_split(split: str, paths: list[Path], images_dir: Path | None) -> ComparisonSet:
    blocks, skipped = [], {}
    for path in paths:
        for number, row in enumerate(read_records(path)):
            where = f"{path.stem} row {number}"
            checked = checked_row(NaturalBenchRow, row, path, f"row {number}")
            kind = _question_type(row)
            if kind is not None and kind != YES_NO:
                skipped["not_a_yes_no_question"] = skipped.get("not_a_yes_no_question", 0) + 1
                continue
            paired = pairing(checked)
            if paired is None:
                skipped["answers_do_not_pair_questions_with_images"] = (
                    skipped.get("answers_do_not_pair_questions_with_images", 0) + 1
                )
                continue
            base = images_dir or path.parent
            first = _image(checked.Image_0, base, where, path, "Image_0")
            second = _image(checked.Image_1, base, where, path, "Image_1")
            questions = (checked.Question_0, checked.Question_1)
            tags = [f"source={row['Source']}"] if row.get("Source") not in (None, "") else []
            blocks.append((f"{path.stem}/{number}", first, second, questions[paired[0]], questions[paired[1]], tags))
    return block_subset(split, paths[0], blocks, skipped)


def _retrieval(metadata: Path) -> ComparisonSet:
    images_dir = metadata.parent / "images"
    try:
        entries = read_json(metadata)
    except UNREADABLE as error:
        return unreadable_subset(RETRIEVAL, error)
    if not isinstance(entries, list):
        return unreadable_subset(RETRIEVAL, ValueError(f"{metadata}: expected a list of entries, got {type(entries).__name__}"))
    blocks = []
    for number, entry in enumerate(entries):
        block = str(entry.get("index", number)) if isinstance(entry, dict) else str(number)
        checked = checked_row(NaturalBenchRetrievalItem, entry, metadata, f"entry {number}")
        first, second = image_item(images_dir, checked.image_0), image_item(images_dir, checked.image_1)
        blocks.append((block, first, second, checked.caption_0, checked.caption_1, ()))
    return block_subset(RETRIEVAL, metadata, blocks)


def read_naturalbench(root: Path) -> list[ComparisonSet]:
    """The retrieval form's ``metadata.json`` (subset ``retrieval``) and every Parquet split, whichever are there."""
    if root.is_file():
        files, metadata = ([root], None) if root.suffix == ".parquet" else ([], root)
    else:
        files = sorted(root.glob("*.parquet")) or sorted((root / "data").glob("*.parquet"))
        metadata = next(
            (p for p in (root / "metadata.json", root / "NaturalBench-Retrieval" / "metadata.json") if present(p)), None
        )
    if not files and metadata is None:
        raise FileNotFoundError(f"{root}: no NaturalBench file; expected {EXPECTS}")
    out = [_retrieval(metadata)] if metadata is not None else []
    images_dir = first_dir([root / "images"]) if root.is_dir() else None
    splits: dict[str, list[Path]] = {}
    for path in files:
        splits.setdefault(split_name(path), []).append(path)
    out += [_parquet_split(split, paths, images_dir) for split, paths in splits.items()]
    return out


ADAPTER = Adapter(
    "naturalbench",
    read_naturalbench,
    "NaturalBench: Parquet rows Image_0, Image_1, Question_0, Question_1 and their four answers (yes/no rows "
    "pairing each question with one image are 2x2 blocks), or NaturalBench-Retrieval's metadata.json",
    EXPECTS,
)
