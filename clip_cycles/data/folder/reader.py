"""Reading a built dataset folder column-wise: ``BuiltFolder``, ``CycleRows``, ``read_cycle_rows``; ``load_split``.

The writer and the verification of a folder's files are in :mod:`clip_cycles.data.folder.writer`;
the format is DEVELOPING.md's "Built dataset folders" and "Reading a built folder". Both layouts
are read: ``parquet`` (file names relative to the source root, or the image bytes of older
self-contained folders in every row) and ``imagefolder`` (file names below ``data/``, each image
stored once). :func:`load_split` is ``datasets.load_dataset`` for one config and split that warns,
rather than fails, when the split is unavailable under the minimum-cycle rule.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from clip_cycles.data.families.registry import SPLITS
from clip_cycles.data.folder.writer import (
    IMAGE_DIR,
    IMAGE_PREFIX,
    layout_of,
    parquet_path,
    read_build_info,
    rebuild_hint,
    source_problems,
    verify_folder_files,
)
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.data.sources.registry import source_feeding
from clip_cycles.fingerprints import canonical_json, content_hash, digest
from clip_cycles.outputs import atomic_write_bytes, cache_record_replaceable
from clip_cycles.regular_files import load_json_text, read_regular_file

logger = logging.getLogger(__name__)


class FamilyTask(Protocol):
    """What reading a family's rows needs of a task: its name, its family (``config``) and caption format."""

    name: str
    config: str

    def format_caption(self, caption: str) -> str: ...


ROW_FIELDS = ("image_0", "image_1", "caption_0", "caption_1", "cycle_id")


@dataclass
class BuiltFolder:
    """A built dataset folder (DEVELOPING.md "Built dataset folders")."""

    root: Path
    info: dict[str, Any]
    #: file name -> its ImageItem, so each distinct image is resolved once per folder
    image_items: dict[str, ImageItem] = field(default_factory=dict, repr=False, compare=False)
    #: Where decoded row files are kept (:func:`read_cycle_rows`); None: decode every file from its Parquet
    rows_cache: Path | None = field(default=None, repr=False, compare=False)
    #: False once a decode could not be written there (read-only, full): kept decodes are still read
    rows_cache_writable: bool = field(default=True, repr=False, compare=False)

    @property
    def source(self) -> str:
        return str(self.info.get("source", ""))

    @property
    def source_root(self) -> Path:
        return Path(self.info.get("source_root", ""))

    @property
    def builder(self) -> str:
        """The family builder that made the folder (``build_info.json``'s ``source``: coco, gqa)."""
        return self.source

    @property
    def raw_source(self) -> str:
        """The raw source its cycles come from (coco, gqa, shapes): what a task's prefix names.

        ``build_info.json``'s ``source_fingerprint.kind`` (recorded at build time, so a moved or
        deleted raw root does not change it); for a folder built before that was recorded, the
        source detected at ``source_root`` when it feeds the builder, else the builder's own.
        """
        stored = self.info.get("source_fingerprint")
        if isinstance(stored, dict) and isinstance(stored.get("kind"), str) and stored["kind"]:
            return str(stored["kind"])
        feeding = source_feeding(self.source_root, self.builder) if self.builder else None
        return feeding.name if feeding is not None else self.builder

    @property
    def layout(self) -> str:
        """``parquet`` or ``imagefolder`` (DEVELOPING.md "Built dataset folders")."""
        return layout_of(self.info)

    def rows_file(self, family: str, seed: int, split: str) -> Path:
        """The row file of one family, seed and split, in this folder's layout."""
        return self.root / parquet_path(family, seed, split, self.layout)


