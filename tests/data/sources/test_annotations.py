"""Bad COCO input: each case is a clear error or a counted, reported skip, never a pycocotools traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import given as hypothesis_given
from hypothesis import strategies as st

from clip_cycles.cli import main
from clip_cycles.data.sources.annotations import drop_polygons, load_coco_split, parse_json, read_json, safe_relative

CATS = [(1, "dog", "animal"), (2, "cat", "animal")]


def good_images():
    return [
        {"id": 1, "objects": [(1, [10, 10, 20, 20]), (2, [60, 10, 20, 20])], "captions": ["a dog and a cat"]},
        {"id": 2, "objects": [(2, [10, 10, 20, 20]), (1, [60, 10, 20, 20])], "captions": ["a cat and a dog"]},
    ]


def edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_malformed_json_names_file_and_position(tmp_path, write_coco, capsys):
    root = write_coco(tmp_path, CATS, good_images(), good_images()[:1])
    path = root / "annotations" / "instances_train2017.json"
    path.write_text('{"images": [\n  {"id": 1,}\n]}')
    with pytest.raises(ValueError, match=r"instances_train2017.json: malformed JSON at line 2 column 12 \(char 24\)"):
        read_json(path)
    assert main(["build", "coco", "--coco-root", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "malformed JSON at line 2" in err and "Traceback" not in err


def test_missing_file_and_fields_are_clear_errors(tmp_path, write_coco):
    with pytest.raises(FileNotFoundError, match="instances_train2017.json does not exist"):
        load_coco_split(tmp_path)
    root = write_coco(tmp_path, CATS, good_images(), [])
    path = root / "annotations" / "instances_train2017.json"
    edit(path, lambda d: d["annotations"][1].pop("bbox"))
    with pytest.raises(ValueError, match=r"annotation 2 field 'bbox' must be \[x, y, w, h\] numbers"):
        load_coco_split(root)
    edit(path, lambda d: d["images"][0].pop("file_name"))
    with pytest.raises(ValueError, match=r"image #0 \(id 1\) has no field 'file_name'"):
        load_coco_split(root)
    edit(path, lambda d: d.update(images=[{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}] * 2))
    with pytest.raises(ValueError, match="image id 1 appears twice"):
        load_coco_split(root)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="top level must be a JSON object"):
        load_coco_split(root)


def test_counted_skips(tmp_path, write_coco):
    images = good_images() + [
        {"id": 3, "objects": [(1, [10, 10, 0, 20]), (2, [50, 50, 10, 10])], "captions": ["zero area dog"]},
        {"id": 4, "objects": [(1, [90, 10, 30, 20])], "captions": ["dog off the edge"]},
        {"id": 5, "objects": [(1, [10, 10, 10, 10])], "captions": ["   ", "a dog"], "file_name": "../../etc/x.jpg"},
        {"id": 6, "objects": [(1, [10, 10, 10, 10]), (2, [40, 40, 10, 10])], "captions": ["", "a dog and a cat"]},
    ]
    root = write_coco(tmp_path, CATS, images, [])
    path = root / "annotations" / "instances_train2017.json"

    def dangling(data):
        data["annotations"].append({"id": 900, "image_id": 77, "category_id": 1, "bbox": [1, 1, 5, 5]})
        data["annotations"].append({"id": 901, "image_id": 1, "category_id": 42, "bbox": [1, 1, 5, 5]})

    edit(path, dangling)
    edit(root / "annotations" / "captions_train2017.json",
         lambda d: d["annotations"].append({"id": 902, "image_id": 78, "caption": "ghost"}))  # fmt: skip
    split = load_coco_split(root)
    # Image 1 holds an object of unknown category 42: no caption can describe it truthfully, so it goes
    # (image_unknown_category) and its one caption is counted with those of images 3, 4 and 5.
    assert dict(split.skipped) == {
        "annotation_missing_image": 1, "annotation_unknown_category": 1, "image_unknown_category": 1,
        "box_zero_area": 1, "box_outside_image": 1, "image_bad_box": 2, "image_unsafe_file_name": 1,
        "caption_empty": 1, "caption_missing_image": 1, "caption_of_dropped_image": 5,
        "annotation_of_dropped_image": 1,
    }  # fmt: skip
    assert sorted(split.images) == [2, 6]
    assert split.captions[6] == ["a dog and a cat"]
    assert sorted(split.instances.getImgIds()) == [2, 6]  # pycocotools only sees clean data
    assert all(a["image_id"] in (2, 6) for a in split.instances.dataset["annotations"])


def test_skips_are_listed_in_card_and_build_info(tmp_path, write_coco):
    from clip_cycles.data.folder.build import build_coco_folder

    train = [{"id": i, "objects": [(1 + i % 2, [10 + 60 * (i % 3 == 0), 10, 20, 20]), (2 - i % 2, [60, 60, 20, 20])],
              "captions": ["a dog and a cat"]} for i in range(1, 41)]  # fmt: skip
    train.append({"id": 99, "objects": [(1, [10, 10, -5, 5])]})
    val = [dict(t, id=t["id"] + 1000) for t in train[:20]]
    root = write_coco(tmp_path / "coco", CATS, train, val)
    out, _ = build_coco_folder(root, tmp_path / "out", families=["object_position"], seeds=[0], min_cycles=1)
    info = json.loads((out / "build_info.json").read_text())
    assert info["skipped"] == {"box_zero_area": 1, "image_bad_box": 1}
    assert "| box_zero_area | 1 |" in (out / "README.md").read_text()


def test_self_contained_mode_names_a_missing_image(tmp_path, write_coco):
    from clip_cycles.data.folder.build import build_coco_folder

    train = [{"id": i, "objects": [(1, [5 if i % 2 else 75, 40, 20, 20])]} for i in range(1, 31)]
    val = [dict(t, id=t["id"] + 1000) for t in train]
    root = write_coco(tmp_path / "coco", CATS, train, val)
    with pytest.raises(FileNotFoundError, match=r"image file .*train2017/0000000000\d\d.jpg of image id \d+ is missing"):
        build_coco_folder(root, tmp_path / "out", families=["object_position"], seeds=[0], min_cycles=1,
                          self_contained=True)  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "relation", "margin": 0.1, "ratio": 1.5, "subject": "cat", "names": ["a", "b"]}',
        '{"big": 123456789012345678901234567890}',  # beyond 64 bits: orjson alone would give a float
        "[18446744073709551616, -9223372036854775809]",
        '{"x": NaN, "y": Infinity}',  # orjson refuses these; the standard library reads them
        "[0.30000000000000004, 1e-320, 5e-324]",
        '{"caf\\u00e9": "\\ud83d\\ude00", "nested": {"a": [[], {}]}}',
    ],
)
def test_parse_json_gives_the_standard_librarys_values(text: str) -> None:
    expected = json.loads(text)
    for given in (text, text.encode("utf-8")):
        value = parse_json(given)
        # repr: the same types (int stays int) and the same float bits, NaN included.
        assert repr(value) == repr(expected)


def test_parse_json_malformed_is_the_standard_librarys_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"a": 1,}')


# --- polygons are not parsed (drop_polygons) ----------------------------------------------------------------------

REAL_FORMAT = (  # instances_*.json as COCO writes it: spaces after colons, none inside the polygon lists
    b'{"info": {}, "images": [{"id": 1, "file_name": "a.jpg", "width": 640, "height": 480}], "annotations": ['
    b'{"segmentation": [[510.66,423.01,511.72,420.03,510.45,416.0],[1.5,2.0,3e-05,4.0]],"area": 702.1,'
    b'"iscrowd": 0,"image_id": 1,"bbox": [473.07,395.93,38.65,28.67],"category_id": 1,"id": 1768},'
    b'{"segmentation": {"counts": [272,2,4,4],"size": [480,640]},"area": 9.0,"iscrowd": 1,"image_id": 1,'
    b'"bbox": [1.0,2.0,3.0,3.0],"category_id": 1,"id": 1769},'
    b'{"segmentation" :\n [ [1, 2,\n 3] ] , "note": "\\"segmentation\\": [[7, 8]]", "image_id": 1, "id": 1770}'
    b'], "categories": [{"id": 1, "name": "dog", "supercategory": "animal"}]}'
)


def _without_polygons(value):
    """The standard library's reading with every list-of-lists segmentation emptied (independent of the regex)."""
    if isinstance(value, dict):
        out = {k: _without_polygons(v) for k, v in value.items()}
        seg = value.get("segmentation")
        if isinstance(seg, list) and all(isinstance(p, list) for p in seg):
            out["segmentation"] = []
        return out
    if isinstance(value, list):
        return [_without_polygons(v) for v in value]
    return value


