"""Independent oracles: every built cycle's captions read right for its images.

The builders' helpers decide nothing here. Each test writes a hand-made fixture in the
real file formats (COCO instances/captions JSON, GQA scene-graph JSON), lets a family
build its cycles, and re-derives from the caption TEXT and the fixture's own numbers,
with the few lines of geometry below, that each matched caption is true of its image
and each swapped caption false of the other image beyond doubt (the stricter rule:
true for every instance pair; false by absence or by the opposite relation holding by
the margin for every pair; a crowd region of a named object makes a claim undecidable).
Fixtures cover left/right, above/below, larger/smaller, both picture sides, counts,
crowd regions, several instances of one category and contrasts inside the margin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.data.families.registry import get_family, load_source

W = H = 100.0  # image size; the 0.1 margin is 10 px, the size ratio 1.5
CATS = {1: ("dog", "animal"), 2: ("cat", "animal"), 3: ("car", "vehicle"), 4: ("bus", "vehicle")}
DOG, CAT, CAR, BUS = 1, 2, 3, 4


def sq(cx: float, cy: float, side: float = 10.0) -> list[float]:
    return [cx - side / 2, cy - side / 2, side, side]


# (id, [(category, box, iscrowd)]). Several images per geometric situation so greedy pairing finds partners.
IMAGES: list[tuple[int, list[tuple[int, list[float], int]]]] = []
_next = iter(range(1, 10_000))


def add(objects: list[tuple], copies: int = 3) -> None:
    for _ in range(copies):
        IMAGES.append((next(_next), [(c, b, o[2] if len(o) > 2 else 0) for o in objects for c, b in [o[:2]]]))


# Horizontal: dog left of cat, dog right of cat, two dogs both left of the cat, inside the margin, crowd cat.
add([(DOG, sq(20, 50)), (CAT, sq(80, 50))])
add([(CAT, sq(20, 50)), (DOG, sq(80, 50))])
add([(DOG, sq(15, 30)), (DOG, sq(25, 70)), (CAT, sq(80, 50))])
add([(DOG, sq(45, 50)), (CAT, sq(52, 50))])
add([(DOG, sq(20, 50)), (CAT, sq(80, 50)), (CAT, sq(60, 20, 20), 1)])
# Vertical: dog above cat, below, two cats both below the dog.
add([(DOG, sq(50, 20)), (CAT, sq(50, 80))])
add([(CAT, sq(50, 20)), (DOG, sq(50, 80))])
add([(DOG, sq(50, 15)), (CAT, sq(30, 80)), (CAT, sq(70, 85))])
# Sizes: car 2.25x the bus, bus 2.25x the car, ratio 1.21 only.
add([(CAR, sq(25, 50, 30)), (BUS, sq(75, 50, 20))])
add([(CAR, sq(25, 50, 20)), (BUS, sq(75, 50, 30))])
add([(CAR, sq(25, 50, 22)), (BUS, sq(75, 50, 20))])
# Diagonal and pure-axis placements of car and bus (same-pair and box families).
add([(CAR, sq(20, 50)), (BUS, sq(80, 50))])
add([(CAR, sq(50, 20)), (BUS, sq(50, 80))])
add([(CAR, sq(20, 20)), (BUS, sq(80, 80))])
# Positions: a lone car on the left, on the right, in the middle band, two cars on different sides.
add([(CAR, sq(20, 50))])
add([(CAR, sq(80, 50))])
add([(CAR, sq(45, 50))])
add([(CAR, sq(20, 50)), (CAR, sq(80, 50))])
# Counts: one, two, three dogs; two dogs and a crowd region of dogs.
add([(DOG, sq(20, 20))])
add([(DOG, sq(20, 20)), (DOG, sq(60, 60))])
add([(DOG, sq(20, 20)), (DOG, sq(60, 60)), (DOG, sq(80, 20))])
add([(DOG, sq(20, 20)), (DOG, sq(60, 60)), (DOG, sq(80, 80, 15), 1)])
# Presence: an animal only, a vehicle only, a cat and a crowd of buses.
add([(CAT, sq(30, 30))])
add([(BUS, sq(30, 30))])
add([(CAT, sq(30, 30)), (BUS, sq(70, 70, 20), 1)])


def write_coco(root: Path) -> Path:
    """The fixture in COCO's layout; every image in both splits' id spaces is train2017 here."""
    (root / "annotations").mkdir(parents=True)
    images, annotations, captions = [], [], []
    ann = 0
    for image_id, objects in IMAGES:
        images.append({"id": image_id, "file_name": f"{image_id:012d}.jpg", "width": W, "height": H})
        for category, box, crowd in objects:
            ann += 1
            annotations.append({"id": ann, "image_id": image_id, "category_id": category, "bbox": box,
                                "area": box[2] * box[3], "iscrowd": crowd, "segmentation": []})  # fmt: skip
        ann += 1
        captions.append({"id": ann, "image_id": image_id, "caption": "a picture"})
    categories = [{"id": i, "name": n, "supercategory": s} for i, (n, s) in CATS.items()]
    head = {"info": {}, "licenses": []}
    for split, imgs, anns, caps in (("train2017", images, annotations, captions), ("val2017", [], [], [])):
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({**head, "images": imgs, "annotations": anns, "categories": categories})
        )
        (root / "annotations" / f"captions_{split}.json").write_text(json.dumps({**head, "images": imgs, "annotations": caps}))
    return root


# --- the COCO oracle: caption text + fixture numbers -------------------------------------------------------------

TRUE, FALSE, UNDECIDED = "true", "false", "undecided"
NAMES = {n: c for c, (n, _) in CATS.items()}
PLURALS = {"dogs": "dog", "cats": "cat", "cars": "car", "buses": "bus"}
SUPER_WORDS = {"an animal": "animal", "a vehicle": "vehicle"}


def instances(image_id: int) -> tuple[dict[str, list[list[float]]], set[str]]:
    objects = dict(IMAGES)[image_id]
    boxes: dict[str, list[list[float]]] = {}
    crowd = set()
    for category, box, is_crowd in objects:
        name = CATS[category][0]
        if is_crowd:
            crowd.add(name)
        else:
            boxes.setdefault(name, []).append(box)
    return boxes, crowd


def centre(b: list[float]) -> tuple[float, float]:
    return b[0] + b[2] / 2, b[1] + b[3] / 2


def pair_says(relation: str, a: list[float], b: list[float]) -> bool:
    """Written from the words: "A to the left of B" means A's centre is further left by 10 px or more, etc."""
    (ax, ay), (bx, by) = centre(a), centre(b)
    return {
        "to the left of": ax + 10 <= bx,
        "to the right of": ax >= bx + 10,
        "above": ay + 10 <= by,  # image y grows downwards
        "below": ay >= by + 10,
        "larger than": a[2] * a[3] >= 1.5 * b[2] * b[3],
        "smaller than": 1.5 * a[2] * a[3] <= b[2] * b[3],
    }[relation]


