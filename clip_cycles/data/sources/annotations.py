"""Loading COCO-format annotations through pycocotools, with validation at the boundary.

pycocotools trusts its input: malformed JSON or a dangling id surfaces as a
traceback from deep inside it. Here every file is read and checked first; only the
cleaned data reaches ``pycocotools.coco.COCO``.

What is an error and what is a counted skip:

- Errors (``ValueError``/``FileNotFoundError`` naming the file and, where known, the
  image or annotation id and field): a missing file, malformed JSON (line, column and
  character position), a top level that is not an object, a missing or wrongly typed
  list or field, a duplicate image id.
- Counted skips (reason -> count in :attr:`CocoSplit.skipped`, listed in the card):

  - ``image_unsafe_file_name``: a file name that is absolute or contains ``..`` (it
    would escape the image folder); the image and its annotations go.
  - ``image_bad_size``: a width or height that is not a finite positive number
    (``NaN``, ``Infinity``, 0, negative); the image and its annotations go.
  - ``annotation_missing_image`` / ``caption_missing_image``: the ``image_id`` is not in
    ``images``.
  - ``annotation_unknown_category``: the ``category_id`` is not in ``categories``. The
    whole image is dropped (``image_unknown_category``, once per image): it holds an
    object no caption can name, so "exactly one bottle" could be false of it.
  - ``box_not_finite`` / ``box_zero_area`` / ``box_outside_image``: a box with a NaN or
    infinite number, with width or height <= 0, or one reaching more than
    ``BOX_TOLERANCE`` pixels past the image border. The whole image is dropped
    (``image_bad_box``, once per image) because family predicates such as "exactly one
    instance of each mentioned category" would be unsound if a dubious box were
    silently removed. An image with both a bad box and an unknown category counts
    once, as ``image_bad_box``.
  - ``caption_empty``: a caption that is empty or only whitespace;
    ``annotation_of_dropped_image`` / ``caption_of_dropped_image``: an annotation or caption of an
    image dropped for one of the reasons above.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from clip_cycles.regular_files import read_regular_file

#: Pixels a box may reach past the image border (COCO boxes are floats from polygons).
BOX_TOLERANCE: float = 1.0


#: An annotation file larger than this is refused (COCO's instances_train2017.json is 448 MB).
MAX_ANNOTATION_BYTES = 4 << 30
try:  # orjson parses several times faster and gives the same Python values for standard JSON
    from orjson import JSONDecodeError as _FastDecodeError
    from orjson import loads as _fast_loads
except ImportError:  # optional: the standard library alone gives the same values
    _fast_loads, _FastDecodeError = json.loads, json.JSONDecodeError


#: 19 digits in a row: an integer orjson might turn into a float (beyond 64 bits), or a long number.
_LONG_NUMBER = re.compile(r"\d{19}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19}")


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``, through orjson where it is installed (hundreds of thousands of
    predicates per COCO build). Texts orjson refuses (NaN) or might read differently (an
    integer beyond 64 bits becomes a float there) go to the standard library, so the values
    are always the standard library's."""
    pattern = _LONG_NUMBER_BYTES if isinstance(text, bytes) else _LONG_NUMBER
    if pattern.search(text) is not None:
        return json.loads(text)
    try:
        return _fast_loads(text)
    except _FastDecodeError:
        return json.loads(text)


_WS = rb"[ \t\r\n]*"
_PLAIN_POLYGON = rb"\[[0-9.,eE+\- \t\r\n]*\]"
#: ``"segmentation": [[x, y, ...], ...]``: polygon lists of numeric characters, exactly two levels deep.
_POLYGONS = re.compile(
    rb'"segmentation"' + _WS + rb":" + _WS + rb"\[" + _WS + _PLAIN_POLYGON
    + rb"(?:" + _WS + rb"," + _WS + _PLAIN_POLYGON + rb")*" + _WS + rb"\]"
)  # fmt: skip


def drop_polygons(raw: bytes) -> bytes:
    """``raw`` with every plain polygon ``segmentation`` value replaced by ``[]``.

    No family reads segmentations, and COCO's polygons are most of the instances file
    (about 70 % of the bytes of bench_build's COCO-sized train2017, tens of millions of numbers): not parsing them makes
    the load several seconds faster and the index gigabytes smaller. Only a value that is
    a list of lists of numeric characters is dropped, so the numbers inside it are not
    checked; anything else (run-length ``counts`` objects, a bracket missing) is parsed as
    written and an error in it is reported as before. A ``"segmentation"`` inside a string
    cannot match: its quotes are escaped there.
    """
    if b'"segmentation"' not in raw:
        return raw
    return _POLYGONS.sub(b'"segmentation":[]', raw)


