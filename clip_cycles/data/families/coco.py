"""The 14 COCO cycle families, from coarse object compatibility to strict relations.

Every caption carries a *meaning* (what it asserts); one table of caption semantics,
:data:`VERDICTS`, decides from the raw annotations whether a meaning is *true* of an
image, *false beyond doubt*, or *undecided* (with a reason). Families differ in how they
choose the two images and the two captions (which facts, which strata), never in what a
caption means. A matched caption must be true and a swapped caption false beyond doubt;
undecided candidates are never used and are counted per reason (``excluded`` in
build_info.json: ``matched_sub_margin``, ``matched_not_all_instances``,
``matched_crowd_uncertain_extent``, ``swap_sub_margin``, ``swap_multi_instance_ambiguous``,
``swap_crowd_uncertain_extent``, ``swap_true``). Notation: W, H image size; a box's centre
(cx, cy) and area w*h.

Caption semantics (``meaning["kind"]``):

- ``mentions`` {categories}: true when every listed category has an instance (a crowd
  region counts as presence); otherwise false (a named object is absent).
- ``relation`` {subject A, relation R, object B, margin m, ratio r}, R one of
  ``to the left of`` (cx_B - cx_A >= m W), ``to the right of`` (cx_A - cx_B >= m W),
  ``above`` (cy_B - cy_A >= m H), ``below`` (cy_A - cy_B >= m H), ``larger than``
  (area_A >= r area_B), ``smaller than`` (area_B >= r area_A). True when A != B, neither
  has a crowd region (a crowd region is an instance of uncertain extent) and R holds for
  EVERY instance pair (a, b); false when A or B is absent, or the opposite relation holds
  for every instance pair; otherwise undecided: ``sub_margin`` (no pair decided either
  way), ``multi_instance_ambiguous`` (instance pairs disagree), ``crowd_uncertain_extent``.
- ``position`` {subject A, side, margin m}: true when A has no crowd region and every
  instance has cx <= (1/2 - m) W (left) or cx >= (1/2 + m) W (right); false when A is
  absent or every instance is on the other side; otherwise undecided, as for relations.
- ``count`` {subject A, count n}: exactly n non-crowd instances of A; a crowd region of A
  makes it undecided (``crowd_uncertain_extent``).
- ``supercategory`` {supercategory S}: true when some instance's category belongs to S,
  else false (absent).

Candidate pairing never loops over all image pairs: images are bucketed by the
category (pair) they are about, and partners are searched in a bounded window of a
shuffled list (``PARTNER_TRIES``); each image is used in at most ``MAX_IMAGE_USES``
cycles per family split. The bucket is the cycle's candidate *stratum*, recorded in each
row and checked by the builder (both pairs of a cycle come from one stratum).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from clip_cycles.data.families.registry import (
    Cycle,
    Family,
    parallel_map,
    register_family,
    register_index_loader,
    select_pool,
    stable_seed,
)
from clip_cycles.data.sources.annotations import CocoSplit, load_coco_split
from clip_cycles.data.sources.shape_vocabulary import SHAPE_WORDS
from clip_cycles.fingerprints import canonical_json

#: Partners tried per image in greedy pairing, and uses of one image per family split.
PARTNER_TRIES: int = 30
MAX_IMAGE_USES: int = 2

COCO_SPLITS: tuple[str, ...] = ("train2017", "val2017")

# Caption words naming a category beyond its own name (plurals are added by rule).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "person": ("man", "woman", "people", "boy", "girl", "child", "kid", "guy", "lady", "player", "skier",
               "surfer", "skateboarder", "snowboarder", "batter", "pitcher", "catcher", "rider", "men", "women",
               "children", "persons"),
    "bicycle": ("bike", "cycle"), "motorcycle": ("motorbike", "motor bike", "scooter"),
    "airplane": ("plane", "jet", "airliner", "aircraft"), "boat": ("ship", "sailboat", "canoe", "kayak"),
    "train": ("locomotive",), "traffic light": ("stoplight", "traffic signal", "stop light"),
    "fire hydrant": ("hydrant",), "bird": ("pigeon", "seagull", "duck", "parrot"),
    "cat": ("kitten", "kitty"), "dog": ("puppy", "pup"), "horse": ("pony",), "sheep": ("lamb",),
    "cow": ("cattle", "calf", "bull"), "handbag": ("purse",), "tie": ("necktie",), "suitcase": ("luggage",),
    "skis": ("ski",), "sports ball": ("ball", "soccer ball", "football", "tennis ball"),
    "baseball bat": ("bat",), "baseball glove": ("glove", "mitt"), "tennis racket": ("racket", "racquet"),
    "cup": ("mug",), "donut": ("doughnut",), "couch": ("sofa",), "potted plant": ("plant", "houseplant"),
    "dining table": ("table",), "tv": ("television", "tv"), "remote": ("remote control",),
    "cell phone": ("phone", "cellphone", "smartphone"), "refrigerator": ("fridge",), "teddy bear": ("teddy",),
    "hair drier": ("hair dryer", "blow dryer"), "laptop": ("computer",),
}  # fmt: skip

_IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "person": "people", "child": "children", "mouse": "mice", "knife": "knives",
    "sheep": "sheep", "skis": "skis", "scissors": "scissors", "cattle": "cattle", "luggage": "luggage",
    "people": "people", "men": "men", "women": "women", "children": "children", "calf": "calves",
}  # fmt: skip

_SUPERCATEGORY_PHRASES = {
    "person": "a person", "vehicle": "a vehicle", "outdoor": "an outdoor object", "animal": "an animal",
    "accessory": "an accessory", "sports": "sports equipment", "kitchen": "a kitchen item", "food": "food",
    "furniture": "furniture", "electronic": "an electronic device", "appliance": "an appliance",
    "indoor": "an indoor object",
}  # fmt: skip

_WORD = re.compile(r"[a-z]+")


def plural(word: str) -> str:
    """English plural of the last word of ``word`` (``teddy bear`` -> ``teddy bears``)."""
    head, _, last = word.rpartition(" ")
    if last in _IRREGULAR_PLURALS:
        last = _IRREGULAR_PLURALS[last]
    elif last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def article(phrase: str) -> str:
    """``a`` or ``an`` followed by ``phrase``."""
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


class MentionMatcher:
    """Which categories a caption mentions: longest-match lookup of names, synonyms and plurals.

    The lexicon holds each category name, its synonyms (:data:`SYNONYMS`, and the shapes
    world's words) and their plurals; a caption is lower-cased, split into words, and
    matched left to right preferring the longest phrase (up to 3 words), so
    "a hot dog" is ``hot dog`` and not ``dog``.
    """

    def __init__(self, category_names: Iterable[str]) -> None:
        self.lexicon: dict[tuple[str, ...], str] = {}
        for name in sorted(category_names):
            words = {name, *SYNONYMS.get(name, ()), *SHAPE_WORDS.get(name, ())}
            for word in sorted(words):
                for form in (word, plural(word)):
                    self.lexicon.setdefault(tuple(_WORD.findall(form.lower())), name)
        self.max_len = max((len(k) for k in self.lexicon), default=1)

    def __call__(self, caption: str) -> tuple[str, ...]:
        """Sorted distinct category names mentioned in ``caption``."""
        words = _WORD.findall(caption.lower())
        found: set[str] = set()
        i = 0
        while i < len(words):
            for n in range(min(self.max_len, len(words) - i), 0, -1):
                name = self.lexicon.get(tuple(words[i : i + n]))
                if name is not None:
                    found.add(name)
                    i += n
                    break
            else:
                i += 1
        return tuple(sorted(found))


@dataclass(frozen=True)
class ImageObjects:
    """The objects of one image: per category, non-crowd boxes (x, y, w, h) and crowd flag."""

    width: float
    height: float
    boxes: Mapping[str, tuple[tuple[float, float, float, float], ...]]
    crowd: frozenset[str]
    categories: frozenset[str] = frozenset()
    unique: Mapping[str, tuple[float, float, float, float]] = field(default_factory=dict)
    #: Memo of :func:`relation_truths` per (a, b, margin, ratio).
    truths: dict[tuple[str, str, float, float], dict[str, bool]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Precomputed once per image: predicates are evaluated millions of times at COCO scale.
        object.__setattr__(self, "categories", frozenset(self.boxes) | self.crowd)
        unique = {n: b[0] for n, b in self.boxes.items() if len(b) == 1 and n not in self.crowd}
        object.__setattr__(self, "unique", unique)

    def unique_box(self, name: str) -> tuple[float, float, float, float] | None:
        """The box of ``name`` when it has exactly one non-crowd instance and no crowd region."""
        return self.unique.get(name)

    def count(self, name: str) -> int | None:
        """Exact instance count of ``name``; None when a crowd region makes it unknowable."""
        return None if name in self.crowd else len(self.boxes.get(name, ()))


class CocoIndex:
    """COCO train2017 + val2017 (validated, via pycocotools) with the lookups the families need."""

    source = "coco"

    def __init__(self, root: str | Path, splits: Mapping[str, CocoSplit]) -> None:
        self.root = Path(root).resolve()
        self.splits = dict(splits)
        self.split_of: dict[int, str] = {}
        for name, split in self.splits.items():
            for image_id in split.images:
                if image_id in self.split_of:
                    raise ValueError(f"image id {image_id} is in both {self.split_of[image_id]} and {name}")
                self.split_of[image_id] = name
        names: dict[str, str] = {}
        for split in self.splits.values():
            for cat in split.categories.values():
                names[cat["name"]] = cat["supercategory"]
        self.supercategories: dict[str, str] = names
        self.mentions = MentionMatcher(names)
        self._objects: dict[int, ImageObjects] = {}
        self._mentions: dict[str, tuple[str, ...]] = {}
        self._file_names: dict[int, str] = {}
        #: Per-image facts of the families, shared by all seeds and splits (they do not depend on either).
        self.memo: dict[tuple[Any, ...], Any] = {}

    @property
    def skipped(self) -> Counter:
        """Counted skips of all splits together (reason -> count)."""
        total: Counter = Counter()
        for split in self.splits.values():
            total.update(split.skipped)
        return total

    def image_ids(self, split: str, with_objects: bool = True) -> list[int]:
        """Sorted ids of a split (``train2017``/``val2017``), by default only images with annotations."""
        coco_split = self.splits[split]
        ids = coco_split.images
        if with_objects:
            return sorted(i for i in ids if coco_split.instances.imgToAnns.get(i))
        return sorted(ids)

    def file_name(self, image_id: int) -> str:
        """File name relative to the COCO root, e.g. ``val2017/000000000139.jpg`` (cached: every row asks twice)."""
        try:
            return self._file_names[image_id]
        except KeyError:
            name = self._file_names[image_id] = self.splits[self.split_of[image_id]].images[image_id].file_name
            return name

    def objects(self, image_id: int) -> ImageObjects:
        """The image's objects grouped by category name (cached)."""
        cached = self._objects.get(image_id)
        if cached is not None:
            return cached
        if image_id not in self.split_of:
            raise ValueError(f"image id {image_id} is not in the COCO annotations under {self.root}")
        split = self.splits[self.split_of[image_id]]
        entry = split.images[image_id]
        boxes: dict[str, list[tuple[float, float, float, float]]] = {}
        crowd: set[str] = set()
        for ann in sorted(split.instances.imgToAnns.get(image_id, []), key=lambda a: a["id"]):
            name = split.categories[ann["category_id"]]["name"]
            if ann.get("iscrowd", 0):
                crowd.add(name)
            else:
                boxes.setdefault(name, []).append(tuple(float(v) for v in ann["bbox"]))
        objects = ImageObjects(entry.width, entry.height, {k: tuple(v) for k, v in boxes.items()}, frozenset(crowd))
        self._objects[image_id] = objects
        return objects

    def captions(self, image_id: int) -> list[str]:
        """The image's human captions (whitespace-normalised, non-empty)."""
        return self.splits[self.split_of[image_id]].captions.get(image_id, [])

    def caption_mentions(self, caption: str) -> tuple[str, ...]:
        """Categories mentioned in a caption (cached)."""
        found = self._mentions.get(caption)
        if found is None:
            found = self._mentions[caption] = self.mentions(caption)
        return found


@register_index_loader("coco")
def load_coco_index(root: str | Path, **_: Any) -> CocoIndex:
    """Load ``instances_*`` and ``captions_*`` of train2017 and val2017 under ``root``."""
    return CocoIndex(root, {split: load_coco_split(root, split) for split in COCO_SPLITS})


# --- caption semantics -------------------------------------------------------------------------------------------


def _centre(box: Sequence[float]) -> tuple[float, float]:
    return box[0] + box[2] / 2.0, box[1] + box[3] / 2.0


def relation_truths(
    a: Sequence[float], b: Sequence[float], width: float, height: float, margin: float, ratio: float
) -> dict[str, bool]:
    """Which relation captions "A <relation> B" one instance pair of boxes satisfies (module docstring rules).

    One function for every relation, used by the verdicts and by the builders' strata,
    so construction and the builder's audit never disagree on a boundary case.
    """
    ax, ay = _centre(a)
    bx, by = _centre(b)
    area_a, area_b = a[2] * a[3], b[2] * b[3]
    return {
        "to the left of": bx - ax >= margin * width,
        "to the right of": ax - bx >= margin * width,
        "above": by - ay >= margin * height,
        "below": ay - by >= margin * height,
        "larger than": area_a >= ratio * area_b,
        "smaller than": area_b >= ratio * area_a,
    }


#: The relations a caption may state.
RELATIONS: tuple[str, ...] = ("to the left of", "to the right of", "above", "below", "larger than", "smaller than")
OPPOSITE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below",
            "below": "above", "larger than": "smaller than", "smaller than": "larger than"}  # fmt: skip