def test_polygons_are_dropped_and_every_other_value_is_the_standard_librarys(tmp_path) -> None:
    path = tmp_path / "instances_train2017.json"
    path.write_bytes(REAL_FORMAT)
    full = json.loads(REAL_FORMAT)
    assert read_json(path) == full  # the default reads everything
    lean = read_json(path, polygons=False)
    assert lean == _without_polygons(full)
    anns = lean["annotations"]
    assert [a["segmentation"] for a in anns] == [[], {"counts": [272, 2, 4, 4], "size": [480, 640]}, []]
    assert anns[2]["note"] == '"segmentation": [[7, 8]]'  # inside a string its quotes are escaped: kept
    assert drop_polygons(b'{"a": 1}') == b'{"a": 1}'


@pytest.mark.parametrize(
    "broken, dropped",
    [
        (b'{"annotations": [{"segmentation": [[1, 2], "id": 1}]}', False),  # a bracket missing: not a polygon list
        (b'{"annotations": [\n{"segmentation": [[1, 2]]]}]}', True),  # one too many: the rest is malformed
        (b'{"annotations": [{"segmentation": [[1, 2]], "id": 1,}]}', True),  # the error is after a dropped list
    ],
)
def test_a_malformed_file_is_still_an_error_at_its_own_position(tmp_path, broken: bytes, dropped: bool) -> None:
    path = tmp_path / "instances_train2017.json"
    path.write_bytes(broken)
    with pytest.raises(json.JSONDecodeError) as as_written:
        json.loads(broken)
    position = (as_written.value.lineno, as_written.value.colno, as_written.value.pos)
    assert (drop_polygons(broken) != broken) == dropped
    if dropped:  # the lean text's own error sits elsewhere: the message must give the file's
        with pytest.raises(json.JSONDecodeError) as lean:
            json.loads(drop_polygons(broken))
        assert lean.value.pos != position[2]
    with pytest.raises(ValueError, match=r"malformed JSON at line {} column {} \(char {}\)".format(*position)):
        read_json(path, polygons=False)


