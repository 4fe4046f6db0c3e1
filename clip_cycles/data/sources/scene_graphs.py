"""GQA-format scene graphs: loading, validation and the per-image lookups families need.

A scene-graph file (``train_sceneGraphs.json`` / ``val_sceneGraphs.json``) maps an image
id (string) to ``{"width", "height", "objects": {object_id: {"name", "x", "y", "w", "h",
"attributes": [...], "relations": [{"name", "object": object_id}]}}}``. An image entry
may carry an optional ``"file_name"`` (relative to the GQA root; the shapes world uses
it); otherwise the image is ``images/<image_id>.jpg`` as in the GQA release.

What is an error and what is a counted skip:

- Errors (``ValueError`` naming the file and, where known, image id, object id and
  field): malformed JSON (with line, column and character position), a top level or
  entry that is not an object, a missing or wrongly typed field, an empty name, an
  unsafe ``file_name`` (absolute or with ``..``), an image id the Parquet schema cannot
  hold (see :func:`gqa_int_id`), the same image id in two files.
- Counted skips of the WHOLE image (reason -> count in :attr:`SceneGraphFile.skipped`):
  a width or height that is not a finite positive number (``image_bad_size``), a box
  with a NaN or infinite number (``box_not_finite``),
  a box with zero or negative area (``box_zero_area``), a box that does not intersect
  the image (``box_outside_image``), a relation whose target object id is missing
  (``relation_target_missing``), an image with no objects (``no_objects``). The image
  goes, not just the object or relation, because family predicates rely on complete
  annotations: "exactly one object named X" and "no relation R to a Y" would become
  unsound if a dubious object or relation were silently removed.
- Counted repairs: a box that crosses the image border is clipped to it
  (``box_clipped``, counted per object); the image is kept.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator, Mapping, NamedTuple

from clip_cycles.data.sources.annotations import MAX_ANNOTATION_BYTES
from clip_cycles.regular_files import read_regular_file
from clip_cycles.verbosity import progress_disable

#: GQA file names per source split, relative to the GQA root.
SCENE_GRAPH_FILES: dict[str, str] = {"train": "train_sceneGraphs.json", "val": "val_sceneGraphs.json"}

#: Where GQA keeps an image when its entry has no ``file_name``.
DEFAULT_IMAGE_TEMPLATE = "images/{image_id}.jpg"

_OBJECT_FIELDS = ("name", "x", "y", "w", "h", "attributes", "relations")
_GQA_N_ID = re.compile(r"^n(\d{1,18})$")


def gqa_int_id(image_id: str) -> int:
    """The int64 id stored in Parquet for a GQA image id.

    GQA ids are decimal strings (``"2354786"``, kept as that number) or ``"n"`` followed
    by digits (``"n161313"``, images from the extra sources), mapped to ``-(digits + 1)``
    so the two forms never collide. Other forms are rejected with a clear error.
    """
    if image_id.isdigit() and len(image_id) <= 18:
        return int(image_id)
    match = _GQA_N_ID.match(image_id)
    if match:
        return -(int(match.group(1)) + 1)
    raise ValueError(
        f"GQA image id {image_id!r} is neither decimal digits nor 'n' + digits; "
        "the dataset rows store image ids as int64 and cannot represent it"
    )


def gqa_str_id(int_id: int) -> str:
    """Inverse of :func:`gqa_int_id`."""
    return str(int_id) if int_id >= 0 else f"n{-int_id - 1}"


class SceneObject(NamedTuple):
    """One annotated object; ``relations`` are (relation name, target object id) pairs.

    A NamedTuple rather than a frozen dataclass: real GQA has over a million objects and
    tuple construction is several times cheaper.
    """

    object_id: str
    name: str
    x: float
    y: float
    w: float
    h: float
    attributes: tuple[str, ...]
    relations: tuple[tuple[str, str], ...]

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (self.x, self.y, self.w, self.h)


@dataclass(frozen=True)
class SceneGraph:
    """One image's scene graph, objects sorted by object id."""

    image_id: str
    width: float
    height: float
    file_name: str
    objects: tuple[SceneObject, ...]
    name_counts: Mapping[str, int] = field(default_factory=dict, compare=False)
    _by_id: Mapping[str, SceneObject] = field(default_factory=dict, compare=False, repr=False)

    @property
    def int_id(self) -> int:
        return gqa_int_id(self.image_id)

    def object(self, object_id: str) -> SceneObject:
        """The object with this id (KeyError names the image when absent)."""
        try:
            return self._by_id[object_id]
        except KeyError:
            raise KeyError(f"image {self.image_id}: no object {object_id!r}") from None

    def unique_object(self, name: str) -> SceneObject | None:
        """The object named ``name`` when exactly one object has that name, else None."""
        if self.name_counts.get(name, 0) != 1:
            return None
        return next(o for o in self.objects if o.name == name)

    def unique_objects(self) -> Iterator[SceneObject]:
        """Objects whose name occurs exactly once in the image, in object-id order."""
        return (o for o in self.objects if self.name_counts[o.name] == 1)

    def related_names(self, obj: SceneObject, relation: str) -> set[str]:
        """Names of the objects that ``obj`` has ``relation`` to."""
        return {self._by_id[target].name for name, target in obj.relations if name == relation}


