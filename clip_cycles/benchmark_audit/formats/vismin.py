"""VisMin (Awal et al., 2024; HF ``mair-lab/vismin-bench``): Arrow ``save_to_disk`` rows and the published solution.

- rows: a ``datasets`` ``save_to_disk`` folder (``dataset_dict.json`` naming the splits, each split a
  folder with ``dataset_info.json``, ``state.json`` and ``data-*.arrow`` shards in Arrow's stream format),
  columns ``image_0``, ``image_1`` (Image structs ``{bytes, path}``), ``text_0``, ``text_1``, ``id`` and
  ``category`` (``object`` / ``attribute`` / ``counting`` / ``relation``; a tag ``category=``). The root is that
  folder, its ``data/`` (the GitHub layout ``vismin-bench/data``), or one split's folder.
- which text goes with which image is not in the rows: the benchmark publishes it as
  ``solutions/sim_solution.csv`` (``idx, Text, Image, category``; ``Text`` reads ``T0_I0 > T1_I0 & T1_I1 > T0_I1``
  when text_0 is true of image_0, ``T1_I0 > T0_I0 & T0_I1 > T1_I1`` when text_0 is true of image_1), matched
  to the rows of split ``test`` (or of the only split) by position, as the benchmark's own ``eval.py`` does.
  It must be in the root or the root's ``solutions/``. A row whose solution names neither pairing, or whose
  Text and Image relations disagree, is dropped and counted.
- one row is one 2x2 block (an exact cycle); subsets: one per split.

Only regular files inside the root are read, each bounded (:func:`~clip_cycles.regular_files.read_regular_file`);
a shard that is not Arrow is a sentence naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.benchmark_audit.adapters import (
    MAX_BENCHMARK_FILE_BYTES,
    Adapter,
    block_subset,
    image_from_value,
    present,
    read_csv_rows,
    read_json,
)
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.input_formats import TEXT, Open, Text, checked_row
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.regular_files import read_regular_file

EXPECTS = (
    "a datasets save_to_disk folder (dataset_dict.json and split folders holding state.json and data-*.arrow, "
    "columns image_0, image_1, text_0, text_1, id, category) in the root or data/, and VisMin's "
    "solutions/sim_solution.csv (idx, Text, Image, category) in the root or solutions/"
)
SOLUTION_NAMES = ("sim_solution.csv", "solutions/sim_solution.csv")
#: The split the published solution covers (or the only split there is).
SOLUTION_SPLIT = "test"
#: A shard name as save_to_disk writes it; anything else named by state.json is refused.
SHARD_NAME = re.compile(r"^data-\d{5}-of-\d{5}\.arrow$")
#: Solution relations, whitespace removed: text_0 true of image_0 (same) or of image_1 (swapped).
SAME = ("T0_I0>T1_I0&T1_I1>T0_I1", "T0_I0>T0_I1&T1_I1>T1_I0")
SWAPPED = ("T1_I0>T0_I0&T0_I1>T1_I1", "T0_I1>T0_I0&T1_I0>T1_I1")


class VisminRow(Open):
    """One VisMin row: two images and two texts (which goes with which is in the solution file)."""

    image_0: object = Field(description="the first image: {bytes, path}")
    image_1: object = Field(description="the second image: {bytes, path}")
    text_0: Text = Field(description=f"{TEXT}: the first text")
    text_1: Text = Field(description=f"{TEXT}: the second text")


def _split_folders(root: Path) -> list[tuple[str, Path]]:
    """``(split, folder)`` of a save_to_disk root, its ``data/``, or one split folder; [] if none is there."""
    for base in (root, root / "data"):
        if present(base / "state.json") or sorted(base.glob("data-*.arrow")):
            return [(base.name, base)]
        listing = base / "dataset_dict.json"
        if present(listing):
            data = read_json(listing)
            splits = data.get("splits") if isinstance(data, dict) else None
            if not isinstance(splits, list) or not all(isinstance(s, str) and re.fullmatch(r"[\w.-]+", s) for s in splits):
                raise ValueError(f"{listing}: field 'splits' must be a list of split folder names, got {splits!r}")
            return [(split, base / split) for split in splits]
    return []


def _shards(folder: Path) -> list[Path]:
    """The split's Arrow shards: those ``state.json`` lists (plain shard names only), else ``data-*.arrow``."""
    state = folder / "state.json"
    if present(state):
        data = read_json(state)
        files = data.get("_data_files") if isinstance(data, dict) else None
        names = (
            [f.get("filename") for f in files] if isinstance(files, list) and all(isinstance(f, dict) for f in files) else None
        )
        if names is None or not all(isinstance(n, str) and SHARD_NAME.fullmatch(n) for n in names):
            raise ValueError(f"{state}: field '_data_files' must list {{filename: data-NNNNN-of-NNNNN.arrow}}, got {files!r}")
        return [folder / name for name in names]
    return sorted(folder.glob("data-*.arrow"))


