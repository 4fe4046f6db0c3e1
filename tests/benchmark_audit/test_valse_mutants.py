"""VALSE's reader by hand (issue 56, mutation-directed): the foil as a string, a list or ``foils``, the
paper's valid set at exactly two votes, the refusals' sentences, item and comparison ids, tags, where
images are looked up, a file root, an unreadable piece among good ones. Expected values are written out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import comparisons

from clip_cycles.benchmark_audit.formats.valse import ADAPTER, ADAPTER_ALL, _reader


# The readers are built on each call (not ADAPTER.reader, built once at import), so that a mutation of
# _reader's body is the reader under test; the registered adapters are checked against them below.
def read_valse(root: Path):
    return _reader(True)(root)


def read_valse_all(root: Path):
    return _reader(False)(root)


def _item(caption: str, votes: int | None = 3, **extra) -> dict:
    row = {"image_file": f"{caption}.jpg", "caption": caption, "foil": f"not {caption}", **extra}
    if votes is not None:
        row["mturk"] = {"foil": 3 - votes, "caption": votes, "other": 0}
    return row


def test_votes_foils_ids_and_tags(tmp_path: Path) -> None:
    piece = {
        "a": _item("a", 2, dataset="visual7w"),  # exactly two votes: valid
        "b": _item("b", 1),  # one vote: not valid
        "c": _item("c", 0),
        "d": _item("d", 3, foils=["x d", "y d"], dataset=""),  # foils wins over foil; an empty dataset: no tag
        "e": {**_item("e", 3), "foil": ["p e", "q e"]},  # a list under foil
    }
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "plurals.json").write_text(json.dumps(piece))
    (cs,) = read_valse(tmp_path)
    assert cs.name == "plurals" and cs.skipped == {"not_valid_mturk_caption_lt_2": 2}
    assert comparisons(cs) == [
        ("a/0", "a", "a.jpg", "a", "not a", ("dataset=visual7w",)),
        ("d/0", "d", "d.jpg", "d", "x d", ()),
        ("d/1", "d", "d.jpg", "d", "y d", ()),
        ("e/0", "e", "e.jpg", "e", "p e", ()),
        ("e/1", "e", "e.jpg", "e", "q e", ()),
    ]
    assert cs.images[0].path == tmp_path / "a.jpg"  # no images/: beside the pieces
    (everything,) = read_valse_all(tmp_path)
    assert everything.skipped == {} and [c[0] for c in comparisons(everything)] == [
        "a/0",
        "b/0",
        "c/0",
        "d/0",
        "d/1",
        "e/0",
        "e/1",
    ]


def test_a_json_list_numbers_its_items_and_valse_all_needs_no_votes(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "existence.json").write_text(json.dumps([_item("a", None), _item("b", None)]))
    (cs,) = read_valse_all(tmp_path)
    assert [c[:3] for c in comparisons(cs)] == [("0/0", "0", "a.jpg"), ("1/0", "1", "b.jpg")]
    assert cs.images[0].path == tmp_path / "images" / "a.jpg"
    with pytest.raises(ValueError) as error:
        read_valse(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'existence.json'}: item 0: field 'mturk' must be an object with 'caption' (the annotators' votes), "
        "got None; VALSE's valid set needs it (use format valse_all to read every instance)"
    )


def test_a_file_root_finds_images_beside_it_and_a_foil_of_another_type_is_named(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "relation.json").write_text(json.dumps({"r1": _item("r")}))
    (cs,) = read_valse(tmp_path / "relation.json")
    assert cs.name == "relation" and cs.images[0].path == tmp_path / "images" / "r.jpg"
    (tmp_path / "relation.json").write_text(json.dumps({"r1": {**_item("r"), "foil": 7}}))
    with pytest.raises(ValueError) as error:
        read_valse(tmp_path / "relation.json")
    assert (
        str(error.value)
        == f"{tmp_path / 'relation.json'}: item r1: field 'foil' must be a non-empty string (or a list of them), got 7"
    )
    # Neither foil nor foils: the checked row names the missing field.
    (tmp_path / "relation.json").write_text(json.dumps({"r1": {"image_file": "r.jpg", "caption": "r", "mturk": {"caption": 3}}}))
    with pytest.raises(ValueError, match=r"relation.json: item r1: field 'foils'"):
        read_valse(tmp_path / "relation.json")


def test_an_unreadable_piece_is_a_row_and_the_others_are_read(tmp_path: Path) -> None:
    (tmp_path / "a_bad.json").write_text("{oops")
    (tmp_path / "b_good.json").write_text(json.dumps({"g": _item("g")}))
    bad, good = read_valse(tmp_path)
    assert bad.name == "a_bad" and bad.unusable.startswith("unreadable: ") and "a_bad.json" in bad.unusable
    assert good.name == "b_good" and good.unusable is None and len(good.comparison_ids) == 1


def test_two_pieces_of_one_stem_and_no_piece_are_sentences(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        read_valse(tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: no VALSE piece file; expected VALSE's piece files (existence.json, plurals.json, counting_hard.json, "
        "relation.json, actions/actant-swap.json, ...) anywhere under the root; images optional (images/)"
    )
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "counting.json").write_text(json.dumps({"c": _item("c")}))
    with pytest.raises(ValueError) as error:
        read_valse_all(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'a' / 'counting.json'} and {tmp_path / 'b' / 'counting.json'}: two VALSE piece files named "
        "'counting'; point --root at the folder of the published pieces (VALSE's data/), not at a folder holding copies"
    )


def test_the_registered_readers_are_the_valid_set_and_every_instance(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps({"a": _item("a", 3), "b": _item("b", 1)}))
    (valid,) = ADAPTER.reader(tmp_path)
    (every,) = ADAPTER_ALL.reader(tmp_path)
    assert (ADAPTER.name, ADAPTER_ALL.name) == ("valse", "valse_all")
    assert [c[0] for c in comparisons(valid)] == ["a/0"] and [c[0] for c in comparisons(every)] == ["a/0", "b/0"]


@pytest.mark.parametrize(
    ("content", "item"), [([{"image_file": "a.jpg", "caption": "a", "foil": "b"}, 5], "1"), ({"k": ["x"]}, "k")]
)
def test_an_item_that_is_no_object_is_named(tmp_path: Path, content, item: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError) as error:
        read_valse_all(tmp_path)
    assert str(error.value) == f"{path}: item {item} must be an object with image_file, caption, foil"


def test_a_file_root_reads_that_file_only(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"a": _item("a")}))
    (tmp_path / "b.json").write_text(json.dumps({"b": _item("b")}))
    (only,) = read_valse(tmp_path / "b.json")
    assert only.name == "b"