def test_the_build_loads_the_instances_without_polygons(tmp_path, write_coco) -> None:
    root = write_coco(tmp_path, CATS, good_images(), good_images()[:1])
    path = root / "annotations" / "instances_train2017.json"
    edit(path, lambda d: [a.update(segmentation=[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]) for a in d["annotations"]])
    split = load_coco_split(root)
    assert [a["segmentation"] for a in split.instances.dataset["annotations"]] == [[]] * 4
    assert sorted(a["bbox"] for a in split.instances.dataset["annotations"]) == sorted(
        a["bbox"] for a in json.loads(path.read_text())["annotations"]
    )


@hypothesis_given(st.text(alphabet="ab./:\\.-_ ", max_size=12))
def test_safe_relative_answers_as_the_path_rules_do(name: str) -> None:
    from pathlib import PurePosixPath

    parts = PurePosixPath(name).parts
    expected = (
        bool(name)
        and "\\" not in name
        and not name.startswith("/")
        and ".." not in parts
        and not (parts and parts[0].endswith(":"))
    )
    assert safe_relative(name) == expected


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"image_id": 1}, r"caption annotation #1 has no field 'caption'"),
        ({"caption": "a dog"}, r"caption annotation #1 has no field 'image_id'"),
        ({"id": 9, "image_id": 1, "caption": 7}, r"caption annotation #1 \(id 9\) field 'caption' has type int"),
        ({"image_id": True, "caption": "a dog"}, r"caption annotation #1 field 'image_id' has type bool"),
        ({"image_id": "1", "caption": "a dog"}, r"caption annotation #1 field 'image_id' has type str"),
        (["a dog"], r"caption annotation #1 must be an object, got list"),
    ],
)
def test_a_malformed_caption_entry_is_an_error_naming_file_and_entry(tmp_path, write_coco, entry, message) -> None:
    root = write_coco(tmp_path, CATS, good_images(), good_images()[:1])
    path = root / "annotations" / "captions_train2017.json"
    edit(path, lambda d: d["annotations"].insert(1, entry))
    with pytest.raises(ValueError, match=r"captions_train2017.json: " + message):
        load_coco_split(root)


def test_caption_text_is_whitespace_normalised_and_each_skip_counted(tmp_path, write_coco) -> None:
    root = write_coco(tmp_path, CATS, good_images(), good_images()[:1])
    path = root / "annotations" / "captions_train2017.json"
    extra = [{"image_id": 1, "caption": "  a\tdog \n on grass "}, {"image_id": 1, "caption": " \n "},
             {"image_id": 99, "caption": "an image that is not there"}]  # fmt: skip
    edit(path, lambda d: d["annotations"].extend(extra))
    split = load_coco_split(root)
    assert split.captions[1] == ["a dog and a cat", "a dog on grass"]
    assert split.skipped["caption_empty"] == 1 and split.skipped["caption_missing_image"] == 1
