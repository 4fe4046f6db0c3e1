"""The folder audit's rules one function at a time, on hand-made images and rows (no folder builds).

Fast companions of ``tests/data/folder/test_folder_audit.py`` (which trips every check on built folders): each
expected verdict, claim and count below is worked out by hand from the module docstring's rules,
so a flipped comparison, a dropped clause or a wrong count in the audit fails here in milliseconds
(``benchmarks/mutation_score.py folder_audit`` runs these first).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from clip_cycles.data.folder.audit import (
    AMBIGUOUS,
    FALSE,
    TRUE,
    AuditResult,
    Image,
    World,
    _audit_rows,
    _conjunction,
    _strata,
    box_relation_holds,
    coco_truth,
    gqa_attribute_truth,
    gqa_relation_truth,
    read_caption,
    read_coco_caption,
    read_gqa_attribute_phrase,
    render_gqa_noun,
)

NAMES = {"cat": "animal", "dog": "animal", "person": "person", "knife": "kitchen", "bus": "vehicle",
         "teddy bear": "indoor", "pony": "animal", "car": "vehicle"}  # fmt: skip


# --- reading a COCO caption --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caption", "claim"),
    [
        ("a cat to the left of a dog", {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "dog"}),
        ("an apple above an orange", {"kind": "relation", "subject": "apple", "relation": "above", "object": "orange"}),
        (
            "a teddy bear smaller than a bus",
            {"kind": "relation", "subject": "teddy bear", "relation": "smaller than", "object": "bus"},
        ),  # fmt: skip
        ("a cat on the left side of the picture", {"kind": "position", "subject": "cat", "side": "left"}),
        ("an apple on the right side of the picture", {"kind": "position", "subject": "apple", "side": "right"}),
        ("exactly one cat", {"kind": "count", "subject": "cat", "count": 1}),
        ("exactly two cats", {"kind": "count", "subject": "cat", "count": 2}),
        ("exactly three buses", {"kind": "count", "subject": "bus", "count": 3}),
        ("exactly four people", {"kind": "count", "subject": "person", "count": 4}),
        ("exactly five knives", {"kind": "count", "subject": "knife", "count": 5}),
        ("exactly 7 teddy bears", {"kind": "count", "subject": "teddy bear", "count": 7}),
        ("exactly two ponies", {"kind": "count", "subject": "pony", "count": 2}),
        ("exactly two zebras", {"kind": "count", "subject": "zebras", "count": 2}),  # no category: the word itself
        ("exactly one cats", {"kind": "count", "subject": "cats", "count": 1}),  # one takes the singular only
        ("a picture with an animal", {"kind": "supercategory", "supercategory": "animal"}),
        ("a picture with food", {"kind": "supercategory", "supercategory": "food"}),
        ("a picture with an outdoor object", {"kind": "supercategory", "supercategory": "outdoor"}),
        ("a picture with a sky object", {"kind": "supercategory", "supercategory": "sky"}),
        ("a picture with an ice object", {"kind": "supercategory", "supercategory": "ice"}),
        ("a cat and a dog", {"kind": "mentions", "categories": ["cat", "dog"]}),
        ("an apple and an orange", {"kind": "mentions", "categories": ["apple", "orange"]}),
    ],
)
def test_coco_templates_read_back_to_their_claim(caption: str, claim: dict[str, Any]) -> None:
    assert read_coco_caption(caption, NAMES) == claim


@pytest.mark.parametrize(
    "caption",
    ["a picture with a dog", "a cat and dog", "a cat and a dog and a cow", "two cats", "a lovely picture", "cat and a dog"],
)
def test_captions_outside_the_templates_read_as_none(caption: str) -> None:
    assert read_coco_caption(caption, NAMES) is None


def test_a_plural_that_two_categories_share_keeps_the_word() -> None:
    # "boxes" is a plural of both "box" and "boxe": no single category, so the claim keeps the word as written.
    assert read_coco_caption("exactly two boxes", ["box", "boxe"]) == {"kind": "count", "subject": "boxes", "count": 2}
    assert read_coco_caption("exactly two boxes", ["box"]) == {"kind": "count", "subject": "box", "count": 2}


# --- reading a GQA caption ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("a red car", ("color", "red", "car")),
        ("red glasses", ("color", "red", "glasses")),
        ("an orange cup", ("color", "orange", "cup")),
        ("a wooden table", ("material", "wooden", "table")),
        ("a large dog", ("size", "large", "dog")),
        ("a red sports car", ("color", "red", "sports car")),
        ("a grey car", None),  # a raw word, not the canonical value the template writes
        ("a big dog", None),
        ("a car", None),
        ("a red", None),
    ],
)
def test_gqa_attribute_phrases(phrase: str, expected: tuple[str, str, str] | None) -> None:
    assert read_gqa_attribute_phrase(phrase) == expected


@pytest.mark.parametrize(
    ("name", "modifier", "expected"),
    [
        ("car", "red", "a red car"),
        ("apple", "", "an apple"),
        ("egg", "orange", "an orange egg"),
        ("car", "", "a car"),
        ("glasses", "red", "red glasses"),
        ("jeans", "", "jeans"),
        ("glass", "", "a glass"),
        ("bus", "", "a bus"),
        ("tennis", "", "a tennis"),
        ("umbrella", "", "an umbrella"),
    ],
)
def test_gqa_nouns_render_as_the_template(name: str, modifier: str, expected: str) -> None:
    assert render_gqa_noun(name, modifier) == expected


# --- truth of COCO claims ----------------------------------------------------------------------------------------


def image(boxes: dict[str, list], crowd: tuple[str, ...] = (), width: float = 100.0, height: float = 100.0) -> Image:
    return Image("x.jpg", width, height, {k: list(v) for k, v in boxes.items()}, set(crowd))


@pytest.mark.parametrize(
    ("relation", "a", "b", "expected"),
    [
        # Exactly the margin (10 of 100) on each side holds; one unit less does not.
        ("to the right of", (20, 0, 10, 10), (10, 0, 10, 10), True),
        ("to the right of", (19, 0, 10, 10), (10, 0, 10, 10), False),
        ("above", (0, 10, 10, 10), (0, 20, 10, 10), True),
        ("above", (0, 10, 10, 10), (0, 19, 10, 10), False),
        ("below", (0, 20, 10, 10), (0, 10, 10, 10), True),
        ("below", (0, 19, 10, 10), (0, 10, 10, 10), False),
        ("to the left of", (10, 0, 10, 10), (20, 0, 10, 10), True),
        ("to the left of", (10, 0, 10, 10), (19, 0, 10, 10), False),
        # Centres, not corners: a wide box whose corner is far left has its centre at 50.
        ("to the left of", (0, 0, 100, 10), (55, 0, 10, 10), True),  # centres 50 and 60
        ("to the left of", (0, 0, 100, 10), (50, 0, 10, 10), False),  # centres 50 and 55
        ("above", (0, 0, 10, 100), (0, 55, 10, 10), True),
        ("above", (0, 0, 10, 100), (0, 50, 10, 10), False),
        # Areas: exactly 1.5 x holds; width and height both count.
        ("larger than", (0, 0, 30, 10), (0, 0, 10, 20), True),  # 300 vs 1.5 x 200
        ("larger than", (0, 0, 29, 10), (0, 0, 10, 20), False),
        ("larger than", (0, 0, 10, 30), (0, 0, 20, 10), True),
        ("smaller than", (0, 0, 10, 20), (0, 0, 30, 10), True),
        ("smaller than", (0, 0, 10, 20), (0, 0, 29, 10), False),
        ("smaller than", (0, 0, 20, 10), (0, 0, 10, 30), True),
    ],
)
def test_box_relations_at_the_margin(relation: str, a: tuple, b: tuple, expected: bool) -> None:
    assert box_relation_holds(relation, a, b, 100.0, 100.0) is expected


def test_box_relations_scale_with_the_side_they_measure() -> None:
    # 15 px apart: enough on a 100-wide image (margin 10), not on a 200-wide one (margin 20); heights likewise.
    assert box_relation_holds("to the left of", (0, 0, 10, 10), (15, 0, 10, 10), 100.0, 300.0)
    assert not box_relation_holds("to the left of", (0, 0, 10, 10), (15, 0, 10, 10), 200.0, 100.0)
    assert box_relation_holds("above", (0, 0, 10, 10), (0, 15, 10, 10), 300.0, 100.0)
    assert not box_relation_holds("above", (0, 0, 10, 10), (0, 15, 10, 10), 100.0, 200.0)
    assert box_relation_holds("to the left of", (0, 0, 10, 10), (15, 0, 10, 10), 100.0, 100.0, margin=0.125)
    assert not box_relation_holds("to the left of", (0, 0, 10, 10), (15, 0, 10, 10), 100.0, 100.0, margin=0.25)
    assert box_relation_holds("larger than", (0, 0, 20, 10), (0, 0, 10, 10), 100.0, 100.0, ratio=2.0)
    assert not box_relation_holds("larger than", (0, 0, 20, 10), (0, 0, 10, 10), 100.0, 100.0, ratio=2.5)
    with pytest.raises(ValueError, match="unknown relation 'near'"):
        box_relation_holds("near", (0, 0, 1, 1), (0, 0, 1, 1), 10.0, 10.0)


def test_coco_truth_takes_the_margin_and_ratio_it_is_given() -> None:
    left = {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "dog"}
    scene = image({"cat": [(0, 0, 10, 10)], "dog": [(15, 0, 10, 10)]})  # centres 15 px apart
    assert coco_truth(left, scene, {}) == TRUE
    assert coco_truth(left, scene, {}, margin=0.2) == AMBIGUOUS
    larger = {"kind": "relation", "subject": "cat", "relation": "larger than", "object": "dog"}
    sizes = image({"cat": [(0, 0, 20, 10)], "dog": [(50, 50, 10, 10)]})  # areas 200 and 100
    assert coco_truth(larger, sizes, {}) == TRUE
    assert coco_truth(larger, sizes, {}, ratio=3.0) == AMBIGUOUS
    # The opposite relation decides falsity with the same ratio: 100 x 3 > 200, so not "smaller" either.
    assert coco_truth({**larger, "relation": "smaller than"}, sizes, {}, ratio=3.0) == AMBIGUOUS
    assert coco_truth({**larger, "relation": "smaller than"}, sizes, {}, ratio=1.5) == FALSE
    position = {"kind": "position", "subject": "cat", "side": "left"}
    one = image({"cat": [(20, 0, 10, 10)]})  # centre 25: <= 40 (margin 0.1), > 20 (margin 0.3)
    assert coco_truth(position, one, {}) == TRUE
    assert coco_truth(position, one, {}, margin=0.3) == AMBIGUOUS


def test_coco_truth_edge_cases() -> None:
    same = {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "cat"}
    assert coco_truth(same, image({"cat": [(0, 0, 10, 10), (80, 0, 10, 10)]}), {}) == AMBIGUOUS
    left = {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "dog"}
    assert coco_truth(left, image({"dog": [(0, 0, 10, 10)]}), {}) == FALSE  # the subject is absent
    assert coco_truth(left, image({"cat": [(0, 0, 10, 10)], "dog": [(80, 0, 10, 10)]}, crowd=("cat",)), {}) == AMBIGUOUS
    # Every pair opposite: false; one pair of each: ambiguous.
    assert coco_truth(left, image({"cat": [(80, 0, 10, 10), (70, 0, 10, 10)], "dog": [(0, 0, 10, 10)]}), {}) == FALSE
    # Position boundaries are inclusive: centre exactly at 40 (left) or 60 (right) counts.
    on_left = {"kind": "position", "subject": "cat", "side": "left"}
    on_right = {**on_left, "side": "right"}
    assert coco_truth(on_left, image({"cat": [(35, 0, 10, 10)]}), {}) == TRUE
    assert coco_truth(on_right, image({"cat": [(55, 0, 10, 10)]}), {}) == TRUE
    assert coco_truth(on_left, image({"cat": [(55, 0, 10, 10)]}), {}) == FALSE
    assert coco_truth(on_right, image({"cat": [(35, 0, 10, 10)]}), {}) == FALSE  # every instance on the left
    assert coco_truth(on_right, image({"cat": [(54, 0, 10, 10)]}), {}) == AMBIGUOUS
    assert coco_truth(on_right, image({"cat": [(36, 0, 10, 10)]}), {}) == AMBIGUOUS
    assert coco_truth(on_left, image({}, crowd=("cat",)), {}) == AMBIGUOUS  # crowd before absence
    assert coco_truth(on_left, image({"cat": [(5, 0, 10, 10)]}, width=20.0), {}) == AMBIGUOUS  # centre 10 of 20: not <= 8
    three = {"kind": "count", "subject": "cat", "count": 3}
    assert coco_truth(three, image({"cat": [(0, 0, 1, 1)] * 3}), {}) == TRUE
    assert coco_truth(three, image({"cat": [(0, 0, 1, 1)] * 4}), {}) == FALSE
    assert coco_truth(three, image({}), {}) == FALSE
    assert coco_truth({**three, "count": 0}, image({}), {}) == TRUE
    animal = {"kind": "supercategory", "supercategory": "animal"}
    assert coco_truth(animal, image({"cat": []}), {"cat": "animal"}) == FALSE  # a name without an instance
    assert coco_truth(animal, image({"cat": [(0, 0, 1, 1)]}), {"cat": "animal"}) == TRUE
    assert coco_truth(animal, image({"cat": [(0, 0, 1, 1)]}), {"cat": "pet"}) == FALSE
    mentions = {"kind": "mentions", "categories": ["cat"]}
    assert coco_truth(mentions, image({"cat": [(0, 0, 1, 1)]}), {}) == TRUE
    assert coco_truth({"kind": "mentions", "categories": []}, image({"cat": [(0, 0, 1, 1)]}), {}) == AMBIGUOUS
    with pytest.raises(ValueError, match="no reading of claim kind 'colour'"):
        coco_truth({"kind": "colour"}, image({}), {})


def test_presence_counts_a_crowd_region_and_an_instance() -> None:
    assert image({"cat": [(0, 0, 1, 1)]}).present("cat")
    assert image({}, crowd=("cat",)).present("cat")
    assert not image({"cat": []}).present("cat")
    assert not image({"dog": [(0, 0, 1, 1)]}).present("cat")


# --- truth of GQA claims -----------------------------------------------------------------------------------------


def graph(objects: list[tuple[str, list[str]]], edges: tuple = ()) -> Image:
    """A GQA image: objects "0", "1", ... with names and raw attributes; edges (source, relation, target)."""
    table = {str(i): {"name": n, "attributes": list(a), "relations": []} for i, (n, a) in enumerate(objects)}
    for source, relation, target in edges:
        table[source]["relations"].append({"name": relation, "object": target})
    return Image("x.jpg", 100, 100, objects=table)


def test_gqa_attribute_truth() -> None:
    cars = graph([("car", ["red"]), ("car", ["blue", "shiny"])])
    assert gqa_attribute_truth("color", "red", "car", cars) == TRUE  # some car carries it
    assert gqa_attribute_truth("color", "blue", "car", cars) == TRUE
    assert gqa_attribute_truth("color", "green", "car", cars) == FALSE  # every car another colour
    assert gqa_attribute_truth("color", "red", "bus", cars) == FALSE  # no bus at all
    bare = graph([("car", ["blue"]), ("car", ["wooden"])])  # the second car has no colour
    assert gqa_attribute_truth("color", "red", "car", bare) == AMBIGUOUS
    assert gqa_attribute_truth("color", "blue", "car", bare) == TRUE
    assert gqa_attribute_truth("material", "wooden", "car", bare) == TRUE
    assert gqa_attribute_truth("material", "metal", "car", bare) == AMBIGUOUS
    # Raw words count as their canonical value, and only for their own type.
    assert gqa_attribute_truth("color", "gray", "car", graph([("car", ["grey"])])) == TRUE
    assert gqa_attribute_truth("material", "wooden", "car", graph([("car", ["wood"])])) == TRUE
    assert gqa_attribute_truth("color", "red", "car", graph([("car", ["large"])])) == AMBIGUOUS
    assert gqa_attribute_truth("size", "small", "car", graph([("car", ["big"]), ("bus", ["tiny"])])) == FALSE


def test_gqa_relations_over_every_pair_of_distinct_objects() -> None:
    # Two cars, one left of the other: "a car to the left of a car" holds for one ordered pair, its opposite
    # for the other, so it is ambiguous (a car is never paired with itself).
    cars = graph([("car", []), ("car", [])], [("0", "to the left of", "1")])
    assert gqa_relation_truth("car", "to the left of", "car", cars) == AMBIGUOUS
    # A self-edge is no fact about two objects: only distinct ones count.
    selfish = graph([("car", []), ("car", [])], [("0", "near", "0")])
    assert gqa_relation_truth("car", "near", "car", selfish) == AMBIGUOUS
    assert gqa_relation_truth("car", "near", "car", graph([("car", []), ("car", [])], [("1", "near", "0")])) == TRUE
    # Spatial: every (subject, object) pair must hold; the other direction's edge is the same fact.
    two = graph([("cup", []), ("plate", []), ("plate", [])], [("0", "above", "1"), ("2", "below", "0")])
    assert gqa_relation_truth("cup", "above", "plate", two) == TRUE
    assert gqa_relation_truth("cup", "below", "plate", two) == FALSE
    assert gqa_relation_truth("plate", "below", "cup", two) == TRUE
    assert gqa_relation_truth("plate", "above", "cup", two) == FALSE
    front = graph([("cup", []), ("plate", [])], [("1", "behind", "0")])
    assert gqa_relation_truth("cup", "in front of", "plate", front) == TRUE
    assert gqa_relation_truth("cup", "behind", "plate", front) == FALSE
    # A relation of another name, or to another object, is not the edge asked for.
    other = graph([("cup", []), ("plate", []), ("fork", [])], [("0", "on", "2")])
    assert gqa_relation_truth("cup", "on", "plate", other) == AMBIGUOUS
    assert gqa_relation_truth("cup", "under", "fork", other) == AMBIGUOUS
    assert gqa_relation_truth("cup", "on", "fork", other) == TRUE
    assert gqa_relation_truth("fork", "on", "cup", other) == AMBIGUOUS  # edges have a direction
    assert gqa_relation_truth("knife", "on", "fork", other) == FALSE
    # Contradictory annotation of the one pair: ambiguous, though an edge says it holds.
    mixed = graph([("cup", []), ("plate", [])], [("0", "above", "1"), ("0", "below", "1")])
    assert gqa_relation_truth("cup", "above", "plate", mixed) == AMBIGUOUS


def test_a_conjunction_is_false_on_any_false_and_true_only_on_all_true() -> None:
    assert _conjunction([TRUE, TRUE]) == TRUE
    assert _conjunction([TRUE, AMBIGUOUS]) == AMBIGUOUS
    assert _conjunction([AMBIGUOUS, FALSE]) == FALSE
    assert _conjunction(iter([FALSE, TRUE])) == FALSE  # a generator, read once


# --- reading a caption against its stored meaning ----------------------------------------------------------------


def coco_world(margin: float = 0.1, ratio: float = 1.5) -> World:
    return World("coco", {}, {"cat": "animal", "dog": "animal"}, margin=margin, size_ratio=ratio)


LEFT = {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "dog"}
NEAR_LEFT = image({"cat": [(0, 0, 10, 10)], "dog": [(15, 0, 10, 10)]})  # 15 px apart on a 100-wide image


def test_coco_template_readings() -> None:
    reading = read_caption(coco_world(), "strict_left_right", "a cat to the left of a dog", {**LEFT, "margin": 0.1}, None)
    assert reading.problem is None and reading.evaluate(NEAR_LEFT) == TRUE
    # The world's margin (the build's threshold) is the one applied.
    strict = read_caption(coco_world(margin=0.2), "strict_left_right", "a cat to the left of a dog", LEFT, None)
    assert strict.problem is None and strict.evaluate(NEAR_LEFT) == AMBIGUOUS
    larger = {**LEFT, "relation": "larger than"}
    sizes = image({"cat": [(0, 0, 20, 10)], "dog": [(50, 50, 10, 10)]})
    strict_size = read_caption(coco_world(ratio=3.0), "relative_size", "a cat larger than a dog", larger, None)
    assert strict_size.evaluate(sizes) == AMBIGUOUS
    assert read_caption(coco_world(), "relative_size", "a cat larger than a dog", larger, None).evaluate(sizes) == TRUE
    wrong = read_caption(coco_world(), "strict_left_right", "a cat to the left of a dog", {**LEFT, "object": "cow"}, None)
    assert wrong.evaluate is None and "says" in wrong.problem and "but the predicate stores" in wrong.problem
    unstored = read_caption(coco_world(), "strict_left_right", "a cat to the left of a dog", "cat left of dog", None)
    assert unstored.evaluate is None and "but the predicate stores" in unstored.problem
    other = read_caption(coco_world(), "strict_left_right", "a cat near a dog", LEFT, None)
    assert other.evaluate is None and "follows no COCO template" in other.problem
    for key, value, rule in (("margin", 0.0, 0.1), ("ratio", 2.0, 1.5)):
        stored = read_caption(coco_world(), "strict_left_right", "a cat to the left of a dog", {**LEFT, key: value}, None)
        assert stored.evaluate is None and f"stores {key} {value}, the rule says {rule}" in stored.problem
    matching = read_caption(coco_world(), "strict_left_right", "a cat to the left of a dog", {**LEFT, "ratio": 1.5}, None)
    assert matching.problem is None


def test_human_caption_readings() -> None:
    own = Image("x.jpg", 100, 100, {"cat": [(0, 0, 1, 1)]}, captions=["A cat sleeps.", "a cat on a mat"])
    meaning = {"categories": ["cat"]}
    reading = read_caption(coco_world(), "coarse_object", "a cat on a mat", meaning, own)
    assert reading.problem is None
    assert reading.evaluate(own) == TRUE and reading.evaluate(image({"dog": [(0, 0, 1, 1)]})) == FALSE
    foreign = read_caption(coco_world(), "matched_object", "a dog on a mat", meaning, own)
    assert foreign.evaluate is None and "is not one of its image's own COCO captions" in foreign.problem
    assert read_caption(coco_world(), "text_neighbor", "a dog on a mat", meaning, None).problem is None  # no image
    for bad in ({"categories": []}, {"categories": "cat"}, {}, "cat"):
        empty = read_caption(coco_world(), "coarse_object", "a cat on a mat", bad, own)
        assert empty.evaluate is None and "stores no mentioned categories" in empty.problem


def test_gqa_caption_readings() -> None:
    world = World("gqa", {})
    red_car = graph([("car", ["red"])])
    meaning = {"object": "car", "value": "red", "type": "color"}
    reading = read_caption(world, "attribute_color", "a red car", meaning, None)
    assert reading.problem is None and reading.evaluate(red_car) == TRUE
    assert reading.evaluate(graph([("car", ["blue"])])) == FALSE
    assert "but the predicate stores" in read_caption(world, "attribute_color", "a red car", {**meaning, "type": "size"},
                                                      None).problem  # fmt: skip
    assert "but the predicate stores" in read_caption(world, "attribute_color", "a red car", {**meaning, "value": "blue"},
                                                      None).problem  # fmt: skip
    assert "is not how the template names" in read_caption(world, "attribute_color", "red car", meaning, None).problem
    assert "follows no GQA attribute template" in read_caption(world, "attribute_color", "a shiny car", meaning, None).problem
    both = {"objects": [["car", "red"], ["bus", "blue"]]}
    binding = read_caption(world, "binding", "a red car and a blue bus", both, None)
    assert binding.problem is None
    assert binding.evaluate(graph([("car", ["red"]), ("bus", ["blue"])])) == TRUE
    assert binding.evaluate(graph([("car", ["red"]), ("bus", ["green"])])) == FALSE
    assert binding.evaluate(graph([("car", ["red"]), ("bus", [])])) == AMBIGUOUS
    assert "follows no GQA attribute template" in read_caption(world, "binding", "a red car", both, None).problem
    relation = {"subject": "cup", "relation": "on", "object": "table"}
    on = read_caption(world, "relation_object", "a cup on a table", relation, None)
    assert on.problem is None
    assert on.evaluate(graph([("cup", []), ("table", [])], [("0", "on", "1")])) == TRUE
    assert "does not say" in read_caption(world, "relation_object", "a cup on a desk", relation, None).problem
    for bad in ({**relation, "object": ""}, {"subject": "cup", "relation": "on"}, "cup on table"):
        unstored = read_caption(world, "relation_object", "a cup on a table", bad, None)
        assert unstored.evaluate is None and "stores no subject/relation/object" in unstored.problem


# --- strata ------------------------------------------------------------------------------------------------------


def test_strata_are_found_wherever_the_predicate_records_them() -> None:
    assert _strata({"caption_0": {"stratum": "a"}, "caption_1": {"stratum": "b"}}) == ("a", "b")
    assert _strata({"details": {"stratum_0": "a", "stratum_1": "a"}}) == ("a", "a")
    assert _strata({"details": {"image_0": {"stratum": "a"}, "image_1": {"stratum": "c"}}}) == ("a", "c")
    assert _strata({"stratum": {"0": "a", "1": "d"}}) == ("a", "d")
    assert _strata({"details": {"stratum_1": "b"}}) == (None, "b")  # one side recorded is still a pair to compare
    # The caption meanings come first, then details.
    assert _strata({"caption_0": {"stratum": "a"}, "caption_1": {"stratum": "a"}, "details": {"stratum_0": "x"}}) == ("a", "a")
    assert _strata({"details": {"stratum_0": "a", "stratum_1": "a", "image_0": {"stratum": "x"}}}) == ("a", "a")
    assert _strata({"details": {"image_0": {"stratum": "a"}, "image_1": {"stratum": "a"}}, "stratum": {"0": "x"}}) == ("a", "a")
    assert _strata({"stratum": "one stratum of the cycle", "details": {"note": 1}}) is None
    assert _strata({"caption_0": "text", "details": None}) is None


# --- one file's rows ---------------------------------------------------------------------------------------------


def cycle_world() -> World:
    """Images 1 and 4: cat left of dog; images 2 and 3: dog left of cat (100 x 100)."""
    cat_left = {"cat": [(0, 0, 10, 10)], "dog": [(80, 0, 10, 10)]}
    dog_left = {"dog": [(0, 0, 10, 10)], "cat": [(80, 0, 10, 10)]}
    scenes = {1: cat_left, 2: dog_left, 3: dog_left, 4: cat_left}
    images = {i: Image(f"val2017/{i}.jpg", 100.0, 100.0, boxes) for i, boxes in scenes.items()}
    return World("coco", images, {"cat": "animal", "dog": "animal"})


def meaning(subject: str, obj: str) -> dict[str, Any]:
    return {"kind": "relation", "subject": subject, "relation": "to the left of", "object": obj, "margin": 0.1}


def row(cid: str = "c0", ids: tuple[int, int] = (1, 2), swap: bool = False, **predicate: Any) -> dict[str, Any]:
    captions = ["a cat to the left of a dog", "a dog to the left of a cat"]
    meanings = [meaning("cat", "dog"), meaning("dog", "cat")]
    if swap:
        captions.reverse()
        meanings.reverse()
    return {"cycle_id": cid, "family": "strict_left_right", "seed": 0, "split": "test",
            "image_0": f"val2017/{ids[0]}.jpg", "image_1": f"val2017/{ids[1]}.jpg",
            "image_id_0": ids[0], "image_id_1": ids[1], "caption_0": captions[0], "caption_1": captions[1],
            "predicate": json.dumps({"caption_0": meanings[0], "caption_1": meanings[1], **predicate})}  # fmt: skip


def audit(rows: list[dict[str, Any]], world: World | None = None) -> tuple[list[str], dict[str, Any], Counter]:
    problems: list[str] = []
    seen: Counter = Counter()
    stats = _audit_rows(world or cycle_world(), "strict_left_right", 0, "test", rows, problems, seen, {})
    return problems, stats, seen


def test_a_valid_row_counts_two_true_matches_and_two_false_swaps() -> None:
    problems, stats, seen = audit([row()])
    assert problems == []
    assert stats == {"images": {1, 2}, "matched_true": 2, "swapped_false": 2, "violations": 0}
    assert seen == Counter({"c0": 1})


def test_swapped_captions_count_four_violations() -> None:
    problems, stats, _ = audit([row(swap=True)])
    assert (stats["matched_true"], stats["swapped_false"], stats["violations"]) == (0, 0, 4)
    assert sum("matched (image_0, caption_0)" in p and p.endswith("is false") for p in problems) == 1
    assert sum("matched (image_1, caption_1)" in p and p.endswith("is false") for p in problems) == 1
    assert sum("swapped (image_1, caption_0)" in p and "is true, not false" in p for p in problems) == 1
    assert sum("swapped (image_0, caption_1)" in p and "is true, not false" in p for p in problems) == 1
    assert len(problems) == 4


def test_an_incomplete_image_makes_its_pairs_ambiguous() -> None:
    world = cycle_world()
    world.images[2].incomplete = True
    problems, stats, _ = audit([row()], world)
    # Image 2 is the matched image of caption_1 and the swapped image of caption_0.
    assert (stats["matched_true"], stats["swapped_false"], stats["violations"]) == (1, 1, 2)
    assert sorted(p.split(") ")[0].split("row c0 ")[1] for p in problems) == ["matched (image_1, caption_1",
                                                                               "swapped (image_1, caption_0"]  # fmt: skip
    assert all("is ambiguous" in p for p in problems)


def test_row_level_problems_each_alone() -> None:
    labelled = row()
    labelled["split"] = "train"
    problems, stats, _ = audit([labelled])
    assert problems == ["strict_left_right seed 0 test: row c0 is labelled strict_left_right/0/train"]
    assert stats["matched_true"] == 2
    for field, value in (("family", "other"), ("seed", 1)):
        relabelled = {**row(), field: value}
        assert len(audit([relabelled])[0]) == 1 and "is labelled" in audit([relabelled])[0][0]

    problems, _, _ = audit([row(), row("c1")])
    assert problems == ["strict_left_right seed 0 test: row c1 repeats the block of test row c0"]
    # The same two pairs in the other order are the same block.
    flipped = row("c2", ids=(2, 1), swap=True)
    assert audit([row(), flipped])[0] == ["strict_left_right seed 0 test: row c2 repeats the block of test row c0"]

    same_image = row(ids=(1, 1))
    problems, _, _ = audit([same_image])
    assert any("row c0 is degenerate" in p for p in problems)
    same_caption = row()
    same_caption["caption_1"] = same_caption["caption_0"]
    assert any("row c0 is degenerate" in p for p in audit([same_caption])[0])

    moved = row()
    moved["image_1"] = "val2017/1.jpg"
    problems, stats, _ = audit([moved])
    assert problems == ["strict_left_right seed 0 test: row c0 image_1 'val2017/1.jpg' is not the file of image id 2 "
                        "('val2017/2.jpg')"]  # fmt: skip
    assert stats["matched_true"] == 2  # the captions are still read against the annotated image
    stored = row()
    stored["image_0"] = {"path": "val2017/1.jpg", "bytes": None}  # an Image struct names its file in `path`
    assert audit([stored])[0] == []


def test_an_unknown_image_or_an_unread_caption_is_counted_unread() -> None:
    problems, stats, _ = audit([row(ids=(1, 9))])
    assert any("image_id_1 9 is not in the raw annotations" in p for p in problems)
    assert stats == {"images": {1, 9}, "matched_true": 0, "swapped_false": 0, "violations": 1}
    unread = row()
    unread["caption_1"] = "a dog near a cat"
    problems, stats, _ = audit([unread, row("c1", ids=(2, 1), swap=True)])
    assert problems == ["strict_left_right seed 0 test: row c0 caption_1: caption 'a dog near a cat' follows no COCO template"]
    assert (stats["matched_true"], stats["swapped_false"], stats["violations"]) == (2, 2, 1)
    broken = row()
    broken["predicate"] = json.dumps({"caption_0": meaning("cat", "dog")})
    problems, stats, seen = audit([broken, row("c1")])
    assert problems == ["strict_left_right seed 0 test: row c0 has an unreadable predicate JSON"]
    assert stats["images"] == {1, 2} and stats["matched_true"] == 2 and seen == Counter({"c0": 1, "c1": 1})
    for text in ("{not json", None):
        bad = row()
        bad["predicate"] = text
        assert audit([bad])[0] == ["strict_left_right seed 0 test: row c0 has an unreadable predicate JSON"]


def test_strata_checks_of_the_rows() -> None:
    agreeing = row(details={"stratum_0": "s", "stratum_1": "s"})
    assert audit([agreeing])[0] == []
    split = row(details={"stratum_0": "s", "stratum_1": "t"})
    assert audit([split])[0] == ["strict_left_right seed 0 test: row c0 pairs strata 's' and 't'"]
    for bad in ("", None, 3):
        problems, _, _ = audit([row(stratum=bad)])
        assert problems == [f"strict_left_right seed 0 test: row c0 records stratum {bad!r}, not a non-empty string"]
    assert audit([row(stratum="s"), row("c1", ids=(4, 3), stratum="s")])[0] == []
    problems, _, _ = audit([row(stratum="s"), row("c1", ids=(4, 3)), row("c2", ids=(1, 3))])
    assert problems == ["strict_left_right seed 0 test: 2 row(s) record no stratum while 1 do"]


def test_an_audit_result_is_ok_only_when_it_checked_rows_and_found_nothing() -> None:
    assert AuditResult(checked_rows=3).ok
    assert not AuditResult(checked_rows=0).ok
    assert not AuditResult(problems=["x"], checked_rows=3).ok
    assert AuditResult(checked_rows=1).to_dict()["ok"] is True


def test_every_unread_row_and_every_repeat_of_an_id_is_counted() -> None:
    """Two rows that cannot be read are two violations; an id seen twice is counted twice (the folder then names it)."""
    first, second = row(ids=(1, 9)), row("c1", ids=(9, 2))
    problems, stats, seen = audit([first, second])
    assert stats["violations"] == 2 and stats["matched_true"] == 0
    assert sum("is not in the raw annotations" in p for p in problems) == 2
    _, stats, seen = audit([row(), row(), row("c1")])
    assert seen == Counter({"c0": 2, "c1": 1}) and stats["matched_true"] == 6
