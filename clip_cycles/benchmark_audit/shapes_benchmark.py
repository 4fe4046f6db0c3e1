"""A SugarCrepe-format benchmark made offline from the shapes world's built cycle families (the demo's audit).

``clip-cycles demo`` audits it with ``audit-benchmark``'s code path, so the demo's page has a
benchmark-audit table with real numbers. Each subset is one file
``<subset>.json`` = ``{id: {filename, caption, negative_caption}}`` (SugarCrepe's published
shape), images under ``images/`` by their source-relative name (the ``sugarcrepe``
adapter's ``images/`` folder), from one seed's test split of a family:

- ``swap_att`` (GQA ``binding``) and ``replace_rel`` (COCO ``strict_left_right``): both
  directions of every cycle, (image_0, caption_0 > caption_1) then (image_1, caption_1 >
  caption_0). The design is balanced, so every caption-only score averages 0.5 over each
  pair, and the adapter's pairing finds every cycle again as an exact cycle: its CycleAcc
  is the family's zero-shot CycleAcc on that seed and split.
- ``add_obj`` (COCO ``coarse_object``): one direction, image_0 with caption_0 against the
  negative "caption_0 and caption_1". caption_1 is false for image_0 (the family's swap
  rule), so the conjunction is false too, and it is always longer: the shortest caption
  wins every comparison without looking at the image, the length artefact of real
  hard-negative benchmarks. No reversed pair exists, so no exact cycle either.

``shapes_benchmark.json`` beside the files records the construction (families, seed,
split, counts, subsets left out with their reason). Same rows give byte-identical files.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.outputs import atomic_write_bytes, replace_folder, staging_folder
from clip_cycles.tasks.loading import load_task_data, resolve_dataset_roots
from clip_cycles.tasks.registry import expand_tasks

#: The ``audit-benchmark`` format the files are in, and the benchmark's name in the demo's results.
FORMAT = "sugarcrepe"
NAME = "shapes_sugarcrepe"
#: The split every subset is drawn from (the one zero-shot evaluation scores).
SPLIT = "test"


@dataclass(frozen=True)
class SubsetDesign:
    """One subset: the SugarCrepe file it fills, the cycle task it is made from, and how."""

    subset: str
    task: str
    design: str  # "both_directions" | "conjunction"
    description: str


#: The subsets in file order. A subset must be one of SugarCrepe's seven file names for the adapter to read it.
SUBSETS: tuple[SubsetDesign, ...] = (
    SubsetDesign(
        "add_obj",
        "cycles/shapes_coarse_object",
        "conjunction",
        "image_0 with caption_0 vs 'caption_0 and caption_1' (false: caption_1 is false for image_0); always longer",
    ),
    SubsetDesign(
        "replace_rel",
        "cycles/shapes_strict_left_right",
        "both_directions",
        "both directions of every left/right cycle: balanced, every cycle found again as an exact cycle",
    ),
    SubsetDesign(
        "swap_att",
        "cycles/shapes_gqa_binding",
        "both_directions",
        "both directions of every attribute-binding cycle: balanced, every cycle found again as an exact cycle",
    ),
)


def hard_negatives(rows: CycleRows, design: str) -> list[tuple[str, str, str]]:
    """``(image key, caption, negative caption)`` per comparison of a subset made from ``rows`` by ``design``."""
    out = []
    for i in range(len(rows)):
        (first, second), (caption_0, caption_1) = rows.image_pair(i), rows.caption_pair(i)
        if design == "both_directions":
            # Consecutive, so the adapter's greedy pairing joins each cycle's two comparisons back into it.
            out += [(first.key, caption_0, caption_1), (second.key, caption_1, caption_0)]
        elif design == "conjunction":
            out.append((first.key, caption_0, f"{caption_0} and {caption_1}"))
        else:
            raise ValueError(f"unknown subset design {design!r}; known: both_directions, conjunction")
    return out


def _image_name(key: str) -> str:
    """The source-relative image name, refused unless it stays below ``images/`` (relative, no '..')."""
    path = PurePosixPath(key)
    if path.is_absolute() or ".." in path.parts or "\\" in key or not path.parts:
        raise ValueError(f"image {key!r} is not a relative name below the source root; rebuild the family folder")
    return path.as_posix()


def sugarcrepe_files(comparisons: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, dict[str, dict[str, str]]]:
    """``{subset: {id: {filename, caption, negative_caption}}}``; ids zero-padded so sorted order is file order."""
    width = len(str(max((len(c) for c in comparisons.values()), default=1)))
    return {
        subset: {
            f"{subset}_{n:0{width}d}": {"filename": _image_name(key), "caption": caption, "negative_caption": negative}
            for n, (key, caption, negative) in enumerate(items)
        }
        for subset, items in comparisons.items()
    }


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _holds_exactly(folder: Path, contents: Mapping[str, bytes]) -> bool:
    """Whether ``folder`` holds exactly the regular files ``contents`` names (relative POSIX paths), with those bytes."""
    if not folder.is_dir():
        return False
    try:
        found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if not p.is_dir()}
        if set(found) != set(contents):
            return False
        return all(
            found[name].is_file() and not found[name].is_symlink() and found[name].read_bytes() == data
            for name, data in contents.items()
        )
    except OSError:
        return False


def write_shapes_sugarcrepe(
    out: str | Path, rows: Mapping[str, CycleRows], unavailable: Mapping[str, str] | None = None, seed: int = 0
) -> dict[str, Any]:
    """Write the benchmark into ``out`` (replaced as a whole) from each subset's cycle rows; returns its description.

    ``rows`` maps a :data:`SUBSETS` name to the cycles it is made from; ``unavailable``
    names the subsets left out and why (written into ``shapes_benchmark.json``).
    ValueError when no subset is left or a name is not one of :data:`SUBSETS`.
    """
    designs = {d.subset: d for d in SUBSETS}
    unknown = sorted(set(rows) - set(designs))
    if unknown:
        raise ValueError(f"subsets {unknown} are not shapes benchmark subsets; known: {sorted(designs)}")
    if not rows:
        raise ValueError(f"no subset of the shapes benchmark is available ({dict(unavailable or {})})")
    comparisons = {d.subset: hard_negatives(rows[d.subset], d.design) for d in SUBSETS if d.subset in rows}
    files = sugarcrepe_files(comparisons)
    images = {_image_name(item.key): item for subset_rows in rows.values() for item in subset_rows.image_items}
    used = sorted({row["filename"] for subset in files.values() for row in subset.values()})
    description = {
        "benchmark": NAME,
        "format": FORMAT,
        "seed": seed,
        "split": SPLIT,
        "subsets": {
            d.subset: {
                "task": d.task,
                "design": d.design,
                "description": d.description,
                "comparisons": len(comparisons[d.subset]),
            }
            for d in SUBSETS
            if d.subset in comparisons
        },
        "unavailable": dict(sorted((unavailable or {}).items())),
        "images": len(used),
    }
    target = Path(out)
    contents = {f"{subset}.json": _json_bytes(data) for subset, data in files.items()}
    contents.update({f"images/{name}": images[name].read_bytes() for name in used})  # bounded reads of regular files
    contents["shapes_benchmark.json"] = _json_bytes(description)
    if _holds_exactly(target, contents):
        return description  # a rerun on the same rows: the folder already is this benchmark, byte for byte
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_folder(target)
    try:
        for name, data in contents.items():
            atomic_write_bytes(staging / name, data)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # the previous benchmark stays as it was
        raise
    replace_folder(staging, target)
    return description


def demo_subset_rows(dataset_root: Path, data_cache_dir: Path, seed: int = 0) -> tuple[dict[str, CycleRows], dict[str, str]]:
    """Each subset's cycle rows (``seed``, test split) from the families built from ``dataset_root``, and the
    subsets whose family is unavailable there, with the reason (a small world may lack some)."""
    tasks = {d.subset: expand_tasks([d.task])[0] for d in SUBSETS}
    folders = resolve_dataset_roots(list(tasks.values()), dataset_root, data_cache_dir)
    rows: dict[str, CycleRows] = {}
    unavailable: dict[str, str] = {}
    for subset, task in tasks.items():
        if task.split != SPLIT:
            raise ValueError(f"task {task.name} scores split {task.split!r}; the shapes benchmark is drawn from {SPLIT!r}")
        data = load_task_data(task, folders[task.name], [seed])
        if data.unavailable is not None:
            unavailable[subset] = data.unavailable
            continue
        rows[subset] = data.splits[seed][task.split]
    return rows, unavailable
