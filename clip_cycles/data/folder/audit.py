"""``clip-cycles audit``: re-check a built dataset folder without the builders' code.

The audit reads the raw annotation files itself (COCO ``instances_*``/``captions_*``
JSON, GQA ``*_sceneGraphs.json``, the shapes world's COCO-layout copies of both) and
reads every caption itself, from the templates the builders emit. From that reading
alone it decides, for each cycle, whether each matched caption is true of its image and
each swapped caption false of the other image. It imports nothing from the family
modules (``coco_families``, ``gqa_families``, ``families``, ``scene_graphs``,
``annotations``), so a bug in a builder's predicate cannot hide itself here.

Truth of a caption for an image (the stricter rule of the family predicates):

- relations "a A <rel> a B" (COCO): true when the relation holds by the margin
  (``MARGIN`` x width/height; sizes: area ratio ``SIZE_RATIO``) for EVERY pair of an
  A instance and a B instance; false beyond doubt when A or B is absent, or the
  opposite relation holds by the margin for every pair; otherwise ambiguous. Absence
  decides first (as in the builder): with A and B present, a crowd region of either makes
  the claim ambiguous.
- positions "a A on the left/right side of the picture": every A instance's centre on
  that side by the margin (true), every one on the other side (false); crowd: ambiguous.
- counts "exactly n A": the non-crowd instance count; a crowd region of A: ambiguous.
- presence ("a A and a B", "a picture with <supercategory>", human captions): an
  instance or crowd region of the category is presence. A human caption's mentions are
  the categories its predicate stores (the audit confirms the caption is one of its
  image's own COCO captions; which word names which category is the builder's lexicon,
  not re-derived here).
- GQA attributes "a <value> <name>": some object named <name> carries <value> (true, as the
  family predicate says); every one carries some value of the type and none <value>, or no
  <name> at all (false); otherwise ambiguous; binding captions
  are the conjunction of two such claims. GQA relations: spatial ones (left/right,
  above/below, in front of/behind) must hold for every (subject, object) pair, the
  opposite for every pair to be false; other relations are true when an edge with those
  names exists and false only when a named object is absent (a missing edge in a sparse
  scene graph is never falsity).

A matched caption must read "true", a swapped one "false"; "ambiguous" is a violation
either way. Beyond validity the audit checks: ``build_info.json``'s shape (named errors
for ``{}``, a list, unparsable JSON), the folder layout and file names, every available
family on disk and in the card, the columns, row labels (family/seed/split), cycle ids
unique in the folder, image file names against the raw annotations, the caption agreeing
with its stored meaning, the two pairs of a cycle coming from one candidate stratum
(when the predicate records strata), duplicate blocks, image-disjoint
train/validation/test per family and seed, and the row counts of ``build_info.json``.
Nothing checked is a failure. Marginal TV and signed-degree balance are not re-checked:
every row is a complete 2x2 block, for which both are identities of the design (0 and
balanced by construction), not gates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from clip_cycles.regular_files import JSONLimitError, load_json_text, read_regular_file
from clip_cycles.schemas.build_info import newer_format_problem

#: Spatial margin (fraction of the image side) and size ratio the family predicates state.
MARGIN: float = 0.1
SIZE_RATIO: float = 1.5

#: Columns of a cycle row in file order (DEVELOPING.md row schema).
COLUMNS: tuple[str, ...] = ("image_0", "image_1", "caption_0", "caption_1", "cycle_id", "family", "seed", "split",
                            "image_id_0", "image_id_1", "predicate")  # fmt: skip
#: Columns of the current writer: ``predicate`` a struct, its JSON text in ``predicate_json``; the
#: imagefolder layout (images stored once) names the image files ``image_<k>_file_name`` below ``data/``.
COLUMNS_BY_LAYOUT: dict[str, tuple[str, ...]] = {
    "parquet": (*COLUMNS, "predicate_json"),
    "imagefolder": ("image_0_file_name", "image_1_file_name", *COLUMNS[2:], "predicate_json"),
}
SPLITS: tuple[str, ...] = ("train", "validation", "test")
SOURCES: tuple[str, ...] = ("coco", "gqa")

#: COCO families whose captions are human captions (the image's own); the rest are templates.
HUMAN_CAPTION_FAMILIES: frozenset[str] = frozenset({"coarse_object", "matched_object", "text_neighbor"})

TRUE, FALSE, AMBIGUOUS = "true", "false", "ambiguous"

_PATH = re.compile(r"^data/(?P<family>[A-Za-z0-9_]+)/seed(?P<seed>\d+)/(?P<split>[a-z]+)\.parquet$")
_FLAT_PATH = re.compile(r"^data/(?P<family>[A-Za-z0-9_]+)-seed(?P<seed>\d+)-(?P<split>[a-z]+)\.parquet$")  # imagefolder


class BuildInfoError(ValueError):
    """``build_info.json`` is missing, unparsable or of the wrong shape."""


# --- build_info.json --------------------------------------------------------------------------------------------


def read_build_info_checked(folder: str | Path) -> dict[str, Any]:
    """``build_info.json`` of ``folder``, its shape validated; :class:`BuildInfoError` names what is wrong.

    Required: an object with ``source`` (coco/gqa), ``source_root`` (string), ``mode``
    (string) and ``families``: name -> {``available`` (bool), ``counts``: seed -> {split -> int >= 0}}.
    """
    path = Path(folder) / "build_info.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {folder} a folder built by `clip-cycles build`?")
    try:
        info = load_json_text(read_regular_file(path, MAX_AUDIT_JSON_BYTES, "build_info.json"), str(path))
    except (json.JSONDecodeError, UnicodeDecodeError, JSONLimitError) as error:
        raise BuildInfoError(f"{path}: not valid JSON ({error}); rebuild the folder with `clip-cycles build`") from None
    newer = newer_format_problem(info, path)  # the same gate, and sentence, as every other reader of a folder
    if newer is not None:
        raise BuildInfoError(newer)
    if not isinstance(info, dict):
        raise BuildInfoError(f"{path}: top level must be a JSON object, got {type(info).__name__}")
    missing = [k for k in ("source", "source_root", "mode", "families") if k not in info]
    if missing:
        raise BuildInfoError(f"{path}: missing field(s) {', '.join(missing)}; rebuild the folder with `clip-cycles build`")
    if info["source"] not in SOURCES:
        raise BuildInfoError(f"{path}: field 'source' must be one of {SOURCES}, got {info['source']!r}")
    for key in ("source_root", "mode"):
        if not isinstance(info[key], str):
            raise BuildInfoError(f"{path}: field {key!r} must be a string, got {info[key]!r}")
    families = info["families"]
    if not isinstance(families, dict) or not families:
        raise BuildInfoError(f"{path}: field 'families' must be a non-empty object (name -> entry), got {families!r}")
    for name, entry in families.items():
        where = f"{path}: families.{name}"
        if not isinstance(entry, dict) or not isinstance(entry.get("available"), bool):
            raise BuildInfoError(f"{where}: must be an object with a boolean 'available'")
        counts = entry.get("counts", {})
        if not isinstance(counts, dict) or (entry["available"] and not counts):
            raise BuildInfoError(f"{where}.counts: must map seeds to split counts, got {counts!r}")
        for seed, splits in counts.items():
            if not str(seed).isdigit():
                raise BuildInfoError(f"{where}.counts: seed {seed!r} is not a non-negative integer")
            if not isinstance(splits, dict) or set(splits) != set(SPLITS):
                raise BuildInfoError(f"{where}.counts.{seed}: must have exactly the splits {SPLITS}, got {splits!r}")
            for split, n in splits.items():
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise BuildInfoError(f"{where}.counts.{seed}.{split}: must be a count >= 0, got {n!r}")
    return info


# --- raw annotations, read here -----------------------------------------------------------------------------------


@dataclass
class Image:
    """One image as the raw files describe it: size, objects per name, crowd regions, captions."""

    file_name: str
    width: float
    height: float
    #: name -> list of GQA object dicts or COCO boxes (x, y, w, h) of non-crowd instances.
    boxes: dict[str, list[tuple[float, float, float, float]]] = field(default_factory=dict)
    crowd: set[str] = field(default_factory=set)
    captions: list[str] = field(default_factory=list)
    #: GQA: object id -> {name, attributes, relations}.
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Some annotation of the image cannot be placed (zero-area box, box off the image).
    incomplete: bool = False

    def present(self, name: str) -> bool:
        """An instance or a crowd region of ``name`` is in the image."""
        return bool(self.boxes.get(name)) or name in self.crowd


@dataclass
class World:
    """The raw annotations of a source: images by row id and COCO supercategories."""

    source: str
    images: dict[int, Image]
    supercategory: dict[str, str] = field(default_factory=dict)
    #: The build's spatial margin and size ratio (build_info.json ``thresholds``; defaults when absent).
    margin: float = MARGIN
    size_ratio: float = SIZE_RATIO


#: The largest raw annotation file the audit reads (COCO's instances_train2017.json is 448 MB).
MAX_AUDIT_JSON_BYTES = 4 << 30


def _load_json(path: Path) -> Any:
    """A raw annotation file, read as a stranger's: a regular file only, bounded, nesting a named error."""
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: pass --source-root pointing at the raw annotations")
    raw = read_regular_file(path, MAX_AUDIT_JSON_BYTES, "annotation file")
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to parse; the file is damaged or hostile: restore it") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None


