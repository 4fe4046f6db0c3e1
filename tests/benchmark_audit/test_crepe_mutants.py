"""CREPE's reader by hand (issue 56, mutation-directed): the hard negatives' list literal, the region box
(blank, numbers, non-numbers, non-positive sizes) and its key, the image folders' order, line-numbered ids,
a file root. Expected values are written out in each test."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from format_subsets import comparisons

from clip_cycles.benchmark_audit.design import CroppedImageItem
from clip_cycles.benchmark_audit.formats.crepe import read_crepe

HEADER = ["image_id", "caption", "hard_negs", "x", "y", "width", "height"]


def _csv(path: Path, rows: list[list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


def test_regions_negatives_ids_and_box_keys(tmp_path: Path) -> None:
    _csv(
        tmp_path / "prod" / "hard_negs_swap.csv",
        [
            ["11", "a dog on grass", "['a grass on dog', 'a dog under grass']", "1.5", "2", "30", "40"],
            ["12", "a red car", "['a blue car']", "", "", "", ""],  # no box: the whole image
            ["13", "a cat", "['a hat']", "0", "0", "5", " "],  # one field blank: the whole image
        ],
    )
    (cs,) = read_crepe(tmp_path)
    assert cs.name == "hard_negs_swap"
    assert comparisons(cs) == [
        ("2/0", "2", "11.jpg#box=1.5,2,30,40", "a dog on grass", "a grass on dog", ()),
        ("2/1", "2", "11.jpg#box=1.5,2,30,40", "a dog on grass", "a dog under grass", ()),
        ("3/0", "3", "12.jpg", "a red car", "a blue car", ()),
        ("4/0", "4", "13.jpg", "a cat", "a hat", ()),
    ]
    region, whole, blank = cs.images
    assert isinstance(region, CroppedImageItem) and region.box == (1.5, 2.0, 30.0, 40.0)
    assert region.path == tmp_path / "11.jpg" and not isinstance(whole, CroppedImageItem) and whole.path == tmp_path / "12.jpg"
    assert not isinstance(blank, CroppedImageItem)


def test_images_are_found_in_the_first_folder_holding_them(tmp_path: Path) -> None:
    _csv(tmp_path / "c.csv", [[str(i), f"cap {i}", f"['neg {i}']", "", "", "", ""] for i in (1, 2, 3)])
    for folder, names in (("VG_100K", ["1"]), ("VG_100K_2", ["1", "2"]), ("images", ["2", "3"])):
        (tmp_path / folder).mkdir()
        for name in names:
            (tmp_path / folder / f"{name}.jpg").write_bytes(b"x")
    (cs,) = read_crepe(tmp_path / "c.csv")  # a file root: the folders beside it
    assert [i.path for i in cs.images] == [
        tmp_path / "VG_100K" / "1.jpg",
        tmp_path / "VG_100K_2" / "2.jpg",
        tmp_path / "images" / "3.jpg",
    ]
    _csv(tmp_path / "c.csv", [["9", "cap", "['neg']", "", "", "", ""]])
    (cs,) = read_crepe(tmp_path / "c.csv")
    assert cs.images[0].path == tmp_path / "VG_100K" / "9.jpg"  # found nowhere: the first folder names it


def test_malformed_fields_are_sentences_naming_file_line_and_field(tmp_path: Path) -> None:
    path = _csv(tmp_path / "c.csv", [["1", "cap", "['neg'", "", "", "", ""]])
    with pytest.raises(ValueError) as error:
        read_crepe(tmp_path)
    assert str(error.value).startswith(f"{path}: line 2: field 'hard_negs' must be a list literal of strings, got \"['neg'\" (")
    _csv(path, [["1", "cap", "['neg']", "1", "2", "three", "4"]])
    with pytest.raises(ValueError) as error:
        read_crepe(tmp_path)
    assert str(error.value) == f"{path}: line 2: fields x, y, width, height must be numbers, got ['1', '2', 'three', '4']"
    for width, height in (("0", "4"), ("3", "-1.5")):
        _csv(path, [["1", "cap", "['neg']", "1", "2", "5", "5"], ["1", "cap", "['neg']", "1", "2", width, height]])
        with pytest.raises(ValueError) as error:
            read_crepe(tmp_path)
        assert (
            str(error.value)
            == f"{path}: line 3: fields 'width' and 'height' must be positive, got {float(width):g}, {float(height):g}"
        )
    _csv(path, [["1", "cap", "", "", "", "", ""]])
    with pytest.raises(ValueError, match=r"c.csv: line 2: field 'hard_negs'"):
        read_crepe(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        read_crepe(tmp_path / "empty_dir_missing")
    assert str(error.value).startswith(f"{tmp_path / 'empty_dir_missing'}: no CREPE file; expected CREPE CSV files")
