"""VALSE (Parcalabescu et al., 2022): one JSON per piece, ``{id: {image_file, caption, foil, mturk, ...}}``.

- fields: ``image_file`` (the image, under the piece's source dataset folder), ``caption`` (the
  caption or declarative statement), ``foil`` (the altered caption, as the published files hold it;
  a list ``foils`` is read too, one comparison per foil), ``mturk`` (the three annotators' votes:
  ``caption`` counts those who chose the caption and not the foil); ``dataset`` becomes a tag; other
  keys (``classes``, ``classes_foil``, ...) are kept but not read.
- subsets: one per JSON file under the root, subfolders included (its stem: ``existence``, ``plurals``,
  ``counting_hard``, ``relation``, ``actant-swap`` (published under ``data/actions/``),
  ``coreference-standard``, ``foil-it``, ...); two files with one stem are refused.
- one comparison: (image, caption) over (image, foil), one per foil.

Which instances, the paper's and ours: the published files hold validated and unvalidated
instances, and VALSE's authors evaluate only the valid set, ``mturk.caption >= 2`` (two of three
annotators chose the caption and not the foil). Format ``valse`` is that protocol: the other
instances are dropped and counted per piece (``skipped``: ``not_valid_mturk_caption_lt_2``), and an
instance without ``mturk.caption`` is refused. Format ``valse_all`` reads every instance.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import (
    UNREADABLE,
    Adapter,
    first_dir,
    hard_negative_subset,
    image_item,
    read_records,
    unreadable_subset,
)
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row

EXPECTS = (
    "VALSE's piece files (existence.json, plurals.json, counting_hard.json, relation.json, actions/actant-swap.json, ...) "
    "anywhere under the root; images optional (images/)"
)
#: VALSE's valid set: at least two of the three annotators chose the caption and not the foil.
VALID_MIN_VOTES = 2
NOT_VALID = f"not_valid_mturk_caption_lt_{VALID_MIN_VOTES}"


class ValseItem(Open):
    """One VALSE instance: an image, its caption and the foils."""

    image_file: Text = Field(description=f"{TEXT}: the image file")
    caption: Text = Field(description=f"{TEXT}: the caption or declarative statement")
    foils: list[Text] = Field(min_length=1, description="the foil (a non-empty string) or a list of at least one")


class ValseVotes(Open):
    """The annotators' votes of one instance (``mturk``)."""

    caption: int = Field(ge=0, le=3, description="how many of the three annotators chose the caption and not the foil (0 to 3)")


def _row(row: dict, path: Path, where: str) -> dict:
    """The row with its foil(s) as ``foils``; a ValueError naming ``foil`` when it is neither a string nor a list."""
    if "foils" in row or "foil" not in row:
        return row
    foil = row["foil"]
    if not isinstance(foil, (str, list)):
        raise ValueError(f"{path}: {where}: field 'foil' must be a non-empty string (or a list of them), got {foil!r}")
    return {**row, "foils": [foil] if isinstance(foil, str) else foil}


def _is_valid(row: dict, path: Path, where: str) -> bool:
    """The paper's rule, or a ValueError naming the missing or malformed ``mturk`` field."""
    votes = row.get("mturk")
    if not isinstance(votes, dict):
        raise ValueError(
            f"{path}: {where}: field 'mturk' must be an object with 'caption' (the annotators' votes), got {votes!r}; "
            "VALSE's valid set needs it (use format valse_all to read every instance)"
        )
    return checked_row(ValseVotes, votes, path, f"{where}: mturk").caption >= VALID_MIN_VOTES


def _check_unique_pieces(files: list[Path]) -> None:
    """A piece is named by its file's stem; two files with one stem are refused, naming both."""
    seen: dict[str, Path] = {}
    for path in files:
        if path.stem in seen:
            raise ValueError(
                f"{seen[path.stem]} and {path}: two VALSE piece files named {path.stem!r}; "
                "point --root at the folder of the published pieces (VALSE's data/), not at a folder holding copies"
            )
        seen[path.stem] = path


def _reader(valid_only: bool):
    def read_valse(root: Path) -> list[ComparisonSet]:
        """Every piece file under ``root`` (subfolders included) as a subset of caption-vs-foil comparisons."""
        folder = root.parent if root.is_file() else root
        # Pieces may sit in subfolders (VALSE ships actant-swap.json under data/actions/): every JSON below the root.
        files = [root] if root.is_file() else sorted(folder.rglob("*.json"))
        if not files:
            raise FileNotFoundError(f"{root}: no VALSE piece file; expected {EXPECTS}")
        _check_unique_pieces(files)
        images_dir = first_dir([root / "images", folder / "images"]) or folder
        out = []
        for path in files:
            try:
                rows = read_records(path)
            except UNREADABLE as error:
                out.append(unreadable_subset(path.stem, error))
                continue
            items, skipped = [], {}
            for number, row in enumerate(rows):
                item_id = str(row.get("_id", number)) if isinstance(row, dict) else str(number)
                where = f"item {item_id}"
                if not isinstance(row, dict) or "_bad" in row:  # a list (or object) of non-objects
                    raise ValueError(f"{path}: {where} must be an object with image_file, caption, foil")
                item = checked_row(ValseItem, _row(row, path, where), path, where)
                if valid_only and not _is_valid(row, path, where):
                    skipped[NOT_VALID] = skipped.get(NOT_VALID, 0) + 1
                    continue
                tags = [f"dataset={row['dataset']}"] if row.get("dataset") else []
                image = image_item(images_dir, item.image_file)
                for k, foil in enumerate(item.foils):
                    items.append(((f"{item_id}/{k}", item_id), image, item.caption, foil, tags))
            out.append(hard_negative_subset(path.stem, path, items, skipped=skipped))
        return out

    return read_valse


ADAPTER = Adapter(
    "valse", _reader(True), "VALSE: one JSON per piece, caption and foil; the paper's valid set (mturk caption >= 2)", EXPECTS
)
ADAPTER_ALL = Adapter(
    "valse_all", _reader(False), "VALSE: one JSON per piece, caption and foil; every instance, validated or not", EXPECTS
)
