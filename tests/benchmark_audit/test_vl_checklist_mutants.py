"""VL-CheckList's reader by hand (issue 56, mutation-directed): every POS x NEG pair, subset names by path,
images/ excluded from the files, an unreadable file as a row, the entry and file shapes refused with
their sentences, a file root. Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import comparisons

from clip_cycles.benchmark_audit.formats.vl_checklist import read_vl_checklist


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_every_pos_neg_pair_named_by_path_and_images_excluded(tmp_path: Path) -> None:
    _write(
        tmp_path / "Attribute" / "vaw" / "color.json",
        [
            ["vg/1.jpg", {"POS": ["a red cup", "a cup, red"], "NEG": ["a blue cup", "a green cup"]}],
            ["vg/2.jpg", {"POS": ["a tall man"], "NEG": ["a short man"]}],
        ],
    )
    _write(tmp_path / "images" / "stray.json", [["x.jpg", {"POS": ["p"], "NEG": ["n"]}]])  # under images/: not a file
    (tmp_path / "images" / "vg").mkdir()
    (cs,) = read_vl_checklist(tmp_path)
    assert cs.name == "Attribute/vaw/color"
    assert comparisons(cs) == [
        ("0/0/0", "0", "vg/1.jpg", "a red cup", "a blue cup", ()),
        ("0/0/1", "0", "vg/1.jpg", "a red cup", "a green cup", ()),
        ("0/1/0", "0", "vg/1.jpg", "a cup, red", "a blue cup", ()),
        ("0/1/1", "0", "vg/1.jpg", "a cup, red", "a green cup", ()),
        ("1/0/0", "1", "vg/2.jpg", "a tall man", "a short man", ()),
    ]
    assert cs.images[0].path == tmp_path / "images" / "vg" / "1.jpg"
    # The file itself as the root: named by its stem, images beside it.
    (one,) = read_vl_checklist(tmp_path / "Attribute" / "vaw" / "color.json")
    assert one.name == "color" and one.images[0].path == tmp_path / "Attribute" / "vaw" / "vg" / "1.jpg"


def test_an_unreadable_or_non_list_file_is_a_row_and_the_others_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[oops")
    bad_shape = _write(tmp_path / "b.json", {"POS": ["p"]})
    _write(tmp_path / "c.json", [["i.jpg", {"POS": ["p"], "NEG": ["n"]}]])
    a, b, c = read_vl_checklist(tmp_path)
    assert (a.name, b.name, c.name) == ("a", "b", "c")
    assert a.unusable.startswith("unreadable: ") and "a.json" in a.unusable
    assert (
        b.unusable
        == f'unreadable: {bad_shape}: a VL-CheckList file must be a list of [image, {{"POS": [...], "NEG": [...]}}], got dict'
    )
    assert c.unusable is None and len(c.comparison_ids) == 1


@pytest.mark.parametrize(
    "entry",
    [
        ["i.jpg"],
        ["i.jpg", {"POS": ["p"], "NEG": ["n"]}, 3],
        [3, {"POS": ["p"], "NEG": ["n"]}],
        ["  ", {"POS": ["p"], "NEG": ["n"]}],
        "i.jpg",
    ],
)
def test_a_malformed_entry_is_named_with_its_number(tmp_path: Path, entry) -> None:
    path = _write(tmp_path / "x.json", [["ok.jpg", {"POS": ["p"], "NEG": ["n"]}], entry])
    with pytest.raises(ValueError) as error:
        read_vl_checklist(tmp_path)
    assert str(error.value) == f'{path}: entry 1 must be [image path, {{"POS": [...], "NEG": [...]}}], got {entry!r}'


def test_empty_lists_and_no_file_are_refused(tmp_path: Path) -> None:
    _write(tmp_path / "x.json", [["ok.jpg", {"POS": ["p"], "NEG": []}]])
    with pytest.raises(ValueError, match=r"x.json: entry 0: field 'NEG'"):
        read_vl_checklist(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        read_vl_checklist(tmp_path / "nothing")
    assert str(error.value) == (
        f"{tmp_path / 'nothing'}: no VL-CheckList file; expected "
        'VL-CheckList JSON files [[image, {"POS": [...], "NEG": [...]}], ...] anywhere under the root; images optional (images/)'
    )