AXES = {"horizontal": ("to the left of", "to the right of"), "vertical": ("above", "below"),
        "size": ("larger than", "smaller than")}  # fmt: skip

#: Verdicts of a caption on an image: true, false beyond doubt, or one of the undecided reasons.
TRUE, FALSE = "true", "false"
SUB_MARGIN = "sub_margin"
MULTI_INSTANCE = "multi_instance_ambiguous"
CROWD = "crowd_uncertain_extent"
SAME_CATEGORY = "same_category"


def _combine(per_instance: Iterable[tuple[bool, bool]]) -> str:
    """Verdict from (stated holds, opposite holds) per instance (pair): all stated -> true; all
    opposite -> false; none of either -> sub-margin; a mixture -> multi-instance ambiguous."""
    states = {(True, False) if s else (False, True) if o else (False, False) for s, o in per_instance}
    if states == {(True, False)}:
        return TRUE
    if states == {(False, True)}:
        return FALSE
    if states == {(False, False)}:
        return SUB_MARGIN
    return MULTI_INSTANCE


def _single_pair_verdicts(t: Mapping[str, bool]) -> dict[str, str]:
    # The common case (one instance of each) without the set-building of _combine.
    return {r: TRUE if t[r] else FALSE if t[OPPOSITE[r]] else SUB_MARGIN for r in RELATIONS}


