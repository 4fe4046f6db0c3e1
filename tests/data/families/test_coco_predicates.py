"""COCO caption semantics at their boundaries, checked against the module docstring's rules by hand.

Boxes are chosen so that every inequality of the stated rules holds with equality (the
rules are inclusive: ``>=``, ``<=``), the image is not square (a width/height mix-up
shows) and boxes are not square (a w/h mix-up in centres or areas shows). Every
expected verdict below is worked out in the comments from the raw numbers.
"""

from __future__ import annotations

from types import SimpleNamespace

from clip_cycles.data.families.build_config import BuildConfig
from clip_cycles.data.families.coco import ImageObjects, position_verdict, relation_verdict
from clip_cycles.data.families.registry import get_family

W, H = 200.0, 100.0  # margin 0.25: 50 px horizontally, 25 px vertically


def objects(boxes: dict[str, list[tuple[float, float, float, float]]], crowd: tuple[str, ...] = ()) -> ImageObjects:
    return ImageObjects(W, H, {k: tuple(v) for k, v in boxes.items()}, frozenset(crowd))


def rel(subject: str, relation: str, obj: str, **extra: float) -> dict:
    return {"kind": "relation", "subject": subject, "relation": relation, "object": obj, **extra}


# dog (0, 0, 20, 20): centre (10, 10). cat (40, 35, 40, 20): centre (60, 45).
# cx_cat - cx_dog = 50 = 0.25 W exactly. A centre at x + w/3 puts them at 6.7 and 53.3 (46.7 < 50), one at
# x + h/2 at 10 and 50 (40 < 50): sub-margin either way.
SIDE_BY_SIDE = {"dog": [(0.0, 0.0, 20.0, 20.0)], "cat": [(40.0, 35.0, 40.0, 20.0)]}
# dog (0, 0, 20, 20): centre (10, 10); cat (150, 5, 20, 60): centre (160, 35): 25 px lower = 0.25 H exactly.
# With y + h/3 the dog sits at 6.7 and the cat at 25: 18.3 < 25, sub-margin.
ABOVE_BELOW = {"dog": [(0.0, 0.0, 20.0, 20.0)], "cat": [(150.0, 5.0, 20.0, 60.0)]}


def verdict(boxes: dict, meaning: dict) -> str:
    """A fresh image per question: the verdicts are memoised per image, so the caption's own subject is
    the first argument of the computation (each direction's inequality is then met at its boundary)."""
    return relation_verdict(objects(boxes), meaning)


def test_spatial_relations_hold_at_exactly_the_margin_both_ways():
    for boxes, first, second in ((SIDE_BY_SIDE, "to the left of", "to the right of"), (ABOVE_BELOW, "above", "below")):
        assert verdict(boxes, rel("dog", first, "cat", margin=0.25)) == "true"
        assert verdict(boxes, rel("cat", second, "dog", margin=0.25)) == "true"
        assert verdict(boxes, rel("dog", second, "cat", margin=0.25)) == "false"
        assert verdict(boxes, rel("cat", first, "dog", margin=0.25)) == "false"
        # A slightly larger margin (51 px of 200, 26 px of 100): neither direction is decided.
        assert verdict(boxes, rel("dog", first, "cat", margin=0.255 if boxes is SIDE_BY_SIDE else 0.26)) == "sub_margin"
        assert verdict(boxes, rel("cat", second, "dog", margin=0.255 if boxes is SIDE_BY_SIDE else 0.26)) == "sub_margin"


# Areas are w * h of non-square boxes: 30 x 10 = 300 and 10 x 20 = 200, ratio 1.5 exactly; the second image
# transposes both boxes (10 x 30, 20 x 10) so that squaring either side's width or height changes an area in
# both directions across the two images (900/100 for the car, 100/400 for the bus).
SIZES = [{"car": [(0.0, 0.0, 30.0, 10.0)], "bus": [(100.0, 0.0, 10.0, 20.0)]},
         {"car": [(0.0, 0.0, 10.0, 30.0)], "bus": [(100.0, 0.0, 20.0, 10.0)]}]  # fmt: skip


def test_size_relations_hold_at_exactly_the_ratio_on_non_square_boxes():
    for boxes in SIZES:
        assert verdict(boxes, rel("car", "larger than", "bus", ratio=1.5)) == "true"
        assert verdict(boxes, rel("bus", "smaller than", "car", ratio=1.5)) == "true"
        assert verdict(boxes, rel("car", "smaller than", "bus", ratio=1.5)) == "false"
        assert verdict(boxes, rel("bus", "larger than", "car", ratio=1.5)) == "false"
        # 300 < 1.6 x 200 and 200 < 1.6 x 300: undecided.
        assert verdict(boxes, rel("car", "larger than", "bus", ratio=1.6)) == "sub_margin"


def test_a_meaning_without_margin_or_ratio_is_the_plain_relation():
    # Centres 10 and 60 apart by 50 px: true with margin 0 (the default), whatever the margin would be otherwise.
    assert verdict(SIDE_BY_SIDE, rel("dog", "to the left of", "cat")) == "true"
    # Areas 300 and 200: "larger" with ratio 1 (the default) but not with the 1.5 it is built with.
    boxes = {"car": [(0.0, 0.0, 30.0, 10.0)], "bus": [(100.0, 0.0, 20.0, 10.0)]}  # 300 vs 200
    assert relation_verdict(objects(boxes), rel("car", "larger than", "bus")) == "true"
    assert relation_verdict(objects(boxes), rel("car", "larger than", "bus", ratio=1.6)) == "sub_margin"
    assert relation_verdict(objects(boxes), rel("bus", "smaller than", "car", ratio=1.4)) == "true"


