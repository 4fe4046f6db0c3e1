"""The synthetic shapes world: determinism, COCO/GQA layout, geometry, captions."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from clip_cycles.cli import main
from clip_cycles.data.families.coco import MentionMatcher
from clip_cycles.data.sources.shape_vocabulary import CATEGORIES
from clip_cycles.data.sources.shapes_world import RELATION_MARGIN, SIZE_RATIO, generate_world, write_shapes_world


def all_bytes(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_parameters_give_identical_files_and_other_seeds_differ(tmp_path):
    a = all_bytes(write_shapes_world(tmp_path / "a", n_images=24, seed=5, image_size=64, progress=False))
    b = all_bytes(write_shapes_world(tmp_path / "b", n_images=24, seed=5, image_size=64, progress=False))
    c = all_bytes(write_shapes_world(tmp_path / "c", n_images=24, seed=6, image_size=64, progress=False))
    assert a == b
    assert a["annotations/instances_train2017.json"] != c["annotations/instances_train2017.json"]
    assert len([k for k in a if k.endswith(".jpg")]) == 24


def test_coco_layout_and_geometry(shapes_world):
    names = {i: n for i, n, _ in CATEGORIES}
    multi = 0
    for split in ("train2017", "val2017"):
        inst = json.loads((shapes_world / "annotations" / f"instances_{split}.json").read_text())
        caps = json.loads((shapes_world / "annotations" / f"captions_{split}.json").read_text())
        assert {c["supercategory"] for c in inst["categories"]} == {"round", "polygon", "symbol"}
        by_image: dict[int, list] = {}
        for ann in inst["annotations"]:
            by_image.setdefault(ann["image_id"], []).append(ann)
        match = MentionMatcher(names.values())
        captions: dict[int, list[str]] = {}
        for c in caps["annotations"]:
            captions.setdefault(c["image_id"], []).append(c["caption"])
        for image in inst["images"]:
            anns = by_image[image["id"]]
            assert 2 <= len(anns) <= 4
            assert (shapes_world / split / image["file_name"]).is_file()
            boxes = [a["bbox"] for a in anns]
            for x, y, w, h in boxes:
                assert x >= 0 and y >= 0 and x + w <= image["width"] and y + h <= image["height"] and w * h > 0
            for i, (x, y, w, h) in enumerate(boxes):  # no two boxes overlap
                for x2, y2, w2, h2 in boxes[i + 1 :]:
                    assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
            present = {names[a["category_id"]] for a in anns}
            multi += len(present) < len(anns)
            assert len(captions[image["id"]]) == 5
            for text in captions[image["id"]]:
                mentioned = set(match(text))
                assert mentioned and mentioned <= present, (text, present)
            assert set(match(captions[image["id"]][0])) == present  # the first caption names everything
    assert 30 <= multi <= 150  # some images hold two instances of one category


def test_scene_graphs_match_boxes_and_relations(shapes_world):
    inst = json.loads((shapes_world / "annotations" / "instances_val2017.json").read_text())
    graphs = json.loads((shapes_world / "val_sceneGraphs.json").read_text())
    assert sorted(graphs, key=int) == [str(i["id"]) for i in inst["images"]]
    names = {i: n for i, n, _ in CATEGORIES}
    boxes = {}
    for ann in inst["annotations"]:
        boxes.setdefault(ann["image_id"], []).append((names[ann["category_id"]], ann["bbox"]))
    relation_names = set()
    for image_id, graph in graphs.items():
        objects = graph["objects"]
        assert sorted((o["name"], [o["x"], o["y"], o["w"], o["h"]]) for o in objects.values()) == sorted(boxes[int(image_id)])
        assert graph["file_name"].startswith("val2017/")
        width = graph["width"]
        for obj in objects.values():
            colour, size, material = obj["attributes"]
            assert size in ("small", "large") and colour and material in ("plastic", "wooden", "metal")
            for rel in obj["relations"]:
                other = objects[rel["object"]]
                relation_names.add(rel["name"])
                dx = (other["x"] + other["w"] / 2) - (obj["x"] + obj["w"] / 2)
                if rel["name"] == "to the left of":
                    assert dx >= RELATION_MARGIN * width
                if rel["name"] == "bigger than":
                    assert obj["w"] * obj["h"] >= SIZE_RATIO * other["w"] * other["h"]
    assert relation_names == {"to the left of", "to the right of", "above", "below", "bigger than", "smaller than"}


def test_images_show_the_shapes(shapes_world):
    inst = json.loads((shapes_world / "annotations" / "instances_train2017.json").read_text())
    image = inst["images"][0]
    pixels = Image.open(shapes_world / "train2017" / image["file_name"]).convert("RGB")
    assert pixels.size == (64, 64)
    for ann in inst["annotations"]:
        if ann["image_id"] == image["id"] and ann["category_id"] in (1, 3):  # filled circle or square
            x, y, w, h = ann["bbox"]
            r, g, b = pixels.getpixel((int(x + w / 2), int(y + h / 2)))
            assert max(r, g, b) - min(r, g, b) > 60  # saturated shape colour, not the grey background


def test_bad_parameters_and_cli(tmp_path, capsys):
    with pytest.raises(
        ValueError, match=r"^ShapesWorldOptions option --image-size \(image_size\): must be an image side in \[64, 128\]"
    ):
        generate_world(10, image_size=32)
    with pytest.raises(
        ValueError, match=r"^ShapesWorldOptions option --n-images \(n_images\): must be a count >= 4 of images, got 2"
    ):
        generate_world(2)
    assert main(["build", "shapes", "--out", str(tmp_path / "w"), "--n-images", "8", "--image-size", "64"]) == 0
    assert "shapes world: 8 images, 64 px, seed 0, val 0.25 written" in capsys.readouterr().out
    assert json.loads((tmp_path / "w" / "shapes_world.json").read_text())["n_images"] == 8
