"""What each GQA family reads off one scene graph, worked out by hand from its stated rule.

Each test parses a small graph in GQA's JSON format and lists, in order, every statement
(group, value, meaning, details) and every exclusion reason the family's rule gives for it
(the family descriptions in ``clip_cycles.data.families.gqa``): unique names only, one canonical
value, spatial relations annotated towards every instance, contradictory annotations
excluded, self-relations ignored. The expected lists are written out below, not computed.
"""

from __future__ import annotations

from string import ascii_lowercase
from types import SimpleNamespace

from clip_cycles.data.families.gqa import Excluded, Statement, attribute_verdict, relation_verdict
from clip_cycles.data.families.registry import get_family
from clip_cycles.data.sources.scene_graphs import SceneGraph, parse_scene_graph

LEFT, RIGHT = "to the left of", "to the right of"


def box(object_id: str) -> list[float]:
    """The test's box of an object: distinct per id, so details name the right object."""
    k = ascii_lowercase.index(object_id)
    return [2.0 * k, float(k), 10.0 + k, 5.0 + k]


def graph(*objects: tuple) -> SceneGraph:
    """Objects (name, attributes, [(relation, target id)]) get ids a, b, c, ... in order."""
    raw = {}
    for object_id, (name, attributes, relations) in zip(ascii_lowercase, objects):
        x, y, w, h = box(object_id)
        raw[object_id] = {"name": name, "x": x, "y": y, "w": w, "h": h, "attributes": list(attributes),
                          "relations": [{"name": r, "object": t} for r, t in relations]}  # fmt: skip
    parsed, reason, _ = parse_scene_graph("1", {"width": 200, "height": 200, "objects": raw}, "test")
    assert reason is None
    return parsed


def statements(family: str, scene: SceneGraph) -> list:
    return list(get_family("gqa", family).statements(scene))


def test_attribute_family_statements():
    scene = graph(
        ("cup", ["red", "small"], []),  # a: one cup, one colour
        ("plate", ["white", "grey"], []),  # b: two colours
        ("bowl", ["wooden"], []),  # c: no colour: nothing to say
        ("spoon", ["silver"], []),  # d, e: two spoons with colours: ambiguous, counted once
        ("spoon", ["gold"], []),
        ("knife", [], []),  # f, g: two knives, only the second has a colour: counted once
        ("knife", ["red"], []),
        ("mug", ["grey"], []),  # h: grey is the synonym of gray
    )
    assert statements("attribute_color", scene) == [
        Statement(("cup",), "red", {"object": "cup", "type": "color", "value": "red"},
                  {"object_id": "a", "box": box("a"), "attributes": ["red", "small"]}),
        Excluded("matched_several_values"),
        Excluded("matched_multi_instance_ambiguous"),
        Excluded("matched_multi_instance_ambiguous"),
        Statement(("mug",), "gray", {"object": "mug", "type": "color", "value": "gray"},
                  {"object_id": "h", "box": box("h"), "attributes": ["grey"]}),
    ]  # fmt: skip


def test_relation_object_statements():
    scene = graph(
        ("man", [], [("holding", "b"), ("near", "c"), ("near", "d"), ("watching", "a"), ("wearing", "p")]),  # a
        ("cup", [], []),
        ("dog", [], []),
        ("cat", [], []),  # b, c, d
        ("bird", [], [("above", "f"), ("on", "q")]),  # e: above one of two trees only; on the roof
        ("tree", [], []),
        ("tree", [], []),  # f, g
        ("boy", [], [(LEFT, "i")]),  # h and i: each left of the other
        ("girl", [], [(LEFT, "h")]),
        ("plate", [], [("on", "l")]),  # j, k: two plates with relations
        ("plate", [], [("on", "l"), ("near", "l")]),
        ("table", [], []),  # l
        ("cloud", [], [("above", "n"), ("above", "o")]),  # m: above both houses
        ("house", [], []),
        ("house", [], []),  # n, o
        ("hat", [], []),
        ("roof", [], []),  # p, q
    )
    rel = lambda s, r, o: {"subject": s, "relation": r, "object": o}  # noqa: E731
    assert statements("relation_object", scene) == [
        Excluded("matched_multi_instance_ambiguous"),  # (plate, near)
        Excluded("matched_multi_instance_ambiguous"),  # (plate, on)
        Statement(("man", "holding"), "cup", rel("man", "holding", "cup"), {"subject_id": "a", "subject_box": box("a")}),
        Excluded("matched_several_objects"),  # man near a dog and a cat; "watching" himself is skipped
        Statement(("man", "wearing"), "hat", rel("man", "wearing", "hat"), {"subject_id": "a", "subject_box": box("a")}),
        Excluded("matched_not_all_instances"),  # bird above one tree of two
        Statement(("bird", "on"), "roof", rel("bird", "on", "roof"), {"subject_id": "e", "subject_box": box("e")}),
        Excluded("matched_contradictory_annotation"),  # boy left of girl, girl left of boy
        Excluded("matched_contradictory_annotation"),
        Statement(("cloud", "above"), "house", rel("cloud", "above", "house"),
                  {"subject_id": "m", "subject_box": box("m")}),
    ]  # fmt: skip