def read_json(path: str | Path, polygons: bool = True) -> Any:
    """Parse a JSON file; a decoding error names the file, line, column and character position.

    Only a regular file of at most :data:`MAX_ANNOTATION_BYTES` is read (a FIFO or a device
    is refused, not waited on), and JSON nested deeper than the parser allows is a ValueError
    naming the file instead of a RecursionError. ``polygons=False`` parses the file as if
    every plain polygon segmentation were empty (:func:`drop_polygons`); a decoding error
    still gives its position in the file as written.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"annotation file {path} does not exist (expected the standard COCO layout)")
    raw = read_regular_file(path, MAX_ANNOTATION_BYTES, "annotation file")
    text = raw if polygons else drop_polygons(raw)
    try:
        # orjson parses COCO-sized files several times faster; any input it refuses
        # (malformed, non-UTF-8, integers beyond 64 bits) is parsed again by the
        # standard library, which either accepts it or gives the precise position.
        import orjson

        return orjson.loads(text)
    except ImportError:
        pass
    except orjson.JSONDecodeError:
        pass
    try:
        if text is not raw:
            with contextlib.suppress(ValueError, RecursionError):
                return json.loads(text)
            del text  # an error: parse the file as written, so that its position is the file's
        return json.loads(raw)
    except RecursionError:
        raise ValueError(
            f"{path}: JSON nested too deeply to parse (more levels than Python's recursion limit); "
            "COCO annotation files nest a few levels only, so this file is damaged or hostile: restore it"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: malformed JSON at line {error.lineno} column {error.colno} (char {error.pos}): {error.msg}"
        ) from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text at byte {error.start}: {error.reason}") from None


def _require_list(data: Any, key: str, path: Path) -> list[Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level must be a JSON object with 'images' and 'annotations', got {type(data).__name__}")
    if key not in data:
        raise ValueError(f"{path}: missing top-level list {key!r}")
    value = data[key]
    if not isinstance(value, list):
        raise ValueError(f"{path}: {key!r} must be a list, got {type(value).__name__}")
    return value


def _field(entry: Any, key: str, kind: type | tuple[type, ...], path: Path, what: str, index: int) -> Any:
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: {what} #{index} must be an object, got {type(entry).__name__}")
    if key not in entry:
        ident = f" (id {entry['id']})" if "id" in entry else ""
        raise ValueError(f"{path}: {what} #{index}{ident} has no field {key!r}")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        ident = f" (id {entry['id']})" if "id" in entry else ""
        raise ValueError(f"{path}: {what} #{index}{ident} field {key!r} has type {type(value).__name__}")
    return value


def safe_relative(name: str) -> bool:
    """Whether ``name`` stays inside the folder it is relative to (no absolute path, no ``..``)."""
    if not name or "\\" in name or name.startswith("/"):
        return False
    if "/" not in name:  # one part (COCO's "000000000139.jpg"), the same answer without pathlib's parsing
        return name != ".." and not name.endswith(":")
    parts = PurePosixPath(name).parts
    return ".." not in parts and not (parts and parts[0].endswith(":"))


@dataclass
class ImageEntry:
    """One image: file name relative to the source root (``train2017/...``), size in pixels."""

    id: int
    file_name: str
    width: float
    height: float


@dataclass
class CocoSplit:
    """A validated COCO split (e.g. ``train2017``): pycocotools objects plus what was skipped."""

    root: Path
    split: str
    images: dict[int, ImageEntry]
    instances: Any  # pycocotools.coco.COCO
    captions: dict[int, list[str]]
    categories: dict[int, dict[str, str]]
    skipped: Counter = field(default_factory=Counter)


def _quiet_coco(dataset: dict[str, Any]) -> Any:
    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress lines
        coco.createIndex()
    return coco


def _images(raw: list[Any], path: Path, split: str, skipped: Counter) -> tuple[dict[int, ImageEntry], set[int]]:
    images: dict[int, ImageEntry] = {}
    seen: set[int] = set()
    for i, entry in enumerate(raw):
        image_id = _field(entry, "id", int, path, "image", i)
        name = _field(entry, "file_name", str, path, "image", i)
        width = _field(entry, "width", (int, float), path, "image", i)
        height = _field(entry, "height", (int, float), path, "image", i)
        if image_id in seen:
            raise ValueError(f"{path}: image id {image_id} appears twice (image #{i})")
        seen.add(image_id)
        if not (math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0):
            skipped["image_bad_size"] += 1  # no box can be checked against it, no caption trusted
            continue
        if not safe_relative(name):
            skipped["image_unsafe_file_name"] += 1
            continue
        images[image_id] = ImageEntry(image_id, f"{split}/{name}", float(width), float(height))
    return images, seen


_NUMBER_TYPES = (int, float)


def _box_problem(bbox: Any, image: ImageEntry, path: Path, ann_id: Any) -> str | None:
    # Exact types first (COCO has ~860k boxes); the isinstance check explains anything else
    # (bool is an int subclass but never a coordinate).
    if not (
        type(bbox) is list
        and len(bbox) == 4
        and type(bbox[0]) in _NUMBER_TYPES
        and type(bbox[1]) in _NUMBER_TYPES
        and type(bbox[2]) in _NUMBER_TYPES
        and type(bbox[3]) in _NUMBER_TYPES
    ):
        if (
            not isinstance(bbox, list)
            or len(bbox) != 4
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)
        ):
            raise ValueError(f"{path}: annotation {ann_id} field 'bbox' must be [x, y, w, h] numbers, got {bbox!r}")
    x, y, w, h = bbox
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(w) and math.isfinite(h)):
        return "box_not_finite"
    if w <= 0 or h <= 0:
        return "box_zero_area"
    tol = BOX_TOLERANCE
    if x < -tol or y < -tol or x + w > image.width + tol or y + h > image.height + tol:
        return "box_outside_image"
    return None


def load_coco_split(root: str | Path, split: str = "train2017", with_captions: bool = True) -> CocoSplit:
    """Load ``annotations/instances_<split>.json`` (and captions) under ``root`` with validation.

    Returns a :class:`CocoSplit` whose ``instances`` is a pycocotools ``COCO`` built from
    the cleaned data only; ``skipped`` counts every dropped entry by reason.
    """
    root = Path(root)
    path = root / "annotations" / f"instances_{split}.json"
    data = read_json(path, polygons=False)  # no family reads a segmentation
    skipped: Counter = Counter()
    images, all_ids = _images(_require_list(data, "images", path), path, split, skipped)
    categories: dict[int, dict[str, str]] = {}
    for i, entry in enumerate(_require_list(data, "categories", path)):
        cat_id = _field(entry, "id", int, path, "category", i)
        name = _field(entry, "name", str, path, "category", i)
        supercategory = entry.get("supercategory", name) if isinstance(entry, dict) else name
        if not isinstance(supercategory, str):
            raise ValueError(f"{path}: category {cat_id} field 'supercategory' must be a string")
        categories[cat_id] = {"name": name.strip(), "supercategory": supercategory.strip()}
    kept: list[dict[str, Any]] = []
    bad_images: set[int] = set()
    unknown_category_images: set[int] = set()
    for i, entry in enumerate(_require_list(data, "annotations", path)):
        # Fast path for well-formed entries (COCO has ~860k); _field explains anything else.
        try:
            image_id, cat_id, ann_id = entry["image_id"], entry["category_id"], entry["id"]
            well_formed = type(image_id) is int and type(cat_id) is int and type(ann_id) is int
        except (KeyError, TypeError):
            well_formed = False
        if not well_formed:
            image_id = _field(entry, "image_id", int, path, "annotation", i)
            cat_id = _field(entry, "category_id", int, path, "annotation", i)
            ann_id = _field(entry, "id", int, path, "annotation", i)
        if image_id not in images:
            skipped["annotation_of_dropped_image" if image_id in all_ids else "annotation_missing_image"] += 1
            continue
        if cat_id not in categories:
            skipped["annotation_unknown_category"] += 1
            unknown_category_images.add(image_id)
            continue
        problem = _box_problem(entry.get("bbox"), images[image_id], path, ann_id)
        if problem:
            skipped[problem] += 1
            bad_images.add(image_id)
            continue
        kept.append(entry)
    if bad_images:
        skipped["image_bad_box"] += len(bad_images)
    unknown_category_images -= bad_images
    if unknown_category_images:
        skipped["image_unknown_category"] += len(unknown_category_images)
    excluded = bad_images | unknown_category_images
    if excluded:
        kept = [a for a in kept if a["image_id"] not in excluded]
        images = {k: v for k, v in images.items() if k not in excluded}
    data_images = data["images"]
    raw_images = [e for e in data_images if isinstance(e, dict) and e.get("id") in images]
    instances = _quiet_coco({"images": raw_images, "annotations": kept, "categories": data["categories"]})
    del data
    captions: dict[int, list[str]] = {}
    if with_captions:
        dropped = all_ids - set(images)
        captions = _load_captions(root / "annotations" / f"captions_{split}.json", images, dropped, skipped)
    return CocoSplit(root, split, images, instances, captions, categories, skipped)


def _load_captions(path: Path, images: dict[int, ImageEntry], dropped: set[Any], skipped: Counter) -> dict[int, list[str]]:
    data = read_json(path)
    captions: dict[int, list[str]] = {}
    for i, entry in enumerate(_require_list(data, "annotations", path)):
        # Fast path for well-formed entries (COCO has ~590k); _field explains anything else.
        try:
            image_id, text = entry["image_id"], entry["caption"]
            well_formed = type(image_id) is int and type(text) is str
        except (KeyError, TypeError):
            well_formed = False
        if not well_formed:
            image_id = _field(entry, "image_id", int, path, "caption annotation", i)
            text = _field(entry, "caption", str, path, "caption annotation", i)
        if image_id not in images:
            skipped["caption_of_dropped_image" if image_id in dropped else "caption_missing_image"] += 1
            continue
        text = " ".join(text.split())
        if not text:
            skipped["caption_empty"] += 1
            continue
        captions.setdefault(image_id, []).append(text)
    return captions
