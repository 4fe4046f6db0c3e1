"""Zero-shot evaluation of a model on cycle tasks: CycleAcc, Winoground scores, the additive audit.

``clip-cycles eval --task cycles/<name> --model-type open_clip --model ViT-B-32
--pretrained openai --dataset-root <built folder or raw root>`` and the clip_benchmark
plugin (:mod:`clip_cycles.integrations.clip_benchmark`) both end here:

1. tasks are resolved through the registry (:mod:`clip_cycles.tasks.registry`), collections expanded;
2. each task's dataset root is resolved: a built folder is used as is, a raw COCO/GQA
   root (or the shapes world) has the needed families built into a cache directory
   first and reused afterwards;
3. the unique images and captions of every cycle of every task and seed are encoded
   once (:func:`clip_cycles.encoding.encoder.encode`, through the feature cache);
4. each seed's (N, 2, 2) cosine blocks give CycleAcc (float64, one fixed tie tolerance)
   and text/image/group accuracy with Winoground semantics; seeds are summarized by
   mean and sample sd.

Under ``torchrun`` the encoding is sharded across ranks and rank 0 scores
(:mod:`clip_cycles.encoding.distributed`); the other ranks write nothing.

Results use clip_benchmark's JSON format ``{dataset, model, pretrained, task, metrics,
language}`` so ``clip_benchmark build`` aggregates them to CSV.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from clip_cycles.algebra.contrast import block_scores_from_embeddings, cycle_acc, deltas_from_blocks, mean_and_sd
from clip_cycles.algebra.winoground import winoground_scores
from clip_cycles.encoding.encoder import EncodedFeatures, ImageItem, ModelSpec, add_model_arguments
from clip_cycles.tasks.registry import TaskSpec, check_seeds, expand_tasks, seed_argument

#: clip_benchmark's task name for cycle results (the ``task`` field and ``{task}`` in --output).
RESULT_TASK = "cycles"
CACHE_ENV = "CLIP_CYCLES_CACHE"
DEFAULT_OUTPUT = "{dataset}_{pretrained}_{model}_{language}_{task}.json"
ROW_FIELDS = ("image_0", "image_1", "caption_0", "caption_1", "cycle_id")

#: Default size of the shapes world generated when a shapes task gets no --dataset-root.
DEFAULT_SHAPES_IMAGES = 400


def resolve_cache_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Feature cache root: ``path``, else ``$CLIP_CYCLES_CACHE``, else ``~/.cache/clip_cycles``."""
    if path:
        return Path(path)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path.home() / ".cache" / "clip_cycles"


# --------------------------------------------------------------------------- dataset roots


@dataclass
class BuiltFolder:
    """A built dataset folder (DEVELOPING.md "Built dataset folders")."""

    root: Path
    info: dict[str, Any]
    #: file name -> its ImageItem, so each distinct image is resolved once per folder
    image_items: dict[str, ImageItem] = field(default_factory=dict, repr=False, compare=False)

    @property
    def source(self) -> str:
        return str(self.info.get("source", ""))

    @property
    def source_root(self) -> Path:
        return Path(self.info.get("source_root", ""))

    def is_shapes_world(self) -> bool:
        return self.source == "shapes" or (self.source_root / "shapes_world.json").is_file()


def open_built_folder(root: str | Path, families: Sequence[str] | None = None, verify: bool = True) -> BuiltFolder:
    """Read and validate ``build_info.json`` of a built folder, then verify its Parquet files.

    Errors name the file and field; with ``verify`` every Parquet file of ``families``
    (default: all) must have the row count and sha256 recorded at build time, else a
    ValueError names each mismatching file: an edited folder is never scored.
    """
    from clip_cycles.data.dataset_folder import read_build_info, verify_folder_files

    root = Path(root)
    info = read_build_info(root)
    if verify:
        problems = verify_folder_files(root, info, families=families)
        if problems:
            raise ValueError(
                f"{root} does not match its build_info.json, refusing to score it: " + "; ".join(problems)
                + f". Rebuild it: {info.get('rebuild_command', 'clip-cycles build ...')}"
            )
    return BuiltFolder(root, info)


def raw_root_fingerprint(kind: str, root: Path, hash_cache: Path | None = None) -> dict[str, Any]:
    """Content fingerprint of a raw source root: its annotation files and its image listing.

    Annotation files (COCO ``annotations/*.json``, GQA ``*_sceneGraphs.json``, the shapes
    world's marker) enter by size, mtime and sha256 (remembered per file in
    ``hash_cache``); image folders by their listing with size and mtime, without reading
    the images. Any change gives a different fingerprint.
    """
    from clip_cycles.encoding.feature_cache import file_fingerprint, listing_fingerprint

    root = root.resolve()
    annotation_files = sorted({*root.glob("annotations/*.json"), *root.glob("*_sceneGraphs.json"),
                               *root.glob("shapes_world.json")})
    annotations = {p.relative_to(root).as_posix(): file_fingerprint(p, hash_cache) for p in annotation_files}
    image_dirs = ["train2017", "val2017"] if kind in ("coco", "shapes") else ["images"]
    if kind == "shapes":
        image_dirs = ["train2017", "val2017"]
    images = {name: listing_fingerprint(root / name) for name in image_dirs if (root / name).is_dir()}
    return {"kind": kind, "root": str(root), "annotations": annotations, "images": images}