REVERSE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below",
           "below": "above", "larger than": "smaller than", "smaller than": "larger than"}  # fmt: skip


def every(values: list[bool], opposite: list[bool]) -> str:
    return TRUE if values and all(values) else FALSE if opposite and all(opposite) else UNDECIDED


def coco_oracle(caption: str, image_id: int) -> str:
    boxes, crowd = instances(image_id)
    present = set(boxes) | crowd
    if m := re.fullmatch(r"an? (\w+) (to the left of|to the right of|above|below|larger than|smaller than) an? (\w+)", caption):
        a, rel, b = m.groups()
        if a in crowd or b in crowd:
            return UNDECIDED
        if a not in boxes or b not in boxes:
            return FALSE
        pairs = [(p, q) for p in boxes[a] for q in boxes[b]]
        return every([pair_says(rel, p, q) for p, q in pairs], [pair_says(REVERSE[rel], p, q) for p, q in pairs])
    if m := re.fullmatch(r"an? (\w+) on the (left|right) side of the picture", caption):
        a, side = m.groups()
        if a in crowd:
            return UNDECIDED
        xs = [centre(b)[0] for b in boxes.get(a, [])]
        if not xs:
            return FALSE
        left, right = [x <= 40 for x in xs], [x >= 60 for x in xs]
        return every(left, right) if side == "left" else every(right, left)
    if m := re.fullmatch(r"exactly (one|two|three) (\w+)", caption):
        n = {"one": 1, "two": 2, "three": 3}[m[1]]
        name = PLURALS.get(m[2], m[2])
        assert (n == 1) == (m[2] == name), caption  # singular noun exactly for one
        if name in crowd:
            return UNDECIDED
        return TRUE if len(boxes.get(name, [])) == n else FALSE
    if m := re.fullmatch(r"a picture with (an animal|a vehicle)", caption):
        wanted = SUPER_WORDS[m[1]]
        return TRUE if any(CATS[NAMES[n]][1] == wanted for n in present) else FALSE
    if m := re.fullmatch(r"an? (\w+) and an? (\w+)", caption):
        return TRUE if {m[1], m[2]} <= present else FALSE
    raise AssertionError(f"the oracle cannot read caption {caption!r}")


