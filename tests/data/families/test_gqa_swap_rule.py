"""GQA swaps false beyond doubt, on real-format scene graphs (``train_sceneGraphs.json`` keyed by
string image ids, objects keyed by string object ids, ``location``/``weather`` fields).

Multi-instance, several-value, contradictory and unannotated cases must be excluded and counted;
the expected counts and the falsity of every swap are worked out here from the raw JSON."""

from __future__ import annotations

import json

import pytest

from clip_cycles.data.families.gqa import load_gqa_index
from clip_cycles.data.families.registry import build_family, get_family

COLOURS = {"red", "blue", "green", "white", "black"}  # the test's own colour list (a subset of GQA's)


def o(name, attributes=(), relations=(), box=(10, 10, 20, 20)):
    x, y, w, h = box
    return {
        "name": name,
        "x": x,
        "y": y,
        "w": w,
        "h": h,
        "attributes": list(attributes),
        "relations": [{"name": r, "object": t} for r, t in relations],
    }


GRAPHS = {
    # attribute_color
    "2354786": {"1001": o("car", ["red", "parked"])},
    "2354787": {"1002": o("car", ["blue"])},
    "2354788": {"1003": o("car", ["red"]), "1004": o("car", ["blue"])},  # two cars: multi-instance
    "2354789": {"1005": o("car", ["red", "white"])},  # two colours on one car
    "2354790": {"1006": o("car", ["blue"]), "1007": o("car", ["parked"])},  # two cars, one uncoloured
    # relation_object
    "2354800": {"2001": o("man", relations=[("holding", "2002")]), "2002": o("cup")},
    "2354801": {"2003": o("man", relations=[("holding", "2004")]), "2004": o("phone"), "2005": o("cup")},
    "2354802": {"2006": o("man", relations=[("holding", "2007")]), "2007": o("phone"), "2008": o("man")},
    "2354803": {"2009": o("man", relations=[("holding", "2010")]), "2010": o("phone")},
    # relation_spatial
    "2354810": {"3001": o("cup", relations=[("to the left of", "3002")]), "3002": o("plate")},
    "2354811": {"3003": o("cup", relations=[("to the right of", "3004")]), "3004": o("plate")},
    "2354812": {
        "3005": o("cup", relations=[("to the left of", "3007")]),
        "3006": o("cup", relations=[("to the right of", "3007")]),
        "3007": o("plate"),
    },
    "2354813": {"3010": o("star", relations=[("to the left of", "3011")]), "3011": o("ring"), "3012": o("ring")},
    "2354814": {"3013": o("star", relations=[("to the left of", "3014")]), "3014": o("ring")},
}


@pytest.fixture(scope="module")
def gqa(tmp_path_factory):
    root = tmp_path_factory.mktemp("real_gqa")
    data = {
        i: {"width": 500, "height": 333, "location": "street", "weather": "sunny", "objects": objs} for i, objs in GRAPHS.items()
    }
    (root / "train_sceneGraphs.json").write_text(json.dumps(data), encoding="utf-8")
    val = {"2400000": {"width": 500, "height": 375, "objects": {"9": o("tree")}}}
    (root / "val_sceneGraphs.json").write_text(json.dumps(val), encoding="utf-8")
    return load_gqa_index(root), data


def _build(index, name, ids):
    return build_family(
        get_family("gqa", name), index, {0: {"train": [int(i) for i in ids], "validation": [], "test": []}}, min_cycles=1
    )


def _raw_objects(data, image_id, name):
    return [ob for ob in data[str(image_id)]["objects"].values() if ob["name"] == name]