def _fingerprint_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """What differs between two raw-root fingerprints, in words."""
    if not isinstance(old, dict):
        return "no source fingerprint was stored with the cached build"
    before, after = old.get("annotations", {}), new["annotations"]
    changed = [f"{name} {'removed' if name not in after else 'added' if name not in before else 'changed'}"
               for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]
    changed += [f"{name}/ listing changed" for name in sorted(set(old.get("images", {})) | set(new["images"]))
                if old.get("images", {}).get(name) != new["images"].get(name)]
    return ", ".join(changed) or "the fingerprint format changed"


def raw_source_kind(root: Path) -> str | None:
    """``"shapes"``, ``"coco"``, ``"gqa"`` or None for a directory that holds no raw source."""
    if (root / "shapes_world.json").is_file():
        return "shapes"
    if (root / "annotations" / "instances_val2017.json").is_file():
        return "coco"
    if any((root / name).is_file() for name in ("val_sceneGraphs.json", "train_sceneGraphs.json")):
        return "gqa"
    return None


def family_builder_source(family: str) -> str:
    """Which builder (``coco`` or ``gqa``) registers ``family``."""
    from clip_cycles.data import families as registry

    for source in ("coco", "gqa"):
        try:
            if family in registry.list_families(source):
                return source
        except (ValueError, ImportError):
            continue
    raise ValueError(f"no COCO or GQA builder registers a family named {family!r}")


def build_from_raw(source: str, raw_root: Path, families: Sequence[str], out: Path) -> Path:
    """Build ``families`` with builder ``source`` (coco | gqa) from ``raw_root`` into ``out``.

    Calls the builder API of :mod:`clip_cycles.data.build` (``build_coco_folder`` /
    ``build_gqa_folder``), the code behind ``clip-cycles build coco|gqa``, with its defaults.
    """
    from clip_cycles.data import build

    builders = {"coco": build.build_coco_folder, "gqa": build.build_gqa_folder}
    # allow_empty: an unavailable family is reported per task (its reason), not a failed build.
    folder, _ = builders[source](raw_root, out, families=list(families), allow_empty=True)
    return Path(folder)


def _expected_roots_message(task: TaskSpec, root: Path | None) -> str:
    where = f"--dataset_root {root}" if root is not None else "no --dataset_root"
    return (
        f"task {task.name}: {where} is neither a built dataset folder (a folder with build_info.json and "
        f"data/<family>/seed<k>/<split>.parquet, made by `clip-cycles build {task.source if task.source != 'shapes' else 'coco'} "
        f"--{task.source if task.source != 'shapes' else 'coco'}-root <raw root> --out <folder>`) nor a raw source root "
        f"(COCO: annotations/instances_val2017.json and val2017/; GQA: val_sceneGraphs.json; shapes world: "
        f"shapes_world.json, made by `clip-cycles build shapes --out <folder>`)"
    )


def _check_source(task: TaskSpec, folder: BuiltFolder) -> None:
    have = "shapes" if folder.is_shapes_world() else folder.source
    if have != task.source:
        raise ValueError(
            f"task {task.name} needs {task.source} cycles but {folder.root / 'build_info.json'} holds "
            f"{'shapes-world' if have == 'shapes' else have} cycles (source {folder.source!r}, source_root "
            f"{str(folder.source_root)!r}); pass a {task.source} folder or raw root"
        )


def _raw_root(task: TaskSpec, root: Path | None, data_cache_dir: Path) -> tuple[str, Path]:
    if root is None:
        if task.source != "shapes":
            raise ValueError(_expected_roots_message(task, None))
        raw = data_cache_dir / "shapes_world"
        if not (raw / "shapes_world.json").is_file():
            from clip_cycles.data.shapes_world import write_shapes_world

            print(f"generating the shapes world ({DEFAULT_SHAPES_IMAGES} images) in {raw}", file=sys.stderr)
            write_shapes_world(raw, n_images=DEFAULT_SHAPES_IMAGES)
        return "shapes", raw
    kind = raw_source_kind(root)
    if kind is None:
        raise ValueError(_expected_roots_message(task, root))
    if kind != task.source and not (kind == "shapes" and task.source in ("coco", "gqa")):
        raise ValueError(f"task {task.name} needs {task.source} data but {root} is a raw {kind} root")
    return kind, root