def check_cycles(cycles, oracle) -> list[str]:
    """Every way a cycle's captions misread its images, as messages (empty when all four pairs are right)."""
    wrong = []
    for c in cycles:
        for image, caption, expected in ((c.image_id_0, c.caption_0, TRUE), (c.image_id_1, c.caption_1, TRUE),
                                         (c.image_id_0, c.caption_1, FALSE), (c.image_id_1, c.caption_0, FALSE)):  # fmt: skip
            got = oracle(caption, image)
            if got != expected:
                wrong.append(f"image {image} {caption!r}: {got}, should be {expected}")
    return wrong


@pytest.fixture(scope="module")
def coco_index(tmp_path_factory):
    return load_source("coco", write_coco(tmp_path_factory.mktemp("oracle_coco")))


COCO_FAMILIES = {
    # family -> words that must appear in its captions across the built cycles (the fixture really covers them)
    "strict_left_right": ("to the left of", "to the right of"),
    "strict_above_below": ("above", "below"),
    "strict_size": ("larger than", "smaller than"),
    "strict_same_pair": (),
    "box_left_right": (),
    "box_above_below": (),
    "box_size": (),
    "object_position": ("left side", "right side"),
    "category_count": ("exactly one", "exactly two", "exactly three"),
    "supercategory_object": ("an animal", "a vehicle"),
    "object_variant": (" and ",),
}


@pytest.mark.parametrize("family", sorted(COCO_FAMILIES))
def test_coco_captions_read_right_for_their_images(coco_index, family):
    ids = sorted(i for i, _ in IMAGES)
    cycles = []
    for seed in (0, 1, 2):
        cycles += get_family("coco", family).build_cycles(coco_index, ids, np.random.default_rng(seed))
    text = " | ".join(c.caption_0 + " | " + c.caption_1 for c in cycles)
    for words in COCO_FAMILIES[family]:
        assert words in text, f"{family}: no cycle states {words!r}; the fixture does not exercise it"
    wrong = check_cycles(cycles, coco_oracle)
    assert not wrong, f"{family}: {len(wrong)} misread pair(s), e.g. {wrong[:3]}"


def test_the_oracle_itself_by_hand():
    ids = {i: objects for i, objects in IMAGES}
    first = {tuple(tuple(o[1]) for o in objs): i for i, objs in reversed(list(ids.items()))}
    dog_left = first[(tuple(sq(20, 50)), tuple(sq(80, 50)))]
    assert coco_oracle("a dog to the left of a cat", dog_left) == TRUE
    assert coco_oracle("a cat to the left of a dog", dog_left) == FALSE
    assert coco_oracle("a dog to the right of a cat", dog_left) == FALSE
    assert coco_oracle("a dog above a cat", dog_left) == UNDECIDED
    assert coco_oracle("a dog to the left of a bus", dog_left) == FALSE
    crowd_cat = [i for i, objs in IMAGES if any(o[2] for o in objs) and {o[0] for o in objs} == {DOG, CAT}][0]
    assert coco_oracle("a dog to the left of a cat", crowd_cat) == UNDECIDED
    assert coco_oracle("exactly two dogs", crowd_cat) == FALSE
    crowd_dogs = [i for i, objs in IMAGES if any(o[2] for o in objs) and {o[0] for o in objs} == {DOG}][0]
    assert coco_oracle("exactly two dogs", crowd_dogs) == UNDECIDED
    two_cars = [i for i, objs in IMAGES if [o[0] for o in objs] == [CAR, CAR]][0]
    assert coco_oracle("a car on the left side of the picture", two_cars) == UNDECIDED
    assert coco_oracle("a picture with a vehicle", crowd_cat) == FALSE