def read_coco_world(root: Path) -> World:
    """COCO train2017 + val2017 instances and captions (also the shapes world's COCO layout)."""
    images: dict[int, Image] = {}
    supercategory: dict[str, str] = {}
    for split in ("train2017", "val2017"):
        instances = _load_json(root / "annotations" / f"instances_{split}.json")
        names = {}
        for cat in instances.get("categories", []):
            names[cat["id"]] = cat["name"].strip()
            supercategory[cat["name"].strip()] = str(cat.get("supercategory", cat["name"])).strip()
        for entry in instances.get("images", []):
            # Rows name COCO files relative to the root: <split>/<file_name>.
            images[int(entry["id"])] = Image(f"{split}/{entry['file_name']}", float(entry["width"]),
                                             float(entry["height"]))  # fmt: skip
        for ann in instances.get("annotations", []):
            image = images.get(int(ann["image_id"]))
            name = names.get(ann["category_id"])
            if image is None or name is None:
                continue
            x, y, w, h = (float(v) for v in ann["bbox"])
            if w <= 0 or h <= 0 or x + w < 0 or y + h < 0 or x > image.width or y > image.height:
                image.incomplete = True  # a box without a place: no claim about this image is certain
            elif ann.get("iscrowd", 0):
                image.crowd.add(name)
            else:
                image.boxes.setdefault(name, []).append((x, y, w, h))
        captions_path = root / "annotations" / f"captions_{split}.json"
        if captions_path.is_file():
            for ann in _load_json(captions_path).get("annotations", []):
                image = images.get(int(ann["image_id"]))
                if image is not None and isinstance(ann.get("caption"), str):
                    image.captions.append(" ".join(ann["caption"].split()))
    return World("coco", images, supercategory)