def _relation_verdicts(objects: ImageObjects, a: str, b: str, margin: float, ratio: float) -> dict[str, str]:
    """Verdict of every relation caption "A <relation> B" on the image (memoised per image).

    "B <r> A" is "A <opposite r> B", so each unordered pair is computed once and stored both ways.
    """
    key = (a, b, margin, ratio)
    found = objects.truths.get(key)
    if found is not None:
        return found
    if a == b:
        found = dict.fromkeys(RELATIONS, SAME_CATEGORY)
    elif a not in objects.categories or b not in objects.categories:
        found = dict.fromkeys(RELATIONS, FALSE)  # a named object is absent
    elif a in objects.crowd or b in objects.crowd:
        found = dict.fromkeys(RELATIONS, CROWD)  # a crowd region is an instance of uncertain extent
    else:
        boxes_a, boxes_b = objects.boxes[a], objects.boxes[b]
        if len(boxes_a) == 1 and len(boxes_b) == 1:
            found = _single_pair_verdicts(relation_truths(boxes_a[0], boxes_b[0], objects.width, objects.height,
                                                          margin, ratio))  # fmt: skip
        else:
            pairs = [relation_truths(x, y, objects.width, objects.height, margin, ratio)
                     for x in boxes_a for y in boxes_b]  # fmt: skip
            found = {r: _combine((t[r], t[OPPOSITE[r]]) for t in pairs) for r in RELATIONS}
    objects.truths[key] = found
    objects.truths[(b, a, margin, ratio)] = {r: found[OPPOSITE[r]] for r in RELATIONS}
    return found


def relation_verdict(objects: ImageObjects, meaning: Mapping[str, Any]) -> str:
    """Verdict of a ``relation`` meaning: true when every instance pair of (A, B) satisfies it by the
    margin (sizes: the ratio); false when A or B is absent or every pair satisfies the opposite
    relation by the margin; otherwise the reason (sub-margin, multi-instance, crowd)."""
    return _relation_verdicts(objects, meaning["subject"], meaning["object"], meaning.get("margin", 0.0),
                              meaning.get("ratio", 1.0))[meaning["relation"]]  # fmt: skip


def position_verdict(objects: ImageObjects, meaning: Mapping[str, Any]) -> str:
    """Verdict of a ``position`` meaning: every instance of A on the stated side (centre at most
    (1/2 - m) W for left, at least (1/2 + m) W for right) -> true; A absent or every instance
    on the other side -> false; otherwise the reason."""
    subject, m, side = meaning["subject"], meaning["margin"], meaning["side"]
    if subject not in objects.categories:
        return FALSE
    if subject in objects.crowd:
        return CROWD
    width = objects.width
    per_instance = []
    for box in objects.boxes[subject]:
        cx = _centre(box)[0]
        left, right = cx <= (0.5 - m) * width, cx >= (0.5 + m) * width
        per_instance.append((left, right) if side == "left" else (right, left))
    return _combine(per_instance)


def count_verdict(objects: ImageObjects, meaning: Mapping[str, Any]) -> str:
    """Verdict of ``exactly n A``: unknowable with a crowd region of A, else true or false by count."""
    count = objects.count(meaning["subject"])
    if count is None:
        return CROWD
    return TRUE if count == meaning["count"] else FALSE


def mentions_verdict(objects: ImageObjects, meaning: Mapping[str, Any], index: CocoIndex) -> str:
    """Every mentioned category present (a crowd region counts as presence) -> true, else false (absent)."""
    present = bool(meaning["categories"]) and all(c in objects.categories for c in meaning["categories"])
    return TRUE if present else FALSE


def supercategory_verdict(objects: ImageObjects, meaning: Mapping[str, Any], index: CocoIndex) -> str:
    """Some instance of the supercategory present -> true, else false (absent)."""
    present = any(index.supercategories.get(c) == meaning["supercategory"] for c in objects.categories)
    return TRUE if present else FALSE


VERDICTS: dict[str, Callable[[ImageObjects, Mapping[str, Any], CocoIndex], str]] = {
    "mentions": mentions_verdict,
    "relation": lambda objects, meaning, index: relation_verdict(objects, meaning),
    "position": lambda objects, meaning, index: position_verdict(objects, meaning),
    "count": lambda objects, meaning, index: count_verdict(objects, meaning),
    "supercategory": supercategory_verdict,
}


_COUNT_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def render_caption(meaning: Mapping[str, Any]) -> str:
    """The template caption of a meaning (relation, position, count, supercategory, object pair)."""
    kind = meaning["kind"]
    if kind == "relation":
        return f"{article(meaning['subject'])} {meaning['relation']} {article(meaning['object'])}"
    if kind == "position":
        return f"{article(meaning['subject'])} on the {meaning['side']} side of the picture"
    if kind == "count":
        n = meaning["count"]
        noun = meaning["subject"] if n == 1 else plural(meaning["subject"])
        return f"exactly {_COUNT_WORDS.get(n, str(n))} {noun}"
    if kind == "supercategory":
        s = meaning["supercategory"]
        return f"a picture with {_SUPERCATEGORY_PHRASES.get(s, article(s + ' object'))}"
    if kind == "mentions":
        return " and ".join(article(c) for c in meaning["categories"])
    raise ValueError(f"no caption template for meaning kind {kind!r}")


# --- pairing helpers ---------------------------------------------------------------------------------------------


class _Uses:
    """Per-split bookkeeping: uses per image and pairs already made (no duplicate blocks)."""

    # A plain dict with .get, not a Counter: a missing key in a Counter runs Python-level
    # __missing__, and these run millions of times in a COCO-scale build.
    def __init__(self, max_uses: int = MAX_IMAGE_USES) -> None:
        self.count: dict[int, int] = {}
        self.pairs: set[tuple[int, int]] = set()
        self.max_uses = max_uses

    def free(self, image_id: int) -> bool:
        return self.count.get(image_id, 0) < self.max_uses

    def can_pair(self, a: int, b: int) -> bool:
        if a == b:
            return False
        count, limit = self.count, self.max_uses
        return count.get(a, 0) < limit and count.get(b, 0) < limit and ((a, b) if a < b else (b, a)) not in self.pairs

    def take(self, a: int, b: int) -> None:
        self.count[a] = self.count.get(a, 0) + 1
        self.count[b] = self.count.get(b, 0) + 1
        self.pairs.add((a, b) if a < b else (b, a))


