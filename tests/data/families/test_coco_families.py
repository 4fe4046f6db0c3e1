"""COCO families on hand-made fixtures whose right answers are known, plus the shapes-world acceptance."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.data.families.coco import MentionMatcher, load_coco_index, plural, render_caption
from clip_cycles.data.families.registry import (
    AuditError,
    Cycle,
    Family,
    StratumError,
    audit_family_cycles,
    build_family,
    get_family,
    list_families,
    register_family,
    select_pool,
    split_pools,
)

CATEGORIES = [(1, "dog", "animal"), (2, "cat", "animal"), (3, "car", "vehicle"), (4, "couch", "furniture"),
              (5, "hot dog", "food")]  # fmt: skip
DOG, CAT, CAR, COUCH, HOTDOG = 1, 2, 3, 4, 5


def box(cx: float, cy: float, side: float = 10) -> list[float]:
    return [cx - side / 2, cy - side / 2, side, side]


# Image width and height are 100 px, so the 0.1 margin is 10 px.
TRAIN = [
    # strict_left_right: 1 dog left of cat, 2 dog right of cat, 3 inside the margin (dx 7),
    # 4 two dogs on both sides of the cat (instance pairs disagree), 5 dog left of cat just outside the
    # margin (dx 11).
    {"id": 1, "objects": [(DOG, box(20, 50)), (CAT, box(80, 50))]},
    {"id": 2, "objects": [(CAT, box(20, 50)), (DOG, box(80, 50))]},
    {"id": 3, "objects": [(DOG, box(45, 50)), (CAT, box(52, 50))]},
    {"id": 4, "objects": [(DOG, box(15, 50)), (DOG, box(95, 85)), (CAT, box(80, 50))]},
    {"id": 5, "objects": [(DOG, box(30, 50)), (CAT, box(41, 50))]},
    # strict_above_below: 11 dog above cat, 12 dog below cat, 13 inside the margin (dy 7).
    {"id": 11, "objects": [(DOG, box(50, 20)), (CAT, box(50, 80))]},
    {"id": 12, "objects": [(CAT, box(50, 20)), (DOG, box(50, 80))]},
    {"id": 13, "objects": [(DOG, box(50, 45)), (CAT, box(50, 52))]},
    # strict_size (ratio 1.5): 21 dog larger (2.25x), 22 dog smaller, 23 ratio 1.21 only.
    {"id": 21, "objects": [(DOG, box(25, 50, 30)), (CAT, box(75, 50, 20))]},
    {"id": 22, "objects": [(DOG, box(25, 50, 20)), (CAT, box(75, 50, 30))]},
    {"id": 23, "objects": [(DOG, box(25, 50, 22)), (CAT, box(75, 50, 20))]},
    # strict_same_pair: 31 horizontal only, 32 vertical only (each: the other axis is sub-margin, so a
    # swapped caption on it would not be clearly false), 33 dog left of and above the cat, 34 the opposite
    # diagonal (dog right of and below the cat).
    {"id": 31, "objects": [(DOG, box(20, 50)), (CAT, box(80, 50))]},
    {"id": 32, "objects": [(DOG, box(50, 20)), (CAT, box(50, 80))]},
    {"id": 33, "objects": [(DOG, box(20, 20)), (CAT, box(80, 80))]},
    {"id": 34, "objects": [(DOG, box(80, 80)), (CAT, box(20, 20))]},
    # object_position: 41 dog on the left, 42 on the right, 43 in the middle band.
    {"id": 41, "objects": [(DOG, box(20, 50))]},
    {"id": 42, "objects": [(DOG, box(80, 50))]},
    {"id": 43, "objects": [(DOG, box(45, 50))]},
    # category_count: 51 one dog, 52 two dogs, 53 two dogs and a crowd region of dogs.
    {"id": 51, "objects": [(DOG, box(20, 50))]},
    {"id": 52, "objects": [(DOG, box(20, 50)), (DOG, box(80, 50))]},
    {"id": 53, "objects": [(DOG, box(20, 50)), (DOG, box(80, 50)), (DOG, box(50, 20, 20), 1)]},
    # object_variant: anchor dog; 61 + cat, 62 + car, 63 has both variants.
    {"id": 61, "objects": [(DOG, box(20, 50)), (CAT, box(80, 50))]},
    {"id": 62, "objects": [(DOG, box(20, 50)), (CAR, box(80, 50))]},
    {"id": 63, "objects": [(DOG, box(20, 50)), (CAT, box(50, 50)), (CAR, box(80, 50))]},
    # box_left_right: 71 and 73 share the pair (dog, cat); 72 is (car, couch).
    {"id": 71, "objects": [(DOG, box(20, 50)), (CAT, box(80, 50))]},
    {"id": 72, "objects": [(CAR, box(20, 50)), (COUCH, box(80, 50))]},
    {"id": 73, "objects": [(CAT, box(20, 50)), (DOG, box(80, 50))]},
    # coarse_object: human captions with synonyms, plurals and a multi-word category.
    {"id": 81, "objects": [(DOG, box(20, 50))], "captions": ["A puppy sleeping on the grass."]},
    {"id": 82, "objects": [(CAR, box(20, 50))], "captions": ["two cars parked on a street"]},
    {"id": 83, "objects": [(DOG, box(20, 50)), (CAR, box(80, 50))], "captions": ["a dog next to a car"]},
    {"id": 84, "objects": [(HOTDOG, box(20, 50))], "captions": ["a hot dog with mustard"]},
    {"id": 85, "objects": [(DOG, box(20, 50))], "captions": ["a dog chasing a cat", "a nice photo"]},
    # matched_object: 91 and 92 both mention one animal; 93 a vehicle.
    {"id": 91, "objects": [(DOG, box(20, 50))], "captions": ["a dog on the grass"]},
    {"id": 92, "objects": [(CAT, box(20, 50))], "captions": ["a cat on the grass"]},
    {"id": 93, "objects": [(CAR, box(20, 50))], "captions": ["a car on the road"]},
    # text_neighbor: 101/102 near-identical wording, different animals; 103/104 both only cars.
    {"id": 101, "objects": [(DOG, box(20, 50)), (COUCH, box(70, 50, 30))], "captions": ["a dog sleeping on a red sofa"]},
    {"id": 102, "objects": [(CAT, box(20, 50)), (COUCH, box(70, 50, 30))], "captions": ["a cat sleeping on a red sofa"]},
    {"id": 103, "objects": [(CAR, box(20, 50))], "captions": ["a car parked outside"]},
    {"id": 104, "objects": [(CAR, box(20, 50))], "captions": ["a blue car parked outside"]},
    # supercategory_object: 111 animal, 112 vehicle, 113 both.
    {"id": 111, "objects": [(DOG, box(20, 50))]},
    {"id": 112, "objects": [(CAR, box(20, 50))]},
    {"id": 113, "objects": [(DOG, box(20, 50)), (CAR, box(80, 50))]},
]
VAL = [{"id": 999, "objects": [(DOG, box(50, 50))], "captions": ["a dog"]}]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from fixture_data import write_coco_root as _write_coco

    root = _write_coco(tmp_path_factory.mktemp("coco_fixture"), CATEGORIES, TRAIN, VAL)
    return load_coco_index(root)


def pairs_of(index, name, ids, seed=0):
    family = get_family("coco", name)
    cycles = family.build_cycles(index, ids, np.random.default_rng(seed))
    if cycles:
        assert audit_family_cycles(family, index, cycles)["passed"]
    return cycles, {frozenset((c.image_id_0, c.image_id_1)) for c in cycles}


def test_registry_holds_the_fourteen_families_with_predicates():
    names = list_families("coco")
    assert names == [
        "coarse_object", "matched_object", "text_neighbor", "box_left_right", "box_above_below",
        "strict_left_right", "strict_above_below", "strict_size", "strict_same_pair", "box_size",
        "object_variant", "object_position", "category_count", "supercategory_object",
    ]  # fmt: skip
    assert all(len(get_family("coco", n).predicate) > 80 for n in names)
    with pytest.raises(ValueError, match="already registered"):
        register_family("coco", "strict_size", predicate="again")(type("Again", (Family,), {}))
    with pytest.raises(ValueError, match="unknown coco family 'nope'"):
        get_family("coco", "nope")


def test_strict_left_right_margin_and_uniqueness(index):
    cycles, pairs = pairs_of(index, "strict_left_right", [1, 2, 3, 4, 5])
    # 3 is inside the margin, 4's two dogs disagree; 1 and 5 are "left", 2 "right" (used twice).
    assert pairs == {frozenset({1, 2}), frozenset({2, 5})}
    for c in cycles:
        m0, m1 = json.loads(c.meaning_0), json.loads(c.meaning_1)
        assert {m0["subject"], m0["object"]} == {"dog", "cat"} and m0["subject"] == m1["subject"]
        assert {m0["relation"], m1["relation"]} == {"to the left of", "to the right of"}
    family = get_family("coco", "strict_left_right")
    for relation in ("to the left of", "to the right of"):
        meaning = {"kind": "relation", "subject": "dog", "relation": relation, "object": "cat", "margin": 0.1}
        assert not family.holds(index, 3, meaning)
        assert not family.holds(index, 4, meaning)
    assert family.holds(index, 5, {"kind": "relation", "subject": "dog", "relation": "to the left of",
                                   "object": "cat", "margin": 0.1})  # fmt: skip


def test_strict_above_below_and_size_and_same_pair(index):
    assert pairs_of(index, "strict_above_below", [11, 12, 13])[1] == {frozenset({11, 12})}
    assert pairs_of(index, "strict_size", [21, 22, 23])[1] == {frozenset({21, 22})}
    family = get_family("coco", "strict_same_pair")
    family.take_exclusions()
    cycles, pairs = pairs_of(index, "strict_same_pair", [31, 32, 33, 34])
    assert pairs == {frozenset({33, 34})}
    assert dict(family.take_exclusions()) == {"swap_sub_margin": 2}  # 31 and 32
    (c,) = cycles
    m0, m1 = json.loads(c.meaning_0), json.loads(c.meaning_1)
    # Caption 0 states image 0's horizontal relation, caption 1 image 1's vertical one (same pair).
    assert m0["relation"] in {"to the left of", "to the right of"} and m1["relation"] in {"above", "below"}
    assert {m0["subject"], m0["object"]} == {m1["subject"], m1["object"]} == {"dog", "cat"}


def test_position_count_variant_supercategory(index):
    assert pairs_of(index, "object_position", [41, 42, 43])[1] == {frozenset({41, 42})}
    cycles, pairs = pairs_of(index, "category_count", [51, 52, 53])
    assert pairs == {frozenset({51, 52})}
    assert {cycles[0].caption_0, cycles[0].caption_1} == {"exactly one dog", "exactly two dogs"}
    cycles, pairs = pairs_of(index, "object_variant", [61, 62, 63])
    assert pairs == {frozenset({61, 62})}
    assert {cycles[0].caption_0, cycles[0].caption_1} == {"a dog and a cat", "a dog and a car"}
    cycles, pairs = pairs_of(index, "supercategory_object", [111, 112, 113])
    assert pairs == {frozenset({111, 112})}
    assert {cycles[0].caption_0, cycles[0].caption_1} == {"a picture with an animal", "a picture with a vehicle"}


def test_box_relation_partners_differ_in_category_pair(index):
    found = set()
    for seed in range(6):
        found |= pairs_of(index, "box_left_right", [71, 72, 73], seed)[1]
    assert frozenset({71, 73}) not in found
    assert found and found <= {frozenset({71, 72}), frozenset({72, 73})}


def test_coarse_object_mentions_synonyms_plurals_and_multiword(index):
    allowed = {frozenset(p) for p in ({81, 82}, {81, 84}, {82, 84}, {83, 84})}
    found = set()
    for seed in range(6):
        cycles, pairs = pairs_of(index, "coarse_object", [81, 82, 83, 84, 85], seed)
        found |= pairs
        assert all(85 not in p for p in pairs)  # its only mentioning caption names an absent cat
        for c in cycles:
            if c.image_id_0 == 84:
                assert json.loads(c.meaning_0)["categories"] == ["hot dog"]
    assert found and found <= allowed


def test_matched_object_and_text_neighbor(index):
    assert pairs_of(index, "matched_object", [91, 92, 93])[1] == {frozenset({91, 92})}
    _, pairs = pairs_of(index, "text_neighbor", [101, 102, 103, 104])
    assert frozenset({101, 102}) in pairs
    assert frozenset({103, 104}) not in pairs


def test_mention_matcher_and_templates():
    match = MentionMatcher(["dog", "hot dog", "person", "couch", "teddy bear", "tv"])
    assert match("A hot dog on a plate") == ("hot dog",)
    assert match("two puppies and three men") == ("dog", "person")
    assert match("people on a sofa watching television") == ("couch", "person", "tv")
    assert match("teddy bears") == ("teddy bear",)
    assert match("a bowl of soup") == ()
    assert plural("bus") == "buses" and plural("person") == "people" and plural("teddy bear") == "teddy bears"
    assert render_caption({"kind": "relation", "subject": "apple", "relation": "above", "object": "dog"}) == (
        "an apple above a dog"
    )


def test_build_family_marks_short_families_unavailable_and_raises_on_failed_audit(index):
    splits = {0: {"train": [1, 2, 5], "validation": [11, 12], "test": [21, 22]}}
    build = build_family(get_family("coco", "strict_left_right"), index, splits, min_cycles=1)
    # The minimum-cycle rule is per split: train (1-2 and 5-2, two cycles) stays usable for zero-shot scoring.
    assert not build.available and "validation seed 0: 0 cycles" in build.reason
    assert build.available_splits == ["train"] and build.counts == {0: {"train": 2, "validation": 0, "test": 0}}
    assert len(build.records[0]["train"]) == 2 and build.records[0]["test"] == []
    # 11 and 12 hold dog and cat at the same x: sub-margin on this axis, counted.
    assert build.excluded == {"matched_sub_margin": 2}
    none = build_family(
        get_family("coco", "strict_left_right"), index, {0: {"train": [11], "validation": [12], "test": [13]}}, min_cycles=1
    )
    assert none.available_splits == [] and none.records == {}

    class AlwaysTrue(Family):
        source, name, predicate = "coco", "always_true", "every caption holds"

        def build_cycles(self, index, image_ids, rng):
            return [Cycle(1, 2, "x", "y", '{"k":0}', '{"k":1}')]

        def holds(self, index, image_id, meaning):
            return True

    everything = {0: {"train": [1], "validation": [1], "test": [1]}}
    with pytest.raises(AuditError, match="always_true seed 0 split train failed its audit .*0/2/0/0/balanced"):
        build_family(AlwaysTrue(), index, everything, min_cycles=1)

    class SubMarginSwaps(AlwaysTrue):
        """Matched captions hold and swaps do not, but the swaps are only undecided, never refuted."""

        name = "sub_margin_swaps"

        def holds(self, index, image_id, meaning):
            return meaning["k"] == image_id - 1

        def verdict(self, index, image_id, meaning):
            return "true" if self.holds(index, image_id, meaning) else "sub_margin"

    with pytest.raises(AuditError, match="sub_margin_swaps seed 0 split train failed its audit .*0/2/0/0/balanced"):
        build_family(SubMarginSwaps(), index, everything, min_cycles=1)

    class MixedStrata(SubMarginSwaps):
        name = "mixed_strata"

        def verdict(self, index, image_id, meaning):
            return "true" if self.holds(index, image_id, meaning) else "false"

        def build_cycles(self, index, image_ids, rng):
            return [Cycle(1, 2, "x", "y", '{"k":0}', '{"k":1}', "{}", "dog|cat", "car|dog")]

    with pytest.raises(
        StratumError,
        match="mixed_strata: cycle mixed_strata-s0-train-000000 draws its pairs from "
        "different candidate strata \\('dog\\|cat' and 'car\\|dog'\\)",
    ):
        build_family(MixedStrata(), index, everything, min_cycles=1)

    class SameStratum(MixedStrata):
        name = "same_stratum"

        def build_cycles(self, index, image_ids, rng):
            return [Cycle(1, 2, "x", "y", '{"k":0}', '{"k":1}', "{}", "dog|cat", "dog|cat")]

    ok = build_family(SameStratum(), index, everything, min_cycles=1)
    assert ok.available and json.loads(ok.records[0]["test"][0].predicate)["stratum"] == "dog|cat"


@settings(max_examples=50, deadline=None)
@given(st.sets(st.integers(0, 10**6), min_size=2, max_size=60), st.sets(st.integers(-100, -1), max_size=20),
       st.integers(0, 5), st.floats(0.05, 0.95))  # fmt: skip
def test_split_pools_are_disjoint_and_deterministic(train, val, seed, fraction):
    splits = split_pools(sorted(train), sorted(val), seed, fraction)
    assert set(splits["train"]) | set(splits["validation"]) == train
    assert not set(splits["train"]) & set(splits["validation"])
    assert splits["test"] == sorted(val)
    assert splits == split_pools(sorted(train, reverse=True), sorted(val), seed, fraction)
    assert select_pool(train, 1) == select_pool(sorted(train, reverse=True), 1)


def test_every_family_builds_from_the_shapes_world(shapes_cycles):
    info = json.loads((shapes_cycles / "build_info.json").read_text())
    assert info["unavailable"] == {}
    assert sorted(info["families"]) == sorted(list_families("coco"))
    for name, entry in info["families"].items():
        for seed in ("0", "1", "2"):
            for split, report in entry["audits"][seed].items():
                assert report == {"passed": True, "matched_violations": 0, "swap_violations": 0,
                                  "image_tv": 0.0, "caption_tv": 0.0, "balanced": True}, (name, seed, split)  # fmt: skip
                assert entry["counts"][seed][split] >= 5


def test_every_family_loads_with_datasets(shapes_cycles, tmp_path):
    import datasets

    datasets.disable_progress_bars()
    info = json.loads((shapes_cycles / "build_info.json").read_text())
    for name in list_families("coco"):
        test = datasets.load_dataset(str(shapes_cycles), name, split="test", cache_dir=str(tmp_path))
        assert len(test) == info["families"][name]["counts"]["0"]["test"]
        assert set(test["family"]) == {name} and set(test["seed"]) == {0}
        assert all(n.startswith("val2017/") for n in list(test["image_0"]) + list(test["image_1"]))
    other = datasets.load_dataset(str(shapes_cycles), "strict_size_seed2", split="validation", cache_dir=str(tmp_path))
    assert set(other["seed"]) == {2} and len(other) == info["families"]["strict_size"]["counts"]["2"]["validation"]


def test_the_build_audit_asks_a_family_without_one_verdict_only_what_each_gate_checks() -> None:
    """A family that does not decide both answers at once is asked holds for matched pairs and refutes for
    swapped ones, each (image, meaning) once (the gate's memo), never both of every pair."""
    from types import SimpleNamespace

    asked: list[tuple[str, int, str]] = []

    class Counted(Family):
        source, name, predicate = "coco", "counted", "k is the image id minus one"

        def holds(self, index, image_id, meaning):
            asked.append(("holds", image_id, meaning["k"]))
            return meaning["k"] == image_id - 1

        def refutes(self, index, image_id, meaning):
            asked.append(("refutes", image_id, meaning["k"]))
            return meaning["k"] != image_id - 1

    cycles = [Cycle(1, 2, "x", "y", '{"k":0}', '{"k":1}')] * 3
    index = SimpleNamespace(memo={})
    assert audit_family_cycles(Counted(), index, cycles)["passed"]
    assert sorted(asked) == [("holds", 1, 0), ("holds", 2, 1), ("refutes", 1, 1), ("refutes", 2, 0)]
