"""Readers of compositionality benchmarks in their published formats, as a registry.

An adapter turns a root folder (or file) into :class:`~.design.ComparisonSet` subsets.
Adding a format is a registration, as with backends::

    @register_adapter("my_bench", "what it is", expects="files the root must hold")
    def read_my_bench(root: Path) -> list[ComparisonSet]: ...

Shipped adapters:

- ``winoground``: ``examples.jsonl`` (or Parquet) with ``image_0``, ``image_1``,
  ``caption_0``, ``caption_1`` and tags, images in ``images/`` (the hub layout
  ``data/examples.jsonl`` + ``data/images/*.png`` too); each block gives its four
  directional comparisons and is declared as an exact cycle.
- ``sugarcrepe``: the seven ``{add,replace,swap}_*.json`` files, each
  ``{id: {filename, caption, negative_caption}}``, COCO val2017 images.
- ``aro``: ``visual_genome_relation.json`` / ``visual_genome_attribution.json`` (image,
  box, true and false caption; images in ``images/``, cropped to the box as ARO does)
  and ``coco_order.json`` / ``flickr30k_order.json`` (ARO's test cases: an image and
  ``caption_options``, the true caption first, then its perturbations).
- ``comparison_table``: a CSV or JSON-lines table, one edge per row: ``image``,
  ``caption``, ``weight``, ``comparison_id`` (optional ``subset``, ``item_id``, ``tag``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from clip_cycles.algebra.audits import hard_negative_edges, winoground_comparisons
from clip_cycles.benchmark_audit.design import ComparisonSet, ComparisonSetBuilder, CroppedImageItem, empty_subset
from clip_cycles.benchmark_audit.input_formats import (
    AroOrderCase,
    AroVisualGenomeItem,
    ComparisonEdge,
    SugarCrepeItem,
    WinogroundBlock,
    checked_row,
)
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.data.sources.text_normalize import caption_key
from clip_cycles.registry import Registry
from clip_cycles.regular_files import load_json_text, read_regular_file

Reader = Callable[[Path], list[ComparisonSet]]


@dataclass(frozen=True)
class Adapter:
    """A registered benchmark format: its reader and what its root must hold."""

    name: str
    reader: Reader
    description: str
    expects: str


ADAPTERS: Registry[Adapter] = Registry("benchmark format")


def register_adapter(name: str, description: str, expects: str, replace: bool = False) -> Callable[[Reader], Reader]:
    """Decorator: register ``reader(root) -> [ComparisonSet, ...]`` as benchmark format ``name``."""

    def decorate(reader: Reader) -> Reader:
        ADAPTERS.register(name, Adapter(name, reader, description, expects), replace=replace)
        return reader

    return decorate


def get_adapter(name: str) -> Adapter:
    """The adapter ``name``; ValueError listing the registered ones."""
    return ADAPTERS.get(name)


def load_benchmark(name: str, root: str | Path, subsets: Sequence[str] | None = None) -> list[ComparisonSet]:
    """Read benchmark ``name`` from ``root``; ``subsets`` keeps only those (ValueError naming unknown ones)."""
    adapter = get_adapter(name)
    path = Path(root).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{name} root {path} does not exist; it must hold {adapter.expects}")
    found = adapter.reader(path)
    if subsets:
        names = [s.name for s in found]
        unknown = [s for s in subsets if s not in names]
        if unknown:
            raise ValueError(f"{name} root {path} has no subset {unknown}; it has {names}")
        found = [s for s in found if s.name in subsets]
    return found


# --------------------------------------------------------------------------- shared readers


#: The largest benchmark file read (a Parquet file with its images included; every published JSON or CSV is far smaller).
MAX_BENCHMARK_FILE_BYTES = 4 << 30


def read_text(path: Path) -> str:
    """A benchmark file's text: a regular file of at most :data:`MAX_BENCHMARK_FILE_BYTES` (a FIFO or device is
    refused before a byte is read), UTF-8 with or without a byte-order mark; a ValueError naming the file otherwise."""
    raw = read_regular_file(path, MAX_BENCHMARK_FILE_BYTES, "benchmark file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"benchmark file {path} is not UTF-8 text: {error}") from None


def read_csv_rows(path: Path) -> csv.DictReader:
    """A CSV benchmark file's rows (:func:`read_text`: regular and bounded).

    A field may be as long as the file (the csv module's default limit of 131,072 characters
    would raise ``_csv.Error`` on a long caption): the whole file is bounded already, so the
    limit is raised to the file's length, never lowered.
    """
    text = read_text(path)
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))
    return csv.DictReader(io.StringIO(text, newline=""))


def _read_json(path: Path) -> Any:
    text = read_text(path)
    if not text.strip():
        raise ValueError(f"{path}: empty file (no JSON value)")
    try:
        return load_json_text(text, str(path), allow_non_finite=True)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from error


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in _numbered_jsonl(path)]


def _numbered_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Each object of a JSON-lines file with its line number in the file (blank lines skipped, still counted)."""
    rows = []
    # Lines as open() gives them (universal newlines): str.splitlines would also cut at U+2028 inside a string.
    for number, line in enumerate(io.StringIO(read_text(path), newline=None), 1):
        if not line.strip():
            continue  # trailing blank lines are common in exported JSON-lines files
        try:
            row = load_json_text(line, f"{path}: line {number}", allow_non_finite=True)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: line {number} is not valid JSON: {error}") from error
        if not isinstance(row, dict):
            raise ValueError(f"{path}: line {number} must be a JSON object, got {type(row).__name__}")
        rows.append((number, row))
    return rows


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = read_regular_file(path, MAX_BENCHMARK_FILE_BYTES, "benchmark file")
    return pq.read_table(pa.BufferReader(raw)).to_pylist()