def test_relation_subject_statements():
    scene = graph(
        ("man", [], [("holding", "c")]),  # a
        ("woman", [], [("holding", "d"), ("near", "c")]),  # b
        ("cup", [], []),
        ("phone", [], []),  # c, d
        ("dog", [], [("near", "c")]),  # e: a second name near the cup
        ("plate", [], []),
        ("plate", [], []),  # f, g: relations to a non-unique object
        ("boy", [], [("on", "f")]),  # h
        ("girl", [], [("under", "g")]),  # i
        ("tree", [], [("near", "j")]),  # j: near itself
        ("chair", [], [(LEFT, "m")]),  # k, l: one chair of two left of the table
        ("chair", [], []),
        ("table", [], []),  # m
        ("sofa", [], [(LEFT, "o")]),  # n, o: contradictory
        ("lamp", [], [(LEFT, "n")]),
        ("bird", [], [("above", "r")]),  # p, q: both birds above the house
        ("bird", [], [("above", "r")]),
        ("house", [], []),  # r
    )
    rel = lambda s, r, o: {"subject": s, "relation": r, "object": o}  # noqa: E731
    assert statements("relation_subject", scene) == [
        Statement(("holding", "cup"), "man", rel("man", "holding", "cup"), {"object_id": "c", "object_box": box("c")}),
        Excluded("matched_several_subjects"),  # woman and dog near the cup
        Statement(("holding", "phone"), "woman", rel("woman", "holding", "phone"),
                  {"object_id": "d", "object_box": box("d")}),
        Excluded("matched_multi_instance_ambiguous"),  # boy on one of two plates
        Excluded("matched_multi_instance_ambiguous"),  # girl under one of two plates
        Excluded("matched_not_all_instances"),  # (tree near itself skipped) one chair of two
        Excluded("matched_contradictory_annotation"),
        Excluded("matched_contradictory_annotation"),
        Statement(("above", "house"), "bird", rel("bird", "above", "house"), {"object_id": "r", "object_box": box("r")}),
    ]  # fmt: skip


def test_relation_spatial_statements():
    scene = graph(
        ("cup", [], [("holding", "b"), (LEFT, "b"), ("above", "b")]),  # a
        ("plate", [], [(RIGHT, "a")]),  # b: the same fact read from the plate
        ("dog", [], [("behind", "d"), ("in front of", "d")]),  # c: both directions
        ("cat", [], []),  # d
        ("man", [], [(LEFT, "f"), (LEFT, "j")]),  # e: towards one of two trees, and the car
        ("tree", [], []),
        ("tree", [], []),  # f, g
        ("boy", [], [("above", "h"), ("below", "i")]),  # h: above itself (skipped), below the kite
        ("kite", [], []),  # i
        ("car", [], []),  # j
    )

    def details(s: str, o: str) -> dict:
        return {"subject_id": s, "object_id": o, "subject_box": box(s), "object_box": box(o)}

    rel = lambda s, r, o: {"subject": s, "relation": r, "object": o}  # noqa: E731
    assert statements("relation_spatial", scene) == [
        Statement(("cup", "above", "plate"), "above", rel("cup", "above", "plate"), details("a", "b")),
        Statement(("cup", LEFT, "plate"), LEFT, rel("cup", LEFT, "plate"), details("a", "b")),
        Statement(("plate", LEFT, "cup"), RIGHT, rel("plate", RIGHT, "cup"), details("b", "a")),
        Excluded("matched_contradictory_annotation"),
        Excluded("matched_contradictory_annotation"),
        Excluded("matched_multi_instance_ambiguous"),
        Statement(("man", LEFT, "car"), LEFT, rel("man", LEFT, "car"), details("e", "j")),
        Statement(("boy", "above", "kite"), "below", rel("boy", "below", "kite"), details("h", "i")),
    ]  # fmt: skip


def test_binding_statements():
    scene = graph(
        ("plate", ["white", "metal"], []),  # a
        ("cup", ["red", "wooden", "small"], []),  # b
        ("bowl", ["red", "large"], []),  # c
        ("fork", ["red", "blue"], []),  # d: two colours: no colour binding
        ("spoon", ["silver"], []),
        ("spoon", ["gold"], []),  # e, f: not unique
    )
    assert statements("binding", scene) == [
        # Colour: bowl red, cup red (same value: no cycle), plate white; names in alphabetical order.
        Statement(("color", "bowl", "plate", "red", "white"), "bowl",
                  {"type": "color", "objects": [["bowl", "red"], ["plate", "white"]]}, {"object_ids": ["c", "a"]}),
        Statement(("color", "cup", "plate", "red", "white"), "cup",
                  {"type": "color", "objects": [["cup", "red"], ["plate", "white"]]}, {"object_ids": ["b", "a"]}),
        # Material: cup wooden, plate metal: the plate holds the lower value.
        Statement(("material", "cup", "plate", "metal", "wooden"), "plate",
                  {"type": "material", "objects": [["cup", "wooden"], ["plate", "metal"]]}, {"object_ids": ["b", "a"]}),
        Statement(("size", "bowl", "cup", "large", "small"), "bowl",
                  {"type": "size", "objects": [["bowl", "large"], ["cup", "small"]]}, {"object_ids": ["c", "b"]}),
    ]  # fmt: skip