def _gqa_row_id(image_id: str) -> int:
    # The rows' int64 form of a GQA id: digits as that number, "n<digits>" as -(digits + 1).
    if image_id.isdigit():
        return int(image_id)
    if image_id[:1] == "n" and image_id[1:].isdigit():
        return -(int(image_id[1:]) + 1)
    raise ValueError(f"GQA image id {image_id!r} is neither digits nor 'n' + digits")


def read_gqa_world(root: Path) -> World:
    """GQA ``train_sceneGraphs.json`` and ``val_sceneGraphs.json`` (object names, attributes, relations)."""
    images: dict[int, Image] = {}
    for name in ("train_sceneGraphs.json", "val_sceneGraphs.json"):
        graphs = _load_json(root / name)
        if not isinstance(graphs, dict):
            raise ValueError(f"{root / name}: top level must map image ids to scene graphs")
        for image_id, graph in graphs.items():
            image = Image(graph.get("file_name", f"images/{image_id}.jpg"), float(graph.get("width", 0)),
                          float(graph.get("height", 0)))  # fmt: skip
            for object_id, obj in graph.get("objects", {}).items():
                image.objects[str(object_id)] = obj
                image.boxes.setdefault(obj["name"], []).append(
                    (float(obj["x"]), float(obj["y"]), float(obj["w"]), float(obj["h"]))
                )
            images[_gqa_row_id(str(image_id))] = image
    return World("gqa", images)


def read_world(source: str, root: Path) -> World:
    """The raw annotations of ``source`` under ``root``."""
    return read_coco_world(root) if source == "coco" else read_gqa_world(root)


# --- reading a caption --------------------------------------------------------------------------------------------

_ARTICLE = r"(?:a|an)"
_COCO_RELATIONS = ("to the left of", "to the right of", "above", "below", "larger than", "smaller than")
_COCO_OPPOSITE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below",
                  "below": "above", "larger than": "smaller than", "smaller than": "larger than"}  # fmt: skip
_RELATION = re.compile(rf"^{_ARTICLE} (?P<subject>.+?) (?P<relation>{'|'.join(_COCO_RELATIONS)}) {_ARTICLE} (?P<object>.+)$")
_POSITION = re.compile(rf"^{_ARTICLE} (?P<subject>.+) on the (?P<side>left|right) side of the picture$")
_COUNT = re.compile(r"^exactly (?P<n>one|two|three|four|five|\d+) (?P<noun>.+)$")
_SUPER = re.compile(r"^a picture with (?P<phrase>.+)$")
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_SUPER_PHRASES = {"a person": "person", "a vehicle": "vehicle", "an animal": "animal", "an accessory": "accessory",
                  "sports equipment": "sports", "a kitchen item": "kitchen", "food": "food", "furniture": "furniture",
                  "an electronic device": "electronic", "an appliance": "appliance",
                  "an outdoor object": "outdoor", "an indoor object": "indoor"}  # fmt: skip
_PLURAL_EXCEPTIONS = {"person": "people", "man": "men", "woman": "women", "child": "children", "mouse": "mice",
                      "knife": "knives", "calf": "calves"}  # fmt: skip

#: GQA canonical values per attribute type, and the raw words that mean each (the family predicates' tables).
GQA_VALUES: dict[str, dict[str, str]] = {
    "color": {**{c: c for c in ("white", "black", "blue", "green", "red", "brown", "yellow", "gray", "orange", "pink",
                                "purple", "silver", "gold", "beige", "tan", "maroon", "cyan", "magenta")},
              "grey": "gray", "golden": "gold"},
    "material": {**{m: m for m in ("metal", "wooden", "plastic", "glass", "concrete", "brick", "stone", "leather",
                                   "rubber", "paper", "ceramic", "cloth")},
                 "wood": "wooden", "metallic": "metal", "cement": "concrete"},
    "size": {"large": "large", "big": "large", "huge": "large", "giant": "large", "small": "small",
             "little": "small", "tiny": "small"},
}  # fmt: skip
GQA_SPATIAL_OPPOSITE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below",
                        "below": "above", "in front of": "behind", "behind": "in front of"}  # fmt: skip


