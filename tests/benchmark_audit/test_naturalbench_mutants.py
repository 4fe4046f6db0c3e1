"""NaturalBench's reader by hand (issue 56, mutation-directed): which answers pair a question with an image
(case and spaces of "yes"), both spellings of the question-type column, the dropped rows per reason, the
image keys, tags and block ids, the retrieval form's unreadable and malformed files, and where the reader
looks (a file root, data/, NaturalBench-Retrieval/). Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clip_cycles.benchmark_audit.formats.naturalbench import read_naturalbench

Q0, Q1 = "Is the cup full?", "Is the cup empty?"


def _row(answers, kind="yes_no", source="Flickr", image_0=None, image_1=None, type_field="Question Type", q=(Q0, Q1)):
    row = {
        "Question_0": q[0],
        "Question_1": q[1],
        "Image_0": image_0 if image_0 is not None else {"bytes": b"img0", "path": None},
        "Image_1": image_1 if image_1 is not None else {"bytes": b"img1", "path": None},
        "Image_0_Question_0": answers[0],
        "Image_1_Question_0": answers[1],
        "Image_0_Question_1": answers[2],
        "Image_1_Question_1": answers[3],
    }
    if kind is not ...:
        row[type_field] = kind
    if source is not ...:
        row["Source"] = source
    return row


def _write(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {key: [row.get(key) for row in rows] for key in rows[0]}
    pq.write_table(pa.table(columns), path)
    return path


def _blocks(cs):
    """Per cycle: (image_0 key, image_1 key, caption of image_0, caption of image_1, tags)."""
    return [
        (cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2], cs.cycle_tags[k])
        for k, (u1, u2, v1, v2) in enumerate(cs.cycles)
    ]


def _ids(cs):
    return list(dict.fromkeys(cs.item_ids))


def test_yes_pairs_each_question_with_one_image_in_any_case_and_spacing(tmp_path: Path) -> None:
    rows = [
        _row(("  YES ", "no", "No", " yes")),  # Q0 on Image_0, Q1 on Image_1
        _row(("No", "Yes", "yES", "NO"), source=""),  # Q1 on Image_0, Q0 on Image_1; an empty source: no tag
        _row(("yes", "yes", "no", "no")),  # Q0 yes on both images: no pairing
        _row(("yes", "no", "yes", "no")),  # both questions yes on Image_0
        _row(("no", "no", "no", "no")),  # no yes at all
        _row(("yes", "no", "no", "no")),  # one yes only
        _row(("yes", "yes", "yes", "yes")),
        _row(("A", "B", "B", "A"), kind="multiple_choice"),
        _row(("B", "A", "A", "B"), kind="other"),
        _row(("Yes", "No", "No", "Yes"), kind="", source=None),  # an empty type is read as yes/no
    ]
    _write(tmp_path / "data" / "train-00000-of-00001.parquet", rows)
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "train"
    stem = "train-00000-of-00001"
    assert _blocks(cs) == [
        (f"{stem} row 0/Image_0", f"{stem} row 0/Image_1", Q0, Q1, ("source=Flickr",)),
        (f"{stem} row 1/Image_0", f"{stem} row 1/Image_1", Q1, Q0, ()),
        (f"{stem} row 9/Image_0", f"{stem} row 9/Image_1", Q0, Q1, ()),
    ]
    assert cs.images[0].data == b"img0" and cs.images[1].data == b"img1" and cs.images[0].path is None
    assert _ids(cs) == [f"{stem}/0", f"{stem}/1", f"{stem}/9"]
    assert cs.skipped == {"answers_do_not_pair_questions_with_images": 5, "not_a_yes_no_question": 2}


def test_the_second_type_spelling_and_shards_of_one_split(tmp_path: Path) -> None:
    first = [
        _row(("Yes", "No", "No", "Yes"), kind="multiple_choice", type_field="Question_Type"),
        _row(("Yes", "No", "No", "Yes"), type_field="Question_Type"),
    ]
    second = [_row(("No", "Yes", "Yes", "No"), source="DOCCI", q=("Is it wet?", "Is it dry?"))]
    _write(tmp_path / "train-00000-of-00002.parquet", first)
    _write(tmp_path / "train-00001-of-00002.parquet", second)
    _write(tmp_path / "data" / "ignored-00000-of-00001.parquet", second)  # root files come first: data/ is not read
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "train" and cs.skipped == {"not_a_yes_no_question": 1}
    assert _ids(cs) == ["train-00000-of-00002/1", "train-00001-of-00002/0"]
    assert [b[2:] for b in _blocks(cs)] == [(Q0, Q1, ("source=Flickr",)), ("Is it dry?", "Is it wet?", ("source=DOCCI",))]


def test_a_type_column_of_none_falls_back_to_the_other_spelling(tmp_path: Path) -> None:
    row = _row(("Yes", "No", "No", "Yes"), kind=None)
    row["Question_Type"] = "multiple_choice"
    _write(tmp_path / "x.parquet", [row, _row(("Yes", "No", "No", "Yes"))])
    (cs,) = read_naturalbench(tmp_path / "x.parquet")
    assert cs.name == "x" and cs.skipped == {"not_a_yes_no_question": 1} and _ids(cs) == ["x/1"]


def test_images_named_by_file_or_path_are_looked_up_under_images(tmp_path: Path) -> None:
    rows = [_row(("Yes", "No", "No", "Yes"), image_0="a.png", image_1={"bytes": None, "path": "b.png"})]
    _write(tmp_path / "test.parquet", rows)
    (tmp_path / "images").mkdir()
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "test"
    assert [(i.key, i.path, i.data) for i in cs.images] == [
        ("a.png", tmp_path / "images" / "a.png", None),
        ("b.png", tmp_path / "images" / "b.png", None),
    ]
    # A file root has no images/ of its own: names are looked up beside the file.
    (cs,) = read_naturalbench(tmp_path / "test.parquet")
    assert [i.path for i in cs.images] == [tmp_path / "a.png", tmp_path / "b.png"]
    # Without images/ in a folder root, beside the file as well.
    _write(tmp_path / "other" / "test.parquet", rows)
    (cs,) = read_naturalbench(tmp_path / "other")
    assert [i.path for i in cs.images] == [tmp_path / "other" / "a.png", tmp_path / "other" / "b.png"]


def _entries(n: int = 2) -> list[dict]:
    return [
        {"index": 10 + i, "image_0": f"{i}a.png", "image_1": f"{i}b.png", "caption_0": f"red {i}", "caption_1": f"blue {i}"}
        for i in range(n)
    ]


def test_retrieval_blocks_ids_and_images(tmp_path: Path) -> None:
    entries = _entries()
    del entries[1]["index"]  # no index: the entry's position
    (tmp_path / "metadata.json").write_text(json.dumps(entries))
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "retrieval" and cs.unusable is None
    assert _ids(cs) == ["10", "1"]
    assert _blocks(cs) == [("0a.png", "0b.png", "red 0", "blue 0", ()), ("1a.png", "1b.png", "red 1", "blue 1", ())]
    assert cs.images[0].path == tmp_path / "images" / "0a.png"
    # The file itself as the root reads the same.
    (same,) = read_naturalbench(tmp_path / "metadata.json")
    assert _blocks(same) == _blocks(cs) and same.name == "retrieval"


def test_retrieval_in_its_folder_beside_parquet_comes_first(tmp_path: Path) -> None:
    folder = tmp_path / "NaturalBench-Retrieval"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps(_entries(1)))
    _write(tmp_path / "data" / "train-00000-of-00001.parquet", [_row(("Yes", "No", "No", "Yes"))])
    retrieval, train = read_naturalbench(tmp_path)
    assert (retrieval.name, train.name) == ("retrieval", "train")
    assert retrieval.images[0].path == folder / "images" / "0a.png" and len(train.cycles) == 1


def test_an_unreadable_or_malformed_metadata_file_is_a_row_not_an_abort(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text("{not json")
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "retrieval" and cs.unusable.startswith("unreadable: ") and "metadata.json" in cs.unusable
    (tmp_path / "metadata.json").write_text(json.dumps({"index": 1}))
    (cs,) = read_naturalbench(tmp_path)
    assert cs.name == "retrieval"
    assert cs.unusable == f"unreadable: {tmp_path / 'metadata.json'}: expected a list of entries, got dict"


def test_nothing_to_read_names_the_root_and_what_it_must_hold(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").mkdir()  # a folder is no metadata file
    with pytest.raises(FileNotFoundError) as error:
        read_naturalbench(tmp_path)
    assert str(error.value).startswith(f"{tmp_path}: no NaturalBench file; expected NaturalBench Parquet files")
    assert str(error.value).endswith("metadata.json with images/ (in the root or NaturalBench-Retrieval/)")


def test_an_image_neither_named_nor_held_is_a_sentence_naming_row_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "test.parquet", [_row(("Yes", "No", "No", "Yes"), image_0="x.png", image_1="")])
    with pytest.raises(ValueError) as error:
        read_naturalbench(tmp_path)
    assert str(error.value) == f"{path}: test row 0: field 'Image_1' must name an image file or hold image bytes, got ''"


def test_the_first_image_and_a_retrieval_entry_of_another_type_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "test.parquet", [_row(("Yes", "No", "No", "Yes"), image_0="", image_1="y.png")])
    with pytest.raises(ValueError) as error:
        read_naturalbench(tmp_path / "test.parquet")
    assert str(error.value) == f"{path}: test row 0: field 'Image_0' must name an image file or hold image bytes, got ''"
    metadata = tmp_path / "r" / "metadata.json"
    metadata.parent.mkdir()
    metadata.write_text(json.dumps([_entries(1)[0], ["not", "an", "object"]]))
    with pytest.raises(ValueError, match=r"metadata.json: entry 1"):
        read_naturalbench(tmp_path / "r")