def _shuffled(items: Sequence[Any], rng: np.random.Generator) -> list[Any]:
    return [items[i] for i in rng.permutation(len(items)).tolist()]


def _cross_pairs(
    left: Sequence[Any], right: Sequence[Any], rng: np.random.Generator, uses: _Uses, key: Callable[[Any], int]
) -> list[tuple[Any, Any]]:
    """Pair members of two strata (rotations of shuffled lists), respecting the use limits."""
    out: list[tuple[Any, Any]] = []
    if not left or not right:
        return out
    left, right = _shuffled(left, rng), _shuffled(right, rng)
    left_keys, right_keys = [key(a) for a in left], [key(b) for b in right]
    n_left, n_right = len(left), len(right)
    # uses.can_pair inlined (with its state in locals): this loop runs millions of times at COCO scale.
    count, made, limit = uses.count, uses.pairs, uses.max_uses
    for shift in range(limit):
        for i in range(max(n_left, n_right)):
            j = (i + shift) % n_right
            ka, kb = left_keys[i % n_left], right_keys[j]
            if ka == kb or count.get(ka, 0) >= limit or count.get(kb, 0) >= limit:
                continue
            if ((ka, kb) if ka < kb else (kb, ka)) not in made:
                uses.take(ka, kb)
                out.append((left[i % n_left], right[j]))
    return out


def _greedy_pairs(
    items: Sequence[Any], rng: np.random.Generator, uses: _Uses, key: Callable[[Any], int], ok: Callable[[Any, Any], bool]
) -> list[tuple[Any, Any]]:
    """Pair items whose exchange is invalid (``ok``), searching ``PARTNER_TRIES`` later items of a shuffle."""
    out = []
    # uses.free and uses.can_pair inlined (with their state in locals): the inner loop runs millions of
    # times at COCO scale. ``ka``'s count does not change inside it (a take ends it), so it is checked once.
    count, made, limit = uses.count, uses.pairs, uses.max_uses
    for _ in range(limit):
        order = _shuffled(items, rng)
        keys = [key(x) for x in order]
        n = len(order)
        for i, a in enumerate(order):
            ka = keys[i]
            if count.get(ka, 0) >= limit:
                continue
            for j in range(i + 1, min(n, i + 1 + PARTNER_TRIES)):
                kb = keys[j]
                if kb == ka or count.get(kb, 0) >= limit or ((ka, kb) if ka < kb else (kb, ka)) in made:
                    continue
                b = order[j]
                if ok(a, b):
                    uses.take(ka, kb)
                    out.append((a, b))
                    break
    return out


def _meaning(**fields: Any) -> str:
    return canonical_json(fields)


class CocoFamily(Family):
    """A COCO family: shared caption semantics, its own cycle construction."""

    def verdict(self, index: CocoIndex, image_id: int, meaning: Mapping[str, Any]) -> str:
        """``true``, ``false`` (beyond doubt) or the undecided reason (see the module docstring)."""
        if meaning["kind"] == "relation":  # the hot path of the relation families and their audits
            return relation_verdict(index.objects(image_id), meaning)
        return VERDICTS[meaning["kind"]](index.objects(image_id), meaning, index)

    def holds(self, index: CocoIndex, image_id: int, meaning: Mapping[str, Any]) -> bool:
        """Whether the caption meaning is true of the image (its verdict is ``true``)."""
        return self.verdict(index, image_id, meaning) == TRUE

    def holds_and_refutes(self, index: CocoIndex, image_id: int, meaning: Mapping[str, Any]) -> tuple[bool, bool]:
        """Both gate answers from one verdict (``holds`` and ``refutes`` both read it)."""
        if meaning["kind"] == "relation":  # the audit's hot path: relation_verdict without its call layers
            objects = index.objects(image_id)
            verdict = _relation_verdicts(objects, meaning["subject"], meaning["object"], meaning.get("margin", 0.0),
                                         meaning.get("ratio", 1.0))[meaning["relation"]]  # fmt: skip
        else:
            verdict = self.verdict(index, image_id, meaning)
        return verdict == TRUE, verdict == FALSE

    def caption_matches(self, index: CocoIndex, caption: str, meaning: Mapping[str, Any]) -> bool:
        """Template families: the caption is the template rendering of its meaning."""
        return caption == render_caption(meaning)

    def _cycle(self, u0: int, u1: int, m0: Mapping[str, Any], m1: Mapping[str, Any],
               strata: tuple[str, str] | None = None, **details: Any) -> Cycle:  # fmt: skip
        j0, j1 = _flat_json(m0), _flat_json(m1)
        s0, s1 = strata if strata is not None else (None, None)
        return Cycle(u0, u1, _CAPTIONS.get(j0) or _caption(j0, m0), _CAPTIONS.get(j1) or _caption(j1, m1), j0, j1,
                     _flat_json(details), s0, s1)  # fmt: skip


_JSON: dict[tuple[Any, ...], str] = {}
_CAPTIONS: dict[str, str] = {}


def _flat_json(obj: Mapping[str, Any]) -> str:
    """canonical_json of a flat object (values scalars or lists of scalars), cached: meanings repeat a lot.

    Keyed by the items in insertion order (the same items in another order are another key with the
    same text): sorting them on every call cost more than the lookup saved.
    """
    key: tuple[Any, ...] = tuple(obj.items())
    try:
        found = _JSON.get(key)
    except TypeError:  # a list value is unhashable: key it as a tuple
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in obj.items())
        found = _JSON.get(key)
    if found is None:
        found = _JSON[key] = canonical_json(obj)
    return found


def _caption(meaning_json: str, meaning: Mapping[str, Any]) -> str:
    caption = _CAPTIONS[meaning_json] = render_caption(meaning)
    return caption


# --- coarse families with human captions ------------------------------------------------------------------------