def test_attribute_multi_instance_and_several_values_are_excluded_and_counted(gqa):
    index, data = gqa
    build = _build(index, "attribute_color", ["2354786", "2354787", "2354788", "2354789", "2354790"])
    # 88 and 90 have two cars (with some colour): multi-instance; 89's car has two colours.
    assert build.excluded == {"matched_multi_instance_ambiguous": 2, "matched_several_values": 1}
    (record,) = build.records[0]["train"]
    assert {record.image_id_0, record.image_id_1} == {2354786, 2354787}
    meanings = json.loads(record.predicate)
    for image_id, swapped in ((record.image_id_0, meanings["caption_1"]), (record.image_id_1, meanings["caption_0"])):
        cars = _raw_objects(data, image_id, swapped["object"])
        # By hand: every car of the image carries some colour and none carries the swapped one.
        assert cars and all(set(c["attributes"]) & COLOURS and swapped["value"] not in c["attributes"] for c in cars)
    family = get_family("gqa", "attribute_color")
    red = {"object": "car", "type": "color", "value": "red"}
    assert family.verdict(index, 2354790, red) == "attribute_unannotated"  # one car blue, one uncoloured
    assert family.verdict(index, 2354788, {**red, "value": "green"}) == "false"  # every car has another colour
    assert family.verdict(index, 2354803, red) == "false"  # no car at all
    assert family.refutes(index, 2354787, red) and not family.refutes(index, 2354790, red)


def test_relation_object_swap_with_the_object_present_but_unlinked_is_counted(gqa):
    index, data = gqa
    # 2354801 holds a phone and also shows a cup: "a man holding a cup" is not provably false there.
    build = _build(index, "relation_object", ["2354800", "2354801"])
    assert build.counts[0]["train"] == 0 and build.excluded == {"swap_relation_unannotated": 1}
    family = get_family("gqa", "relation_object")
    cup = {"subject": "man", "relation": "holding", "object": "cup"}
    assert family.verdict(index, 2354801, cup) == "relation_unannotated"
    assert family.verdict(index, 2354803, cup) == "false"  # no cup in the image
    # Two men (2354802): the subject is ambiguous.
    build = _build(index, "relation_object", ["2354800", "2354802", "2354803"])
    assert build.excluded == {"matched_multi_instance_ambiguous": 1}
    (record,) = build.records[0]["train"]
    assert {record.image_id_0, record.image_id_1} == {2354800, 2354803}
    meanings = json.loads(record.predicate)
    for image_id, swapped in ((record.image_id_0, meanings["caption_1"]), (record.image_id_1, meanings["caption_0"])):
        assert _raw_objects(data, image_id, swapped["object"]) == []  # the swapped object is absent, by hand


def test_relation_spatial_multi_instance_is_excluded_and_the_swap_is_opposite_for_every_pair(gqa):
    index, data = gqa
    build = _build(index, "relation_spatial", ["2354810", "2354811", "2354812"])
    assert build.excluded == {"matched_multi_instance_ambiguous": 2}  # both spatial edges of 2354812
    (record,) = build.records[0]["train"]
    assert {record.image_id_0, record.image_id_1} == {2354810, 2354811}
    assert json.loads(record.predicate)["stratum"] == "cup|to the left of|plate"
    family = get_family("gqa", "relation_spatial")
    left = {"subject": "cup", "relation": "to the left of", "object": "plate"}
    right = {**left, "relation": "to the right of"}
    assert family.verdict(index, 2354811, left) == "false"  # the only cup is annotated right of the plate
    assert family.verdict(index, 2354812, {**left, "relation": "above"}) == "relation_unannotated"
    # One cup on each side of the plate (the fixture): neither direction holds for every instance pair.
    assert family.verdict(index, 2354812, right) == "multi_instance_ambiguous"
    assert not family.holds(index, 2354812, right) and not family.refutes(index, 2354812, left)


def test_relation_object_spatial_edge_to_one_of_two_objects_is_not_a_true_caption(gqa):
    index, data = gqa
    # 2354813: the only star is left of one ring; a second ring has no edge: "a star to the left
    # of a ring" is not known for every (star, ring) pair, so the candidate is excluded.
    rings = _raw_objects(data, 2354813, "ring")
    assert len(rings) == 2 and sum(1 for ob in data["2354813"]["objects"].values() if ob.get("relations")) == 1
    meaning = {"subject": "star", "relation": "to the left of", "object": "ring"}
    family = get_family("gqa", "relation_object")
    assert family.verdict(index, 2354813, meaning) == "multi_instance_ambiguous"
    assert not family.holds(index, 2354813, meaning)
    build = _build(index, "relation_object", ["2354813", "2354814"])
    assert build.excluded.get("matched_not_all_instances") == 1
    # The single-ring image keeps its candidate (no partner to pair with here, so no cycle).
    assert build.counts[0]["train"] == 0
    assert family.verdict(index, 2354814, meaning) == "true"
