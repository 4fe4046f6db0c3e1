"""MMVP-VLM's reader by hand (issue 56, mutation-directed): rows paired 2k/2k+1, one subset per Type in
first-seen order, image names and folders, the pairing and Type refusals with their line numbers.
Expected values are written out in each test."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from format_subsets import block_ids, blocks

from clip_cycles.benchmark_audit.formats.mmvp_vlm import read_mmvp_vlm


def _csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Question ID", "Type", "Statement"])
        writer.writerows(rows)
    return path


ROWS = [
    ("1", "Color", "The dog is brown."),
    ("2", "Color", "The dog is black."),
    ("3", "Orientation", "The bus faces left."),
    ("4", "Orientation", "The bus faces right."),
    ("5", "Color", "The cup is red."),
    ("6", "Color", "The cup is blue."),
]


def test_pairs_types_ids_and_images(tmp_path: Path) -> None:
    _csv(tmp_path / "MMVP_VLM" / "Questions.csv", ROWS)
    color, orientation = read_mmvp_vlm(tmp_path)
    assert (color.name, orientation.name) == ("Color", "Orientation")
    assert block_ids(color) == ["1-2", "5-6"] and block_ids(orientation) == ["3-4"]
    assert blocks(color) == [
        ("Color/1.jpg", "Color/2.jpg", "The dog is brown.", "The dog is black.", ()),
        ("Color/5.jpg", "Color/6.jpg", "The cup is red.", "The cup is blue.", ()),
    ]
    assert color.images[0].path == tmp_path / "MMVP_VLM" / "Color" / "1.jpg"
    (tmp_path / "MMVP_VLM" / "MLLM_VLM Images").mkdir()
    (color, _) = read_mmvp_vlm(tmp_path / "MMVP_VLM" / "Questions.csv")
    assert color.images[0].path == tmp_path / "MMVP_VLM" / "MLLM_VLM Images" / "Color" / "1.jpg"
    (tmp_path / "MMVP_VLM" / "images").mkdir()
    (color, _) = read_mmvp_vlm(tmp_path / "MMVP_VLM")
    assert color.images[0].path == tmp_path / "MMVP_VLM" / "images" / "Color" / "1.jpg"


def test_the_root_table_comes_first(tmp_path: Path) -> None:
    _csv(tmp_path / "MMVP_VLM" / "Questions.csv", ROWS)
    _csv(tmp_path / "Questions.csv", ROWS[2:4])
    (only,) = read_mmvp_vlm(tmp_path)
    assert only.name == "Orientation" and only.images[0].path == tmp_path / "Orientation" / "3.jpg"


def test_refusals_name_the_line(tmp_path: Path) -> None:
    path = _csv(tmp_path / "Questions.csv", ROWS[:3])
    with pytest.raises(ValueError) as error:
        read_mmvp_vlm(tmp_path)
    assert str(error.value) == f"{path}: line 4: rows come in pairs (one per image), the last row has no partner"
    _csv(path, [*ROWS[:2], ROWS[2], ROWS[4]])
    with pytest.raises(ValueError) as error:
        read_mmvp_vlm(tmp_path)
    assert str(error.value) == f"{path}: line 5: field 'Type' must equal line 4's ('Orientation') in a pair, got 'Color'"
    _csv(path, [*ROWS[:2], ("7", "Color", " ")])
    with pytest.raises(ValueError) as error:
        read_mmvp_vlm(tmp_path)  # the odd count is found first
    assert "line 4: rows come in pairs" in str(error.value)
    _csv(path, [*ROWS[:2], ("7", "Color", " "), ("8", "Color", "x")])
    with pytest.raises(ValueError, match=r"Questions.csv: line 4: field 'Statement'"):
        read_mmvp_vlm(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        read_mmvp_vlm(tmp_path / "MMVP_VLM")
    assert str(error.value) == (
        f"{tmp_path / 'MMVP_VLM'}: no MMVP-VLM table; expected MMVP-VLM's Questions.csv (Question ID, Type, Statement) "
        "in the root or MMVP_VLM/; images optional (<Type>/<id>.jpg, also under images/)"
    )