def resolve_dataset_roots(tasks: Sequence[TaskSpec], dataset_root: str | Path | None, data_cache_dir: Path,
                          build: Callable[[str, Path, Sequence[str], Path], Path] = build_from_raw
                          ) -> dict[str, BuiltFolder]:
    """The built folder of each task: the given one, or one built from a raw root into ``data_cache_dir``.

    Families needed from the same raw root and builder are built together, once; the
    folder is reused by later runs and rebuilt (with the union of families) only when a
    task needs a family it lacks.
    """
    root = Path(dataset_root).expanduser() if dataset_root else None
    if root is not None and not root.exists():
        raise FileNotFoundError(f"--dataset_root {root} does not exist")
    out: dict[str, BuiltFolder] = {}
    if root is not None and (root / "build_info.json").is_file():
        folder = open_built_folder(root, families=sorted({t.config for t in tasks if t.config}))
        for task in tasks:
            _check_source(task, folder)
            out[task.name] = folder
        return out
    from clip_cycles.encoding.feature_cache import canonical_json, digest

    groups: dict[tuple[str, Path, str], list[TaskSpec]] = {}
    for task in tasks:
        kind, raw = _raw_root(task, root, data_cache_dir)
        groups.setdefault((kind, raw, family_builder_source(task.config)), []).append(task)
    for (kind, raw, builder), members in groups.items():
        target = data_cache_dir / f"{kind}-{builder}-{digest(str(raw.resolve()), 16)}"
        # The fingerprint of the raw root the cached build was made from sits beside it.
        stamp = target.with_name(target.name + ".source.json")
        fingerprint = raw_root_fingerprint(kind, raw, data_cache_dir / "fingerprints")
        needed = sorted({t.config for t in members})
        have: list[str] = []
        why = ""
        if (target / "build_info.json").is_file():
            try:
                stored = json.loads(stamp.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                stored = None
            if stored != fingerprint:
                why = f"the raw root changed since the cached build ({_fingerprint_changes(stored, fingerprint)})"
            else:
                try:
                    have = sorted(open_built_folder(target).info.get("families", {}))
                except (ValueError, FileNotFoundError) as error:
                    why = f"the cached build does not verify ({error})"
        if why or not set(needed) <= set(have):
            families = sorted(set(needed) | set(have))
            reason = why or f"families {sorted(set(needed) - set(have))} are not in the cached build"
            print(f"building {builder} families {families} from {raw} into {target}: {reason}", file=sys.stderr)
            staging = target.with_name(target.name + f".building-{os.getpid()}")
            if staging.exists():
                shutil.rmtree(staging)
            build(builder, raw, families, staging)
            # Fingerprint again: a raw root edited during the build must not be stamped as its source.
            if raw_root_fingerprint(kind, raw, data_cache_dir / "fingerprints") != fingerprint:
                shutil.rmtree(staging, ignore_errors=True)
                raise ValueError(f"{raw} changed while the families were being built from it; run again")
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
            from clip_cycles.encoding.feature_cache import atomic_write_bytes

            atomic_write_bytes(stamp, (canonical_json(fingerprint) + "\n").encode("utf-8"))
        folder = open_built_folder(target, families=needed)
        for task in members:
            out[task.name] = folder
    return out


# --------------------------------------------------------------------------- cycle rows


class UnavailableFamily(ValueError):
    """The family was built but declared unavailable (minimum-cycle rule); reported, not scored."""


@dataclass
class CycleRows:
    """The cycles of one (task, seed, split), column-wise.

    Row ``i`` pairs images ``image_items[image_index[i, 0]]`` and ``image_items[image_index[i, 1]]``
    with captions ``captions[caption_index[i, 0]]`` and ``captions[caption_index[i, 1]]``.
    ``image_items`` and ``captions`` (formatted by the task) are unique, in order of first
    appearance (row by row, ``_0`` before ``_1``); ``cycle_ids`` is a pyarrow string array.
    """

    cycle_ids: Any
    image_items: list[ImageItem]
    image_index: np.ndarray
    captions: list[str]
    caption_index: np.ndarray

    def __len__(self) -> int:
        return int(self.image_index.shape[0])

    def image_pair(self, i: int) -> tuple[ImageItem, ImageItem]:
        """The two image items of row ``i``."""
        a, b = self.image_index[i]
        return self.image_items[a], self.image_items[b]

    def caption_pair(self, i: int) -> tuple[str, str]:
        """The two (formatted) captions of row ``i``."""
        a, b = self.caption_index[i]
        return self.captions[a], self.captions[b]

    @classmethod
    def from_pairs(cls, cycle_ids: Sequence[str], image_pairs: Sequence[tuple[ImageItem, ImageItem]],
                   caption_pairs: Sequence[tuple[str, str]]) -> CycleRows:
        """Rows from per-cycle pairs (items interned by key, captions by text), e.g. for data built in code."""
        import pyarrow as pa

        if not len(cycle_ids) == len(image_pairs) == len(caption_pairs):
            raise ValueError(f"{len(cycle_ids)} cycle ids, {len(image_pairs)} image pairs and "
                             f"{len(caption_pairs)} caption pairs: one of each per cycle")
        images: dict[str, int] = {}
        items: list[ImageItem] = []
        for pair in image_pairs:
            for item in pair:
                if item.key not in images:
                    images[item.key] = len(items)
                    items.append(item)
        captions: dict[str, int] = {}
        for pair in caption_pairs:
            for text in pair:
                captions.setdefault(text, len(captions))
        image_index = np.array([[images[a.key], images[b.key]] for a, b in image_pairs], dtype=np.int64).reshape(-1, 2)
        caption_index = np.array([[captions[a], captions[b]] for a, b in caption_pairs], dtype=np.int64).reshape(-1, 2)
        return cls(pa.array(list(cycle_ids), type=pa.string()), items, image_index, list(captions), caption_index)

    @classmethod
    def concat(cls, parts: Sequence[CycleRows]) -> CycleRows:
        """The rows of ``parts`` one after another (items re-interned by key and text)."""
        import pyarrow as pa

        images: dict[str, int] = {}
        items: list[ImageItem] = []
        captions: dict[str, int] = {}
        image_index, caption_index = [], []
        for part in parts:
            image_map = np.empty(len(part.image_items), dtype=np.int64)
            for k, item in enumerate(part.image_items):
                if item.key not in images:
                    images[item.key] = len(items)
                    items.append(item)
                image_map[k] = images[item.key]
            caption_map = np.array([captions.setdefault(c, len(captions)) for c in part.captions], dtype=np.int64)
            image_index.append(image_map[part.image_index])
            caption_index.append(caption_map[part.caption_index])
        ids = pa.concat_arrays([pa.array(p.cycle_ids, type=pa.string()) for p in parts]) if parts else pa.array(
            [], type=pa.string())
        return cls(ids, items, np.concatenate(image_index).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64),
                   list(captions), np.concatenate(caption_index).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64))