def _noun_forms(name: str) -> set[str]:
    """The category name and the plural spellings a count caption may use."""
    head, _, last = name.rpartition(" ")
    forms = {last, last + "s", last + "es", _PLURAL_EXCEPTIONS.get(last, last)}
    if last.endswith("y"):
        forms.add(last[:-1] + "ies")
    return {f"{head} {f}" if head else f for f in forms}


def read_coco_caption(caption: str, names: Iterable[str]) -> dict[str, Any] | None:
    """The claim of a COCO template caption, or None when it follows no template."""
    if m := _RELATION.match(caption):
        return {"kind": "relation", "subject": m["subject"], "relation": m["relation"], "object": m["object"]}
    if m := _POSITION.match(caption):
        return {"kind": "position", "subject": m["subject"], "side": m["side"]}
    if m := _COUNT.match(caption):
        n = _NUMBERS.get(m["n"]) or int(m["n"])
        matches = [c for c in names if (m["noun"] == c if n == 1 else m["noun"] in _noun_forms(c) - {c} or
                                        (m["noun"] == c and c in _noun_forms(c) - {c}))]  # fmt: skip
        return {"kind": "count", "subject": matches[0] if len(matches) == 1 else m["noun"], "count": n}
    if m := _SUPER.match(caption):
        phrase = m["phrase"]
        if phrase in _SUPER_PHRASES:
            return {"kind": "supercategory", "supercategory": _SUPER_PHRASES[phrase]}
        if phrase.endswith(" object"):
            return {"kind": "supercategory", "supercategory": re.sub(rf"^{_ARTICLE} ", "", phrase[: -len(" object")])}
        return None
    parts = caption.split(" and ")
    if len(parts) == 2 and all(re.match(rf"^{_ARTICLE} ", p) for p in parts):
        return {"kind": "mentions", "categories": [re.sub(rf"^{_ARTICLE} ", "", p) for p in parts]}
    return None


def _gqa_noun(phrase: str) -> tuple[str, str | None]:
    """(words, article) of a GQA noun phrase ``a red car`` / ``red glasses``."""
    m = re.match(rf"^({_ARTICLE}) (.+)$", phrase)
    return (m.group(2), m.group(1)) if m else (phrase, None)


def read_gqa_attribute_phrase(phrase: str) -> tuple[str, str, str] | None:
    """``a red car`` -> (type, canonical value, name); None when the first word is no known value."""
    words, _ = _gqa_noun(phrase)
    value, _, name = words.partition(" ")
    for kind, table in GQA_VALUES.items():
        if value in table and table[value] == value and name:
            return kind, value, name
    return None


def render_gqa_noun(name: str, modifier: str = "") -> str:
    """How a GQA caption names an object: article unless the name looks plural (the documented template)."""
    words = f"{modifier} {name}".strip()
    if name.endswith("s") and not name.endswith(("ss", "us", "is")):
        return words
    return ("an " if words[0] in "aeiou" else "a ") + words


# --- truth of a claim ---------------------------------------------------------------------------------------------


def _centre(box: tuple[float, float, float, float]) -> tuple[float, float]:
    return box[0] + box[2] / 2.0, box[1] + box[3] / 2.0


def box_relation_holds(relation: str, a: tuple, b: tuple, width: float, height: float, margin: float = MARGIN,
                       ratio: float = SIZE_RATIO) -> bool:  # fmt: skip
    """Whether "A <relation> B" holds by the margin (sizes: the ratio) for boxes a of A and b of B."""
    (ax, ay), (bx, by) = _centre(a), _centre(b)
    if relation == "to the left of":
        return bx - ax >= margin * width
    if relation == "to the right of":
        return ax - bx >= margin * width
    if relation == "above":  # image y grows downwards
        return by - ay >= margin * height
    if relation == "below":
        return ay - by >= margin * height
    if relation == "larger than":
        return a[2] * a[3] >= ratio * b[2] * b[3]
    if relation == "smaller than":
        return b[2] * b[3] >= ratio * a[2] * a[3]
    raise ValueError(f"unknown relation {relation!r}")


def _all_or_none(holds: list[bool], opposite: list[bool]) -> str:
    if holds and all(holds):
        return TRUE
    if opposite and all(opposite):
        return FALSE
    return AMBIGUOUS