def open_built_folder(
    root: str | Path,
    families: Sequence[str] | None = None,
    verify: bool = True,
    *,
    hash_cache: Path | None = None,
    source_fingerprint: Mapping[str, Any] | None = None,
) -> BuiltFolder:
    """Read and validate ``build_info.json`` of a built folder, then verify its Parquet files and its source.

    Errors name the file and field; with ``verify`` every Parquet file of ``families``
    (default: all) must have the row count and sha256 recorded at build time, and the raw
    root a reference-mode folder points into must match the fingerprint recorded at build
    time (:func:`~clip_cycles.data.folder.writer.source_problems`; per-file hashes kept in
    ``hash_cache``, default ``<cache>/fingerprints``), else a ValueError names each problem:
    an edited folder, or one whose images were replaced, is never scored.
    ``source_fingerprint``: the root's fingerprint when the caller has just taken it.
    """
    root = Path(root)
    info = read_build_info(root)
    if verify:
        problems = verify_folder_files(root, info, families=families)
        problems += source_problems(root, info, hash_cache, source_fingerprint)
        if problems:
            raise ValueError(
                f"{root} does not match its build_info.json, refusing to score it: "
                + "; ".join(problems)
                + f". Rebuild it: {rebuild_hint(root, info)}"
            )
    return BuiltFolder(root, info)


class UnavailableFamily(ValueError):
    """The family was built but declared unavailable (minimum-cycle rule); reported, not scored."""


@dataclass
class CycleRows:
    """The cycles of one (task, seed, split), column-wise.

    Row ``i`` pairs images ``image_items[image_index[i, 0]]`` and ``image_items[image_index[i, 1]]``
    with captions ``captions[caption_index[i, 0]]`` and ``captions[caption_index[i, 1]]``.
    ``image_items`` and ``captions`` (formatted by the task) are unique, in order of first
    appearance (row by row, ``_0`` before ``_1``); ``cycle_ids`` is a list of strings.
    """

    cycle_ids: list[str]
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
    def from_pairs(
        cls,
        cycle_ids: Sequence[str],
        image_pairs: Sequence[tuple[ImageItem, ImageItem]],
        caption_pairs: Sequence[tuple[str, str]],
    ) -> CycleRows:
        """Rows from per-cycle pairs (items interned by key, captions by text), e.g. for data built in code."""
        if not len(cycle_ids) == len(image_pairs) == len(caption_pairs):
            raise ValueError(
                f"{len(cycle_ids)} cycle ids, {len(image_pairs)} image pairs and "
                f"{len(caption_pairs)} caption pairs: one of each per cycle"
            )
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
        return cls([str(c) for c in cycle_ids], items, image_index, list(captions), caption_index)

    @classmethod
    def concat(cls, parts: Sequence[CycleRows]) -> CycleRows:
        """The rows of ``parts`` one after another (items re-interned by key and text)."""
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
        return cls(
            [cid for part in parts for cid in part.cycle_ids],
            items,
            np.concatenate(image_index).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64),
            list(captions),
            np.concatenate(caption_index).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64),
        )


def _confined(name: Any) -> bool:
    """Whether ``name`` is a relative path that stays inside the folder it is joined to (no ``..``, not absolute)."""
    return isinstance(name, str) and bool(name) and not Path(name).is_absolute() and ".." not in Path(name).parts


def _image_item(value: Any, folder: BuiltFolder) -> ImageItem:
    """The item of one image value (interned per folder for file names); ValueError says what is wrong.

    A file name (reference mode) is confined to the source root and the ``path`` of a
    ``datasets.Image`` struct without bytes (self-contained mode) to the folder, by the same
    rule: relative, no ``..``.
    """
    if isinstance(value, str):
        item = folder.image_items.get(value)
        if item is None:
            if folder.layout == "imagefolder":  # stored below data/: the key is the source-relative name
                key = value[len(IMAGE_PREFIX) :]
                name = PurePosixPath(key)
                if not value.startswith(IMAGE_PREFIX) or not key or name.is_absolute() or ".." in name.parts or "\\" in value:
                    raise ValueError(f"image file name {value!r} must name a stored image below {IMAGE_PREFIX}")
                item = folder.image_items[value] = ImageItem(key=key, path=folder.root / IMAGE_DIR / key)
                return item
            if not _confined(value):
                raise ValueError(f"image file name {value!r} must be relative to the source root")
            item = folder.image_items[value] = ImageItem(key=value, path=folder.source_root / value)
        return item
    if isinstance(value, dict) and (value.get("bytes") or value.get("path")):
        data = value.get("bytes")
        name = value.get("path") or ""
        if data is None:
            if not _confined(name):
                raise ValueError(
                    f"image struct path {name!r} (bytes: null) must be relative to the folder {folder.root}, "
                    "without '..'; rebuild the folder (clip-cycles build ... --self-contained) so it embeds its images"
                )
            return ImageItem(key=name, path=(folder.root / name))

        return ImageItem(key=name or f"sha256:{content_hash(data)}", data=bytes(data))
    raise ValueError(f"image value must be a file name or a datasets.Image struct, got {type(value).__name__}")