def _records(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON list, JSON-lines or Parquet file."""
    if path.suffix == ".parquet":
        return _read_parquet(path)
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    data = _read_json(path)
    if isinstance(data, dict):  # SugarCrepe style: {id: record}
        return [{"_id": key, **value} if isinstance(value, dict) else {"_id": key, "_bad": value} for key, value in data.items()]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of records or an object of records, got {type(data).__name__}")
    return data


def present(path: Path) -> bool:
    """A benchmark file is there: anything but a folder (a FIFO or device is then refused by :func:`read_text`
    with a sentence, never skipped as if absent)."""
    return path.exists() and not path.is_dir()


def _first_file(candidates: Iterable[Path]) -> Path | None:
    return next((p for p in candidates if present(p)), None)


def _first_dir(candidates: Iterable[Path]) -> Path | None:
    return next((p for p in candidates if p.is_dir()), None)


def _image_file(folder: Path, name: str) -> Path:
    """``folder/name``; a name without a suffix (Winoground's ``ex_0_img_0``) tries .png, .jpg, .jpeg."""
    path = Path(name) if Path(name).is_absolute() else folder / name
    if path.suffix or path.exists():
        return path
    for suffix in (".png", ".jpg", ".jpeg"):
        if path.with_suffix(suffix).exists():
            return path.with_suffix(suffix)
    return path.with_suffix(".png")  # missing: the encoder names it (or counts it with --skip-bad-images)


# --------------------------------------------------------------------------- Winoground


WINOGROUND_TAG_FIELDS = ("collapsed_tag", "tag", "secondary_tag", "num_main_preds")


def _winoground_image(value: Any, images_dir: Path, where: str, table: Path, key: str) -> ImageItem:
    if isinstance(value, str) and value:
        path = _image_file(images_dir, value)
        return ImageItem(key=path.relative_to(images_dir).as_posix() if path.is_relative_to(images_dir) else str(path), path=path)
    if isinstance(value, dict) and (value.get("bytes") or value.get("path")):
        # Parquet from `datasets`: an Image feature stored as {bytes, path}.
        if value.get("bytes"):
            return ImageItem(key=f"{where}/{key}:{value.get('path') or ''}", data=bytes(value["bytes"]))
        return ImageItem(key=str(value["path"]), path=_image_file(images_dir, str(value["path"])))
    raise ValueError(f"{table}: {where}: field {key!r} must name an image file or hold image bytes, got {value!r}")


def _winoground_tags(row: dict[str, Any]) -> list[str]:
    tags = []
    for name in WINOGROUND_TAG_FIELDS:
        value = row.get(name)
        if value is None or value == "":
            continue
        # secondary_tag may list several tags separated by commas.
        for part in str(value).split(",") if name == "secondary_tag" else [str(value)]:
            if part.strip():
                tags.append(f"{name}={part.strip()}")
    return tags


@register_adapter(
    "winoground",
    "Winoground: 2x2 blocks (image_0, image_1, caption_0, caption_1) with tags",
    "examples.jsonl (or a .parquet table) with image_0, image_1, caption_0, caption_1 and images/ "
    "(the hub layout data/examples.jsonl + data/images/ also works)",
)
def read_winoground(root: Path) -> list[ComparisonSet]:
    """Each block: two text comparisons and two image comparisons, and the block itself as a declared cycle."""
    if root.is_file():
        table, base = root, root.parent
    else:
        table = _first_file([root / "examples.jsonl", root / "data" / "examples.jsonl"])
        if table is None:
            parquet = sorted(root.glob("*.parquet")) or sorted((root / "data").glob("*.parquet"))
            table = parquet[0] if parquet else None
        if table is None:
            raise FileNotFoundError(
                f"{root}: no Winoground table: expected examples.jsonl, data/examples.jsonl or a "
                ".parquet file with columns image_0, image_1, caption_0, caption_1"
            )
        base = table.parent
    images_dir = _first_dir([base / "images", root / "images" if root.is_dir() else base]) or base
    blocks = []
    for number, row in enumerate(_records(table)):
        block = str(row.get("id", number))
        where = f"row {number} (id {block})"
        checked = checked_row(WinogroundBlock, row, table, where)
        first = _winoground_image(checked.image_0, images_dir, where, table, "image_0")
        second = _winoground_image(checked.image_1, images_dir, where, table, "image_1")
        blocks.append((block, first, second, checked.caption_0, checked.caption_1, _winoground_tags(row)))
    return [block_subset("winoground", table, blocks)]


# --------------------------------------------------------------------------- shared shapes


#: Skip reason of a block whose two captions differ only in whitespace or case (one caption vertex).
CAPTIONS_EQUAL_UNDER_KEY = "block_with_captions_equal_up_to_whitespace_and_case"


def block_subset(
    name: str,
    source: Path,
    blocks: Iterable[tuple[str, ImageItem, ImageItem, str, str, Sequence[str]]],
    skipped: dict[str, int] | None = None,
) -> ComparisonSet:
    """A subset of 2x2 blocks ``(block id, image_0, image_1, caption_0, caption_1, tags)``, caption_i true of image_i.

    Each block gives its two text and two image comparisons (as Winoground) and is declared an
    exact cycle; a block repeating an image or a caption is dropped and counted. Captions repeat under
    the builder's vertex identity (:func:`caption_key`: whitespace and case), so a block whose captions
    differ only there would be one caption vertex, no cycle: it is counted under its own reason. ``skipped``: rows
    the format's reader already dropped, per reason (counted with the others).
    """
    builder = ComparisonSetBuilder(name, kind="winoground")
    for reason, count in (skipped or {}).items():
        builder.skip(reason, count)
    for block, first, second, caption_0, caption_1, tags in blocks:
        if first.key == second.key or caption_0 == caption_1:
            builder.skip("block_with_repeated_image_or_caption")
            continue
        if caption_key(caption_0) == caption_key(caption_1):
            builder.skip(CAPTIONS_EQUAL_UNDER_KEY)
            continue
        items = {first.key: first, second.key: second}
        for which in ("text", "image"):
            comparisons = winoground_comparisons([(first.key, second.key, caption_0, caption_1)], which)
            for k, (image_keys, captions, weights) in enumerate(comparisons):
                builder.add(f"{block}/{which}{k}", block, [items[key] for key in image_keys], captions, weights, tags)
        builder.add_cycle(first, second, caption_0, caption_1, tags)
    return builder.build()  # no usable block: an empty subset with its reason, reported, never an abort


def image_item(images_dir: Path, name: str) -> ImageItem:
    """An image named in a benchmark file, looked up under ``images_dir`` (it may be missing: blind audits never read it)."""
    return ImageItem(key=name, path=_image_file(images_dir, name))


def unreadable_subset(name: str, error: Exception) -> ComparisonSet:
    """The row of a piece whose file cannot be read (empty, not JSON, not UTF-8, refused, wrong top-level shape)."""
    return empty_subset(name, f"unreadable: {error}")


#: What a piece's file read may raise that makes it an unreadable piece (a row), not an abort of the benchmark.
UNREADABLE = (OSError, ValueError)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON list, ``{id: record}`` object (``_id`` added), JSON-lines or Parquet file."""
    return _records(path)


def read_json(path: Path) -> Any:
    """A JSON file, or a ValueError naming it."""
    return _read_json(path)


def image_from_value(value: Any, images_dir: Path, where: str, table: Path, key: str) -> ImageItem:
    """An image given as a file name or as ``{bytes, path}`` (a ``datasets`` Image in Parquet); ValueError naming the field."""
    return _winoground_image(value, images_dir, where, table, key)


def first_dir(candidates: Iterable[Path]) -> Path | None:
    """The first of ``candidates`` that is a folder."""
    return _first_dir(candidates)


# --------------------------------------------------------------------------- SugarCrepe


SUGARCREPE_SUBSETS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
#: SugarCrepe's published subset sizes (7,511 items in all).
SUGARCREPE_PUBLISHED_SIZES = {
    "add_att": 692,
    "add_obj": 2062,
    "replace_att": 788,
    "replace_obj": 1652,
    "replace_rel": 1406,
    "swap_att": 666,
    "swap_obj": 245,
}


def hard_negative_subset(
    name: str,
    source: Path,
    items: Iterable[tuple[str | tuple[str, str], ImageItem, str, str, Sequence[str]]],
    kind: str = "hard_negative",
    skipped: dict[str, int] | None = None,
) -> ComparisonSet:
    """A subset of one-image hard negatives ``(item id, image, true caption, false caption, tags)``.

    The id may be a pair ``(comparison id, item id)`` when an item gives several comparisons.

    ``skipped`` carries the reader's own counts of dropped entries (per reason) into the subset.
    """
    builder = ComparisonSetBuilder(name, kind=kind)
    for reason, count in (skipped or {}).items():
        builder.skip(reason, count)
    for item_id, image, positive, negative, tags in items:
        if caption_key(positive) == caption_key(negative):
            # One caption vertex (equal up to whitespace runs and case): every score ties, the model's too.
            builder.skip("negative_equal_to_caption")
            continue
        image_keys, captions, weights = hard_negative_edges([(image.key, positive, negative)])
        # An id (comparison id, item id) lets one item give several comparisons (several foils).
        comparison_id, item = item_id if isinstance(item_id, tuple) else (item_id, item_id)
        builder.add(comparison_id, item, [image] * len(image_keys), captions, weights, tags)
    return builder.build()  # no usable item: an empty subset with its reason, reported, never an abort


@register_adapter(
    "sugarcrepe",
    "SugarCrepe: one image, a caption and a hard negative; seven subsets",
    "the seven SugarCrepe files (add_att.json ... swap_obj.json, in the root or data/) and the COCO "
    "val2017 images (val2017/ or images/)",
)
def read_sugarcrepe(root: Path) -> list[ComparisonSet]:
    folder = root if any(present(root / f"{s}.json") for s in SUGARCREPE_SUBSETS) else root / "data"
    images_dir = _first_dir([root / "val2017", root / "images", root / "coco" / "val2017"]) or root
    out = []
    for subset in SUGARCREPE_SUBSETS:
        path = folder / f"{subset}.json"
        if not present(path):
            continue
        try:
            rows = _records(path)
        except UNREADABLE as error:
            out.append(unreadable_subset(subset, error))
            continue
        items = []
        for number, row in enumerate(rows):
            item_id = str(row.get("_id", number)) if isinstance(row, dict) else str(number)
            where = f"item {item_id}"
            if not isinstance(row, dict) or "_bad" in row:  # a list (or object) of non-objects
                raise ValueError(f"{path}: {where} must be an object with filename, caption, negative_caption")
            item = checked_row(SugarCrepeItem, row, path, where)
            image = ImageItem(key=item.filename, path=_image_file(images_dir, item.filename))
            items.append((item_id, image, item.caption, item.negative_caption, ()))
        out.append(hard_negative_subset(subset, path, items))
    if not out:
        raise FileNotFoundError(
            f"{root}: no SugarCrepe file found; expected some of "
            f"{', '.join(s + '.json' for s in SUGARCREPE_SUBSETS)} in {root} or {root / 'data'}"
        )
    return out


# --------------------------------------------------------------------------- ARO


ARO_VG_FILES = {"vg_relation": "visual_genome_relation.json", "vg_attribution": "visual_genome_attribution.json"}
ARO_ORDER_FILES = {
    "coco_order": ("coco_order.json", "coco_order.jsonl"),
    "flickr_order": ("flickr30k_order.json", "flickr30k_order.jsonl"),
}


def _aro_vg(subset: str, path: Path, images_dir: Path) -> ComparisonSet:
    items = []
    for number, row in enumerate(_records(path)):
        item = checked_row(AroVisualGenomeItem, row, path, f"item {number}")
        image_path, box = item.image_path, (item.bbox_x, item.bbox_y, item.bbox_w, item.bbox_h)
        file = _image_file(images_dir, image_path)
        image = CroppedImageItem(key=f"{image_path}#box={','.join(f'{v:g}' for v in box)}", path=file, box=box)
        if subset == "vg_relation":
            tags = [f"relation={row['relation_name']}"] if row.get("relation_name") else []
        else:
            attributes = row.get("attributes")
            tags = [f"attributes={'_'.join(map(str, attributes))}"] if isinstance(attributes, list) else []
        items.append(
            (
                str(row.get("id", number)),
                image,
                item.true_caption,
                item.false_caption,
                tags,
            )
        )
    return hard_negative_subset(subset, path, items)


def _aro_order(subset: str, path: Path, root: Path) -> ComparisonSet:
    builder = ComparisonSetBuilder(subset, kind="caption_order")
    for number, row in enumerate(_records(path)):
        case = checked_row(AroOrderCase, row, path, f"test case {number}")
        name = case.image
        file = _image_file(root, name)
        if not file.exists() and (root / "images" / name).exists():
            file = root / "images" / name
        image = ImageItem(key=name, path=file)
        options = case.caption_options
        true = options[0]
        for k, perturbed in enumerate(options[1:], 1):
            if caption_key(perturbed) == caption_key(true):
                # A shuffle that changed nothing (beyond whitespace and case, one caption vertex): every score ties.
                builder.skip("perturbation_equal_to_caption")
                continue
            image_keys, captions, weights = hard_negative_edges([(image.key, true, perturbed)])
            builder.add(f"{number}/{k}", str(number), [image] * 2, captions, weights)
    return builder.build()


@register_adapter(
    "aro",
    "ARO: VG-Relation, VG-Attribution (image box, true/false caption), COCO-Order, Flickr-Order",
    "visual_genome_relation.json and/or visual_genome_attribution.json with images/, and/or "
    "coco_order.json(l) / flickr30k_order.json(l) (ARO test cases: image, caption_options); files in the "
    "root or annotations/",
)
def read_aro(root: Path) -> list[ComparisonSet]:
    out = []
    images_dir = _first_dir([root / "images"]) or root
    for subset, name in ARO_VG_FILES.items():
        path = _first_file([root / name, root / "annotations" / name])
        if path is not None:
            out.append(_aro_vg(subset, path, images_dir))
    for subset, names in ARO_ORDER_FILES.items():
        path = _first_file([root / n for n in names] + [root / "annotations" / n for n in names])
        if path is not None:
            out.append(_aro_order(subset, path, root))
    if not out:
        raise FileNotFoundError(
            f"{root}: no ARO file found; expected {', '.join(ARO_VG_FILES.values())} or "
            f"{', '.join(n for names in ARO_ORDER_FILES.values() for n in names)}"
        )
    return out


# --------------------------------------------------------------------------- generic comparison table


TABLE_COLUMNS = ("image", "caption", "weight", "comparison_id")
TABLE_NAMES = ("comparisons.csv", "comparisons.jsonl")


def _table_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Each row of a comparison table with the line of the file it ends on (errors name the file's own line)."""
    if path.suffix == ".jsonl":
        return _numbered_jsonl(path)
    if path.suffix != ".csv":
        raise ValueError(f"{path}: a comparison table must be .csv or .jsonl")
    reader = read_csv_rows(path)
    reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
    rows = []
    for row in reader:  # the reader skips wholly empty lines; line_num still counts them
        if any((v or "").strip() for v in row.values() if isinstance(v, str)):
            rows.append((reader.line_num, {k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()}))
    return rows


@register_adapter(
    "comparison_table",
    "Any benchmark as a table of signed edges grouped into comparisons",
    "a .csv or .jsonl file (or a folder with comparisons.csv / comparisons.jsonl) with columns image, "
    "caption, weight, comparison_id (optional subset, item_id, tag); images relative to the table",
)
def read_comparison_table(root: Path) -> list[ComparisonSet]:
    path = root if root.is_file() else _first_file([root / n for n in TABLE_NAMES])
    if path is None:
        raise FileNotFoundError(f"{root}: no comparison table; expected {' or '.join(TABLE_NAMES)}")
    base = path.parent
    builders: dict[str, ComparisonSetBuilder] = {}
    comparisons: dict[str, dict[str, Any]] = {}
    for number, row in _table_rows(path):
        edge = checked_row(ComparisonEdge, row, path, f"line {number}")
        weight, comparison = edge.weight, str(edge.comparison_id)
        subset = str(row.get("subset") or "table")
        item = str(row.get("item_id") or comparison)
        entry = comparisons.setdefault(comparison, {"subset": subset, "item": item, "edges": [], "tags": []})
        if (entry["subset"], entry["item"]) != (subset, item):
            raise ValueError(
                f"{path}: line {number}: comparison {comparison!r} is in subset {entry['subset']!r}, item "
                f"{entry['item']!r} on an earlier line but in {subset!r}, {item!r} here"
            )
        name = edge.image
        entry["edges"].append((ImageItem(key=name, path=_image_file(base, name)), edge.caption, weight))
        tag = row.get("tag")
        if tag not in (None, "") and str(tag) not in entry["tags"]:
            entry["tags"].append(str(tag))
    for comparison, entry in comparisons.items():
        builder = builders.setdefault(entry["subset"], ComparisonSetBuilder(entry["subset"], kind="table"))
        images, captions, weights = zip(*entry["edges"])
        builder.add(comparison, entry["item"], images, captions, weights, entry["tags"])
    if not builders:
        raise ValueError(f"{path}: the table has no rows")
    return [builders[name].build() for name in builders]


# --------------------------------------------------------------------------- formats in their own modules

#: Formats declared in ``clip_cycles.benchmark_audit.formats.<module>`` (each an ``ADAPTER``, or the attribute
#: after ``:``), loaded on first use.
FORMAT_MODULES: dict[str, tuple[str, str]] = {
    "valse": ("valse", "VALSE: one JSON per piece, caption and foil; the paper's valid set (mturk caption >= 2)"),
    "valse_all": ("valse:ADAPTER_ALL", "VALSE: one JSON per piece, caption and foil; every instance, validated or not"),
    "vl_checklist": ("vl_checklist", "VL-CheckList: [[image, {POS: [...], NEG: [...]}], ...] per file, many folders"),
    "sugarcrepe_pp": ("sugarcrepe_pp", "SugarCrepe++: one image, two positive captions and one negative"),
    "crepe": ("crepe", "CREPE: productivity / systematicity CSVs, a caption and its hard negatives"),
    "cola": ("cola", "Cola multi-object matching: [image_1, caption_1, image_2, caption_2] blocks"),
    "eqben": ("eqben", "EqBen: image0, caption0, image1, caption1 blocks"),
    "mmvp_vlm": ("mmvp_vlm", "MMVP-VLM: Questions.csv, pairs of statements over pairs of images, nine patterns"),
    "colorswap": ("colorswap", "ColorSwap: image_1, image_2, caption_1, caption_2 blocks"),
    "bivlc": ("bivlc", "BiVLC: Parquet rows image, caption, negative_caption, negative_image (one 2x2 block each)"),
    "naturalbench": ("naturalbench", "NaturalBench: Parquet rows Image_0, Image_1, Question_0, Question_1 and answers"),
    "vismin": ("vismin", "VisMin: Arrow save_to_disk rows image_0, image_1, text_0, text_1 and sim_solution.csv"),
}
for _name, (_module, _description) in FORMAT_MODULES.items():
    _target = _module if ":" in _module else f"{_module}:ADAPTER"
    ADAPTERS.register(_name, f"clip_cycles.benchmark_audit.formats.{_target}", origin="builtin", description=_description)