def _image_item(value: Any, folder: BuiltFolder) -> ImageItem:
    """The item of one image value (interned per folder for file names); ValueError says what is wrong."""
    if isinstance(value, str):
        item = folder.image_items.get(value)
        if item is None:
            if not value or Path(value).is_absolute() or ".." in Path(value).parts:
                raise ValueError(f"image file name {value!r} must be relative to the source root")
            item = folder.image_items[value] = ImageItem(key=value, path=folder.source_root / value)
        return item
    if isinstance(value, dict) and (value.get("bytes") or value.get("path")):
        data = value.get("bytes")
        name = value.get("path") or ""
        if data is None:
            return ImageItem(key=name, path=(folder.root / name))
        from clip_cycles.encoding.feature_cache import content_hash

        return ImageItem(key=name or f"sha256:{content_hash(data)}", data=bytes(data))
    raise ValueError(f"image value must be a file name or a datasets.Image struct, got {type(value).__name__}")


def _where(path: Path, cycle_ids: Any, row: int) -> str:
    cid = cycle_ids[row].as_py() if row < len(cycle_ids) else None
    return f"{path} row {row} (cycle_id {cid!r})"


def _stringlike(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _interleaved(path: Path, table: Any, first: str, second: str) -> Any:
    """``first[0], second[0], first[1], second[1], ...`` as one array (the row order of the values)."""
    import pyarrow as pa

    a, b = table.column(first).combine_chunks(), table.column(second).combine_chunks()
    if pa.types.is_null(a.type) != pa.types.is_null(b.type):  # an all-null column: nulls of the other type
        a, b = (a.cast(b.type), b) if pa.types.is_null(a.type) else (a, b.cast(a.type))
    if a.type != b.type:
        if not (_stringlike(a.type) and _stringlike(b.type)):
            raise ValueError(f"{path}: columns {first} ({a.type}) and {second} ({b.type}) must have the same type")
        a, b = a.cast(pa.large_string()), b.cast(pa.large_string())
    n = len(a)
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2] = np.arange(n)
    order[1::2] = np.arange(n, 2 * n)
    return pa.concat_arrays([a, b]).take(pa.array(order))


def _codes(values: Any) -> tuple[list[Any], np.ndarray]:
    """Unique values (first appearance) and the (N, 2) int64 codes of an interleaved string array."""
    encoded = values.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return encoded.dictionary.to_pylist(), codes.reshape(-1, 2)


def _first_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_cycle_ids(path: Path, table: Any) -> Any:
    """The cycle_id column, after checking every value is a unique non-empty string."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = table.column("cycle_id").combine_chunks()
    message = "cycle_id must be a unique non-empty string"
    if not _stringlike(ids.type) and not pa.types.is_null(ids.type):
        raise ValueError(f"{path}: column cycle_id holds {ids.type}; {message}")
    nulls = ids.is_null().to_numpy(zero_copy_only=False)
    if nulls.any():
        raise ValueError(f"{_where(path, ids, _first_row(nulls))}: {message}")
    empty = pc.utf8_length(ids).to_numpy(zero_copy_only=False) == 0
    if empty.any():
        raise ValueError(f"{_where(path, ids, _first_row(empty))}: {message}")
    encoded = ids.dictionary_encode()
    if len(encoded.dictionary) != len(ids):
        _, first = np.unique(encoded.indices.to_numpy(zero_copy_only=False), return_index=True)
        repeated = np.ones(len(ids), dtype=bool)
        repeated[first] = False
        raise ValueError(f"{_where(path, ids, _first_row(repeated))}: {message}")
    return ids


def _caption_columns(path: Path, table: Any, ids: Any, task: TaskSpec) -> tuple[list[str], np.ndarray]:
    """Unique formatted captions and (N, 2) codes, after checking every caption."""
    import pyarrow as pa

    values = _interleaved(path, table, "caption_0", "caption_1")
    if not _stringlike(values.type) and not pa.types.is_null(values.type):
        raise ValueError(f"{path}: columns caption_0 and caption_1 hold {values.type}; captions must be strings")
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    if nulls.any():
        k = _first_row(nulls)
        raise ValueError(f"{_where(path, ids, k // 2)}: caption_{k % 2} is empty or not a string")
    unique, codes = _codes(values)
    for code, caption in enumerate(unique):
        if not caption.strip():
            k = _first_row(codes.ravel() == code)
            raise ValueError(f"{_where(path, ids, k // 2)}: caption_{k % 2} is empty or not a string")
    same = codes[:, 0] == codes[:, 1]
    if same.any():
        raise ValueError(f"{_where(path, ids, _first_row(same))}: caption_0 equals caption_1; "
                         "a cycle needs two distinct captions")
    formatted = [task.format_caption(c) for c in unique]
    position: dict[str, int] = {}
    remap = np.array([position.setdefault(text, len(position)) for text in formatted], dtype=np.int64)
    return list(position), remap[codes]


def _image_columns(path: Path, table: Any, ids: Any, folder: BuiltFolder) -> tuple[list[ImageItem], np.ndarray]:
    """Unique image items and (N, 2) codes; each distinct file name is resolved once."""

    values = _interleaved(path, table, "image_0", "image_1")
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    if nulls.any():
        k = _first_row(nulls)
        raise ValueError(f"{_where(path, ids, k // 2)} image_{k % 2}: image value must be a file name or a "
                         "datasets.Image struct, got NoneType")
    if _stringlike(values.type):
        unique, codes = _codes(values)
    else:  # datasets.Image structs (self-contained folders): one Python value per row
        unique, flat = [], []
        seen: dict[Any, int] = {}
        for value in values.to_pylist():
            marker = (value.get("path"), value.get("bytes")) if isinstance(value, dict) else (type(value).__name__,)
            if marker not in seen:
                seen[marker] = len(unique)
                unique.append(value)
            flat.append(seen[marker])
        codes = np.asarray(flat, dtype=np.int64).reshape(-1, 2)
    items: list[ImageItem] = []
    for code, value in enumerate(unique):
        try:
            items.append(_image_item(value, folder))
        except ValueError as error:
            k = _first_row(codes.ravel() == code)
            raise ValueError(f"{_where(path, ids, k // 2)} image_{k % 2}: {error}") from None
    position: dict[str, int] = {}
    keep: list[ImageItem] = []
    remap = np.empty(len(items), dtype=np.int64)
    for code, item in enumerate(items):
        if item.key not in position:
            position[item.key] = len(keep)
            keep.append(item)
        remap[code] = position[item.key]
    codes = remap[codes]
    same = codes[:, 0] == codes[:, 1]
    if same.any():
        raise ValueError(f"{_where(path, ids, _first_row(same))}: image_0 equals image_1; "
                         "a cycle needs two distinct images")
    return keep, codes


def _family_entry(folder: BuiltFolder, task: TaskSpec, split: str) -> dict[str, Any]:
    """The family's entry in build_info.json; UnavailableFamily when ``split`` of it is unavailable."""
    family = task.config
    entry = folder.info.get("families", {}).get(family)
    if not isinstance(entry, dict):
        available = sorted(folder.info.get("families", {}))
        raise ValueError(
            f"task {task.name}: family {family!r} is not in {folder.root / 'build_info.json'} "
            f"(families: {available}); rebuild with `clip-cycles build ... --families {family}`"
        )
    # The minimum-cycle rule applies to the split being read: a family short elsewhere still
    # serves the splits that meet it (``available_splits``; older folders: all or nothing).
    if entry.get("available") is False and split not in entry.get("available_splits", ()):
        reason = folder.info.get("unavailable", {}).get(family) or entry.get("reason") or "no reason recorded"
        raise UnavailableFamily(f"task {task.name}: family {family!r} split {split!r} is unavailable in "
                                f"{folder.root}: {reason}")
    return entry