def read_arrow_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one Arrow shard (stream format, as save_to_disk writes it; the file format too), read bounded."""
    import pyarrow as pa

    raw = read_regular_file(path, MAX_BENCHMARK_FILE_BYTES, "benchmark file")
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            return opener(pa.BufferReader(raw)).read_all().to_pylist()
        except (pa.ArrowInvalid, OSError):
            continue
    raise ValueError(
        f"{path}: not an Arrow shard (neither Arrow's stream nor its file format); expected save_to_disk's data-*.arrow"
    )


def orientation(row: dict[str, str]) -> bool | None:
    """True when text_0 is true of image_0, False when of image_1, None when the solution says neither."""
    text = re.sub(r"\s+", "", str(row.get("Text") or ""))
    image = re.sub(r"\s+", "", str(row.get("Image") or ""))
    if (text, image) == SAME:
        return True
    if (text, image) == SWAPPED:
        return False
    return None


def read_solution(root: Path) -> tuple[Path, list[bool | None]]:
    """The published solution, one orientation per row (in file order); FileNotFoundError naming where it goes."""
    path = next((root / name for name in SOLUTION_NAMES if present(root / name)), None)
    if path is None:
        raise FileNotFoundError(
            f"{root}: no VisMin solution file; VisMin's rows do not say which text goes with which image: put the "
            "benchmark's solutions/sim_solution.csv (github.com/rabiulcste/vismin, vismin-bench/solutions/) in the root "
            "or its solutions/ folder"
        )
    rows = list(read_csv_rows(path))
    if rows and not {"Text", "Image"} <= set(rows[0]):
        raise ValueError(f"{path}: expected columns idx, Text, Image, category; got {sorted(rows[0])}")
    return path, [orientation(row) for row in rows]


def _image(value: object, base: Path, where: str, table: Path, field: str) -> ImageItem:
    item = image_from_value(value, base, where, table, field)
    if item.data is not None:
        return ImageItem(key=f"{where}/{field}", data=item.data)
    return item


def read_vismin(root: Path) -> list[ComparisonSet]:
    """Every split of the save_to_disk folder, each row a block oriented by the published solution."""
    folders = _split_folders(root) if root.is_dir() else []
    if not folders:
        raise FileNotFoundError(f"{root}: no VisMin Arrow folder; expected {EXPECTS}")
    solution_path, solution = read_solution(root)
    out = []
    for split, folder in folders:
        covered = split == SOLUTION_SPLIT or len(folders) == 1
        rows = [(path, number, row) for path in _shards(folder) for number, row in enumerate(read_arrow_rows(path))]
        if covered and len(rows) != len(solution):
            raise ValueError(
                f"{solution_path}: {len(solution)} solution rows for the {len(rows)} rows of split {split!r}; "
                "the solution matches the rows by position, so the two must be of one release"
            )
        blocks, skipped = [], {}
        for position, (path, number, row) in enumerate(rows):
            where = f"{split}/{path.stem} row {number}"
            checked = checked_row(VisminRow, row, path, f"row {number}")
            same = solution[position] if covered else None
            if same is None:
                reason = "solution_names_no_pairing" if covered else "no_solution_for_split"
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            first = _image(checked.image_0, folder, where, path, "image_0")
            second = _image(checked.image_1, folder, where, path, "image_1")
            texts = (checked.text_0, checked.text_1) if same else (checked.text_1, checked.text_0)
            tags = [f"category={row['category']}"] if row.get("category") not in (None, "") else []
            blocks.append((f"{path.stem}/{number}", first, second, texts[0], texts[1], tags))
        out.append(block_subset(split, folder, blocks, skipped))
    return out


ADAPTER = Adapter(
    "vismin",
    read_vismin,
    "VisMin: Arrow save_to_disk rows image_0, image_1, text_0, text_1, oriented by the published sim_solution.csv",
    EXPECTS,
)