def coco_truth(claim: Mapping[str, Any], image: Image, supercategory: Mapping[str, str], margin: float = MARGIN,
               ratio: float = SIZE_RATIO) -> str:  # fmt: skip
    """TRUE / FALSE / AMBIGUOUS of a COCO claim for an image (module docstring rules)."""
    kind = claim["kind"]
    if kind == "relation":
        a, b, rel = claim["subject"], claim["object"], claim["relation"]
        if a == b:
            return AMBIGUOUS
        # Absence decides before crowd ambiguity, as in the builder's rule: a named object that
        # is absent makes the relation false whatever the other object's extent.
        if not image.present(a) or not image.present(b):
            return FALSE
        if a in image.crowd or b in image.crowd:
            return AMBIGUOUS
        pairs = [(p, q) for p in image.boxes[a] for q in image.boxes[b]]
        holds = [box_relation_holds(rel, p, q, image.width, image.height, margin, ratio) for p, q in pairs]
        opposite = [box_relation_holds(_COCO_OPPOSITE[rel], p, q, image.width, image.height, margin, ratio)
                    for p, q in pairs]  # fmt: skip
        return _all_or_none(holds, opposite)
    if kind == "position":
        a = claim["subject"]
        if a in image.crowd:
            return AMBIGUOUS
        if not image.boxes.get(a):
            return FALSE
        left = [_centre(box)[0] <= (0.5 - margin) * image.width for box in image.boxes[a]]
        right = [_centre(box)[0] >= (0.5 + margin) * image.width for box in image.boxes[a]]
        return _all_or_none(left, right) if claim["side"] == "left" else _all_or_none(right, left)
    if kind == "count":
        if claim["subject"] in image.crowd:
            return AMBIGUOUS
        return TRUE if len(image.boxes.get(claim["subject"], [])) == claim["count"] else FALSE
    if kind == "supercategory":
        names = set(image.boxes) | image.crowd
        return TRUE if any(supercategory.get(n) == claim["supercategory"] for n in names if image.present(n)) else FALSE
    if kind == "mentions":
        cats = claim["categories"]
        if not cats:
            return AMBIGUOUS
        return TRUE if all(image.present(c) for c in cats) else FALSE
    raise ValueError(f"no reading of claim kind {kind!r}")


def _named(image: Image, name: str) -> list[tuple[str, dict[str, Any]]]:
    return [(oid, o) for oid, o in sorted(image.objects.items()) if o.get("name") == name]


def _values(obj: Mapping[str, Any], kind: str) -> set[str]:
    table = GQA_VALUES[kind]
    return {table[a] for a in obj.get("attributes", []) if a in table}


def gqa_attribute_truth(kind: str, value: str, name: str, image: Image) -> str:
    """ "a <value> <name>": some <name> carries it (true, the family predicate's reading); no <name>, or
    every one another value of the type only (false); otherwise (a <name> without a value of the type) ambiguous."""
    objects = [o for _, o in _named(image, name)]
    if not objects:
        return FALSE
    if any(value in _values(o, kind) for o in objects):
        return TRUE
    return FALSE if all(_values(o, kind) for o in objects) else AMBIGUOUS


def _edge(image: Image, source_id: str, relation: str, target_id: str) -> bool:
    return any(r.get("name") == relation and str(r.get("object")) == target_id
               for r in image.objects[source_id].get("relations", []))  # fmt: skip


def gqa_relation_truth(subject: str, relation: str, obj: str, image: Image) -> str:
    """ "<subject> <relation> <object>" from the scene graph (module docstring rules)."""
    subjects, objects = _named(image, subject), _named(image, obj)
    if not subjects or not objects:
        return FALSE
    if relation not in GQA_SPATIAL_OPPOSITE:
        found = any(_edge(image, s, relation, o) for s, _ in subjects for o, _ in objects if s != o)
        return TRUE if found else AMBIGUOUS
    opposite = GQA_SPATIAL_OPPOSITE[relation]
    pairs = [(s, o) for s, _ in subjects for o, _ in objects if s != o]
    # An edge and the inverse edge of the opposite relation state the same fact.
    holds = [_edge(image, s, relation, o) or _edge(image, o, opposite, s) for s, o in pairs]
    against = [_edge(image, s, opposite, o) or _edge(image, o, relation, s) for s, o in pairs]
    if any(h and a for h, a in zip(holds, against)):
        return AMBIGUOUS  # contradictory annotation
    return _all_or_none(holds, against)


def _conjunction(verdicts: Iterable[str]) -> str:
    verdicts = list(verdicts)
    if FALSE in verdicts:
        return FALSE
    return TRUE if all(v == TRUE for v in verdicts) else AMBIGUOUS


# --- one row ------------------------------------------------------------------------------------------------------


@dataclass
class Reading:
    """What the audit read from a caption: a claim it can evaluate, or why it cannot."""

    evaluate: Callable[[Image], str] | None
    problem: str | None = None