def read_cycle_rows(folder: BuiltFolder, task: TaskSpec, seed: int, split: str) -> CycleRows:
    """Read ``data/<family>/seed<k>/<split>.parquet`` of the task's family column-wise, validating every row.

    Each distinct image value is resolved once (per folder) and each distinct caption
    formatted once; rows become (N, 2) index arrays. Errors name the file, row and cycle_id.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _family_entry(folder, task, split)
    path = folder.root / "data" / task.config / f"seed{seed}" / f"{split}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"task {task.name}: {path} does not exist (seed {seed}, split {split})")
    # ParquetFile, not read_table: it reads only the needed columns and does not import pyarrow.dataset.
    try:
        with pq.ParquetFile(path) as parquet:
            names = parquet.schema_arrow.names
            missing = [c for c in ROW_FIELDS if c not in names]
            if missing:
                raise ValueError(f"{path}: columns {missing} are missing (have {names})")
            table = parquet.read(columns=list(ROW_FIELDS))
    except pa.ArrowException as error:
        raise ValueError(f"{path} is not a readable Parquet file ({error}); rebuild the folder") from error
    if table.num_rows == 0:
        raise ValueError(f"{path} holds no cycles")
    ids = _check_cycle_ids(path, table)
    captions, caption_index = _caption_columns(path, table, ids, task)
    items, image_index = _image_columns(path, table, ids, folder)
    return CycleRows(ids, items, image_index, captions, caption_index)


@dataclass
class TaskData:
    """Everything one task needs from its folder: test cycles per seed (and train/validation for the audit).

    ``unavailable`` holds the reason when the folder declares the family unavailable.
    """

    task: TaskSpec
    folder: BuiltFolder
    splits: dict[int, dict[str, CycleRows]] = field(default_factory=dict)
    unavailable: str | None = None
    #: Why the additive audit's train/validation splits could not be read (the scored split was).
    audit_unavailable: str | None = None

    def all_rows(self) -> list[CycleRows]:
        return [rows for by_split in self.splits.values() for rows in by_split.values()]


def load_task_data(task: TaskSpec, folder: BuiltFolder, seeds: Sequence[int] | None = None,
                   with_audit: bool = False) -> TaskData:
    """Read the task's cycles for each seed: the test split, plus train/validation for the audit."""
    data = TaskData(task, folder)
    wanted = (task.split, task.train_split, "validation") if with_audit else (task.split,)
    try:
        _family_entry(folder, task, task.split)
    except UnavailableFamily as reason:
        print(f"warning: {reason}", file=sys.stderr)
        data.unavailable = str(reason)
        return data
    for seed in seeds if seeds is not None else task.seeds:
        data.splits[seed] = {}
        for split in dict.fromkeys(wanted):
            try:
                data.splits[seed][split] = read_cycle_rows(folder, task, seed, split)
            except UnavailableFamily as reason:  # an audit split short of the minimum: score without the audit
                data.audit_unavailable = str(reason)
    if data.audit_unavailable is not None:  # nothing but the scored split is needed (or encoded) then
        data.splits = {seed: {task.split: rows[task.split]} for seed, rows in data.splits.items()}
    return data


