"""Swapped captions false beyond doubt, on real-format COCO annotations.

The fixture is written the way COCO ships ``instances_*.json`` and ``captions_*.json``:
``info``/``licenses``/``images`` with licence and URLs, polygon segmentations, RLE crowd
regions with ``iscrowd: 1``, several instances of one category, non-square images. Expected
verdicts and directions come from the test's own arithmetic on the raw JSON (box centres
computed here), never from the builder's helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.data.families.coco import load_coco_index
from clip_cycles.data.families.registry import build_family, get_family

W, H = 200, 100  # non-square: the horizontal margin is 20 px, the vertical one 10 px
CATEGORIES = [
    {"supercategory": "kitchen", "id": 44, "name": "bottle"},
    {"supercategory": "kitchen", "id": 47, "name": "cup"},
    {"supercategory": "animal", "id": 17, "name": "cat"},
    {"supercategory": "animal", "id": 18, "name": "dog"},
]
CAT_ID = {c["name"]: c["id"] for c in CATEGORIES}


def at(cx: float, cy: float, w: float = 8, h: float = 6) -> list[float]:
    return [cx - w / 2, cy - h / 2, w, h]


# (image id, [(category, bbox, iscrowd)]); every image also gets two human captions.
IMAGES = {
    # The case: bottle at y 20 and one cup well below it (y 80).
    1: [("bottle", at(100, 20), 0), ("cup", at(100, 80), 0)],
    # Dog above cat; a bottle at y 40 with two cups just below it (y 45, 47): "a cup below a bottle"
    # is true of neither cup by the 10 px margin, "a cup above a bottle" of neither: sub-margin.
    2: [
        ("dog", at(30, 20), 0),
        ("cat", at(30, 80), 0),
        ("bottle", at(150, 40), 0),
        ("cup", at(140, 45), 0),
        ("cup", at(160, 47), 0),
    ],
    # Dog above cat; the bottle at y 50 has one cup 30 px below and one 30 px above: instances disagree.
    3: [
        ("dog", at(30, 5), 0),
        ("cat", at(30, 95), 0),
        ("bottle", at(150, 50), 0),
        ("cup", at(140, 80), 0),
        ("cup", at(160, 20), 0),
    ],
    # Dog above cat only.
    5: [("dog", at(30, 20), 0), ("cat", at(30, 80), 0)],
    # Dog above cat; the bottle at y 20 with one cup below it and a crowd region of cups.
    6: [
        ("dog", at(30, 5), 0),
        ("cat", at(30, 95), 0),
        ("bottle", at(150, 20), 0),
        ("cup", at(150, 80), 0),
        ("cup", at(120, 60, 40, 30), 1),
    ],
    # The opposite of image 1: two cups, both above the bottle by >= 10 px.
    7: [("bottle", at(100, 80), 0), ("cup", at(60, 20), 0), ("cup", at(140, 30), 0)],
}


def write_real_coco(root: Path) -> Path:
    """COCO 2017 layout with the fields real files carry; val2017 gets one image (the builder needs both)."""
    (root / "annotations").mkdir(parents=True)
    ann_id = 900000
    for split, ids in (("train2017", sorted(IMAGES)), ("val2017", [99])):
        images, instances, captions = [], [], []
        for image_id in ids:
            images.append(
                {
                    "license": 3,
                    "file_name": f"{image_id:012d}.jpg",
                    "coco_url": f"http://images.cocodataset.org/{split}/{image_id:012d}.jpg",
                    "height": H,
                    "width": W,
                    "date_captured": "2013-11-14 16:28:13",
                    "flickr_url": "http://farm4.staticflickr.com/x.jpg",
                    "id": image_id,
                }
            )
            for name, bbox, crowd in IMAGES.get(image_id, [("dog", at(30, 20), 0)]):
                ann_id += 1
                x, y, w, h = bbox
                seg = {"counts": [int(y) * 1, int(h), 5], "size": [H, W]} if crowd else [[x, y, x + w, y, x + w, y + h, x, y + h]]
                instances.append(
                    {
                        "segmentation": seg,
                        "area": w * h,
                        "iscrowd": crowd,
                        "image_id": image_id,
                        "bbox": bbox,
                        "category_id": CAT_ID[name],
                        "id": ann_id,
                    }
                )
            for text in ("A kitchen counter with some things on it.", "Some objects in a room "):
                ann_id += 1
                captions.append({"image_id": image_id, "id": ann_id, "caption": text})
        head = {
            "info": {"description": "COCO 2017 Dataset", "year": 2017, "version": "1.0"},
            "licenses": [{"url": "http://creativecommons.org/licenses/by-nc-sa/2.0/", "id": 3, "name": "x"}],
            "images": images,
        }
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({**head, "annotations": instances, "categories": CATEGORIES})
        )
        (root / "annotations" / f"captions_{split}.json").write_text(json.dumps({**head, "annotations": captions}))
    return root


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    root = write_real_coco(tmp_path_factory.mktemp("real_coco"))
    raw = json.loads((root / "annotations" / "instances_train2017.json").read_text())
    return load_coco_index(root), raw


# --- the test's own reading of the raw annotations ---------------------------------------------------------------


def raw_instances(raw: dict, image_id: int, name: str) -> tuple[list[tuple[float, float]], bool]:
    """Box centres of the non-crowd instances of ``name`` and whether a crowd region of it exists."""
    centres, crowd = [], False
    for ann in raw["annotations"]:
        if ann["image_id"] == image_id and ann["category_id"] == CAT_ID[name]:
            if ann["iscrowd"]:
                crowd = True
            else:
                x, y, w, h = ann["bbox"]
                centres.append((x + w / 2, y + h / 2))
    return centres, crowd


def expected_vertical(raw: dict, image_id: int, subject: str, relation: str, obj: str) -> str:
    """'true' / 'false' / 'undecided' for "subject above/below obj", by hand: y grows downwards, margin 10 px."""
    subs, crowd_s = raw_instances(raw, image_id, subject)
    objs, crowd_o = raw_instances(raw, image_id, obj)
    if (not subs and not crowd_s) or (not objs and not crowd_o):
        return "false"
    if crowd_s or crowd_o:
        return "undecided"
    above = [oy - sy >= 10 for _, sy in subs for _, oy in objs]  # subject centre higher by >= 10 px
    below = [sy - oy >= 10 for _, sy in subs for _, oy in objs]
    stated, opposite = (above, below) if relation == "above" else (below, above)
    return "true" if all(stated) else "false" if all(opposite) else "undecided"


def test_verdicts_match_a_hand_computation_on_every_instance_pair(coco):
    index, raw = coco
    family = get_family("coco", "strict_above_below")
    hand = {  # the example first: both cups below the bottle by less than the margin
        (2, "cup", "below", "bottle"): "sub_margin", (2, "cup", "above", "bottle"): "sub_margin",
        (1, "cup", "below", "bottle"): "true", (1, "cup", "above", "bottle"): "false",
        (3, "cup", "below", "bottle"): "multi_instance_ambiguous", (3, "bottle", "above", "cup"): "multi_instance_ambiguous",
        (6, "cup", "below", "bottle"): "crowd_uncertain_extent", (5, "cup", "below", "bottle"): "false",
        (7, "cup", "above", "bottle"): "true", (7, "bottle", "above", "cup"): "false",
    }  # fmt: skip
    for (image_id, subject, relation, obj), verdict in hand.items():
        meaning = {"kind": "relation", "subject": subject, "relation": relation, "object": obj, "margin": 0.1}
        got = family.verdict(index, image_id, meaning)
        assert got == verdict, (image_id, subject, relation, obj)
        mine = expected_vertical(raw, image_id, subject, relation, obj)
        assert mine == (verdict if verdict in ("true", "false") else "undecided")
        assert family.holds(index, image_id, meaning) == (verdict == "true")
        assert family.refutes(index, image_id, meaning) == (verdict == "false")


def _build(name: str, train: list[int]):
    index = load_coco_index(Path(_ROOT[0]))
    return build_family(get_family("coco", name), index, {0: {"train": train, "validation": [], "test": []}}, min_cycles=1)


_ROOT: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _root(coco):
    _ROOT[:] = [str(coco[0].root)]


@pytest.mark.parametrize("train, cycles, excluded", [
    # 1 + 2: image 1's fact (bottle/cup) is sub-margin on image 2, tried in each of the two pairing passes;
    # image 2's own bottle/cup pair has no true vertical fact (sub-margin).
    ([1, 2], 0, {"matched_sub_margin": 1, "swap_sub_margin": 2}),
    # 1 + 3: the same with instances that disagree.
    ([1, 3], 0, {"matched_not_all_instances": 1, "swap_multi_instance_ambiguous": 2}),
    # 1 + 6: a crowd region of cups: every pair with "cup" in image 6 is undecided (3 pairs).
    ([1, 6], 0, {"matched_crowd_uncertain_extent": 3, "swap_crowd_uncertain_extent": 2}),
    # 1 + 5: each fact names an object absent from the other image: one cycle, nothing excluded.
    ([1, 5], 1, {}),
])  # fmt: skip
def test_box_relation_excludes_and_counts_doubtful_swaps(train, cycles, excluded):
    build = _build("box_above_below", train)
    assert build.counts[0]["train"] == cycles
    assert build.excluded == excluded


def test_strict_relation_counts_multi_instance_images_and_keeps_the_clear_flip(coco):
    index, raw = coco
    build = _build("strict_above_below", [1, 2, 3, 6, 7])
    # bottle/cup strata: 1 (cup below), 7 (cups above) decided; 2 sub-margin, 3 disagreeing, 6 crowd.
    # dog/cat strata: 2, 3, 6 all dog-above-cat (one side only, so no cycle). Crowd pairs in 6: 3.
    assert build.excluded == {"matched_sub_margin": 1, "matched_not_all_instances": 1,
                              "matched_crowd_uncertain_extent": 3}  # fmt: skip
    (record,) = build.records[0]["train"]
    assert {record.image_id_0, record.image_id_1} == {1, 7}
    assert json.loads(record.predicate)["stratum"] == "bottle|cup"
    _check_directions_by_hand(raw, build)


def test_every_built_relation_cycle_is_right_by_hand_on_the_raw_json(coco):
    index, raw = coco
    for name in ("box_above_below", "strict_above_below"):
        for seed in range(4):
            build = build_family(
                get_family("coco", name), index, {seed: {"train": sorted(IMAGES), "validation": [], "test": []}}, min_cycles=1
            )
            _check_directions_by_hand(raw, build)


def _check_directions_by_hand(raw: dict, build) -> None:
    for records in build.records.values():
        for r in records["train"]:
            m0, m1 = (json.loads(r.predicate)[k] for k in ("caption_0", "caption_1"))
            for image_id, meaning, want in ((r.image_id_0, m0, "true"), (r.image_id_1, m1, "true"),
                                            (r.image_id_0, m1, "false"), (r.image_id_1, m0, "false")):  # fmt: skip
                got = expected_vertical(raw, image_id, meaning["subject"], meaning["relation"], meaning["object"])
                assert got == want, (r.cycle_id, image_id, meaning)


def test_object_position_needs_every_instance_on_its_side(tmp_path):
    from fixture_data import write_coco_root as _write_coco

    cats = [(1, "dog", "animal")]
    train = [
        {"id": 1, "objects": [(1, at(40, 50))]},  # left: 40 <= (0.5 - 0.1) * 200 = 80
        {"id": 2, "objects": [(1, at(150, 50)), (1, at(170, 50))]},  # both right: >= 120
        {"id": 3, "objects": [(1, at(40, 50)), (1, at(170, 50))]},  # one each side: ambiguous
        {"id": 4, "objects": [(1, at(100, 50))]},  # middle band: sub-margin
        {"id": 5, "objects": [(1, at(40, 50)), (1, at(60, 50, 20, 20), 1)]},  # crowd region
    ]
    root = _write_coco(tmp_path, cats, train, [{"id": 9, "objects": [(1, at(40, 50))]}], width=W, height=H)
    index = load_coco_index(root)
    build = build_family(
        get_family("coco", "object_position"), index, {0: {"train": [1, 2, 3, 4, 5], "validation": [], "test": []}}, min_cycles=1
    )
    assert build.excluded == {"matched_not_all_instances": 1, "matched_sub_margin": 1,
                              "matched_crowd_uncertain_extent": 1}  # fmt: skip
    (record,) = build.records[0]["train"]
    assert {record.image_id_0, record.image_id_1} == {1, 2}
    family = get_family("coco", "object_position")
    right = {"kind": "position", "subject": "dog", "side": "right", "margin": 0.1}
    assert family.holds(index, 2, right) and family.refutes(index, 1, right)
    assert not family.holds(index, 3, right) and not family.refutes(index, 3, right)
    np.testing.assert_equal(family.verdict(index, 4, right), "sub_margin")


def test_the_margin_flag_changes_the_verdict(coco):
    from clip_cycles.data.families.build_config import BuildConfig

    index, raw = coco
    family = get_family("coco", "box_above_below")
    cups, _ = raw_instances(raw, 2, "cup")
    (bottle,), _ = raw_instances(raw, 2, "bottle")
    gaps = [cy - bottle[1] for _, cy in cups]
    assert gaps == [5.0, 7.0]  # by hand: both cups below the bottle by less than 10 px (margin 0.1 x 100)
    family = family.configured(BuildConfig.make(margin=0.04))  # 4 px: both gaps clear it
    build = build_family(family, index, {0: {"train": [2, 5], "validation": [], "test": []}}, min_cycles=1)
    facts = family.relation_facts(index, 2, ("above", "below"))
    assert {"kind": "relation", "subject": "cup", "relation": "below", "object": "bottle", "margin": 0.04} in facts
    assert "matched_sub_margin" not in build.excluded
    with pytest.raises(ValueError, match=r"^BuildConfig option --margin \(margin\): must be a fraction of the image side"):
        BuildConfig.make(margin=0.7)