# --- verdicts: true, false beyond doubt, or the undecided reason ---------------------------------------------------

VERDICT_SCENE = (
    ("cup", ["red"], [(LEFT, "b")]),  # a
    ("cup", [], []),  # b: no colour annotated
    ("plate", ["white"], []),  # c
    ("plate", ["grey"], []),  # d
    ("man", [], [("holding", "a"), (LEFT, "c"), (LEFT, "d"), ("above", "f")]),  # e
    ("dog", [], [("above", "e")]),  # f: man above dog and dog above man
    ("tree", [], [(RIGHT, "h")]),  # g: right of one bench of two
    ("bench", [], []),
    ("bench", [], []),  # h, i
)


def test_attribute_verdicts_by_hand():
    scene = graph(*VERDICT_SCENE)
    assert attribute_verdict(scene, "cup", "color", "red") == "true"  # some cup is red
    assert attribute_verdict(scene, "cup", "color", "blue") == "attribute_unannotated"  # cup b has no colour
    assert attribute_verdict(scene, "plate", "color", "gray") == "true"  # grey is gray
    assert attribute_verdict(scene, "plate", "color", "black") == "false"  # every plate has another colour
    assert attribute_verdict(scene, "bus", "color", "red") == "false"  # no bus


def test_relation_verdicts_by_hand():
    scene = graph(*VERDICT_SCENE)
    cases = {
        ("man", "holding", "cup"): "true",  # an edge says so
        ("man", "holding", "plate"): "relation_unannotated",  # no edge: not false
        ("man", LEFT, "plate"): "true",  # towards both plates
        ("plate", RIGHT, "man"): "true",  # the same edges read the other way
        ("man", RIGHT, "plate"): "false",  # both plates annotated the other way
        ("man", "above", "dog"): "contradictory_annotation",
        ("dog", "below", "man"): "contradictory_annotation",
        ("tree", RIGHT, "bench"): "multi_instance_ambiguous",  # one bench of two
        ("tree", LEFT, "bench"): "multi_instance_ambiguous",
        ("man", "above", "tree"): "relation_unannotated",  # spatial, no edge either way
        ("man", LEFT, "bus"): "false",  # no bus
        ("bus", LEFT, "man"): "false",
        # Two cups: cup a left of cup b; pairs of one object with itself do not count.
        ("cup", LEFT, "cup"): "multi_instance_ambiguous",
    }
    assert {case: relation_verdict(scene, *case) for case in cases} == cases


def test_family_verdicts_holds_and_swap_compatibility():
    scene = graph(*VERDICT_SCENE)
    index = SimpleNamespace(graph=lambda image_id: scene)
    colour = get_family("gqa", "attribute_color")
    assert colour.verdict(index, 1, {"object": "cup", "type": "color", "value": "red"}) == "true"
    assert colour.holds(index, 1, {"object": "cup", "type": "color", "value": "red"})
    assert not colour.holds(index, 1, {"object": "cup", "type": "color", "value": "blue"})
    assert not colour.holds(index, 1, {"object": "bus", "type": "color", "value": "red"})
    binding = get_family("gqa", "binding")
    cases = {
        (("cup", "red"), ("plate", "white")): ("true", True),
        (("cup", "red"), ("plate", "black")): ("false", False),  # every plate has another colour
        (("cup", "blue"), ("plate", "white")): ("attribute_unannotated", False),
        (("plate", "white"), ("cup", "blue")): ("attribute_unannotated", False),  # the undecided one, not the first
        (("cup", "blue"), ("plate", "black")): ("false", False),  # one false binding decides
        (("bus", "red"), ("cup", "red")): ("false", False),
    }
    for objects, expected in cases.items():
        meaning = {"type": "color", "objects": [list(o) for o in objects]}
        assert (binding.verdict(index, 1, meaning), binding.holds(index, 1, meaning)) == expected, objects
    for name in ("relation_object", "relation_subject", "relation_spatial"):
        family = get_family("gqa", name)
        holding = {"subject": "man", "relation": "holding", "object": "cup"}
        right = {"subject": "man", "relation": RIGHT, "object": "plate"}
        assert (family.verdict(index, 1, holding), family.holds(index, 1, holding)) == ("true", True)
        assert (family.verdict(index, 1, right), family.holds(index, 1, right)) == ("false", False)
    # relation_object: a partner naming an object this image has is refused (the swap is not false by absence).
    family = get_family("gqa", "relation_object")
    mine = Statement(("man", "holding"), "cup", {}, {})
    assert not family.compatible(scene, mine, scene, Statement(("man", "holding"), "plate", {}, {}))
    assert family.compatible(scene, mine, scene, Statement(("man", "holding"), "phone", {}, {}))