def unique_items(loaded: Sequence[TaskData]) -> tuple[list[ImageItem], list[str]]:
    """The unique image items (by key) and captions of every split of ``loaded``, in order of first appearance."""
    images: dict[str, ImageItem] = {}
    captions: dict[str, None] = {}
    for data in loaded:
        for rows in data.all_rows():
            for item in rows.image_items:
                images.setdefault(item.key, item)
            captions.update(dict.fromkeys(rows.captions))
    return list(images.values()), list(captions)


# --------------------------------------------------------------------------- encoding and scoring


def model_spec_from_args(args: argparse.Namespace, loader: Callable[[], Any] | None = None) -> ModelSpec:
    """A ModelSpec from the shared CLI arguments."""
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return ModelSpec(backend=args.model_type, model=args.model, pretrained=args.pretrained, device=device,
                     seed=args.seed, amp=args.amp, model_cache_dir=args.model_cache_dir, loader=loader)


def encode_tasks(tasks: Sequence[TaskSpec], spec: ModelSpec, dataset_root: str | Path | None,
                 cache_dir: Path | None, data_cache_dir: str | Path | None = None, batch_size: int = 64,
                 num_workers: int | None = None, skip_bad_images: bool = False, with_audit: bool | None = None,
                 seeds: Sequence[int] | None = None) -> tuple[list[TaskData], EncodedFeatures | None]:
    """Load every task's cycles and encode all their unique images and captions in one pass.

    Under a process group (:func:`clip_cycles.encoding.distributed.process_group`) the encoding is
    sharded across ranks and the features come back on rank 0 only (None elsewhere).
    """
    from clip_cycles.encoding.distributed import encode_sharded, main_process_first

    unsupported = [t.name for t in tasks if not isinstance(t, TaskSpec) or t.members]
    if unsupported:
        raise ValueError(f"tasks {unsupported} are not single-family cycle tasks; their runners "
                         "(clip_cycles.evaluation.runners) encode what they need")
    if seeds is not None:
        check_seeds(seeds)
    data_cache = Path(data_cache_dir) if data_cache_dir else resolve_cache_dir(cache_dir) / "datasets"
    with main_process_first():  # rank 0 builds shared data folders once; the others reuse them
        folders = resolve_dataset_roots(tasks, dataset_root, data_cache)
    loaded = []
    for task in tasks:
        # Train/validation are read (and encoded) only when the audit fits on the train split.
        audit = ("additive_audit" in task.metric_names and task.audit_fit == "train") if with_audit is None \
            else with_audit
        loaded.append(load_task_data(task, folders[task.name], seeds, audit))
    from clip_cycles.encoding.vlm_scores import score_tasks, uses_pair_scores

    if uses_pair_scores(spec):  # generative VLMs score each unique (image, caption) pair instead
        return loaded, score_tasks(loaded, spec, cache_dir, batch_size, skip_bad_images)  # type: ignore[return-value]
    images, captions = unique_items(loaded)
    encoded = encode_sharded(images, captions, spec, cache_dir, batch_size=batch_size, num_workers=num_workers,
                             skip_bad_images=skip_bad_images)
    return loaded, encoded


def cycle_index(rows: CycleRows, encoded: EncodedFeatures) -> tuple[np.ndarray, int]:
    """(N, 4) indices into the encoded tables; cycles touching a skipped image are dropped and counted."""
    image_rows, caption_rows = encoded.image_rows, encoded.caption_rows
    images = np.fromiter((image_rows.get(item.key, -1) for item in rows.image_items), dtype=np.int64,
                         count=len(rows.image_items))
    captions = np.fromiter((caption_rows[text] for text in rows.captions), dtype=np.int64, count=len(rows.captions))
    index = np.concatenate([images[rows.image_index], captions[rows.caption_index]], axis=1)
    keep = (index[:, :2] >= 0).all(axis=1)
    if keep.all():
        return index, 0
    return np.ascontiguousarray(index[keep]), int((~keep).sum())


def score_blocks(blocks: np.ndarray, tol: float) -> dict[str, Any]:
    """CycleAcc (half ties), text/image/group accuracy and counts of one set of blocks."""
    deltas = deltas_from_blocks(blocks)
    wino = winoground_scores(blocks)
    return {
        "cycle_acc": cycle_acc(deltas, tol),
        "text_acc": wino.text_acc,
        "image_acc": wino.image_acc,
        "group_acc": wino.group_acc,
        "n_cycles": int(blocks.shape[0]),
        "n_ties": int((np.abs(deltas) <= tol).sum()),
    }


#: Bumped when the audit's cached result format changes.
AUDIT_CACHE_VERSION = 1


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """sha256 of this package's Python sources and the numeric libraries' versions: cached audits follow the code."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for source in sorted(package.rglob("*.py")):
        h.update(source.relative_to(package).as_posix().encode("utf-8") + b"\x00" + source.read_bytes() + b"\x00")
    for name in ("torch", "numpy"):
        try:
            h.update(f"{name}={version(name)}".encode())
        except PackageNotFoundError:
            h.update(f"{name}=".encode())
    return h.hexdigest()


def _compact(phi: np.ndarray, psi: np.ndarray, parts: Sequence[np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The feature rows ``parts`` use (in order of first use) and ``parts`` re-indexed into them.

    The audit then depends on this task's cycles and features only, not on which other
    tasks were encoded in the same run, so its cache key is stable.
    """
    out: list[list[np.ndarray]] = [[] for _ in parts]
    tables = []
    for table, cols in ((phi, slice(0, 2)), (psi, slice(2, 4))):
        flat = np.concatenate([p[:, cols].ravel() for p in parts])
        unique, first = np.unique(flat, return_index=True)
        used = unique[np.argsort(first, kind="stable")]
        lookup = np.full(table.shape[0], -1, dtype=np.int64)
        lookup[used] = np.arange(used.shape[0])
        tables.append(np.ascontiguousarray(table[used]))
        for k, p in enumerate(parts):
            out[k].append(lookup[p[:, cols]])
    return tables[0], tables[1], [np.concatenate(cols, axis=1) for cols in out]


