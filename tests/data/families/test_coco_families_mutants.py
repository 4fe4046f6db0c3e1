"""COCO caption semantics on one image at a time, for the mutants the family tests leave alive.

Each test builds :class:`ImageObjects` by hand (a 200 x 100 image, so a width/height mix-up
shows) and asks the verdict functions directly; every expected verdict is worked out in the
comments from the numbers written here, by the module docstring's rules, never by the
module's own helpers. They run in well under a second, so the mutation run
(``benchmarks/mutation_score.py coco_families``) can afford them for every mutant.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from clip_cycles.data.families.coco import (
    ImageObjects,
    count_verdict,
    exclusion_reason,
    mentions_verdict,
    position_verdict,
    relation_verdict,
    supercategory_verdict,
)
from clip_cycles.data.families.registry import get_family

W, H = 200.0, 100.0  # margin 0.1: 20 px horizontally, 10 px vertically


def image(boxes: dict[str, list[tuple[float, float, float, float]]], crowd: tuple[str, ...] = ()) -> ImageObjects:
    return ImageObjects(W, H, {k: tuple(v) for k, v in boxes.items()}, frozenset(crowd))


def rel(subject: str, relation: str, obj: str, margin: float = 0.1, ratio: float = 1.5) -> dict:
    return {"kind": "relation", "subject": subject, "relation": relation, "object": obj, "margin": margin, "ratio": ratio}


def at(cx: float, cy: float, w: float = 10.0, h: float = 6.0) -> tuple[float, float, float, float]:
    """A box centred on (cx, cy)."""
    return (cx - w / 2, cy - h / 2, w, h)


INDEX = SimpleNamespace(supercategories={"dog": "animal", "cat": "animal", "car": "vehicle", "cup": "kitchen"})


def test_one_image_answers_both_readings_and_every_margin_without_mixing_them_up():
    # dog centre x 40, cat centre x 100: 60 px apart. By margin 0.1 (20 px) "dog left of cat" is true and
    # "cat left of dog" false; by margin 0.35 (70 px) neither holds. The same object is asked every
    # question in turn, so a memo keyed on the wrong fields, or storing the reverse reading unreversed,
    # answers one of them from the other.
    scene = image({"dog": [at(40, 50)], "cat": [at(100, 50)]})
    assert relation_verdict(scene, rel("dog", "to the left of", "cat")) == "true"
    assert relation_verdict(scene, rel("cat", "to the left of", "dog")) == "false"
    assert relation_verdict(scene, rel("cat", "to the right of", "dog")) == "true"
    assert relation_verdict(scene, rel("dog", "to the right of", "cat")) == "false"
    assert relation_verdict(scene, rel("dog", "to the left of", "cat", margin=0.35)) == "sub_margin"
    assert relation_verdict(scene, rel("cat", "to the right of", "dog", margin=0.35)) == "sub_margin"
    # Areas 60 and 60: neither larger at ratio 1.5, both "larger" at ratio 1 (>=, inclusive).
    assert relation_verdict(scene, rel("dog", "larger than", "cat")) == "sub_margin"
    assert relation_verdict(scene, rel("dog", "larger than", "cat", ratio=1.0)) == "true"
    assert relation_verdict(scene, rel("cat", "larger than", "dog", ratio=1.0)) == "true"


def test_absent_and_crowd_objects_decide_every_relation_the_same_way_in_both_readings():
    # cat absent: every relation of dog and cat is false, whichever is named first.
    lone = image({"dog": [at(40, 50)]})
    for relation in ("to the left of", "below", "smaller than"):
        assert relation_verdict(lone, rel("dog", relation, "cat")) == "false"
        assert relation_verdict(lone, rel("cat", relation, "dog")) == "false"
    # A crowd region of cats beside one boxed cat, and a crowd-only bus: undecided, in either reading.
    crowded = image({"dog": [at(40, 50)], "cat": [at(160, 50)]}, crowd=("cat", "bus"))
    for a, b in (("dog", "cat"), ("cat", "dog"), ("dog", "bus"), ("bus", "dog")):
        assert relation_verdict(crowded, rel(a, "to the left of", b)) == "crowd_uncertain_extent"


def test_instance_pairs_that_agree_disagree_or_fall_inside_the_margin():
    # Two dogs at x 20 and x 90, a cat at x 100: "dog left of cat" holds for the first pair (80 px) but not
    # the second (10 px < 20 px, inside the margin): instances disagree.
    mixed = image({"dog": [at(20, 50), at(90, 50)], "cat": [at(100, 50)]})
    assert relation_verdict(mixed, rel("dog", "to the left of", "cat")) == "multi_instance_ambiguous"
    # Dogs at x 20 and x 180, cat at x 100: one pair says left, the other right: disagree.
    split = image({"dog": [at(20, 50), at(180, 50)], "cat": [at(100, 50)]})
    assert relation_verdict(split, rel("dog", "to the left of", "cat")) == "multi_instance_ambiguous"
    # Dogs at x 95 and x 105, cat at x 100: every pair inside the margin.
    close = image({"dog": [at(95, 50), at(105, 50)], "cat": [at(100, 50)]})
    assert relation_verdict(close, rel("dog", "to the left of", "cat")) == "sub_margin"
    # Dogs at x 10 and x 30, cat at x 100: every pair left by >= 70 px; the reverse reading is false.
    both = image({"dog": [at(10, 50), at(30, 50)], "cat": [at(100, 50)]})
    assert relation_verdict(both, rel("dog", "to the left of", "cat")) == "true"
    assert relation_verdict(both, rel("cat", "to the left of", "dog")) == "false"
    assert relation_verdict(both, rel("dog", "to the right of", "cat")) == "false"


def test_position_of_absent_crowd_and_split_instances():
    # margin 0.1 of W = 200: left means centre x <= 80, right means x >= 120.
    assert position_verdict(image({}), {"subject": "car", "side": "left", "margin": 0.1}) == "false"
    crowd = image({"car": [at(20, 50)]}, crowd=("car",))
    assert position_verdict(crowd, {"subject": "car", "side": "left", "margin": 0.1}) == "crowd_uncertain_extent"
    sides = image({"car": [at(20, 50), at(180, 50)]})  # one on each side
    assert position_verdict(sides, {"subject": "car", "side": "left", "margin": 0.1}) == "multi_instance_ambiguous"
    both_left = image({"car": [at(20, 50), at(70, 50)]})
    assert position_verdict(both_left, {"subject": "car", "side": "left", "margin": 0.1}) == "true"
    assert position_verdict(both_left, {"subject": "car", "side": "right", "margin": 0.1}) == "false"
    # x = 90 is left of the centre but inside the band (90 > 80): undecided, not left.
    band = image({"car": [at(90, 50)]})
    assert position_verdict(band, {"subject": "car", "side": "left", "margin": 0.1}) == "sub_margin"
    assert position_verdict(band, {"subject": "car", "side": "left", "margin": 0.0}) == "true"


def test_count_mentions_and_supercategory_verdicts():
    scene = image({"dog": [at(20, 50), at(60, 50)], "car": [at(150, 50)]}, crowd=("cup",))
    assert count_verdict(scene, {"subject": "dog", "count": 2}) == "true"
    assert count_verdict(scene, {"subject": "dog", "count": 1}) == "false"
    assert count_verdict(scene, {"subject": "cat", "count": 1}) == "false"  # absent: zero instances
    assert count_verdict(scene, {"subject": "cup", "count": 1}) == "crowd_uncertain_extent"
    # A crowd region counts as presence for mentions and supercategories.
    assert mentions_verdict(scene, {"categories": ["dog", "cup"]}, INDEX) == "true"
    assert mentions_verdict(scene, {"categories": ["dog", "cat"]}, INDEX) == "false"
    assert mentions_verdict(scene, {"categories": ["cat"]}, INDEX) == "false"
    assert mentions_verdict(scene, {"categories": []}, INDEX) == "false"  # a caption naming nothing asserts nothing
    assert supercategory_verdict(scene, {"supercategory": "kitchen"}, INDEX) == "true"  # the crowd of cups
    assert supercategory_verdict(scene, {"supercategory": "vehicle"}, INDEX) == "true"
    assert supercategory_verdict(image({"dog": [at(20, 50)]}), {"supercategory": "vehicle"}, INDEX) == "false"


def test_image_objects_categories_unique_boxes_and_counts():
    scene = image({"dog": [at(20, 50)], "cat": [at(60, 50), at(90, 50)], "car": [at(150, 50)]}, crowd=("car", "cup"))
    assert scene.categories == {"dog", "cat", "car", "cup"}
    assert scene.unique == {"dog": at(20, 50)}  # cat has two boxes, car a crowd region too, cup no box
    assert [scene.count(n) for n in ("dog", "cat", "car", "cup", "bus")] == [1, 2, None, None, 0]


@pytest.mark.parametrize(
    "role, verdict, key",
    [
        ("matched", "multi_instance_ambiguous", "matched_not_all_instances"),
        ("swap", "multi_instance_ambiguous", "swap_multi_instance_ambiguous"),
        ("swap", "true", "swap_true"),
        ("matched", "sub_margin", "matched_sub_margin"),
        ("swap", "crowd_uncertain_extent", "swap_crowd_uncertain_extent"),
    ],
)
def test_exclusion_reasons_are_the_build_info_keys(role, verdict, key):
    assert exclusion_reason(role, verdict) == key


def test_family_verdict_and_holds_read_every_kind_through_the_index():
    scene = image({"dog": [at(20, 50)], "cat": [at(180, 50)]})
    index = SimpleNamespace(objects=lambda image_id: scene, supercategories=INDEX.supercategories)
    family = get_family("coco", "object_position")
    cases = [
        ({"kind": "position", "subject": "dog", "side": "left", "margin": 0.1}, "true"),
        ({"kind": "position", "subject": "cat", "side": "left", "margin": 0.1}, "false"),
        ({"kind": "count", "subject": "dog", "count": 1}, "true"),
        ({"kind": "count", "subject": "dog", "count": 2}, "false"),
        ({"kind": "mentions", "categories": ["cat", "dog"]}, "true"),
        ({"kind": "supercategory", "supercategory": "vehicle"}, "false"),
        ({**rel("dog", "to the left of", "cat"), "kind": "relation"}, "true"),
        ({**rel("cat", "to the left of", "dog"), "kind": "relation"}, "false"),
    ]
    for meaning, expected in cases:
        assert family.verdict(index, 7, meaning) == expected, meaning
        assert family.holds(index, 7, meaning) is (expected == "true"), meaning