def read_caption(world: World, family: str, caption: str, meaning: Any, own_image: Image | None) -> Reading:
    """The audit's reading of one caption (with its stored meaning as the hypothesis to confirm)."""
    if world.source == "coco":
        if family in HUMAN_CAPTION_FAMILIES:
            cats = meaning.get("categories") if isinstance(meaning, dict) else None
            if not isinstance(cats, list) or not cats:
                return Reading(None, f"human caption {caption!r} stores no mentioned categories")
            if own_image is not None and caption not in own_image.captions:
                return Reading(None, f"caption {caption!r} is not one of its image's own COCO captions")
            claim = {"kind": "mentions", "categories": cats}
        else:
            claim = read_coco_caption(caption, world.supercategory)
            if claim is None:
                return Reading(None, f"caption {caption!r} follows no COCO template")
            stored = {k: meaning.get(k) for k in claim} if isinstance(meaning, dict) else None
            if stored != claim:
                return Reading(None, f"caption {caption!r} says {claim} but the predicate stores {meaning}")
            for key, expected in (("margin", world.margin), ("ratio", world.size_ratio)):
                if isinstance(meaning, dict) and key in meaning and meaning[key] != expected:
                    return Reading(None, f"caption {caption!r} stores {key} {meaning[key]}, the rule says {expected}")
        return Reading(lambda image: coco_truth(claim, image, world.supercategory, world.margin, world.size_ratio))
    # GQA
    if family.startswith("attribute_") or family == "binding":
        phrases = caption.split(" and ") if family == "binding" else [caption]
        parsed = [read_gqa_attribute_phrase(p) for p in phrases]
        if any(p is None for p in parsed) or len(parsed) != (2 if family == "binding" else 1):
            return Reading(None, f"caption {caption!r} follows no GQA attribute template")
        for p, phrase in zip(parsed, phrases):
            if render_gqa_noun(p[2], p[1]) != phrase:
                return Reading(None, f"caption {caption!r}: {phrase!r} is not how the template names a {p[1]} {p[2]}")
        said = [[p[2], p[1]] for p in parsed]
        stored = meaning.get("objects") if family == "binding" else [[meaning.get("object"), meaning.get("value")]]
        if said != stored or (family != "binding" and meaning.get("type") != parsed[0][0]):
            return Reading(None, f"caption {caption!r} says {said} but the predicate stores {meaning}")
        return Reading(lambda image: _conjunction(gqa_attribute_truth(k, v, n, image) for k, v, n in parsed))
    subject, relation, obj = (meaning.get(k) if isinstance(meaning, dict) else None for k in ("subject", "relation", "object"))
    if not all(isinstance(x, str) and x for x in (subject, relation, obj)):
        return Reading(None, f"caption {caption!r}: the predicate stores no subject/relation/object ({meaning})")
    if f"{render_gqa_noun(subject)} {relation} {render_gqa_noun(obj)}" != caption:
        return Reading(None, f"caption {caption!r} does not say {subject!r} {relation!r} {obj!r}")
    return Reading(lambda image: gqa_relation_truth(subject, relation, obj, image))