def _where(path: Path, cycle_ids: Any, row: int) -> str:
    value = cycle_ids[row] if row < len(cycle_ids) else None
    cid = value.as_py() if hasattr(value, "as_py") else value  # a pyarrow column (before its check) or the checked list
    return f"{path} row {row} (cycle_id {cid!r})"


def _stringlike(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):  # a string column read as a dictionary (read_cycle_rows)
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _integers(array: Any) -> np.ndarray:
    """A pyarrow signed-integer array without nulls as int64 numpy, read from its data buffer.

    ``Array.to_numpy`` (and ``pa.array``) would import pandas, a third of a warm evaluation's start.
    """
    import pyarrow as pa

    if array.null_count or not pa.types.is_signed_integer(array.type):
        raise ValueError(f"expected signed integers without nulls, got {array.type} with {array.null_count} nulls")
    width = array.type.bit_width // 8
    values = np.frombuffer(array.buffers()[1], dtype=np.dtype(f"<i{width}"), count=len(array), offset=array.offset * width)
    return values.astype(np.int64)


def _nulls(array: Any) -> np.ndarray:
    """Row mask of the nulls of ``array`` (only on the error path: it may import pandas)."""
    return np.asarray(array.is_null().to_pylist(), dtype=bool)


def _same_type(path: Path, table: Any, first: str, second: str) -> tuple[Any, Any]:
    """Columns ``first`` and ``second`` as two arrays of one type (an all-null column takes the other's type)."""
    import pyarrow as pa

    # Left chunked: a dictionary-read column may hold one dictionary per row group (see _local_codes).
    a, b = table.column(first), table.column(second)
    if pa.types.is_null(a.type) != pa.types.is_null(b.type):  # an all-null column: nulls of the other type
        a, b = (a.cast(_stored(b.type)), b) if pa.types.is_null(a.type) else (a, b.cast(_stored(a.type)))
    if a.type != b.type:
        if not (_stringlike(a.type) and _stringlike(b.type)):
            raise ValueError(
                f"{path}: columns {first} ({_stored(a.type)}) and {second} ({_stored(b.type)}) must have the same type"
            )
        a, b = a.cast(pa.large_string()), b.cast(pa.large_string())
    return a, b


def _stored(kind: Any) -> Any:
    """The type a column holds: a dictionary-read string column's value type (what the file calls it)."""
    import pyarrow as pa

    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _first_null(a: Any, b: Any) -> int | None:
    """Position of the first null in the row order of the values (``a[0], b[0], a[1], b[1], ...``), or None."""
    if not (a.null_count or b.null_count):
        return None
    flat = np.stack([_nulls(a), _nulls(b)], axis=1).ravel()
    return _first_row(flat)