# --- GQA ---------------------------------------------------------------------------------------------------------


def gobj(name, attributes=(), relations=(), box=(0, 0, 10, 10)):
    x, y, w, h = box
    return {"name": name, "x": x, "y": y, "w": w, "h": h, "attributes": list(attributes),
            "relations": [{"name": r, "object": t} for r, t in relations]}  # fmt: skip


GRAPHS: dict[str, dict[str, dict]] = {}


def gadd(objects: dict[str, dict], copies: int = 3) -> None:
    for _ in range(copies):
        GRAPHS[str(len(GRAPHS) + 1)] = objects


# Attributes: a red/blue/big/small/wooden/metal cup; two cups (one red, one blue); a grey cup (synonym of gray).
gadd({"a": gobj("cup", ["red", "small"]), "b": gobj("plate", ["white", "metal"])})
gadd({"a": gobj("cup", ["blue", "large"]), "b": gobj("plate", ["black", "wooden"])})
gadd({"a": gobj("cup", ["red"]), "b": gobj("cup", ["blue"])})
gadd({"a": gobj("cup", ["grey", "wooden"]), "b": gobj("plate", ["white", "plastic"])})
# Binding: the two values exchanged between cup and plate.
gadd({"a": gobj("cup", ["green"]), "b": gobj("plate", ["yellow"])})
gadd({"a": gobj("cup", ["yellow"]), "b": gobj("plate", ["green"])})
# Spatial relations both ways, vertical both ways, in front/behind, and a contradictory pair.
gadd({"a": gobj("cup", relations=[("to the left of", "b")]), "b": gobj("plate", relations=[("to the right of", "a")])})
gadd({"a": gobj("cup", relations=[("to the right of", "b")]), "b": gobj("plate")})
gadd({"a": gobj("cup", relations=[("above", "b")]), "b": gobj("plate")})
gadd({"a": gobj("cup", relations=[("below", "b")]), "b": gobj("plate")})
gadd({"a": gobj("cup", relations=[("in front of", "b")]), "b": gobj("plate")})
gadd({"a": gobj("cup", relations=[("behind", "b")]), "b": gobj("plate")})
gadd({"a": gobj("cup", relations=[("to the left of", "b")]), "b": gobj("plate", relations=[("to the left of", "a")])})
# Relations with changing object and subject (the swapped name absent).
gadd({"a": gobj("man", relations=[("holding", "b")]), "b": gobj("cup")})
gadd({"a": gobj("man", relations=[("holding", "b")]), "b": gobj("phone")})
gadd({"a": gobj("woman", relations=[("holding", "b")]), "b": gobj("cup")})


def write_gqa(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    data = {i: {"width": 100, "height": 100, "objects": objs} for i, objs in GRAPHS.items()}
    (root / "train_sceneGraphs.json").write_text(json.dumps(data))
    (root / "val_sceneGraphs.json").write_text(json.dumps({}))
    return root


COLOURS = {"red", "blue", "green", "yellow", "white", "black", "gray"}
MEANS = {"grey": "gray", "big": "large", "wood": "wooden"}
KIND = {**{c: "color" for c in COLOURS}, "large": "size", "small": "size", "wooden": "material", "metal": "material",
        "plastic": "material"}  # fmt: skip
OPPOSITE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below",
            "below": "above", "in front of": "behind", "behind": "in front of"}  # fmt: skip


def attribute_claim(phrase: str, graph: dict) -> str:
    m = re.fullmatch(r"(?:an? )?(\w+) (\w+)", phrase)
    assert m, phrase
    value, name = m.groups()
    named = [o for o in graph.values() if o["name"] == name]
    if not named:
        return FALSE
    values = [{MEANS.get(a, a) for a in o["attributes"] if KIND.get(MEANS.get(a, a)) == KIND[value]} for o in named]
    return every([value in v for v in values], [bool(v) and value not in v for v in values])