def test_a_relation_of_a_category_to_itself_is_never_decided():
    image = objects({"dog": [(0.0, 0.0, 10.0, 10.0), (150.0, 0.0, 10.0, 10.0)]})
    for relation in ("to the left of", "above", "larger than"):
        assert relation_verdict(image, rel("dog", relation, "dog", margin=0.1, ratio=1.5)) == "same_category"


def test_position_sides_are_inclusive_at_the_margin():
    # margin 0.25 of W = 200: left means cx <= 50, right cx >= 150.
    left = objects({"car": [(40.0, 0.0, 20.0, 50.0)]})  # cx = 50
    right = objects({"car": [(140.0, 0.0, 20.0, 50.0)]})  # cx = 150
    middle = objects({"car": [(90.0, 0.0, 20.0, 50.0)]})  # cx = 100
    assert position_verdict(left, {"subject": "car", "side": "left", "margin": 0.25}) == "true"
    assert position_verdict(left, {"subject": "car", "side": "right", "margin": 0.25}) == "false"
    assert position_verdict(right, {"subject": "car", "side": "right", "margin": 0.25}) == "true"
    assert position_verdict(right, {"subject": "car", "side": "left", "margin": 0.25}) == "false"
    assert position_verdict(middle, {"subject": "car", "side": "left", "margin": 0.25}) == "sub_margin"


def test_unique_box_and_count_follow_crowd_and_instances():
    image = objects({"dog": [(1.0, 2.0, 3.0, 4.0)], "cat": [(0.0, 0.0, 5.0, 5.0), (9.0, 9.0, 5.0, 5.0)],
                     "bus": [(7.0, 7.0, 2.0, 2.0)]}, crowd=("bus", "cup"))  # fmt: skip
    assert image.unique_box("dog") == (1.0, 2.0, 3.0, 4.0)
    assert image.unique_box("cat") is None  # two instances
    assert image.unique_box("bus") is None  # one box but also a crowd region
    assert image.unique_box("cup") is None  # crowd only
    assert image.unique_box("car") is None  # absent
    assert (image.count("dog"), image.count("cat"), image.count("bus"), image.count("car")) == (1, 2, None, 0)


def test_relation_family_verdicts_and_facts_use_the_build_geometry():
    registered = get_family("coco", "strict_size")
    # Ratio 2.25 = 1.5^2 (area 450 vs 200): larger at ratio 1.5, but not at 2.5.
    # bus centre (40, 5), car centre (22.5, 5): 17.5 px apart, under the 50 px margin.
    boxes = {"bus": [(30.0, 0.0, 20.0, 10.0)], "car": [(0.0, 0.0, 45.0, 10.0)]}
    image = objects(boxes)
    index = SimpleNamespace(memo={}, objects=lambda image_id: image)
    family = registered.configured(BuildConfig.make(margin=0.25, size_ratio=1.5))
    assert family.verdicts(image, "car", "bus")["larger than"] == "true"
    assert family.verdicts(image, "car", "bus")["to the left of"] == "sub_margin"
    facts = family.relation_facts(index, 1, ("larger than", "smaller than"))
    # Each size fact in both readings, carrying the ratio it was decided with (and no margin).
    assert facts == [
        {"kind": "relation", "subject": "bus", "relation": "smaller than", "object": "car", "ratio": 1.5},
        {"kind": "relation", "subject": "car", "relation": "larger than", "object": "bus", "ratio": 1.5},
    ]
    wider = registered.configured(BuildConfig.make(margin=0.25, size_ratio=2.5))
    assert wider.verdicts(objects(boxes), "car", "bus")["larger than"] == "sub_margin"
    assert registered.ratio == 1.5 and registered.margin == 0.1  # the registered family keeps the defaults


def test_holds_and_refutes_of_a_coco_family_are_its_holds_and_refutes():
    """The audit asks both answers at once (one verdict); they must be the two it would get one by one."""
    boxes = {
        "dog": [(0.0, 0.0, 20.0, 20.0)],
        "cat": [(40.0, 35.0, 40.0, 20.0)],
        "bus": [(150.0, 5.0, 20.0, 60.0), (100.0, 60.0, 30.0, 30.0)],
        "car": [(120.0, 0.0, 10.0, 10.0)],
    }
    image = objects(boxes, crowd=("person",))
    index = SimpleNamespace(memo={}, objects=lambda image_id: image, supercategories={"dog": "animal", "cat": "animal"})
    meanings = [
        rel(a, r, b, **extra)
        for a in ("dog", "cat", "bus", "person", "zebra")
        for b in ("dog", "cat", "bus", "car")
        for r in ("to the left of", "to the right of", "above", "below", "larger than", "smaller than")
        for extra in ({}, {"margin": 0.25}, {"ratio": 1.5})
    ]
    meanings += [
        {"kind": "position", "subject": s, "side": side, "margin": 0.1}
        for s in ("dog", "bus", "person")
        for side in ("left", "right")
    ]
    meanings += [{"kind": "count", "subject": s, "count": n} for s in ("bus", "person") for n in (1, 2)]
    meanings += [{"kind": "mentions", "categories": c} for c in (["dog"], ["dog", "zebra"])]
    answers = set()
    for name in ("strict_left_right", "box_size", "object_position", "category_count", "object_variant"):
        family = get_family("coco", name)
        for meaning in meanings:
            both = family.holds_and_refutes(index, 1, meaning)
            assert both == (family.holds(index, 1, meaning), family.refutes(index, 1, meaning)), (name, meaning)
            answers.add(both)
    assert answers == {(True, False), (False, True), (False, False)}  # true, false beyond doubt, undecided
