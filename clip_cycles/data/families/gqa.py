"""GQA cycle families: attribute, relation and binding cycles from scene graphs.

Every family here follows one scheme. From each image's scene graph it reads at most one
*statement* per *group* (e.g. group ``("car",)`` of ``attribute_color`` with value
``"red"``); two images of the same group with different values form a candidate cycle,
kept only when the family's strict compatibility rule holds (e.g. the other image's
object name is absent). Candidates are indexed by group key, never compared pairwise
across all images, and paired greedily within a group (largest value buckets first,
order drawn from the split's generator), each image at most once per group.

Captions state a *meaning* (a JSON object); ``holds(index, image_id, meaning)`` reads
the truth of a meaning from the raw scene graph alone, so the build-time and
``clip-cycles audit`` validity checks do not trust the construction. ``verdict`` says
more: ``"true"``, ``"false"`` (false beyond doubt) or why the caption is undecided. A
swapped caption must be false beyond doubt: a named object is absent, or EVERY instance
of the named object carries a different value of the attribute type (a value of one type
excludes the others), or, for a spatial relation, every instance pair is annotated with
the opposite direction. A matched spatial relation holds for every instance pair (the
same rule as ``clip-cycles audit``). A missing edge or a missing attribute in a sparse scene graph is
never falsity. Candidates rejected on these grounds are counted per reason
(``excluded`` in build_info.json).

Families (predicates in words are in the registration calls below):

- ``attribute_color``, ``attribute_material``, ``attribute_size``: one object name,
  two mutually exclusive values of one attribute type ("a red car" / "a blue car").
- ``relation_object``: same subject and relation, different object ("a man holding a
  cup" / "a man holding a phone"); the swapped object name is absent from the image.
- ``relation_subject``: same relation and object, different subject ("a man riding a
  horse" / "a woman riding a horse"); the swapped subject name is absent.
- ``relation_spatial``: same subject and object, opposite spatial relations ("a cup to
  the left of a plate" / "a cup to the right of a plate").
- ``binding``: two objects whose values of one attribute type are exchanged between
  the images ("a red cube and a blue ball" / "a blue cube and a red ball").

Why these seven: paper 1 names attribute, relation/object and binding families and a
transfer study over 7 available GQA families without listing them. Attributes split by
type because colour, material and size are different visual signals (and need separate
mutual-exclusion tables); relations split by which argument changes (object, subject)
and add the direction-only spatial family, the GQA counterpart of COCO's strict
relations, where both objects are present in both images. Each swap is false for a
reason the annotations can certify (exclusive values, an absent name, an opposite
direction), never merely because an edge is missing from a sparse scene graph.
Another family is one more registered class.

Pools (REFERENCE.md, paper 1: 8,000 images, about 4,800 / 800 / 2,400): a fixed pool
of 5,600 images from ``train_sceneGraphs.json`` split per seed into train/validation
with validation fraction 1/7 (4,800 / 800), and a fixed pool of 2,400 images from
``val_sceneGraphs.json`` for test (the layout of the COCO builder: train/validation from
the train file, test from the val file). Pools are drawn from the images that pass
validation (:mod:`clip_cycles.data.sources.scene_graphs`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
from tqdm.auto import tqdm

from clip_cycles.data.families.build_config import GQA_POOL_TEST, GQA_POOL_TRAIN, BuildConfig
from clip_cycles.data.families.build_config import GQA_VALIDATION_FRACTION as GQA_VALIDATION_FRACTION
from clip_cycles.data.families.registry import (
    Cycle,
    Family,
    FamilyBuild,
    build_families,
    list_families,
    parallel_map,
    register_family,
    register_index_loader,
    select_pool,
)
from clip_cycles.data.sources.scene_graphs import (
    SceneGraph,
    SceneObject,
    gqa_int_id,
    load_gqa_scene_graphs,
)
from clip_cycles.fingerprints import canonical_json
from clip_cycles.verbosity import progress_disable

#: Paper 1's GQA pool: 4,800 train + 800 validation images from the train file ...
DEFAULT_POOL_TRAIN: int = GQA_POOL_TRAIN
#: ... and 2,400 test images from the val file (800 of the 5,600 train-pool images go to
#: validation per seed: ``GQA_VALIDATION_FRACTION``, declared with the other build defaults).
DEFAULT_POOL_TEST: int = GQA_POOL_TEST

#: A greedy pairing step looks for a compatible partner among the last MAX_PARTNER_TRIES
#: candidates of each of the MAX_PARTNER_BUCKETS largest other value buckets, then gives
#: up on the image; this bounds the work per image (no pairwise loop over a group).
MAX_PARTNER_TRIES: int = 16
MAX_PARTNER_BUCKETS: int = 8

#: Attribute types as data: raw GQA attribute -> canonical value. Values of one type are
#: treated as mutually exclusive; synonyms map to one value so "big" and "large" never
#: form a cycle. Attributes outside these tables are ignored by the attribute families.
ATTRIBUTE_TYPES: dict[str, dict[str, str]] = {
    "color": {
        **{
            c: c
            for c in (
                "white",
                "black",
                "blue",
                "green",
                "red",
                "brown",
                "yellow",
                "gray",
                "orange",
                "pink",
                "purple",
                "silver",
                "gold",
                "beige",
                "tan",
                "maroon",
                "cyan",
                "magenta",
            )
        },
        "grey": "gray",
        "golden": "gold",
    },
    "material": {
        **{
            m: m
            for m in (
                "metal",
                "wooden",
                "plastic",
                "glass",
                "concrete",
                "brick",
                "stone",
                "leather",
                "rubber",
                "paper",
                "ceramic",
                "cloth",
            )
        },
        "wood": "wooden",
        "metallic": "metal",
        "cement": "concrete",
    },
    "size": {
        "large": "large",
        "big": "large",
        "huge": "large",
        "giant": "large",
        "small": "small",
        "little": "small",
        "tiny": "small",
    },
}

#: Spatial relations whose two directions exclude each other (GQA relation names).
SPATIAL_OPPOSITES: dict[str, str] = {
    "to the left of": "to the right of",
    "to the right of": "to the left of",
    "above": "below",
    "below": "above",
    "in front of": "behind",
    "behind": "in front of",
}


# --------------------------------------------------------------------------- index


@dataclass
class GqaIndex:
    """Validated scene graphs of both GQA files, keyed by the int64 image id of the rows."""

    root: Path
    graphs: dict[int, SceneGraph]
    split_of: dict[int, str]
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    source: str = "gqa"
    #: Per-image facts of the families (candidate statements), shared by every seed and split.
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    def file_name(self, image_id: int) -> str:
        """Image file relative to the GQA root (``images/<id>.jpg`` or the entry's ``file_name``)."""
        return self.graph(image_id).file_name

    def graph(self, image_id: int) -> SceneGraph:
        """The scene graph of an image; a clear error when the id is unknown."""
        try:
            return self.graphs[int(image_id)]
        except KeyError:
            raise ValueError(f"GQA image id {image_id} is not in the scene graphs under {self.root}") from None

    def ids_of(self, split: str) -> list[int]:
        """Sorted ids of the valid images of one source file (``train`` or ``val``)."""
        return sorted(i for i, s in self.split_of.items() if s == split)


@register_index_loader("gqa")
def load_gqa_index(root: str | Path) -> GqaIndex:
    """Load and validate ``train_sceneGraphs.json`` and ``val_sceneGraphs.json`` under ``root``."""
    root = Path(root).resolve()
    files = load_gqa_scene_graphs(root)
    graphs: dict[int, SceneGraph] = {}
    split_of: dict[int, str] = {}
    skipped: Counter = Counter()
    repaired: Counter = Counter()
    for split, loaded in files.items():
        skipped.update({f"{split}:{k}": v for k, v in loaded.skipped.items()})
        repaired.update({f"{split}:{k}": v for k, v in loaded.repaired.items()})
        for image_id, graph in loaded.graphs.items():
            key = gqa_int_id(image_id)
            if key in graphs:
                raise ValueError(
                    f"{loaded.path}: image ids {image_id!r} and {graphs[key].image_id!r} map to the same "
                    f"int64 id {key}; rename one (leading zeros are not allowed to differ)"
                )
            graphs[key] = graph
            split_of[key] = split
    return GqaIndex(root=root, graphs=graphs, split_of=split_of, skipped=skipped, repaired=repaired)


# --------------------------------------------------------------------------- helpers


def attribute_values(obj: SceneObject, attribute_type: str) -> set[str]:
    """Canonical values of one attribute type that an object carries."""
    table = ATTRIBUTE_TYPES[attribute_type]
    return {table[a] for a in obj.attributes if a in table}


def _single_value(obj: SceneObject, attribute_type: str) -> str | None:
    values = attribute_values(obj, attribute_type)
    return next(iter(values)) if len(values) == 1 else None


def noun_phrase(name: str, modifier: str = "") -> str:
    """``a red car``, ``an orange cup``, ``glasses`` (plural-looking names take no article)."""
    words = f"{modifier} {name}".strip()
    if name.endswith("s") and not name.endswith(("ss", "us", "is")):
        return words
    return ("an " if words[0] in "aeiou" else "a ") + words


def _has_named_relation(graph: SceneGraph, subject: str, relation: str, obj: str) -> bool:
    return any(
        o.name == subject and r == relation and graph.object(target).name == obj
        for o in graph.objects
        for r, target in o.relations
    )


# --------------------------------------------------------------------------- generic family


class Excluded(NamedTuple):
    """A candidate an image would offer but the family rule rejects (counted, never paired)."""

    reason: str


class Statement(NamedTuple):
    """What one image offers a family: a group key, a value, its meaning and details."""

    group: tuple[str, ...]
    value: str
    meaning: Mapping[str, Any]
    details: Mapping[str, Any]


class GqaFamily(Family):
    """Statements per image, grouped and paired; subclasses define the four hooks."""

    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        """At most one statement per group for this image; ambiguous groups yield an
        :class:`Excluded` with the reason instead."""
        raise NotImplementedError

    #: Reason counted when a candidate partner is rejected by ``compatible``.
    incompatible_reason: str = "swap_not_false_beyond_doubt"

    def caption(self, meaning: Mapping[str, Any]) -> str:
        """The caption text of a meaning (deterministic, so the audit can re-render it)."""
        raise NotImplementedError

    def compatible(self, graph_a: SceneGraph, a: Statement, graph_b: SceneGraph, b: Statement) -> bool:
        """Extra strictness beyond ``holds`` for a candidate pair (default: none)."""
        return True

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def caption_matches(self, index: Any, caption: str, meaning: Mapping[str, Any]) -> bool:
        return caption == self.caption(meaning)

    def prepare(self, index: Any, pools: Mapping[str, Sequence[int]]) -> None:
        """Candidate indexing: every pool image's statements, once for all seeds and splits
        (on ``--num-proc`` processes; a pure function of the scene graph, so order-free)."""
        memo = getattr(index, "memo", None)
        if memo is None:
            return
        ids = [i for i in sorted({int(i) for pool in pools.values() for i in pool}) if ("statements", self.name, i) not in memo]
        found = parallel_map(
            lambda image_id: list(self.statements(index.graph(image_id))), ids, chunk_size=64, processes=self.config.num_proc
        )
        for image_id, statements in zip(ids, found):
            memo[("statements", self.name, image_id)] = statements

    def build_cycles(self, index: Any, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        groups: dict[tuple[str, ...], dict[str, list[tuple[int, SceneGraph, Statement]]]] = {}
        memo = getattr(index, "memo", {})
        for image_id in sorted(image_ids):
            graph = index.graph(image_id)
            known = memo.get(("statements", self.name, int(image_id)))
            for st in self.statements(graph) if known is None else known:
                if isinstance(st, Excluded):
                    self.exclude(st.reason)
                    continue
                groups.setdefault(st.group, {}).setdefault(st.value, []).append((image_id, graph, st))
        cycles: list[Cycle] = []
        pairable = sorted(key for key, buckets in groups.items() if len(buckets) >= 2)
        for key in tqdm(pairable, desc=f"gqa {self.name}", disable=progress_disable(), leave=False):
            cycles.extend(self._pair_group(groups[key], rng))
        order = rng.permutation(len(cycles)) if cycles else np.zeros(0, dtype=int)
        return [cycles[i] for i in order.tolist()]

    def _pair_group(self, buckets: dict[str, list[tuple[int, SceneGraph, Statement]]], rng: np.random.Generator) -> list[Cycle]:
        """Greedy pairing across value buckets, largest bucket first (a maximum matching when
        every pair is compatible); a max-heap of (size, value) keeps each step O(log k)."""
        pools = {}
        for value in sorted(buckets):
            entries = buckets[value]
            pools[value] = [entries[i] for i in rng.permutation(len(entries)).tolist()]
        heap = [(-len(pool), value) for value, pool in pools.items()]
        heapq.heapify(heap)
        cycles = []
        while len(heap) >= 2:
            _, value_a = heapq.heappop(heap)
            entry_a = pools[value_a].pop()
            partner, tried = None, []
            while heap and len(tried) < MAX_PARTNER_BUCKETS and partner is None:
                _, value_b = heapq.heappop(heap)
                tried.append(value_b)
                pool = pools[value_b]
                for j in range(len(pool) - 1, max(len(pool) - 1 - MAX_PARTNER_TRIES, -1), -1):
                    entry_b = pool[j]
                    if self.compatible(entry_a[1], entry_a[2], entry_b[1], entry_b[2]) and self.compatible(
                        entry_b[1], entry_b[2], entry_a[1], entry_a[2]
                    ):
                        partner = pool.pop(j)
                        break
                    self.exclude(self.incompatible_reason)  # a candidate pairing, rejected
            for value in (value_a, *tried):
                if pools[value]:
                    heapq.heappush(heap, (-len(pools[value]), value))
            if partner is None:
                continue  # no compatible partner within the bounded search: the image stays unpaired here
            first, second = (entry_a, partner) if rng.random() < 0.5 else (partner, entry_a)
            cycles.append(self._cycle(first, second))
        return cycles

    def _cycle(self, first: tuple[int, SceneGraph, Statement], second: tuple[int, SceneGraph, Statement]) -> Cycle:
        (id0, graph0, s0), (id1, graph1, s1) = first, second
        details = {
            "gqa_image_id_0": graph0.image_id,
            "gqa_image_id_1": graph1.image_id,
            "image_0": dict(s0.details),
            "image_1": dict(s1.details),
        }
        return Cycle(
            image_id_0=id0,
            image_id_1=id1,
            caption_0=self.caption(s0.meaning),
            caption_1=self.caption(s1.meaning),
            meaning_0=canonical_json(dict(s0.meaning)),
            meaning_1=canonical_json(dict(s1.meaning)),
            details=canonical_json(details),
            stratum_0=_stratum(s0.group),
            stratum_1=_stratum(s1.group),
        )


def _stratum(group: tuple[str, ...]) -> str:
    """The candidate stratum of a statement: its group key (both pairs of a cycle share it)."""
    return "|".join(group)


def attribute_verdict(graph: SceneGraph, name: str, attribute_type: str, value: str) -> str:
    """'a <value> <name>': true when some <name> carries the value; false when no <name> is in the
    image or EVERY <name> carries another value of the type (values of a type exclude each
    other); otherwise undecided (some <name> has no value of the type annotated)."""
    instances = [o for o in graph.objects if o.name == name]
    if not instances:
        return "false"
    values = [attribute_values(o, attribute_type) for o in instances]
    if any(value in v for v in values):
        return "true"
    if all(v for v in values):
        return "false"
    return "attribute_unannotated"


def relation_verdict(graph: SceneGraph, subject: str, relation: str, obj: str) -> str:
    """'<subject> <relation> <object>' from the scene graph alone.

    False when a named object is absent. A spatial relation (opposite pairs in
    ``SPATIAL_OPPOSITES``) is true when EVERY (subject, object) instance pair is annotated
    with it (the edge, or the opposite edge the other way), false when every pair is
    annotated with the opposite; pairs that disagree are ``multi_instance_ambiguous`` and a
    pair annotated both ways ``contradictory_annotation``. Other relations are true when
    an edge says so. Anything else is ``relation_unannotated`` (a missing edge is not falsity).
    """
    subjects = [o for o in graph.objects if o.name == subject]
    objects = [o for o in graph.objects if o.name == obj]
    if not subjects or not objects:
        return "false"
    opposite = SPATIAL_OPPOSITES.get(relation)
    if opposite is None:
        return "true" if _has_named_relation(graph, subject, relation, obj) else "relation_unannotated"
    pairs = [(s_, o_) for s_ in subjects for o_ in objects if s_.object_id != o_.object_id]
    stated = [(relation, o_.object_id) in s_.relations or (opposite, s_.object_id) in o_.relations for s_, o_ in pairs]
    against = [(opposite, o_.object_id) in s_.relations or (relation, s_.object_id) in o_.relations for s_, o_ in pairs]
    if any(x and y for x, y in zip(stated, against)):
        return "contradictory_annotation"
    if pairs and all(stated):
        return "true"
    if pairs and all(against):
        return "false"
    if any(stated) or any(against):
        return "multi_instance_ambiguous"
    return "relation_unannotated"


def _box(obj: SceneObject) -> list[float]:
    return [obj.x, obj.y, obj.w, obj.h]


# --------------------------------------------------------------------------- attribute families


class AttributeFamily(GqaFamily):
    """One object name, two values of ``attribute_type``."""

    attribute_type = ""

    incompatible_reason = "swap_not_false_beyond_doubt"

    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        multi: set[str] = set()
        for obj in graph.objects:
            values = attribute_values(obj, self.attribute_type)
            if graph.name_counts[obj.name] != 1:
                if values and obj.name not in multi:
                    multi.add(obj.name)  # several <name>: which one is meant is ambiguous
                    yield Excluded("matched_multi_instance_ambiguous")
                continue
            if len(values) > 1:
                yield Excluded("matched_several_values")
                continue
            if not values:
                continue
            (value,) = values
            meaning = {"object": obj.name, "type": self.attribute_type, "value": value}
            details = {"object_id": obj.object_id, "box": _box(obj), "attributes": list(obj.attributes)}
            yield Statement((obj.name,), value, meaning, details)

    def caption(self, meaning: Mapping[str, Any]) -> str:
        return noun_phrase(meaning["object"], meaning["value"])

    def verdict(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> str:
        return attribute_verdict(index.graph(image_id), meaning["object"], meaning["type"], meaning["value"])

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        graph = index.graph(image_id)
        return any(
            o.name == meaning["object"] and meaning["value"] in attribute_values(o, meaning["type"]) for o in graph.objects
        )


_ATTRIBUTE_PREDICATE = (
    "Caption 'a <value> <name>' is valid for an image when some object named <name> carries "
    "<value> ({type} attribute; synonyms mapped to one canonical value: {synonyms}). A cycle "
    "pairs two images that each contain EXACTLY ONE object named <name> whose {type} "
    "attributes map to exactly one canonical value, and the two values differ. The swap is "
    "invalid because the image's only <name> has the other {type} and values of one type "
    "exclude each other. Images with two or more <name> objects, or with zero or several "
    "{type} values on it, are ambiguous and never used for that name."
)


def _synonyms(attribute_type: str) -> str:
    pairs = [f"{raw}->{value}" for raw, value in sorted(ATTRIBUTE_TYPES[attribute_type].items()) if raw != value]
    return ", ".join(pairs) or "none"


for _type in ("color", "material", "size"):
    _cls = type(f"Attribute{_type.title()}", (AttributeFamily,), {"attribute_type": _type})
    register_family("gqa", f"attribute_{_type}", _ATTRIBUTE_PREDICATE.format(type=_type, synonyms=_synonyms(_type)))(_cls)


# --------------------------------------------------------------------------- relation families


def _relation_caption(meaning: Mapping[str, Any]) -> str:
    return f"{noun_phrase(meaning['subject'])} {meaning['relation']} {noun_phrase(meaning['object'])}"


def _relation_holds(index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
    return relation_verdict(index.graph(image_id), meaning["subject"], meaning["relation"], meaning["object"]) == "true"


def _matched_exclusion(graph: SceneGraph, meaning: Mapping[str, Any]) -> Excluded | None:
    """Why a candidate's own caption is not true for every instance pair (spatial relations), or None."""
    verdict = relation_verdict(graph, meaning["subject"], meaning["relation"], meaning["object"])
    if verdict == "true":
        return None
    return Excluded("matched_contradictory_annotation" if verdict == "contradictory_annotation" else "matched_not_all_instances")


class _RelationArgumentFamily(GqaFamily):
    """Relation families whose swap is false because the swapped argument's name is absent."""

    def caption(self, meaning: Mapping[str, Any]) -> str:
        return _relation_caption(meaning)

    #: The swapped argument's name is in the image without the edge: a sparse graph, not falsity.
    incompatible_reason = "swap_relation_unannotated"

    def compatible(self, graph_a: SceneGraph, a: Statement, graph_b: SceneGraph, b: Statement) -> bool:
        return graph_a.name_counts.get(b.value, 0) == 0

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        return _relation_holds(index, image_id, meaning)

    def verdict(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> str:
        return relation_verdict(index.graph(image_id), meaning["subject"], meaning["relation"], meaning["object"])


@register_family(
    "gqa",
    "relation_object",
    "Caption '<subject> <relation> <object>' is valid for an image when its scene graph has "
    "an object named <subject> with relation <relation> to an object named <object>. A cycle "
    "pairs two images with the same <subject> and <relation> and different objects o1, o2: "
    "each image has EXACTLY ONE <subject>, whose <relation> edges all point to objects of one "
    "single name (o1 in image 0, o2 in image 1, o1 != subject name); a spatial <relation> must "
    "be annotated towards EVERY object named o1 (o2). Strict swap rule: image 0 "
    "contains NO object named o2 and image 1 none named o1, so the swapped triple is false "
    "even where GQA's relation annotation is incomplete (absence of an edge alone is never "
    "taken as falsity).",
)
class RelationObject(_RelationArgumentFamily):
    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        multi = {(o.name, r) for o in graph.objects if graph.name_counts[o.name] > 1 for r, _ in o.relations}
        for _ in sorted(multi):
            yield Excluded("matched_multi_instance_ambiguous")  # several subjects of that name
        for subject in graph.unique_objects():
            for relation in sorted({r for r, _ in subject.relations}):
                names = graph.related_names(subject, relation)
                if len(names) != 1:
                    yield Excluded("matched_several_objects")
                    continue
                (obj,) = names
                if obj == subject.name:
                    continue
                meaning = {"subject": subject.name, "relation": relation, "object": obj}
                # A spatial relation must hold towards every instance of the object name, not one.
                excluded = _matched_exclusion(graph, meaning)
                if excluded is not None:
                    yield excluded
                    continue
                details = {"subject_id": subject.object_id, "subject_box": _box(subject)}
                yield Statement((subject.name, relation), obj, meaning, details)


@register_family(
    "gqa",
    "relation_subject",
    "Caption '<subject> <relation> <object>' is valid for an image when its scene graph has "
    "an object named <subject> with relation <relation> to an object named <object>. A cycle "
    "pairs two images with the same <relation> and <object> and different subjects s1, s2: "
    "each image has EXACTLY ONE <object>, and the objects with a <relation> edge to it all "
    "share one single name (s1 in image 0, s2 in image 1, != object name); a spatial <relation> "
    "must be annotated for EVERY object named s1 (s2). Strict swap rule: "
    "image 0 contains NO object named s2 and image 1 none named s1.",
)
class RelationSubject(_RelationArgumentFamily):
    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        sources: dict[tuple[str, str], set[str]] = {}
        for subject in graph.objects:
            for relation, target in subject.relations:
                sources.setdefault((target, relation), set()).add(subject.name)
        for (target_id, relation), names in sorted(sources.items()):
            target = graph.object(target_id)
            if graph.name_counts[target.name] != 1:
                yield Excluded("matched_multi_instance_ambiguous")
                continue
            if len(names) != 1:
                yield Excluded("matched_several_subjects")
                continue
            (subject,) = names
            if subject == target.name:
                continue
            meaning = {"subject": subject, "relation": relation, "object": target.name}
            # A spatial relation must hold for every instance of the subject name, not one.
            excluded = _matched_exclusion(graph, meaning)
            if excluded is not None:
                yield excluded
                continue
            details = {"object_id": target.object_id, "object_box": _box(target)}
            yield Statement((relation, target.name), subject, meaning, details)


@register_family(
    "gqa",
    "relation_spatial",
    "Caption '<subject> <relation> <object>' with <relation> one of the opposite spatial pairs "
    "to the left of/to the right of, above/below, in front of/behind is valid for an image when "
    "its scene graph has an object named <subject> with that relation to an object named "
    "<object>. A cycle pairs two images each with EXACTLY ONE <subject> and EXACTLY ONE "
    "<object> (different names), where image 0 has the relation r and image 1 its opposite, "
    "and neither image also has the opposite edge subject->object nor the same edge "
    "object->subject (contradictory annotations are ambiguous and excluded). The swap is "
    "invalid because opposite directions exclude each other; both objects are present in "
    "both images, so object presence does not decide the swap.",
)
class RelationSpatial(GqaFamily):
    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        seen: set[tuple[str, str, str]] = set()
        for subject in graph.objects:
            for relation, target_id in subject.relations:
                if relation not in SPATIAL_OPPOSITES:
                    continue
                target = graph.object(target_id)
                if target.name == subject.name:
                    continue
                if graph.name_counts[subject.name] != 1 or graph.name_counts[target.name] != 1:
                    yield Excluded("matched_multi_instance_ambiguous")
                    continue
                opposite = SPATIAL_OPPOSITES[relation]
                if (opposite, target_id) in subject.relations or (relation, subject.object_id) in target.relations:
                    yield Excluded("matched_contradictory_annotation")
                    continue
                axis = min(relation, opposite)
                key = (subject.name, axis, target.name)
                if key in seen:
                    continue
                seen.add(key)
                meaning = {"subject": subject.name, "relation": relation, "object": target.name}
                details = {
                    "subject_id": subject.object_id,
                    "object_id": target.object_id,
                    "subject_box": _box(subject),
                    "object_box": _box(target),
                }
                yield Statement(key, relation, meaning, details)

    def caption(self, meaning: Mapping[str, Any]) -> str:
        return _relation_caption(meaning)

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        return _relation_holds(index, image_id, meaning)

    def verdict(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> str:
        return relation_verdict(index.graph(image_id), meaning["subject"], meaning["relation"], meaning["object"])


# --------------------------------------------------------------------------- binding


@register_family(
    "gqa",
    "binding",
    "Caption 'a <v1> <A> and a <v2> <B>' is valid for an image when some object named <A> "
    "carries <v1> and some object named <B> carries <v2> (canonical values of one attribute "
    "type: color, material or size). A cycle pairs two images that each have EXACTLY ONE <A> "
    "and EXACTLY ONE <B> (A != B, A before B alphabetically), each with exactly one canonical "
    "value of the type, with the values exchanged: image 0 has <A> v1 and <B> v2, image 1 has "
    "<A> v2 and <B> v1, v1 != v2. Both images contain both objects and both values, so only "
    "the binding of value to object decides the swap, which is invalid because each object's "
    "single value of the type excludes the other.",
)
class Binding(GqaFamily):
    def verdict(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> str:
        """True when both bindings hold; false when one named object is absent or every instance of
        it carries another value of the type; otherwise undecided."""
        graph = index.graph(image_id)
        verdicts = [attribute_verdict(graph, name, meaning["type"], value) for name, value in meaning["objects"]]
        if "false" in verdicts:
            return "false"
        if all(v == "true" for v in verdicts):
            return "true"
        return next(v for v in verdicts if v != "true")

    def statements(self, graph: SceneGraph) -> Iterator[Statement | Excluded]:
        unique = sorted(graph.unique_objects(), key=lambda o: o.name)
        for attribute_type in ATTRIBUTE_TYPES:
            valued = [(o, v) for o in unique if (v := _single_value(o, attribute_type)) is not None]
            for i, (first, value_a) in enumerate(valued):
                for second, value_b in valued[i + 1 :]:
                    if value_a == value_b:
                        continue
                    low, high = sorted((value_a, value_b))
                    meaning = {
                        "type": attribute_type,
                        "objects": [[first.name, value_a], [second.name, value_b]],
                    }
                    details = {"object_ids": [first.object_id, second.object_id]}
                    # The group fixes the two names and the unordered value pair; the value
                    # says which object has the lower value, so buckets are the two bindings.
                    group = (attribute_type, first.name, second.name, low, high)
                    yield Statement(group, first.name if value_a == low else second.name, meaning, details)

    def caption(self, meaning: Mapping[str, Any]) -> str:
        (name_a, value_a), (name_b, value_b) = meaning["objects"]
        return f"{noun_phrase(name_a, value_a)} and {noun_phrase(name_b, value_b)}"

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        graph = index.graph(image_id)
        return all(
            any(o.name == name and value in attribute_values(o, meaning["type"]) for o in graph.objects)
            for name, value in meaning["objects"]
        )


# --------------------------------------------------------------------------- building


def gqa_pools(
    index: GqaIndex, pool_train: int | None = DEFAULT_POOL_TRAIN, pool_test: int | None = DEFAULT_POOL_TEST
) -> tuple[list[int], list[int]]:
    """The fixed train pool (from the train file) and test pool (from the val file)."""
    return select_pool(index.ids_of("train"), pool_train), select_pool(index.ids_of("val"), pool_test)


def gqa_build_inputs(
    gqa_root: str | Path, pool_train: int | None, pool_test: int | None
) -> tuple[GqaIndex, list[int], list[int]]:
    index = load_gqa_index(gqa_root)
    train_pool, val_pool = gqa_pools(index, pool_train, pool_test)
    if not train_pool or not val_pool:
        missing = "train_sceneGraphs.json" if not train_pool else "val_sceneGraphs.json"
        raise ValueError(f"GQA root {index.root}: no valid images in {missing} (skipped: {dict(index.skipped)})")
    return index, train_pool, val_pool


def pool_facts(
    index: GqaIndex,
    pool_train: int | None,
    pool_test: int | None,
    train_pool: Sequence[int],
    val_pool: Sequence[int],
    validation_fraction: float,
) -> dict[str, Any]:
    return {
        "pool_train_requested": pool_train,
        "pool_test_requested": pool_test,
        "pool_train": len(train_pool),
        "pool_test": len(val_pool),
        "validation_fraction": validation_fraction,
        "skipped": dict(sorted(index.skipped.items())),
        "repaired": dict(sorted(index.repaired.items())),
    }


def build_gqa_families(
    gqa_root: str | Path,
    families: Sequence[str] | None = None,
    *,
    config: BuildConfig | None = None,
    progress: bool | None = None,
    **settings: Any,
) -> tuple[GqaIndex, list[FamilyBuild], dict[str, Any]]:
    """Load, pool, split, build and audit GQA families in memory (no files written).

    ``config`` (or ``settings``, the :class:`~clip_cycles.data.families.build_config.BuildConfig` fields,
    over GQA's defaults; ``pool_test`` is the config's ``pool_val``) holds seeds, pools,
    minimum cycles and validation fraction. Returns the index, one :class:`FamilyBuild` per
    family (unavailable ones carry a reason), and facts for ``build_info.json``:
    ``pool_train_requested``, ``pool_test_requested``, ``pool_train``, ``pool_test`` (actual
    sizes), ``validation_fraction``, ``skipped`` and ``repaired`` (scene-graph validation counts).
    """
    config = gqa_config(config, families=families, **settings)
    families, pool_train, pool_test = config.families, config.pool_train, config.pool_val
    validation_fraction = config.validation_fraction
    names = list(families) if families else list_families("gqa")
    index, train_pool, val_pool = gqa_build_inputs(gqa_root, pool_train, pool_test)
    builds = build_families(index, names, train_pool, val_pool, config, progress=progress)
    return index, builds, pool_facts(index, pool_train, pool_test, train_pool, val_pool, validation_fraction)


def gqa_config(config: BuildConfig | None = None, **settings: Any) -> BuildConfig:
    """``config`` with ``settings`` over it, or GQA's defaults with ``settings`` (``pool_test`` names ``pool_val``)."""
    if "pool_test" in settings:
        settings["pool_val"] = settings.pop("pool_test")
    settings = {name: value for name, value in settings.items() if name != "families" or value is not None}
    if config is None:
        return BuildConfig.for_source("gqa", **settings)
    return config.replace(**settings) if settings else config