@dataclass
class SceneGraphFile:
    """The valid graphs of one file (keyed by GQA image id) and what was skipped or repaired."""

    path: Path
    graphs: dict[str, SceneGraph]
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)


def _read_json(path: Path) -> Any:
    """A scene-graph file: a regular file within the annotation size bound, parsed with named errors."""
    try:
        text = read_regular_file(path, MAX_ANNOTATION_BYTES, "scene-graph file").decode("utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"scene-graph file {path} does not exist") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text at byte {error.start}: {error.reason}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to parse; scene graphs nest a few levels only: restore it") from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: malformed JSON at line {error.lineno}, column {error.colno} (char {error.pos}): {error.msg}"
        ) from None


class _NotFinite(ValueError):
    """A number field holding NaN or infinity: the image is skipped and counted, not an error."""


def _number(value: Any, where: str, name: str) -> float:
    # bool is an int subclass in Python; a box coordinate of true/false is a data error.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: field {name!r} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise _NotFinite(f"{where}: field {name!r} must be a finite number, got {value!r}")
    return float(value)


def _safe_file_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: field 'file_name' must be a non-empty string, got {value!r}")
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{where}: file_name {value!r} escapes the GQA root (absolute or with '..')")
    return path.as_posix()


_NUMBER_TYPES = (int, float)


def _parse_object(object_id: str, raw: Any, where: str) -> SceneObject:
    """Fast path for well-formed objects; anything unusual goes to the checked path for its error."""
    try:
        name, x, y, w, h = raw["name"].strip(), raw["x"], raw["y"], raw["w"], raw["h"]
        attributes, relations = raw["attributes"], raw["relations"]
        if (
            name
            and type(x) in _NUMBER_TYPES and type(y) in _NUMBER_TYPES and type(w) in _NUMBER_TYPES
            and type(h) in _NUMBER_TYPES and math.isfinite(x + y + w + h)
            and type(attributes) is list and type(relations) is list
        ):  # fmt: skip
            attrs = {a.strip() for a in attributes}
            attrs.discard("")
            rels = {(r["name"].strip(), r["object"]) for r in relations}
            if all(type(target) is str for _, target in rels):
                return SceneObject(object_id, name, float(x), float(y), float(w), float(h),
                                   tuple(sorted(attrs)), tuple(sorted(rels)))  # fmt: skip
    except (KeyError, TypeError, AttributeError):
        pass
    return _parse_object_checked(object_id, raw, where)


def _parse_object_checked(object_id: str, raw: Any, where: str) -> SceneObject:
    where = f"{where}, object {object_id}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a JSON object, got {type(raw).__name__}")
    missing = [f for f in _OBJECT_FIELDS if f not in raw]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    name = raw["name"]
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: field 'name' must be a non-empty string, got {name!r}")
    attributes = raw["attributes"]
    if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
        raise ValueError(f"{where}: field 'attributes' must be a list of strings, got {attributes!r}")
    relations = raw["relations"]
    if not isinstance(relations, list):
        raise ValueError(f"{where}: field 'relations' must be a list, got {type(relations).__name__}")
    parsed_relations = []
    for k, rel in enumerate(relations):
        if not isinstance(rel, dict) or not isinstance(rel.get("name"), str) or not isinstance(rel.get("object"), str):
            raise ValueError(f"{where}: relations[{k}] must be {{'name': str, 'object': str}}, got {rel!r}")
        parsed_relations.append((rel["name"].strip(), rel["object"]))
    return SceneObject(
        object_id=object_id,
        name=name.strip(),
        x=_number(raw["x"], where, "x"),
        y=_number(raw["y"], where, "y"),
        w=_number(raw["w"], where, "w"),
        h=_number(raw["h"], where, "h"),
        # Sorted and de-duplicated: attribute order carries no meaning in GQA.
        attributes=tuple(sorted({a.strip() for a in attributes if a.strip()})),
        relations=tuple(sorted(set(parsed_relations))),
    )