class HumanCaptionFamily(CocoFamily):
    """Families on COCO's own captions; a caption's meaning is the set of categories it mentions."""

    def caption_matches(self, index: CocoIndex, caption: str, meaning: Mapping[str, Any]) -> bool:
        """The mention matcher finds exactly the stored categories in the caption."""
        return list(index.caption_mentions(caption)) == list(meaning["categories"])

    def facts(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[tuple[int, str, tuple]]:
        """One own caption per image whose mentions are all present: (image id, caption, mentions)."""
        out = []
        for image_id in image_ids:
            key = ("eligible_captions", image_id)
            good = index.memo.get(key)
            if good is None:
                objects = index.objects(image_id)
                good = index.memo[key] = [c for c in index.captions(image_id) if index.caption_mentions(c)
                                          and all(m in objects.categories for m in index.caption_mentions(c))]  # fmt: skip
            if good:
                caption = good[int(rng.integers(len(good)))]
                out.append((image_id, caption, index.caption_mentions(caption)))
        return out

    def swap_invalid(self, index: CocoIndex, a: tuple, b: tuple) -> bool:
        """Each caption mentions a category absent from the other image (and the captions differ)."""
        if a[1] == b[1]:
            return False
        cats_a, cats_b = index.objects(a[0]).categories, index.objects(b[0]).categories
        return not cats_a.issuperset(b[2]) and not cats_b.issuperset(a[2])

    def to_cycle(self, a: tuple, b: tuple, stratum: str | None = None) -> Cycle:
        m0, m1 = {"kind": "mentions", "categories": list(a[2])}, {"kind": "mentions", "categories": list(b[2])}
        return Cycle(
            a[0], b[0], a[1], b[1], canonical_json(m0), canonical_json(m1), canonical_json({"rule": self.name}), stratum, stratum
        )


@register_family(
    "coco",
    "coarse_object",
    predicate="""Human COCO captions. A caption's meaning is the set of categories it mentions (names,
    synonyms, plurals; longest match). A pair is valid when every mentioned category has an instance in
    the image. Each image contributes one of its own captions with at least one mention, all present;
    two images are paired when each caption mentions a category absent from the other image, so both
    swaps are invalid because an object is missing.""",
)
class CoarseObject(HumanCaptionFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        facts = self.facts(index, image_ids, rng)
        pairs = _greedy_pairs(facts, rng, _Uses(), lambda f: f[0], lambda a, b: self.swap_invalid(index, a, b))
        return [self.to_cycle(a, b) for a, b in pairs]


@register_family(
    "coco",
    "matched_object",
    predicate="""Human COCO captions with the coarse_object predicate, but the two captions are matched on
    coarse object evidence: their mentioned categories have the same multiset of supercategories (e.g.
    both mention one animal and one vehicle). The swaps are invalid because a specific mentioned category
    is absent, so supercategory-level evidence cannot separate matched from swapped pairs.""",
)
class MatchedObject(HumanCaptionFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        strata: dict[tuple[str, ...], list[tuple]] = {}
        for fact in self.facts(index, image_ids, rng):
            signature = tuple(sorted(index.supercategories[c] for c in fact[2]))
            strata.setdefault(signature, []).append(fact)
        uses, cycles = _Uses(), []
        for signature in sorted(strata):
            ok = lambda a, b: self.swap_invalid(index, a, b)  # noqa: E731
            cycles += [
                self.to_cycle(a, b, "+".join(signature))
                for a, b in _greedy_pairs(strata[signature], rng, uses, lambda f: f[0], ok)
            ]
        return cycles


@register_family(
    "coco",
    "text_neighbor",
    predicate="""Human COCO captions with the coarse_object predicate, paired with a hard textual neighbour.
    Each image has one fixed caption (with mentions, all present; chosen by a hash of the image id, the
    same for every seed). Captions of each pool (train pool, val pool) are embedded with scikit-learn
    TF-IDF (lower-cased word unigrams and bigrams, sublinear tf) and their POOL_NEIGHBORS nearest
    captions under cosine distance are found; a caption's partner is its nearest neighbour that belongs
    to an image of the same split, still has uses left, and makes both swaps invalid (a mentioned
    category is absent). No model is needed.""",
)
class TextNeighbor(HumanCaptionFamily):
    #: Neighbours kept per caption in the pool; the split's candidates are those among them.
    pool_neighbors: int = 50

    def fixed_fact(self, index: CocoIndex, image_id: int) -> tuple[int, str, tuple] | None:
        """The image's caption for this family, independent of seed and split (memoised)."""
        key = ("text_neighbor_fact", image_id)
        if key not in index.memo:
            good = self.facts(index, [image_id], np.random.default_rng(stable_seed("text_neighbor", image_id)))
            index.memo[key] = good[0] if good else None
        return index.memo[key]

    def neighbours(self, index: CocoIndex, image_ids: Sequence[int]) -> dict[int, list[int]]:
        """Image id -> ids of the images with the nearest captions (nearest first), memoised per id set."""
        import hashlib

        from sklearn.feature_extraction.text import TfidfVectorizer

        ids = sorted(set(image_ids))
        # A short token, not the id tuple: big tuples re-hash on every dict lookup.
        key = ("text_neighbor_pool", hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest())
        if key in index.memo:
            return index.memo[key]
        facts = [f for f in (self.fixed_fact(index, u) for u in ids) if f is not None]
        result: dict[int, list[int]] = {}
        if len(facts) >= 2:
            # TF-IDF rows are L2-normalised: cosine similarity is a dot product. Blocks of rows are
            # searched independently (on --num-proc processes); each row's result depends on that
            # row alone, so the neighbours are the same for any block size or process count.
            vectors = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit_transform([f[1] for f in facts])
            k = min(self.pool_neighbors, len(facts) - 1)
            columns = vectors.T.tocsr()
            starts = list(range(0, len(facts), NEIGHBOUR_BLOCK))
            blocks = parallel_map(
                lambda start: _top_neighbours(vectors[start : start + NEIGHBOUR_BLOCK], columns, start, k),
                starts,
                chunk_size=1,
                processes=self.config.num_proc,
            )
            rows = [row for block in blocks for row in block]
            result = {facts[i][0]: [facts[j][0] for j in row] for i, row in enumerate(rows)}
        index.memo[key] = result
        for image_id in result:
            index.memo[("text_neighbor_pool_of", image_id)] = key
        return result

    def prepare(self, index: CocoIndex, pools: Mapping[str, Sequence[int]]) -> None:
        """Neighbours are computed once per pool and shared by every seed and split."""
        for ids in pools.values():
            self.neighbours(index, ids)

    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        members = set(image_ids)
        pool_keys = {index.memo.get(("text_neighbor_pool_of", u)) for u in image_ids}
        pool_keys.discard(None)
        if len(pool_keys) == 1:
            (key,) = pool_keys
            neighbours = index.memo[key]
        else:  # not prepared (a direct call): the split is its own pool
            neighbours = self.neighbours(index, image_ids)
        facts = {u: f for u in sorted(members) if u in neighbours and (f := self.fixed_fact(index, u)) is not None}
        uses, cycles = _Uses(), []
        order = sorted(facts)
        for i in rng.permutation(len(order)).tolist():
            a = facts[order[i]]
            for other in neighbours[a[0]]:
                b = facts.get(other)
                if b is not None and uses.can_pair(a[0], b[0]) and self.swap_invalid(index, a, b):
                    uses.take(a[0], b[0])
                    cycles.append(self.to_cycle(a, b))
                    break
        return cycles


#: Rows per block of the text-neighbour search (a block's similarities are one dense block x pool array).
NEIGHBOUR_BLOCK = 64


def _top_neighbours(block: Any, columns: Any, offset: int, k: int) -> list[list[int]]:
    """For each row of ``block`` (rows ``offset...`` of the pool): the ``k`` most similar other rows,
    by descending similarity, ties by ascending row."""
    sims = (block @ columns).toarray()
    n = sims.shape[1]
    out = []
    for r in range(sims.shape[0]):
        row = sims[r]
        row[offset + r] = -np.inf  # never its own neighbour
        threshold = np.partition(row, n - k)[n - k]  # the k-th largest value
        candidates = np.flatnonzero(row >= threshold)
        ranked = candidates[np.lexsort((candidates, -row[candidates]))]
        out.append(ranked[:k].tolist())
    return out


# --- relation families (template captions from box geometry) ---------------------------------------------------


def _present_categories(objects: ImageObjects) -> list[str]:
    """Categories with an instance or a crowd region (crowd ones are candidates only to be counted as excluded)."""
    return sorted(objects.categories)


def exclusion_reason(role: str, verdict: str) -> str:
    """The build_info ``excluded`` key of a rejected candidate: ``matched_...`` (its own caption is not
    true for every instance) or ``swap_...`` (a swapped caption would not be false beyond doubt)."""
    if verdict == MULTI_INSTANCE:
        return "matched_not_all_instances" if role == "matched" else "swap_multi_instance_ambiguous"
    if verdict == TRUE:
        return f"{role}_true"
    return f"{role}_{verdict}"


def _relation_meaning(subject: str, relation: str, obj: str, margin: float, ratio: float) -> dict[str, Any]:
    meaning: dict[str, Any] = {"kind": "relation", "subject": subject, "relation": relation, "object": obj}
    if relation in ("larger than", "smaller than"):
        meaning["ratio"] = ratio
    else:
        meaning["margin"] = margin
    return meaning


class RelationFamily(CocoFamily):
    """Shared parameters of the template relation families."""

    axis: str = "horizontal"

    @property
    def margin(self) -> float:
        """The build's spatial margin (``BuildConfig.margin``, ``--margin``)."""
        return self.config.margin

    @property
    def ratio(self) -> float:
        """The build's size ratio (``BuildConfig.size_ratio``, ``--size-ratio``)."""
        return self.config.size_ratio

    def relation_facts(self, index: CocoIndex, image_id: int, relations: Sequence[str]) -> list[dict[str, Any]]:
        """True relation meanings of ``relations`` (every instance pair agrees) of the image (memoised);
        each category pair with no true relation on the axis is counted as excluded, with its reason."""
        key = ("relation_facts", image_id, tuple(relations), self.margin, self.ratio)
        found = index.memo.get(key)
        if found is None:
            facts, excluded = self._relation_facts(index, image_id, relations)
            found = index.memo[key] = (facts, tuple(Counter(excluded).items()))  # counted per reason, once
        facts, excluded = found
        for reason, count in excluded:
            self.exclude(reason, count)
        return facts

    def _relation_facts(self, index: CocoIndex, image_id: int, relations: Sequence[str]
                        ) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
        objects = index.objects(image_id)
        cats = _present_categories(objects)
        margin, ratio = self.margin, self.ratio
        out, excluded = [], []
        for i, a in enumerate(cats):
            for b in cats[i + 1 :]:
                verdicts = _relation_verdicts(objects, a, b, margin, ratio)
                # "a r b" true is the same fact as "b opposite(r) a": both captions are offered.
                found = [(a, r, b) for r in relations if verdicts[r] == TRUE]
                if found:
                    out += [_relation_meaning(x, r, y, self.margin, self.ratio) for x, r, y in found]
                    out += [_relation_meaning(y, OPPOSITE[r], x, self.margin, self.ratio) for x, r, y in found]
                else:
                    excluded.append(exclusion_reason("matched", verdicts[relations[0]]))
        out.sort(key=lambda m: (m["subject"], m["object"], RELATIONS.index(m["relation"])))
        return out, excluded

    def verdicts(self, objects: ImageObjects, a: str, b: str) -> dict[str, str]:
        """Verdict of every relation "A <relation> B" with this family's margin and ratio."""
        return _relation_verdicts(objects, a, b, self.margin, self.ratio)

    def pair_strata(self, index: CocoIndex, image_ids: Sequence[int],
                    classify: Callable[[ImageObjects, str, str], tuple[str | None, str | None]]
                    ) -> dict[tuple[str, str], dict[str, list[int]]]:  # fmt: skip
        """Images bucketed by unordered category pair (a < b), then by ``classify``'s label.

        ``classify`` returns (label, None) or (None, exclusion reason); the exclusions are
        counted every time the image is seen. Labels are memoised per family: they depend
        on neither seed nor split.
        """
        strata: dict[tuple[str, str], dict[str, list[int]]] = {}
        excluded: dict[str, int] = {}
        for image_id in image_ids:
            key = ("pair_labels", self.name, self.margin, self.ratio, image_id)
            labels = index.memo.get(key)
            if labels is None:
                objects = index.objects(image_id)
                cats = _present_categories(objects)
                labels = index.memo[key] = [((a, b), classify(objects, a, b)) for i, a in enumerate(cats)
                                            for b in cats[i + 1:]]  # fmt: skip
            if not labels:
                continue
            for pair, (label, reason) in labels:
                if label is not None:
                    strata.setdefault(pair, {}).setdefault(label, []).append(image_id)
                elif reason is not None:
                    excluded[reason] = excluded.get(reason, 0) + 1
        for reason, count in excluded.items():  # in first-seen order, as one call per candidate would
            self.exclude(reason, count)
        return strata

    def details(self, **extra: Any) -> dict[str, Any]:
        return {"rule": self.name, "margin": self.margin, "ratio": self.ratio, **extra}


class BoxRelationFamily(RelationFamily):
    """One true relation fact per image; partners have a different category pair and each swapped
    caption is false beyond doubt on the other image."""

    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        facts = []
        for image_id in image_ids:
            options = self.relation_facts(index, image_id, AXES[self.axis])
            if options:
                facts.append((image_id, options[int(rng.integers(len(options)))]))

        def ok(a: tuple, b: tuple) -> bool:
            pair_a, pair_b = {a[1]["subject"], a[1]["object"]}, {b[1]["subject"], b[1]["object"]}
            if pair_a == pair_b:
                return False
            for image, meaning in ((a[0], b[1]), (b[0], a[1])):
                verdict = self.verdict(index, image, meaning)
                if verdict != FALSE:
                    self.exclude(exclusion_reason("swap", verdict))  # a candidate pairing, rejected
                    return False
            return True

        pairs = _greedy_pairs(facts, rng, _Uses(), lambda f: f[0], ok)
        stratum = f"{self.axis} relation facts"
        return [self._cycle(a[0], b[0], a[1], b[1], strata=(stratum, stratum), **self.details()) for a, b in pairs]


_MANY = """A caption is true when A != B, neither A nor B has a crowd region, and {rule} for EVERY instance pair
    (a, b) of A and B; it is false beyond doubt when A or B is absent, or when every instance pair satisfies the
    opposite relation by the same {what}. Anything else (a sub-{what} pair, instance pairs that disagree, a crowd
    region) is undecided: such a caption is never used, neither as a matched nor as a swapped caption, and the
    rejected candidates are counted per reason in build_info.json (``excluded``)."""
_BOX_TEXT = (
    """Template captions "a A <relation> a B" from box geometry, relation in {rels}. """
    + _MANY
    + """ Each
    image contributes one true fact; partners describe a different unordered category pair and each swapped
    caption is false beyond doubt on the other image (often because an object is absent: this is the coarse
    box-relation family)."""
)
_HORIZONTAL_RULE = (
    "the box centres differ in x by at least margin x width (margin: default 0.1, --margin) in the stated direction"
)
_VERTICAL_RULE = "the box centres differ in y by at least margin x height (margin: default 0.1, --margin) in the stated direction"
_SIZE_RULE = "the stated larger box has at least ratio (default 1.5, --size-ratio) times the other's area"


@register_family("coco", "box_left_right", predicate=_BOX_TEXT.format(
    rels="{to the left of, to the right of}", rule=_HORIZONTAL_RULE, what="margin"))  # fmt: skip
class BoxLeftRight(BoxRelationFamily):
    axis = "horizontal"


@register_family("coco", "box_above_below", predicate=_BOX_TEXT.format(
    rels="{above, below}", rule=_VERTICAL_RULE, what="margin"))  # fmt: skip
class BoxAboveBelow(BoxRelationFamily):
    axis = "vertical"


class StrictFlipFamily(RelationFamily):
    """Both images hold A and B; on ``axis`` every instance pair agrees, one way in the first image
    and the opposite way in the second."""

    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        first, second = AXES[self.axis]
        margin, ratio = self.margin, self.ratio

        def classify(objects: ImageObjects, a: str, b: str) -> tuple[str | None, str | None]:
            verdict = _relation_verdicts(objects, a, b, margin, ratio)[first]
            if verdict == TRUE:
                return first, None
            if verdict == FALSE:  # both present: every pair satisfies the opposite relation
                return second, None
            return None, exclusion_reason("matched", verdict)

        strata = self.pair_strata(index, image_ids, classify)
        uses, cycles = _Uses(), []
        for a, b in sorted(strata):
            groups = strata[(a, b)]
            left = [(u, f"{a}|{b}") for u in groups.get(first, [])]
            right = [(u, f"{a}|{b}") for u in groups.get(second, [])]
            for (u0, s0), (u1, s1) in _cross_pairs(left, right, rng, uses, lambda x: x[0]):
                subject, obj, r0 = (a, b, first) if rng.random() < 0.5 else (b, a, second)
                m0 = _relation_meaning(subject, r0, obj, self.margin, self.ratio)
                m1 = _relation_meaning(subject, OPPOSITE[r0], obj, self.margin, self.ratio)
                cycles.append(self._cycle(u0, u1, m0, m1, strata=(s0, s1), **self.details(pair=[a, b])))
        return cycles


_STRICT_TEXT = (
    """Template captions "a A <relation> a B" with relation in {rels}. """
    + _MANY
    + """ Both images
    contain A and B; the relation holds (for every instance pair) one way in the first image and the opposite way
    in the second, and the captions state the same pair with opposite relations, so each swap is false by geometry
    alone, never by a missing object. Candidate stratum: the unordered category pair."""
)


@register_family("coco", "strict_left_right", predicate=_STRICT_TEXT.format(
    rels="{to the left of, to the right of}", rule=_HORIZONTAL_RULE, what="margin"))  # fmt: skip
class StrictLeftRight(StrictFlipFamily):
    axis = "horizontal"


@register_family("coco", "strict_above_below", predicate=_STRICT_TEXT.format(
    rels="{above, below}", rule=_VERTICAL_RULE, what="margin"))  # fmt: skip
class StrictAboveBelow(StrictFlipFamily):
    axis = "vertical"


@register_family("coco", "strict_size", predicate=_STRICT_TEXT.format(
    rels="{larger than, smaller than}", rule=_SIZE_RULE, what="ratio"))  # fmt: skip
class StrictSize(StrictFlipFamily):
    axis = "size"


@register_family(
    "coco",
    "strict_same_pair",
    predicate="""Same-pair relation change. Relation captions as in strict_left_right / strict_above_below
    (every instance pair by the margin, default 0.1 of width or height, --margin; crowd regions undecided). Both images contain
    A and B and are decided on both axes: in the first image A is, say, left of and below B; in the second
    A is right of and above B (the opposite on both axes). Caption 0 states the first image's horizontal
    relation, caption 1 the second image's vertical relation, about the same ordered pair, so each swapped
    caption is false beyond doubt by geometry with both objects present. Images undecided on one axis are
    excluded (swap_*: the other caption would not be clearly false) and counted. Candidate stratum: the
    unordered category pair.""",
)
class StrictSamePair(RelationFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        margin, ratio = self.margin, self.ratio

        def classify(objects: ImageObjects, a: str, b: str) -> tuple[str | None, str | None]:
            verdicts = _relation_verdicts(objects, a, b, margin, ratio)
            h, v = verdicts["to the left of"], verdicts["above"]
            decided = [x in (TRUE, FALSE) for x in (h, v)]
            if all(decided):
                return ("left" if h == TRUE else "right") + "/" + ("above" if v == TRUE else "below"), None
            if not any(decided):
                return None, exclusion_reason("matched", h)
            return None, exclusion_reason("swap", v if decided[0] else h)

        strata = self.pair_strata(index, image_ids, classify)
        uses, cycles = _Uses(), []
        h_rel = {"left": "to the left of", "right": "to the right of"}
        for a, b in sorted(strata):
            groups = strata[(a, b)]
            for q0, q1 in (("left/below", "right/above"), ("left/above", "right/below")):
                first = [(u, q0) for u in groups.get(q0, [])]
                second = [(u, q1) for u in groups.get(q1, [])]
                for (u0, l0), (u1, l1) in _cross_pairs(first, second, rng, uses, lambda x: x[0]):
                    if rng.random() < 0.5:  # which image states the horizontal relation
                        (u0, l0), (u1, l1) = (u1, l1), (u0, l0)
                    r0 = h_rel[l0.split("/")[0]]  # image 0's horizontal relation of a to b
                    r1 = l1.split("/")[1]  # image 1's vertical relation of a to b
                    if rng.random() < 0.5:
                        m0 = _relation_meaning(a, r0, b, self.margin, self.ratio)
                        m1 = _relation_meaning(a, r1, b, self.margin, self.ratio)
                    else:
                        m0 = _relation_meaning(b, OPPOSITE[r0], a, self.margin, self.ratio)
                        m1 = _relation_meaning(b, OPPOSITE[r1], a, self.margin, self.ratio)
                    stratum = f"{a}|{b}"
                    cycles.append(self._cycle(u0, u1, m0, m1, strata=(stratum, stratum), **self.details(pair=[a, b])))
        return cycles


@register_family("coco", "box_size", predicate=_BOX_TEXT.format(
    rels="{larger than, smaller than}", rule=_SIZE_RULE, what="ratio"))  # fmt: skip
class BoxSize(BoxRelationFamily):
    """Why: the coarse counterpart of strict_size, as box_left_right is of strict_left_right."""

    axis = "size"


@register_family(
    "coco",
    "object_variant",
    predicate="""Template captions "a A and a B" naming true object pairs. Valid when both categories have an
    instance in the image. The two images share an anchor category A and differ in a second object: image 0
    has B0 and not B1, image 1 has B1 and not B0, so each swapped caption is invalid because its variant
    object is absent. Images are indexed by anchor category.""",
)
class ObjectVariant(CocoFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        by_anchor: dict[str, list[int]] = {}
        for image_id in image_ids:
            for c in sorted(index.objects(image_id).categories):
                by_anchor.setdefault(c, []).append(image_id)
        uses, cycles = _Uses(), []
        anchors = sorted(by_anchor)
        for anchor in [anchors[i] for i in rng.permutation(len(anchors)).tolist()]:
            chosen: dict[tuple[int, int], tuple[str, str]] = {}

            def ok(u0: int, u1: int, anchor: str = anchor, chosen: dict = chosen) -> bool:
                c0, c1 = index.objects(u0).categories, index.objects(u1).categories
                only0, only1 = sorted(c0 - c1 - {anchor}), sorted(c1 - c0 - {anchor})
                if not only0 or not only1:
                    return False
                chosen[(u0, u1)] = (only0[int(rng.integers(len(only0)))], only1[int(rng.integers(len(only1)))])
                return True

            for u0, u1 in _greedy_pairs(by_anchor[anchor], rng, uses, lambda x: x, ok):
                b0, b1 = chosen[(u0, u1)]
                m0 = {"kind": "mentions", "categories": [anchor, b0]}
                m1 = {"kind": "mentions", "categories": [anchor, b1]}
                cycles.append(self._cycle(u0, u1, m0, m1, strata=(anchor, anchor), rule=self.name, anchor=anchor))
        return cycles


@register_family(
    "coco",
    "object_position",
    predicate="""Template captions "a A on the left/right side of the picture". True when A has no crowd region
    and EVERY instance of A has its box centre at most (1/2 - m) x width (left) or at least (1/2 + m) x
    width (right), m the margin (default 0.1, --margin); false beyond doubt when A is absent or every
    instance is on the other side by the margin.
    Otherwise (an instance in the middle band, instances on both sides, a crowd region) undecided: not used,
    counted per reason. Both images contain A, all instances on opposite sides; each swap is false by
    position. Candidate stratum: the category A. Why: absolute single-object localisation, the control for
    strict_left_right's relative binding of two objects.""",
)
class ObjectPosition(CocoFamily):
    @property
    def margin(self) -> float:
        """The build's spatial margin (``BuildConfig.margin``, ``--margin``)."""
        return self.config.margin

    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        strata: dict[str, dict[str, list[int]]] = {}
        for image_id in image_ids:
            key = ("position_labels", self.margin, image_id)
            labels = index.memo.get(key)
            if labels is None:
                objects = index.objects(image_id)
                labels = index.memo[key] = []
                for c in _present_categories(objects):
                    verdict = position_verdict(objects, {"subject": c, "side": "left", "margin": self.margin})
                    # Present, so "false" means every instance is on the right by the margin.
                    side = {TRUE: "left", FALSE: "right"}.get(verdict)
                    labels.append((c, side, exclusion_reason("matched", verdict)))
            for c, side, reason in labels:
                if side is None:
                    self.exclude(reason)
                else:
                    strata.setdefault(c, {}).setdefault(side, []).append(image_id)
        uses, cycles = _Uses(), []
        for c in sorted(strata):
            for u0, u1 in _cross_pairs(strata[c].get("left", []), strata[c].get("right", []), rng, uses, lambda x: x):
                m0 = {"kind": "position", "subject": c, "side": "left", "margin": self.margin}
                m1 = {"kind": "position", "subject": c, "side": "right", "margin": self.margin}
                if rng.random() < 0.5:
                    u0, u1, m0, m1 = u1, u0, m1, m0
                cycles.append(self._cycle(u0, u1, m0, m1, strata=(c, c), rule=self.name, margin=self.margin))
        return cycles


@register_family(
    "coco",
    "category_count",
    predicate="""Template captions "exactly n A" (n = 1..3). Valid when the image has exactly n non-crowd
    instances of A and no crowd region of A. Both images contain A, in different exact counts, so each swap
    is false by count with the category present. Why: counting is pair-dependent (object presence is
    matched) and needs the several-instance images the "exactly one instance" rules of other families
    exclude.""",
)
class CategoryCount(CocoFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        strata: dict[str, dict[int, list[int]]] = {}
        for image_id in image_ids:
            objects = index.objects(image_id)
            for c in sorted(objects.categories):
                n = objects.count(c)
                if n is None:
                    self.exclude(exclusion_reason("matched", CROWD))
                elif 1 <= n <= 3:
                    strata.setdefault(c, {}).setdefault(n, []).append(image_id)
        uses, cycles = _Uses(), []
        for c in sorted(strata):
            for n0, n1 in ((1, 2), (2, 3), (1, 3)):
                for u0, u1 in _cross_pairs(strata[c].get(n0, []), strata[c].get(n1, []), rng, uses, lambda x: x):
                    m0 = {"kind": "count", "subject": c, "count": n0}
                    m1 = {"kind": "count", "subject": c, "count": n1}
                    cycles.append(self._cycle(u0, u1, m0, m1, strata=(c, c), rule=self.name))
        return cycles


@register_family(
    "coco",
    "supercategory_object",
    predicate="""Template captions "a picture with <supercategory phrase>" (e.g. "an animal"). Valid when some
    instance's category belongs to that COCO supercategory. Image 0 has supercategory S0 and not S1, image 1
    has S1 and not S0, so each swap is invalid by absence. Why: the coarsest object level, below
    coarse_object's category mentions; it locates where object evidence stops being enough.""",
)
class SupercategoryObject(CocoFamily):
    def build_cycles(self, index: CocoIndex, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        supers = {u: {index.supercategories[c] for c in index.objects(u).categories} for u in image_ids}
        chosen: dict[tuple[int, int], tuple[str, str]] = {}

        def ok(u0: int, u1: int) -> bool:
            only0, only1 = sorted(supers[u0] - supers[u1]), sorted(supers[u1] - supers[u0])
            if not only0 or not only1:
                return False
            chosen[(u0, u1)] = (only0[int(rng.integers(len(only0)))], only1[int(rng.integers(len(only1)))])
            return True

        cycles = []
        for u0, u1 in _greedy_pairs(sorted(supers), rng, _Uses(), lambda x: x, ok):
            s0, s1 = chosen[(u0, u1)]
            m0, m1 = {"kind": "supercategory", "supercategory": s0}, {"kind": "supercategory", "supercategory": s1}
            cycles.append(self._cycle(u0, u1, m0, m1, rule=self.name))
        return cycles


def coco_pools(index: CocoIndex, pool_train: int | None, pool_val: int | None) -> tuple[list[int], list[int]]:
    """The fixed image pools: ``pool_train`` of train2017 and ``pool_val`` of val2017 (images with objects)."""
    return (select_pool(index.image_ids("train2017"), pool_train), select_pool(index.image_ids("val2017"), pool_val))


def meaning_of(record_predicate: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two caption meanings stored in a row's ``predicate`` JSON."""
    data = json.loads(record_predicate)
    return data["caption_0"], data["caption_1"]