def gqa_oracle(caption: str, image_id: int) -> str:
    graph = GRAPHS[str(image_id)]
    names = "|".join(sorted({o["name"] for g in GRAPHS.values() for o in g.values()}))
    rel = re.fullmatch(rf"an? ({names}) (.+) an? ({names})", caption)
    if rel and rel[2].split(" ")[0] not in COLOURS:
        subject, relation, obj = rel.groups()
        s_ids = [k for k, o in graph.items() if o["name"] == subject]
        o_ids = [k for k, o in graph.items() if o["name"] == obj]
        if not s_ids or not o_ids:
            return FALSE

        def edge(a, r, b):
            return {"name": r, "object": b} in graph[a]["relations"]

        if relation not in OPPOSITE:
            return TRUE if any(edge(s, relation, o) for s in s_ids for o in o_ids) else UNDECIDED
        says = [edge(s, relation, o) or edge(o, OPPOSITE[relation], s) for s in s_ids for o in o_ids]
        denies = [edge(s, OPPOSITE[relation], o) or edge(o, relation, s) for s in s_ids for o in o_ids]
        if any(a and b for a, b in zip(says, denies)):
            return UNDECIDED
        return every(says, denies)
    verdicts = [attribute_claim(p, graph) for p in caption.split(" and ")]
    return FALSE if FALSE in verdicts else TRUE if all(v == TRUE for v in verdicts) else UNDECIDED


GQA_FAMILIES = {
    "attribute_color": ("red cup", "blue cup"),
    "attribute_size": ("large cup", "small cup"),
    "attribute_material": ("wooden", "metal"),
    "binding": ("green cup and", "yellow cup and"),
    "relation_spatial": ("to the left of", "to the right of", "above", "below"),
    "relation_object": ("holding a cup", "holding a phone"),
    "relation_subject": ("a man holding", "a woman holding"),
}


@pytest.fixture(scope="module")
def gqa_index(tmp_path_factory):
    return load_source("gqa", write_gqa(tmp_path_factory.mktemp("oracle_gqa")))


@pytest.mark.parametrize("family", sorted(GQA_FAMILIES))
def test_gqa_captions_read_right_for_their_images(gqa_index, family):
    ids = sorted(int(i) for i in GRAPHS)
    cycles = []
    for seed in (0, 1, 2):
        cycles += get_family("gqa", family).build_cycles(gqa_index, ids, np.random.default_rng(seed))
    text = " | ".join(c.caption_0 + " | " + c.caption_1 for c in cycles)
    for words in GQA_FAMILIES[family]:
        assert words in text, f"{family}: no cycle states {words!r}; the fixture does not exercise it"
    wrong = check_cycles(cycles, gqa_oracle)
    assert not wrong, f"{family}: {len(wrong)} misread pair(s), e.g. {wrong[:3]}"


def test_the_gqa_oracle_by_hand():
    left = next(int(i) for i, g in GRAPHS.items() if g["a"]["relations"] == [{"name": "to the left of", "object": "b"}]
                and not g["b"]["relations"] or g["b"]["relations"] == [{"name": "to the right of", "object": "a"}])  # fmt: skip
    assert gqa_oracle("a cup to the left of a plate", left) == TRUE
    assert gqa_oracle("a cup to the right of a plate", left) == FALSE
    assert gqa_oracle("a plate to the right of a cup", left) == TRUE
    contradiction = next(int(i) for i, g in GRAPHS.items() if g["b"]["relations"] == [{"name": "to the left of", "object": "a"}])
    assert gqa_oracle("a cup to the left of a plate", contradiction) == UNDECIDED
    two_cups = next(int(i) for i, g in GRAPHS.items() if [o["name"] for o in g.values()] == ["cup", "cup"])
    assert gqa_oracle("a red cup", two_cups) == UNDECIDED
    grey = next(int(i) for i, g in GRAPHS.items() if "grey" in g["a"]["attributes"])
    assert gqa_oracle("a gray cup", grey) == TRUE and gqa_oracle("a red cup", grey) == FALSE
