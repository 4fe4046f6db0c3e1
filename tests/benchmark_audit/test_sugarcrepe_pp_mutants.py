"""SugarCrepe++'s reader by hand (issue 56, mutation-directed): two comparisons per item (each positive over
the negative), ids from ``_id``, ``id`` or the position, subsets in the published order, root before data/,
image folders, the refusals. Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import comparisons

from clip_cycles.benchmark_audit.formats.sugarcrepe_pp import read_sugarcrepe_pp


def _item(i: int, **extra) -> dict:
    return {
        "filename": f"{i}.jpg",
        "caption": f"a man rides a horse {i}",
        "caption2": f"a horse ridden by a man {i}",
        "negative_caption": f"a horse rides a man {i}",
        **extra,
    }


def test_two_comparisons_per_item_ids_and_subset_order(tmp_path: Path) -> None:
    (tmp_path / "swap_obj.json").write_text(json.dumps({"k1": _item(1), "k2": _item(2)}))
    (tmp_path / "replace_att.json").write_text(json.dumps([_item(3, id=30), _item(4)]))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "replace_obj.json").write_text(json.dumps([_item(5)]))  # the root has files: data/ is not read
    (tmp_path / "val2017").mkdir()
    (tmp_path / "images").mkdir()
    replace_att, swap_obj = read_sugarcrepe_pp(tmp_path)
    assert (replace_att.name, swap_obj.name) == ("replace_att", "swap_obj")
    assert comparisons(replace_att) == [
        ("30/p1", "30", "3.jpg", "a man rides a horse 3", "a horse rides a man 3", ()),
        ("30/p2", "30", "3.jpg", "a horse ridden by a man 3", "a horse rides a man 3", ()),
        ("1/p1", "1", "4.jpg", "a man rides a horse 4", "a horse rides a man 4", ()),
        ("1/p2", "1", "4.jpg", "a horse ridden by a man 4", "a horse rides a man 4", ()),
    ]
    assert [c[:2] for c in comparisons(swap_obj)] == [("k1/p1", "k1"), ("k1/p2", "k1"), ("k2/p1", "k2"), ("k2/p2", "k2")]
    assert replace_att.images[0].path == tmp_path / "val2017" / "3.jpg"


def test_files_under_data_images_under_images_and_refusals(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "replace_rel.json"
    path.write_text(json.dumps([_item(1)]))
    (tmp_path / "images").mkdir()
    (cs,) = read_sugarcrepe_pp(tmp_path)
    assert cs.name == "replace_rel" and cs.images[0].path == tmp_path / "images" / "1.jpg"
    path.write_text(json.dumps([_item(1, caption2="")]))
    with pytest.raises(ValueError, match=r"replace_rel.json: item 0: field 'caption2'"):
        read_sugarcrepe_pp(tmp_path)
    path.write_text(json.dumps([_item(1), 5]))
    with pytest.raises(ValueError) as error:
        read_sugarcrepe_pp(tmp_path)
    assert str(error.value) == f"{path}: item 1 must be an object with filename, caption, caption2, negative_caption"
    path.unlink()
    (tmp_path / "data" / "other.json").write_text("[]")
    with pytest.raises(FileNotFoundError) as error:
        read_sugarcrepe_pp(tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: no SugarCrepe++ file found; expected SugarCrepe++ files (replace_att.json, replace_obj.json, "
        "replace_rel.json, swap_att.json, swap_obj.json) in the root or data/; images optional (val2017/ or images/)"
    )


def test_an_object_of_non_objects_is_named_by_its_key(tmp_path: Path) -> None:
    path = tmp_path / "swap_att.json"
    path.write_text(json.dumps({"k1": _item(1), "k2": ["not", "an", "item"]}))
    with pytest.raises(ValueError) as error:
        read_sugarcrepe_pp(tmp_path)
    assert str(error.value) == f"{path}: item k2 must be an object with filename, caption, caption2, negative_caption"