def _sub(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


def _strata(predicate: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The candidate strata the predicate records for the two pairs, if it records any per pair.

    A single ``stratum`` string names the one stratum of the whole cycle (checked to be a
    non-empty string elsewhere); per-pair strata may sit in the caption meanings, in
    ``details`` (``stratum_k`` or ``image_k.stratum``) or in a ``stratum`` object keyed by pair.
    """
    details = _sub(predicate, "details")
    for getter in (lambda k: _sub(_sub(predicate, f"caption_{k}"), "stratum"),
                   lambda k: _sub(details, f"stratum_{k}"),
                   lambda k: _sub(_sub(details, f"image_{k}"), "stratum"),
                   lambda k: _sub(_sub(predicate, "stratum"), str(k))):  # fmt: skip
        pair = (getter(0), getter(1))
        if pair != (None, None):
            return pair
    return None


# --- the folder ---------------------------------------------------------------------------------------------------


@dataclass
class AuditResult:
    """Problems found and the per-file table; ``ok`` when something was checked and nothing is wrong."""

    problems: list[str] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)
    checked_rows: int = 0

    @property
    def ok(self) -> bool:
        return self.checked_rows > 0 and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "table": self.table, "checked_rows": self.checked_rows}


def _file_of(value: Any) -> Any:
    return value.get("path") if isinstance(value, dict) else value


def _row_file(layout: str, family: str, seed: Any, split: str) -> str:
    """A split's row file, written out here rather than taken from the builder."""
    return f"data/{family}-seed{seed}-{split}.parquet" if layout == "imagefolder" else f"data/{family}/seed{seed}/{split}.parquet"


def _plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of any layout in the original shape: ``image_<k>`` source file names, ``predicate`` JSON text."""
    for k in (0, 1):
        if f"image_{k}_file_name" in row:
            name = row.pop(f"image_{k}_file_name")
            row[f"image_{k}"] = name[len("images/") :] if isinstance(name, str) and name.startswith("images/") else name
    if "predicate_json" in row:
        row["predicate"] = row.pop("predicate_json")
    return row


def _card_paths(folder: Path) -> set[str] | None:
    card = folder / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8")
    header = text.split("---")[1] if text.startswith("---") and text.count("---") >= 2 else ""
    return set(re.findall(r"(?:path:|-) (data/\S+\.parquet)", header))


def _file_integrity(folder: Path, info: Mapping[str, Any], expected: set[str]) -> list[str]:
    """Each data file against the ``files`` record of build_info.json: listed, same rows, same sha256.

    Recomputed here (hashlib, pyarrow metadata) rather than through the builder's
    verification, so a bug there cannot hide an edited file from the audit.
    """
    import pyarrow.parquet as pq

    record = info.get("files")
    if not isinstance(record, dict):
        return [
            "build_info.json has no `files` record (row counts and sha256 per Parquet file); "
            "rebuild the folder with this version of clip-cycles"
        ]
    found: list[str] = []
    for rel in sorted(set(record) - expected):
        found.append(f"{rel}: listed in build_info.json `files` but not a file of an available split")
    for rel in sorted(expected):
        path = folder / rel
        entry = record.get(rel)
        if not path.is_file():
            continue  # reported as a missing file by the row checks
        if not isinstance(entry, dict):
            found.append(f"{rel}: not listed in build_info.json `files`")
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != entry.get("sha256"):
            found.append(
                f"{rel}: sha256 {digest.hexdigest()[:12]}... differs from build_info.json "
                f"({str(entry.get('sha256'))[:12]}...): the file was changed after the build"
            )
        rows = pq.ParquetFile(path).metadata.num_rows
        if rows != entry.get("rows"):
            found.append(f"{rel}: {rows} rows but build_info.json `files` records {entry.get('rows')}")
    stored = info.get("images") if isinstance(info.get("images"), dict) else {}
    for rel, entry in sorted(stored.items()):
        path = folder / rel
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() != (entry or {}).get("sha256"):
            found.append(f"{rel}: the stored image differs from its sha256 in build_info.json: changed after the build")
    return found


def audit_folder(folder: str | Path, source_root: str | Path | None = None) -> dict[str, Any]:
    """Re-check a built folder against the raw annotations; ``{"ok", "problems", "table", "checked_rows"}``."""
    import pyarrow.parquet as pq

    folder = Path(folder)
    info = read_build_info_checked(folder)
    root = Path(source_root) if source_root is not None else Path(info["source_root"])
    world = read_world(info["source"], root)
    thresholds = info.get("thresholds") if isinstance(info.get("thresholds"), dict) else {}
    world.margin = MARGIN if thresholds.get("margin") is None else float(thresholds["margin"])
    world.size_ratio = SIZE_RATIO if thresholds.get("size_ratio") is None else float(thresholds["size_ratio"])
    result = AuditResult()
    problems = result.problems

    # Families with rows on disk: every available one, and (builds that apply the minimum-cycle rule per
    # split) an unavailable one whose scored split met it; their counts name every seed.
    available = {n: e for n, e in sorted(info["families"].items()) if e["available"] or e.get("counts")}
    layout = info.get("layout", "parquet")
    columns = {COLUMNS, COLUMNS_BY_LAYOUT.get(layout, COLUMNS)}
    expected_files = {_row_file(layout, n, s, sp) for n, e in available.items() for s in e["counts"] for sp in SPLITS}
    data = folder / "data"
    on_disk = {p.relative_to(folder).as_posix() for p in data.rglob("*") if p.is_file()} if data.is_dir() else set()
    stored = info.get("images") if isinstance(info.get("images"), dict) else {}
    problems.extend(f"{rel}: stored image listed in build_info.json but missing" for rel in sorted(set(stored) - on_disk))
    on_disk -= set(stored)
    for rel in sorted(on_disk - expected_files):
        m = (_FLAT_PATH if layout == "imagefolder" else _PATH).match(rel)
        if m is None:
            problems.append(f"{rel}: not a data/<family>/seed<k>/<split>.parquet file")
        elif m["split"] not in SPLITS:
            problems.append(f"{rel}: unknown split {m['split']!r}")
        else:
            problems.append(f"{rel}: family {m['family']!r} seed {m['seed']} is not in build_info.json")
    card = _card_paths(folder)
    if card is None:
        problems.append("README.md (the dataset card) is missing")
    else:
        for rel in sorted(expected_files - card):
            problems.append(f"{rel}: not listed in the card's configs")
        for rel in sorted(card - expected_files):
            problems.append(f"card lists {rel}, which build_info.json does not")
    for name in info["families"]:
        if name not in available and (folder / "data" / name).exists():
            problems.append(f"{name}: build_info.json records no rows for it but data/{name} exists")

    seen_ids: Counter = Counter()
    for name, entry in available.items():
        for seed_key, counts in sorted(entry["counts"].items(), key=lambda kv: int(kv[0])):
            seed = int(seed_key)
            images_by_split: dict[str, set[int]] = {}
            blocks: dict[tuple, str] = {}
            for split in SPLITS:
                rel = _row_file(layout, name, seed, split)
                where = f"{name} seed {seed} {split}"
                path = folder / rel
                if not path.is_file():
                    problems.append(f"{where}: missing file {rel}")
                    continue
                table = pq.read_table(path)
                if tuple(table.column_names) not in columns:
                    problems.append(f"{where}: columns {table.column_names} != {list(COLUMNS_BY_LAYOUT.get(layout, COLUMNS))}")
                    continue
                rows = [_plain_row(row) for row in table.to_pylist()]
                if len(rows) != counts[split]:
                    problems.append(f"{where}: {len(rows)} rows but build_info.json says {counts[split]}")
                stats = _audit_rows(world, name, seed, split, rows, problems, seen_ids, blocks)
                images_by_split[split] = stats.pop("images")
                result.checked_rows += len(rows)
                result.table.append({"family": name, "seed": seed, "split": split, "cycles": len(rows), **stats})
            for a, b in combinations(SPLITS, 2):
                shared = images_by_split.get(a, set()) & images_by_split.get(b, set())
                if shared:
                    problems.append(f"{name} seed {seed}: {len(shared)} image(s) in both {a} and {b} "
                                    f"(e.g. image id {min(shared)}): the splits are not image-disjoint")  # fmt: skip
    repeated = sorted(c for c, n in seen_ids.items() if n > 1)
    if repeated:
        problems.append(f"{len(repeated)} cycle id(s) repeat in the folder, e.g. {repeated[0]!r}")
    problems.extend(f"file integrity: {p}" for p in _file_integrity(folder, info, expected_files))
    if result.checked_rows == 0:
        problems.append("nothing was checked: no available family has rows in this folder")
    return result.to_dict()


def _audit_rows(world: World, name: str, seed: int, split: str, rows: list[dict[str, Any]], problems: list[str],
                seen_ids: Counter, blocks: dict[tuple, str]) -> dict[str, Any]:  # fmt: skip
    """Row-level checks of one file; appends problems, returns its table cells and image ids."""
    where = f"{name} seed {seed} {split}"
    images: set[int] = set()
    verdicts: Counter = Counter()
    has_stratum: Counter = Counter()
    for row in rows:
        cid = row["cycle_id"]
        seen_ids[cid] += 1
        if (row["family"], row["seed"], row["split"]) != (name, seed, split):
            problems.append(f"{where}: row {cid} is labelled {row['family']}/{row['seed']}/{row['split']}")
        try:
            predicate = json.loads(row["predicate"])
            meanings = (predicate["caption_0"], predicate["caption_1"])
        except (TypeError, ValueError, KeyError):
            problems.append(f"{where}: row {cid} has an unreadable predicate JSON")
            continue
        ids = (row["image_id_0"], row["image_id_1"])
        images.update(ids)
        if ids[0] == ids[1] or row["caption_0"] == row["caption_1"]:
            problems.append(f"{where}: row {cid} is degenerate (repeated image or caption)")
        block = frozenset({(ids[0], row["caption_0"]), (ids[1], row["caption_1"])})
        if block in blocks:
            problems.append(f"{where}: row {cid} repeats the block of {blocks[block]}")
        else:
            blocks[block] = f"{split} row {cid}"
        strata = _strata(predicate)
        if strata is not None and strata[0] != strata[1]:
            problems.append(f"{where}: row {cid} pairs strata {strata[0]!r} and {strata[1]!r}")
        if "stratum" in predicate and not (isinstance(predicate["stratum"], str) and predicate["stratum"]):
            problems.append(f"{where}: row {cid} records stratum {predicate['stratum']!r}, not a non-empty string")
        has_stratum["stratum" in predicate] += 1
        found = [world.images.get(i) for i in ids]
        readings = []
        for k in (0, 1):
            if found[k] is None:
                problems.append(f"{where}: row {cid} image_id_{k} {ids[k]} is not in the raw annotations")
            elif _file_of(row[f"image_{k}"]) != found[k].file_name:
                problems.append(f"{where}: row {cid} image_{k} {_file_of(row[f'image_{k}'])!r} is not the file of "
                                f"image id {ids[k]} ({found[k].file_name!r})")  # fmt: skip
            reading = read_caption(world, name, row[f"caption_{k}"], meanings[k], found[k])
            if reading.problem:
                problems.append(f"{where}: row {cid} caption_{k}: {reading.problem}")
            readings.append(reading)
        if None in found or any(r.evaluate is None for r in readings):
            verdicts["unread"] += 1
            continue
        for k in (0, 1):
            matched = AMBIGUOUS if found[k].incomplete else readings[k].evaluate(found[k])
            swapped = AMBIGUOUS if found[1 - k].incomplete else readings[k].evaluate(found[1 - k])
            verdicts[f"matched_{matched}"] += 1
            verdicts[f"swapped_{swapped}"] += 1
            if matched != TRUE:
                problems.append(f"{where}: row {cid} matched (image_{k}, caption_{k}) {row[f'caption_{k}']!r} is {matched}")
            if swapped != FALSE:
                problems.append(f"{where}: row {cid} swapped (image_{1 - k}, caption_{k}) {row[f'caption_{k}']!r} "
                                f"is {swapped}, not false beyond doubt")  # fmt: skip
    if has_stratum[True] and has_stratum[False]:
        problems.append(f"{where}: {has_stratum[False]} row(s) record no stratum while {has_stratum[True]} do")
    return {
        "images": images,
        "matched_true": verdicts[f"matched_{TRUE}"],
        "swapped_false": verdicts[f"swapped_{FALSE}"],
        "violations": sum(v for k, v in verdicts.items() if k not in (f"matched_{TRUE}", f"swapped_{FALSE}")),
    }