def _audit(task: TaskSpec, seed: int, data: TaskData, encoded: EncodedFeatures,
           phi: np.ndarray, psi: np.ndarray, cache_dir: Path | None = None) -> dict[str, Any]:
    """The additive audit of one seed; cached under ``cache_dir/audits`` keyed by its inputs' content."""
    from clip_cycles.encoding.feature_cache import atomic_write_bytes
    from clip_cycles.heads.additive_audit import additive_audit

    splits = data.splits[seed]
    test, _ = cycle_index(splits[task.split], encoded)
    if task.audit_fit == "scored":
        # The probes fit on the scored cycles' own pairs: the features are in memory, and the
        # audit's claim (exactly 0.5 on balanced comparisons) holds for any fit, wherever it came from.
        train, val = test, None
    else:
        train, _ = cycle_index(splits[task.train_split], encoded)
        val = cycle_index(splits["validation"], encoded)[0] if "validation" in splits else None
    parts = [train, test] if val is None else [train, test, val]
    phi_c, psi_c, indexed = _compact(phi, psi, parts)
    train, test = indexed[0], indexed[1]
    val = indexed[2] if val is not None else None
    path = None
    if cache_dir is not None:
        h = hashlib.sha256()
        for array in (phi_c, psi_c, *indexed):
            h.update(repr((array.dtype.str, array.shape)).encode("utf-8") + array.tobytes())
        settings = {"version": AUDIT_CACHE_VERSION, "code": _code_digest(), "arrays": h.hexdigest(), "fit": task.audit_fit,
                    "has_validation": val is not None, "seed": seed, "tie_tolerance": repr(task.tie_tolerance)}
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:32]
        path = cache_dir / "audits" / f"{key}.json"
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(cached, dict) and cached.get("settings") == settings and isinstance(cached.get("report"),
                                                                                              dict):
                return cached["report"]
        except (OSError, ValueError):
            pass  # absent or unreadable: compute (and rewrite) it
    report = additive_audit(phi_c, psi_c, train, test, val_cycles=val, seed=seed,
                            tie_tolerance=task.tie_tolerance).to_dict()
    report["fit_split"] = task.split if task.audit_fit == "scored" else task.train_split
    if path is not None:
        payload = json.dumps({"settings": settings, "report": report}, sort_keys=True)
        atomic_write_bytes(path, payload.encode("utf-8"))
    return report


def score_task(data: TaskData, encoded: EncodedFeatures, cache_dir: Path | None = None) -> dict[str, Any]:
    """clip_benchmark-style ``metrics`` of one task: per-seed values, their mean and sd.

    ``cache_dir`` (the feature cache root) also keeps the additive audit's results.
    """
    task = data.task
    if data.unavailable is not None:
        return {"available": False, "unavailable_reason": data.unavailable, "n_cycles": 0,
                "tie_tolerance": task.tie_tolerance}
    pair_blocks = getattr(encoded, "block_scores", None)  # issue 18: pair scorers (clip_cycles.encoding.vlm_scores)
    if pair_blocks is None:
        phi = encoded.image_features.astype(np.float64)
        psi = encoded.caption_features.astype(np.float64)
    per_seed: dict[str, dict[str, Any]] = {}
    dropped_total = 0
    audits: dict[str, Any] = {}
    for seed in sorted(data.splits):
        index, dropped = cycle_index(data.splits[seed][task.split], encoded)
        dropped_total += dropped
        if index.shape[0] == 0:
            raise ValueError(f"task {task.name} seed {seed}: every cycle touches a skipped image; nothing to score")
        blocks = pair_blocks(task, index) if pair_blocks else block_scores_from_embeddings(phi, psi, index)
        per_seed[str(seed)] = score_blocks(blocks, task.tie_tolerance)
        per_seed[str(seed)]["dropped_cycles"] = dropped
        if "additive_audit" in task.metric_names and pair_blocks is None and data.audit_unavailable is None:
            audits[str(seed)] = _audit(task, seed, data, encoded, phi, psi, cache_dir)
    metrics: dict[str, Any] = {}
    for name in ("cycle_acc", "text_acc", "image_acc", "group_acc"):
        if name in task.metric_names:
            summary = mean_and_sd([per_seed[s][name] for s in per_seed])
            metrics[name] = summary["mean"]
            metrics[f"{name}_sd"] = summary["sd"]
    if "group_acc" in task.metric_names:
        metrics["acc"] = metrics["group_acc"]  # clip_benchmark's image_caption_selection name
    metrics["n_cycles"] = int(sum(v["n_cycles"] for v in per_seed.values()))
    metrics["tie_tolerance"] = task.tie_tolerance
    metrics["seeds"] = [int(s) for s in per_seed]
    metrics["per_seed"] = per_seed
    if audits:
        metrics["additive_audit"] = {"passed": all(a["passed"] for a in audits.values()), "per_seed": audits}
    elif pair_blocks and "additive_audit" in task.metric_names:
        metrics["additive_audit"] = encoded.audit_unavailable()  # type: ignore[attr-defined]
    elif "additive_audit" in task.metric_names and data.audit_unavailable is not None:
        metrics["additive_audit"] = {"passed": None, "available": False, "unavailable_reason": data.audit_unavailable}
    metrics["dropped_cycles"] = dropped_total
    bad = encoded.stats.bad_images
    metrics["skipped_bad_images"] = len(bad)
    if bad:
        metrics["bad_images"] = dict(sorted(bad.items()))
    return metrics


