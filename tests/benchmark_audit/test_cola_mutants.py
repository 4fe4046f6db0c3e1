"""Cola's reader by hand (issue 56, mutation-directed): caption_1 goes with image_1, images by their last
path component under images/, entries numbered, the files looked up in the root then data/, the entry and
file refusals. Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import block_ids, blocks

from clip_cycles.benchmark_audit.formats.cola import read_cola

ENTRY = ["https://host/a/1.jpg/", "square red, round blue", "http://host/b/2.jpg", "square blue, round red"]


def test_blocks_keys_paths_and_ids(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "COLA_multiobjects.json").write_text(json.dumps([ENTRY, ["3.jpg", "a", "4.jpg", "b"]]))
    (cs,) = read_cola(tmp_path)
    assert cs.name == "COLA_multiobjects" and block_ids(cs) == ["0", "1"]
    assert blocks(cs) == [
        ("https://host/a/1.jpg/", "http://host/b/2.jpg", "square red, round blue", "square blue, round red", ()),
        ("3.jpg", "4.jpg", "a", "b", ()),
    ]
    assert [i.path for i in cs.images] == [tmp_path / "images" / n for n in ("1.jpg", "2.jpg", "3.jpg", "4.jpg")]
    (cs,) = read_cola(tmp_path / "COLA_multiobjects.json")  # a file root: images/ beside it
    assert cs.images[0].path == tmp_path / "images" / "1.jpg"


def test_files_under_data_and_no_images_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.json").write_text(json.dumps([ENTRY]))
    (tmp_path / "data" / "a.json").write_text(json.dumps([["x/5.png", "p", "6.png", "q"]]))
    a, b = read_cola(tmp_path)
    assert (a.name, b.name) == ("a", "b") and a.images[0].path == tmp_path / "5.png"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (ENTRY[:3], "entry 1 must be [image_1, caption_1, image_2, caption_2], got "),
        ({"image_1": "x"}, "entry 1 must be [image_1, caption_1, image_2, caption_2], got "),
        ([*ENTRY, "extra"], "entry 1 must be [image_1, caption_1, image_2, caption_2], got "),
        ([" ", *ENTRY[1:]], "entry 1: field 'image_1' (position 0) must be a non-empty string, got ' '"),
        ([ENTRY[0], 3, *ENTRY[2:]], "entry 1: field 'caption_1' (position 1) must be a non-empty string, got 3"),
        ([*ENTRY[:2], "", ENTRY[3]], "entry 1: field 'image_2' (position 2) must be a non-empty string, got ''"),
        ([*ENTRY[:3], None], "entry 1: field 'caption_2' (position 3) must be a non-empty string, got None"),
    ],
)
def test_a_malformed_entry_is_named(tmp_path: Path, entry, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps([ENTRY, entry]))
    with pytest.raises(ValueError) as error:
        read_cola(tmp_path)
    assert str(error.value).startswith(f"{path}: {message}")


def test_a_file_of_another_shape_and_no_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"0": ENTRY}))
    with pytest.raises(ValueError) as error:
        read_cola(tmp_path)
    assert str(error.value) == f"{path}: a Cola file must be a list of [image_1, caption_1, image_2, caption_2], got dict"
    with pytest.raises(FileNotFoundError) as error:
        read_cola(tmp_path / "none")
    assert str(error.value) == (
        f"{tmp_path / 'none'}: no Cola file; expected Cola JSON files [[image_1, caption_1, image_2, caption_2], ...] "
        "in the root; images optional (images/)"
    )


def test_only_slashes_are_stripped_from_the_end_of_an_image_url(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps([["https://host/photo_XX/", "a", "https://host/X/Y.jpgX", "b"]]))
    (cs,) = read_cola(tmp_path)
    assert [i.path for i in cs.images] == [tmp_path / "photo_XX", tmp_path / "Y.jpgX"]