def _clip_box(obj: SceneObject, width: float, height: float) -> tuple[SceneObject | None, str | None]:
    """The object with its box clipped to the image, or (None, skip reason)."""
    if obj.w <= 0 or obj.h <= 0:
        return None, "box_zero_area"
    x0, y0 = max(obj.x, 0.0), max(obj.y, 0.0)
    x1, y1 = min(obj.x + obj.w, width), min(obj.y + obj.h, height)
    if x1 <= x0 or y1 <= y0:
        return None, "box_outside_image"
    if (x0, y0, x1 - x0, y1 - y0) == obj.box:
        return obj, None
    return obj._replace(x=x0, y=y0, w=x1 - x0, h=y1 - y0), "box_clipped"


def parse_scene_graph(image_id: str, raw: Any, where: str) -> tuple[SceneGraph | None, str | None, int]:
    """Validate one image entry.

    Returns ``(graph, None, n_clipped)`` for a kept image or ``(None, reason, 0)`` for a
    skipped one; raises ValueError (naming ``where``, the image and object ids and the
    field) for structurally broken entries.
    """
    where = f"{where}: image {image_id}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a JSON object, got {type(raw).__name__}")
    for name in ("width", "height", "objects"):
        if name not in raw:
            raise ValueError(f"{where}: missing field {name!r}")
    try:
        width, height = _number(raw["width"], where, "width"), _number(raw["height"], where, "height")
    except _NotFinite:
        return None, "image_bad_size", 0
    if width <= 0 or height <= 0:
        return None, "image_bad_size", 0
    try:
        gqa_int_id(image_id)  # rejects ids the Parquet schema cannot hold
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if "file_name" in raw:
        file_name = _safe_file_name(raw["file_name"], where)
    else:
        file_name = DEFAULT_IMAGE_TEMPLATE.format(image_id=image_id)
    objects_raw = raw["objects"]
    if not isinstance(objects_raw, dict):
        raise ValueError(f"{where}: field 'objects' must be a JSON object of object id -> object")
    try:
        objects = [_parse_object(str(oid), obj, where) for oid, obj in sorted(objects_raw.items())]
    except _NotFinite:
        return None, "box_not_finite", 0
    if not objects:
        return None, "no_objects", 0
    ids = {o.object_id for o in objects}
    kept, clipped = [], 0
    for obj in objects:
        if any(target not in ids for _, target in obj.relations):
            return None, "relation_target_missing", 0
        fixed, reason = _clip_box(obj, width, height)
        if fixed is None:
            return None, reason, 0
        clipped += reason == "box_clipped"
        kept.append(fixed)
    graph = SceneGraph(
        image_id=image_id,
        width=width,
        height=height,
        file_name=file_name,
        objects=tuple(kept),
        name_counts=dict(Counter(o.name for o in kept)),
        _by_id={o.object_id: o for o in kept},
    )
    return graph, None, clipped


def parse_scene_graphs(data: Any, source: str | Path) -> SceneGraphFile:
    """Validate a whole scene-graph mapping (already parsed JSON); ``source`` names it in errors."""
    from tqdm.auto import tqdm

    if not isinstance(data, dict):
        raise ValueError(f"{source}: top level must be a JSON object of image id -> scene graph, got {type(data).__name__}")
    result = SceneGraphFile(path=Path(source), graphs={})
    for image_id in tqdm(sorted(data), desc=f"scene graphs {Path(source).name}", disable=progress_disable()):
        graph, reason, clipped = parse_scene_graph(str(image_id), data[image_id], str(source))
        if graph is None:
            result.skipped[reason] += 1
            continue
        result.graphs[graph.image_id] = graph
        if clipped:
            result.repaired["box_clipped"] += clipped
    return result


def load_scene_graphs(path: str | Path) -> SceneGraphFile:
    """Load and validate one GQA scene-graph JSON file."""
    path = Path(path)
    return parse_scene_graphs(_read_json(path), path)


def load_gqa_scene_graphs(root: str | Path) -> dict[str, SceneGraphFile]:
    """Load ``train_sceneGraphs.json`` and ``val_sceneGraphs.json`` under ``root``.

    Raises FileNotFoundError naming the missing file, and ValueError when an image id
    appears in both files (the splits must be image-disjoint).
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"GQA root {root} is not a directory")
    files = {split: load_scene_graphs(root / name) for split, name in SCENE_GRAPH_FILES.items()}
    shared = files["train"].graphs.keys() & files["val"].graphs.keys()
    if shared:
        raise ValueError(
            f"{len(shared)} image ids appear in both {SCENE_GRAPH_FILES['train']} and "
            f"{SCENE_GRAPH_FILES['val']} under {root}, e.g. {sorted(shared)[0]}"
        )
    return files