def result_record(task: TaskSpec, model: str, pretrained: str | None, metrics: dict[str, Any],
                  language: str = "en") -> dict[str, Any]:
    """clip_benchmark's result JSON: ``{dataset, model, pretrained, task, metrics, language}``."""
    return {"dataset": task.name, "model": model, "pretrained": pretrained or "", "task": RESULT_TASK,
            "metrics": metrics, "language": language}


def output_path(template: str, dataset: str, model: str, pretrained: str | None, language: str = "en",
                task: str = RESULT_TASK) -> str:
    """Fill clip_benchmark's ``--output`` template fields the way its ``run`` does."""
    pretrained = pretrained or ""
    is_file = os.path.isfile(pretrained)
    return template.format(
        model=model,
        pretrained=os.path.basename(pretrained) if is_file else pretrained,
        pretrained_full_path=pretrained.replace("/", "_") if is_file else pretrained,
        task=task,
        dataset=dataset.replace("/", "_"),
        language=language,
    )


def evaluate(task_names: Sequence[str], spec: ModelSpec, dataset_root: str | Path | None = None,
             cache_dir: str | Path | None = None, use_cache: bool = True, data_cache_dir: str | Path | None = None,
             batch_size: int = 64, num_workers: int | None = None, skip_bad_images: bool = False,
             seeds: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """Evaluate ``spec`` on cycle_selection tasks (collections expanded); returns result records and the encoder output.

    Under torchrun only rank 0 scores: the other ranks get ``([], None)``. Tasks of
    other output types run through :func:`clip_cycles.evaluation.runners.run_tasks`.
    """
    tasks = expand_tasks(task_names)
    cache = resolve_cache_dir(cache_dir) if use_cache else None
    return evaluate_tasks(tasks, spec, dataset_root, cache, data_cache_dir or resolve_cache_dir(cache_dir) / "datasets",
                          batch_size, num_workers, skip_bad_images, seeds)


def evaluate_tasks(tasks: Sequence[TaskSpec], spec: ModelSpec, dataset_root: str | Path | None,
                   cache: Path | None, data_cache_dir: str | Path, batch_size: int = 64, num_workers: int | None = None,
                   skip_bad_images: bool = False, seeds: Sequence[int] | None = None
                   ) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """:func:`evaluate` on resolved task specs, with the feature cache (None: none) and data cache already chosen."""
    other = [t.name for t in tasks if t.output_type != "cycle_selection"]
    if other:
        raise ValueError(f"tasks {other} are not cycle_selection tasks; run them with clip_cycles.evaluation.runners.run_tasks "
                         "(`clip-cycles eval` and the clip_benchmark plugin do)")
    loaded, encoded = encode_tasks(tasks, spec, dataset_root, cache, data_cache_dir, batch_size,
                                   num_workers, skip_bad_images, seeds=seeds)
    if encoded is None:
        return [], None
    records = [result_record(data.task, spec.model, spec.pretrained, score_task(data, encoded, cache))
               for data in loaded]
    return records, encoded


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Write one result JSON (sorted keys, so equal results give equal bytes)."""
    path = Path(path)
    if path.parent != Path("."):
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- CLI


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles eval``: the same results as the clip_benchmark plugin, without its CLI."""
    add_model_arguments(parser)
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="result file template (clip_benchmark's fields: {dataset} {model} {pretrained} "
                             "{task} {language} {pretrained_full_path}); '-' prints to stdout")
    parser.add_argument("--seeds", type=seed_argument, nargs="+", default=None,
                        help="restrict to these seeds (non-negative integers)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and write one JSON per task (rank 0 under torchrun); each output type goes to its runner."""
    from clip_cycles.encoding.distributed import process_group
    from clip_cycles.evaluation.runners import RunContext, run_tasks

    spec = model_spec_from_args(args)
    context = RunContext.create(spec, args.dataset_root, args.cache_dir, not args.no_cache, args.data_cache_dir,
                                batch_size=args.batch_size, num_workers=args.num_workers,
                                skip_bad_images=args.skip_bad_images, seeds=args.seeds)
    with process_group(spec):
        outcome = run_tasks(args.task, context)
    if not outcome.main:  # a rank other than 0: its shard is in the cache, rank 0 reports
        return 0
    if outcome.encoded is not None:
        stats = outcome.encoded.stats
        print(f"encoded {stats.encoded_images} images and {stats.encoded_captions} captions "
              f"({stats.cached_images} + {stats.cached_captions} from the cache; "
              f"{len(stats.bad_images)} bad images skipped)", file=sys.stderr)
    for record in outcome.records:
        if args.output == "-":
            print(json.dumps(record, sort_keys=True, indent=2))
        else:
            path = write_record(record, output_path(args.output, record["dataset"], spec.model, spec.pretrained,
                                                    task=record["task"]))
            print(f"{record['dataset']}: {_headline(record['metrics'])} -> {path}", file=sys.stderr)
    return 0


def _headline(metrics: dict[str, Any]) -> str:
    """The first headline number of a result, for the one-line summary."""
    for name in ("cycle_acc", "pearson", "f1_selectivity"):
        if name in metrics:
            return f"{name} {metrics[name]}"
    return f"available {metrics.get('available')}"
