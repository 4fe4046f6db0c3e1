"""GQA scene-graph loading: validation errors, counted skips and repairs, id mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clip_cycles.data.sources.scene_graphs import (
    gqa_int_id,
    gqa_str_id,
    load_gqa_scene_graphs,
    load_scene_graphs,
    parse_scene_graphs,
)


def obj(name, x=0, y=0, w=10, h=10, attributes=(), relations=()):
    return {
        "name": name,
        "x": x,
        "y": y,
        "w": w,
        "h": h,
        "attributes": list(attributes),
        "relations": [{"name": r, "object": t} for r, t in relations],
    }


def image(objects, width=100, height=80, **extra):
    return {"width": width, "height": height, "objects": objects, **extra}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_valid_graph_is_parsed_with_sorted_attributes_and_lookups(tmp_path):
    data = {
        "7": image(
            {
                "2": obj("cup", 5, 5, 10, 10, ["red", "small", "red"], [("to the left of", "1")]),
                "1": obj("plate", 50, 5, 20, 10, ["white"]),
                "3": obj("plate", 70, 40, 20, 10),
            }
        )
    }
    loaded = load_scene_graphs(write(tmp_path / "train_sceneGraphs.json", data))
    graph = loaded.graphs["7"]
    assert [o.object_id for o in graph.objects] == ["1", "2", "3"]
    cup = graph.unique_object("cup")
    assert cup is not None and cup.attributes == ("red", "small")
    assert graph.unique_object("plate") is None  # two plates: not unique
    assert graph.related_names(cup, "to the left of") == {"plate"}
    assert graph.file_name == "images/7.jpg"
    assert [o.name for o in graph.unique_objects()] == ["cup"]
    assert not loaded.skipped and not loaded.repaired


def test_malformed_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "val_sceneGraphs.json"
    path.write_text('{"1": {"width": 10,\n  "height": 10 "objects": {}}}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"val_sceneGraphs\.json: malformed JSON at line 2, column 16 \(char 35\)"):
        load_scene_graphs(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.json"):
        load_scene_graphs(tmp_path / "nothere.json")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], r"top level must be a JSON object"),
        ({"5": {"width": 10, "objects": {}}}, r"image 5: missing field 'height'"),
        (
            {"5": image({"9": {"name": "cup", "x": 0, "y": 0, "w": 3}})},
            r"image 5, object 9: missing field\(s\) h, attributes, relations",
        ),
        ({"5": image({"9": obj("")})}, r"image 5, object 9: field 'name' must be a non-empty string"),
        ({"5": image({"9": {**obj("cup"), "x": "left"}})}, r"image 5, object 9: field 'x' must be a finite number"),
        ({"5": image({"9": {**obj("cup"), "y": True}})}, r"image 5, object 9: field 'y' must be a finite number"),
        ({"5": image({"9": {**obj("cup"), "relations": [{"name": "on", "object": 3}]}})}, r"object 9: relations\[0\] must be"),
        ({"5": image({"9": {**obj("cup"), "attributes": "red"}})}, r"object 9: field 'attributes' must be a list of strings"),
        ({"5": image({"9": {**obj("cup"), "relations": [{"name": "on"}]}})}, r"object 9: relations\[0\] must be"),
        ({"5": image({"9": obj("cup")}, file_name="../secret.jpg")}, r"image 5: file_name '../secret.jpg' escapes"),
        ({"5": image({"9": obj("cup")}, file_name="/etc/x.jpg")}, r"escapes the GQA root"),
        ({"abc": image({"9": obj("cup")})}, r"GQA image id 'abc' is neither decimal digits"),
    ],
)
def test_structural_errors_name_file_image_object_and_field(tmp_path, data, message):
    path = write(tmp_path / "train_sceneGraphs.json", data)
    with pytest.raises(ValueError, match=message) as info:
        load_scene_graphs(path)
    assert "train_sceneGraphs.json" in str(info.value)


def test_semantic_problems_skip_whole_images_and_are_counted():
    data = {
        "1": image({"a": obj("cup"), "b": obj("plate", 20, 0)}),  # fine
        "2": image({"a": obj("cup", relations=[("on", "zz")])}),  # dangling relation
        "3": image({"a": obj("cup", w=0)}),  # zero area
        "4": image({"a": obj("cup", x=500, y=500)}),  # entirely outside 100x80
        "5": image({}),  # no objects
        "6": image({"a": obj("cup", x=-5, y=75, w=20, h=10)}),  # crosses the border: clipped
        "7": image({"a": obj("cup", w=-3)}),  # negative width
        "8": image({"a": obj("cup"), "b": {**obj("plate", 20, 0), "w": float("inf")}}),  # infinite box
        "9": image({"a": obj("cup"), "b": {**obj("plate", 20, 0), "h": float("nan")}}),  # NaN box
        "10": image({"a": obj("cup")}, width=0),  # zero image width
        "11": image({"a": obj("cup")}, width=float("nan")),  # NaN image width
        "12": image({"a": obj("cup")}, height=-4),  # negative image height
    }
    loaded = parse_scene_graphs(data, "mem.json")
    assert sorted(loaded.graphs) == ["1", "6"]
    assert dict(loaded.skipped) == {
        "relation_target_missing": 1,
        "box_zero_area": 2,
        "box_outside_image": 1,
        "no_objects": 1,
        "box_not_finite": 2,
        "image_bad_size": 3,
    }
    assert dict(loaded.repaired) == {"box_clipped": 1}
    clipped = loaded.graphs["6"].objects[0]
    assert clipped.box == (0.0, 75.0, 15.0, 5.0)


def test_file_name_entry_is_used_and_normalised():
    data = {"3": image({"a": obj("cup")}, file_name="train2017\\000000000003.jpg")}
    assert parse_scene_graphs(data, "m.json").graphs["3"].file_name == "train2017/000000000003.jpg"


def test_both_files_are_loaded_and_must_be_image_disjoint(tmp_path):
    write(tmp_path / "train_sceneGraphs.json", {"1": image({"a": obj("cup")}), "2": image({"a": obj("cup")})})
    write(tmp_path / "val_sceneGraphs.json", {"3": image({"a": obj("cup")})})
    files = load_gqa_scene_graphs(tmp_path)
    assert sorted(files["train"].graphs) == ["1", "2"] and sorted(files["val"].graphs) == ["3"]
    write(tmp_path / "val_sceneGraphs.json", {"2": image({"a": obj("cup")})})
    with pytest.raises(ValueError, match=r"1 image ids appear in both train_sceneGraphs.json and val_sceneGraphs.json.*e\.g\. 2"):
        load_gqa_scene_graphs(tmp_path)
    (tmp_path / "val_sceneGraphs.json").unlink()
    with pytest.raises(FileNotFoundError, match="val_sceneGraphs.json"):
        load_gqa_scene_graphs(tmp_path)


@given(st.integers(min_value=0, max_value=10**17), st.booleans())
def test_gqa_int_ids_round_trip_and_never_collide(number, prefixed):
    text = f"n{number}" if prefixed else str(number)
    encoded = gqa_int_id(text)
    assert gqa_str_id(encoded) == text
    assert (encoded < 0) == prefixed
    other = str(number) if prefixed else f"n{number}"
    assert gqa_int_id(other) != encoded


def test_ids_that_collide_as_int64_are_rejected(tmp_path):
    from clip_cycles.data.families.gqa import load_gqa_index

    write(tmp_path / "train_sceneGraphs.json", {"0123": image({"a": obj("cup")})})
    write(tmp_path / "val_sceneGraphs.json", {"123": image({"a": obj("cup")})})
    with pytest.raises(ValueError, match=r"image ids '123' and '0123' map to the same int64 id 123"):
        load_gqa_index(tmp_path)