def _local_codes(column: Any) -> tuple[list[Any], np.ndarray]:
    """A string column's values as Python strings (repeats allowed) and each row's index into them.

    A dictionary-read column (``read_dictionary``) gives only its dictionary to Python, chunk by chunk,
    and its indices as numpy; a plain one gives every row. Neither imports ``pyarrow.compute`` (a tenth
    of a warm evaluation), which ``dictionary_encode`` does.
    """
    import pyarrow as pa

    values: list[Any] = []
    parts: list[np.ndarray] = []
    for chunk in getattr(column, "chunks", [column]):
        if pa.types.is_dictionary(chunk.type):
            parts.append(_integers(chunk.indices) + len(values))
            values.extend(chunk.dictionary.to_pylist())
        else:
            parts.append(np.arange(len(values), len(values) + len(chunk), dtype=np.int64))
            values.extend(chunk.to_pylist())
    return values, (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))


def _codes(a: Any, b: Any) -> tuple[list[Any], np.ndarray]:
    """Unique values of two string arrays without nulls, in order of first appearance in the row order
    (``a[0], b[0], a[1], b[1], ...``), and the (N, 2) int64 codes of the rows into them."""
    values_a, rows_a = _local_codes(a)
    values_b, rows_b = _local_codes(b)
    position: dict[Any, int] = {}  # one code per distinct string, whichever column or chunk it came from
    to_a = np.array([position.setdefault(v, len(position)) for v in values_a], dtype=np.int64)
    to_b = np.array([position.setdefault(v, len(position)) for v in values_b], dtype=np.int64)
    codes = np.stack([to_a[rows_a], to_b[rows_b]], axis=1)
    # Renumber by first appearance in the row order, as a dictionary encoding of the interleaved values would.
    unique, first = np.unique(codes.ravel(), return_index=True)
    order = unique[np.argsort(first, kind="stable")]
    remap = np.empty(len(position), dtype=np.int64)
    remap[order] = np.arange(order.shape[0])
    distinct = list(position)
    return [distinct[k] for k in order.tolist()], remap[codes]


def _first_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_cycle_ids(path: Path, table: Any) -> list[str]:
    """The cycle_id column as a list, after checking every value is a unique non-empty string."""
    import pyarrow as pa

    ids = table.column("cycle_id").combine_chunks()
    message = "cycle_id must be a unique non-empty string"
    if not _stringlike(ids.type) and not pa.types.is_null(ids.type):
        raise ValueError(f"{path}: column cycle_id holds {ids.type}; {message}")
    if ids.null_count:
        raise ValueError(f"{_where(path, ids, _first_row(_nulls(ids)))}: {message}")
    # In Python, not pyarrow.compute (its import is a tenth of a warm evaluation): a few thousand short strings.
    values = ids.to_pylist()
    if not all(values):
        raise ValueError(f"{_where(path, ids, values.index(''))}: {message}")
    if len(set(values)) != len(values):
        seen: set[str] = set()
        for row, value in enumerate(values):  # the first row whose value came before
            if value in seen:
                raise ValueError(f"{_where(path, ids, row)}: {message}")
            seen.add(value)
    return values


def _raw_captions(path: Path, table: Any, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The file's distinct captions and (N, 2) codes, after checking every caption (what its bytes alone decide)."""
    import pyarrow as pa

    a, b = _same_type(path, table, "caption_0", "caption_1")
    if not _stringlike(a.type) and not pa.types.is_null(a.type):
        raise ValueError(f"{path}: columns caption_0 and caption_1 hold {a.type}; captions must be strings")
    k = _first_null(a, b)
    if k is not None:
        raise ValueError(f"{_where(path, ids, k // 2)}: caption_{k % 2} is empty or not a string")
    unique, codes = _codes(a, b)
    _check_captions(path, ids, unique, codes)
    return unique, codes


def _check_captions(path: Path, ids: Sequence[str], unique: Sequence[Any], codes: np.ndarray) -> None:
    """Every caption a non-blank string and each cycle's two distinct (ValueError naming the first row that is not)."""
    for code, caption in enumerate(unique):
        if not isinstance(caption, str) or not caption.strip():
            k = _first_row(codes.ravel() == code)
            raise ValueError(f"{_where(path, ids, k // 2)}: caption_{k % 2} is empty or not a string")
    same = codes[:, 0] == codes[:, 1]
    if same.any():
        raise ValueError(
            f"{_where(path, ids, _first_row(same))}: caption_0 equals caption_1; a cycle needs two distinct captions"
        )


def _formatted_captions(unique: Sequence[str], codes: np.ndarray, task: FamilyTask) -> tuple[list[str], np.ndarray]:
    """The task's formatted captions, unique (two raw captions may format alike), and the codes into them."""
    formatted = [task.format_caption(c) for c in unique]
    position: dict[str, int] = {}
    remap = np.array([position.setdefault(text, len(position)) for text in formatted], dtype=np.int64)
    return list(position), remap[codes]


def _raw_images(path: Path, table: Any, ids: Sequence[str]) -> tuple[list[Any], np.ndarray]:
    """The file's distinct image values (file names, or datasets.Image structs) and (N, 2) codes into them."""
    a, b = _same_type(path, table, "image_0", "image_1")
    k = _first_null(a, b)
    if k is not None:
        raise ValueError(
            f"{_where(path, ids, k // 2)} image_{k % 2}: image value must be a file name or a datasets.Image struct, got NoneType"
        )
    if _stringlike(a.type):
        return _codes(a, b)
    # datasets.Image structs (self-contained folders): one Python value per row
    unique: list[Any] = []
    flat: list[int] = []
    seen: dict[Any, int] = {}
    for pair in zip(a.to_pylist(), b.to_pylist()):
        for value in pair:
            marker = (value.get("path"), value.get("bytes")) if isinstance(value, dict) else (type(value).__name__,)
            if marker not in seen:
                seen[marker] = len(unique)
                unique.append(value)
            flat.append(seen[marker])
    return unique, np.asarray(flat, dtype=np.int64).reshape(-1, 2)


def _resolved_images(
    path: Path, ids: Sequence[str], unique: Sequence[Any], codes: np.ndarray, folder: BuiltFolder
) -> tuple[list[ImageItem], np.ndarray]:
    """The image items of the distinct values (resolved in ``folder``, each once) and the codes into them."""
    resolved = folder.image_items  # file names seen in an earlier file of this folder: already checked
    found = [resolved.get(value) if isinstance(value, str) else None for value in unique]
    items: list[ImageItem] = []
    for code, (value, known) in enumerate(zip(unique, found)):
        if known is not None:
            items.append(known)
            continue
        try:
            items.append(_image_item(value, folder))
        except ValueError as error:
            k = _first_row(codes.ravel() == code)
            raise ValueError(f"{_where(path, ids, k // 2)} image_{k % 2}: {error}") from None
    keys = [item.key for item in items]
    if len(set(keys)) == len(keys):  # each value its own image (file names always): the codes stand
        keep = items
    else:  # two values of one image (e.g. a struct's path and bytes): one item, one code
        position: dict[str, int] = {}
        keep = []
        remap = np.empty(len(items), dtype=np.int64)
        for code, item in enumerate(items):
            if item.key not in position:
                position[item.key] = len(keep)
                keep.append(item)
            remap[code] = position[item.key]
        codes = remap[codes]
    same = codes[:, 0] == codes[:, 1]
    if same.any():
        raise ValueError(f"{_where(path, ids, _first_row(same))}: image_0 equals image_1; a cycle needs two distinct images")
    return keep, codes


def available_splits(info: dict[str, Any], family: str) -> tuple[str, ...]:
    """The splits of ``family`` that meet the minimum-cycle rule (older folders: all or none)."""
    entry = info.get("families", {}).get(family)
    if not isinstance(entry, dict):
        return ()
    if entry.get("available") is not False:
        return tuple(SPLITS)
    return tuple(s for s in SPLITS if s in entry.get("available_splits", ()))


def _family_entry(folder: BuiltFolder, task: FamilyTask, split: str) -> dict[str, Any]:
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
    if split not in available_splits(folder.info, family):
        reason = folder.info.get("unavailable", {}).get(family) or entry.get("reason") or "no reason recorded"
        raise UnavailableFamily(f"task {task.name}: family {family!r} split {split!r} is unavailable in {folder.root}: {reason}")
    return entry


def read_cycle_rows(folder: BuiltFolder, task: FamilyTask, seed: int, split: str) -> CycleRows:
    """Read ``data/<family>/seed<k>/<split>.parquet`` of the task's family column-wise, validating every row.

    Each distinct image value is resolved once (per folder) and each distinct caption
    formatted once; rows become (N, 2) index arrays. Errors name the file, row and cycle_id.
    With ``folder.rows_cache``, what the file's bytes alone decide (its checked ids, distinct
    captions and image names, and the codes into them) is kept there under the file's sha256 and
    this module's source, and read back while both hold (:func:`_decoded`); the task's caption
    format and the folder's images are applied on every read.
    """
    _family_entry(folder, task, split)
    path = folder.rows_file(task.config, seed, split)
    if not path.is_file():
        raise FileNotFoundError(f"task {task.name}: {path} does not exist (seed {seed}, split {split})")
    # The imagefolder layout names the image columns as datasets' metadata files do.
    columns = [f"{c}_file_name" if folder.layout == "imagefolder" and c.startswith("image_") else c for c in ROW_FIELDS]
    decoded = _decoded(path, columns, folder)
    captions, caption_index = _formatted_captions(decoded.captions, decoded.caption_codes, task)
    items, image_index = _resolved_images(path, decoded.ids, decoded.images, decoded.image_codes, folder)
    return CycleRows(decoded.ids, items, image_index, captions, caption_index)


@dataclass
class _Decoded:
    """A row file's columns after the checks its bytes alone decide: what :func:`_decoded` keeps."""

    ids: list[str]
    captions: list[str]  # distinct raw captions, in order of first appearance
    caption_codes: np.ndarray  # (N, 2) int64 into ``captions``
    images: list[Any]  # distinct image values: file names, or datasets.Image structs (never kept)
    image_codes: np.ndarray  # (N, 2) int64 into ``images``


#: Bumped when what a kept decode holds changes (the module's source digest covers the code that made it).
ROWS_CACHE_VERSION = 1
#: Row files up to this size are read into memory, hashed and decoded from those bytes, and their decode kept;
#: larger ones (self-contained folders embed their images) are decoded from the file and not kept.
MAX_KEPT_ROW_FILE_BYTES = 64 << 20
#: The largest kept decode read back (a 64 MiB row file's ids, names and codes are far less).
MAX_KEPT_DECODE_BYTES = 256 << 20


@functools.cache
def _reader_digest() -> str:
    """sha256 of this module's source: a kept decode is served only to the code that made it."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _decoded(path: Path, columns: Sequence[str], folder: BuiltFolder) -> _Decoded:
    """The file's :class:`_Decoded` columns, from ``folder.rows_cache`` when a decode of exactly its bytes is kept there.

    The bytes are read once, hashed, and decoded from memory on a miss, so a kept decode is that of the bytes
    its key names. A kept decode is checked again on reading (its settings, checksum and every rule the
    decoding checks); one that fails is decoded afresh and rewritten. A write that fails is logged once and not
    tried again for this folder (a read-only cache is still read); it is never fatal.
    """
    cache = folder.rows_cache
    if cache is None or path.stat().st_size > MAX_KEPT_ROW_FILE_BYTES:
        return _decode(path, columns, None)
    data = read_regular_file(path, MAX_KEPT_ROW_FILE_BYTES, "row file")
    settings = {
        "version": ROWS_CACHE_VERSION,
        "code": _reader_digest(),
        "sha256": hashlib.sha256(data).hexdigest(),
        "columns": list(columns),
    }
    record = cache / f"{digest(settings, 32)}.rows"
    kept = _kept_decode(path, record, settings)
    if kept is not None:
        return kept
    decoded = _decode(path, columns, data)
    # Image structs hold bytes: decoded from the file each time. Only a missing or regular record is (re)written:
    # a FIFO, device or link someone put there is left as it is.
    if folder.rows_cache_writable and cache_record_replaceable(record) and all(isinstance(v, str) for v in decoded.images):
        try:
            atomic_write_bytes(record, _kept_bytes(settings, decoded), durable=False)
        except OSError as error:  # a cache that cannot be written (read-only, full): said once, not tried again
            logger.warning(
                "row file cache: %s could not be written (%s); this run decodes its other row files without keeping them",
                record,
                error,
            )
            folder.rows_cache_writable = False
    return decoded


def _kept_bytes(settings: Mapping[str, Any], decoded: _Decoded) -> bytes:
    """A kept decode: one line of JSON (settings, counts, the payload's sha256), then the payload.

    The payload is the (N, 2) caption codes and image codes as little-endian int32, then the ids,
    captions and image names as one JSON array of three arrays: parsing it is a small part of
    reading the Parquet again, where a JSON list of every code was not.
    """
    codes = np.concatenate([decoded.caption_codes.ravel(), decoded.image_codes.ravel()]).astype("<i4").tobytes()
    names = canonical_json([decoded.ids, decoded.captions, decoded.images]).encode("utf-8")
    header = {
        "settings": settings,
        "rows": len(decoded.ids),
        "captions": len(decoded.captions),
        "images": len(decoded.images),
        "code_bytes": len(codes),
        "sha256": hashlib.sha256(codes + names).hexdigest(),
    }
    return canonical_json(header).encode("utf-8") + b"\n" + codes + names


def _kept_decode(path: Path, record: Path, settings: Mapping[str, Any]) -> _Decoded | None:
    """The decode kept at ``record`` if it is one for ``settings`` and passes its checksum and the row checks."""
    if not record.parent.is_dir():  # no cache folder (yet), or something else in its place: said when writing
        return None
    try:
        data = read_regular_file(record, MAX_KEPT_DECODE_BYTES, "kept row decode")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        logger.warning("row file cache: %s is unreadable (%s); %s is decoded again", record, error, path)
        return None
    try:
        line, _, payload = data.partition(b"\n")
        header = load_json_text(line, str(record))
        if header["settings"] != settings or header["sha256"] != hashlib.sha256(payload).hexdigest():
            raise ValueError("its settings or checksum do not match")
        n_rows, n_captions, n_images, n_code_bytes = (int(header[k]) for k in ("rows", "captions", "images", "code_bytes"))
        if n_rows < 1 or n_code_bytes != 16 * n_rows or len(payload) < n_code_bytes:
            raise ValueError("its counts do not match its payload")
        names = load_json_text(payload[n_code_bytes:], str(record))
        if not (isinstance(names, list) and len(names) == 3):
            raise ValueError("its names are not three lists")
        ids, captions, images = names
        for values, n in ((ids, n_rows), (captions, n_captions), (images, n_images)):
            if not isinstance(values, list) or len(values) != n or not all(isinstance(x, str) for x in values):
                raise ValueError("its ids, captions or images are not lists of strings of the recorded lengths")
        codes = np.frombuffer(payload[:n_code_bytes], dtype="<i4").astype(np.int64).reshape(2, n_rows, 2)
        for kind, block, n in (("caption", codes[0], n_captions), ("image", codes[1], n_images)):
            if block.min() < 0 or block.max() >= n:
                raise ValueError(f"its {kind} codes lie outside 0..{n - 1}")
        # The checks the decoding made, made again: a kept decode is never more trusted than the file.
        if not all(ids) or len(set(ids)) != len(ids):
            raise ValueError("its cycle ids are not unique non-empty strings")
        _check_captions(path, ids, captions, codes[0])
    except (KeyError, TypeError, ValueError) as error:
        logger.warning("row file cache: %s is not a kept decode of %s (%s); it is decoded again", record, path, error)
        return None
    return _Decoded(ids, captions, np.ascontiguousarray(codes[0]), images, np.ascontiguousarray(codes[1]))


def _decode(path: Path, columns: Sequence[str], data: bytes | None) -> _Decoded:
    """Decode and check the row file at ``path`` (from ``data``, its bytes, when given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pa.BufferReader(data) if data is not None else path
    # ParquetFile, not read_table: it reads only the needed columns and does not import pyarrow.dataset.
    try:
        try:
            # The image and caption strings come as dictionaries (each distinct value once), not one per row.
            parquet = pq.ParquetFile(source, read_dictionary=columns[:4])
        except KeyError:  # a struct column (datasets.Image) or a missing one has no leaf of that name
            parquet = pq.ParquetFile(source)
        with parquet:
            names = parquet.schema_arrow.names
            missing = [c for c in columns if c not in names]
            if missing:
                raise ValueError(f"{path}: columns {missing} are missing (have {names})")
            table = parquet.read(columns=list(columns)).rename_columns(list(ROW_FIELDS))
    except pa.ArrowException as error:
        raise ValueError(f"{path} is not a readable Parquet file ({error}); rebuild the folder") from error
    if table.num_rows == 0:
        raise ValueError(f"{path} holds no cycles")
    ids = _check_cycle_ids(path, table)
    captions, caption_codes = _raw_captions(path, table, ids)
    images, image_codes = _raw_images(path, table, ids)
    return _Decoded(ids, captions, caption_codes, images, image_codes)


class UnavailableSplitWarning(UserWarning):
    """A split below the minimum-cycle rule was loaded (:func:`load_split`)."""


_CONFIG = re.compile(r"^(?P<family>.+?)(?:_seed(?P<seed>\d+))?$")


def load_split(folder: str | Path, config: str, split: str, **load_kwargs: Any) -> Any:
    """``datasets.load_dataset(folder, config, split=split)``, and the unavailable splits too, with a warning.

    A split with fewer cycles than the build's minimum in some seed is written but left out of
    the card's ``configs:`` (``datasets`` alone refuses it as an unknown split); here it is
    loaded from its files with :class:`UnavailableSplitWarning` naming the reason. Same rows,
    columns and decoded images as an available split. ``load_kwargs`` go to ``load_dataset``
    (``cache_dir``, ...). ValueError names an unknown config or split.
    """
    import datasets

    built = open_built_folder(folder)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    match = _CONFIG.match(config)
    family, seed = (match["family"], int(match["seed"] or 0)) if match else (config, 0)
    entry = built.info["families"].get(family)
    if not isinstance(entry, dict) or str(seed) not in entry.get("counts", {}):
        configs = sorted(
            name if int(k) == 0 else f"{name}_seed{k}" for name, e in built.info["families"].items() for k in e.get("counts", {})
        )
        raise ValueError(f"{built.root}: no config {config!r} (configs: {configs})")
    if split in available_splits(built.info, family):
        return datasets.load_dataset(str(built.root), config, split=split, **load_kwargs)
    path = built.rows_file(family, seed, split)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: split {split!r} of config {config!r} was not written (no split met the rule)")
    reason = built.info.get("unavailable", {}).get(family, "no reason recorded")
    warnings.warn(
        UnavailableSplitWarning(
            f"{built.root}: split {split!r} of config {config!r} ({entry['counts'][str(seed)][split]} cycles) is "
            f"unavailable: {reason}; loaded anyway, do not report it as a result"
        ),
        stacklevel=2,
    )
    if built.layout == "imagefolder":
        files = [str(path), str(built.root / IMAGE_DIR / "**")]
        return datasets.load_dataset("imagefolder", data_files={split: files}, metadata_filenames=[path.name], split=split,
                                     **load_kwargs)  # fmt: skip
    return datasets.load_dataset("parquet", data_files={split: [str(path)]}, split=split, **load_kwargs)
