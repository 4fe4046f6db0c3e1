"""VisMin's reader by hand (issue 56, mutation-directed): the solution's two orientations and what is neither,
where the solution and the split folders are looked up, state.json's shard list and order, Arrow's stream and
file formats, which split the solution covers, the dropped rows per reason, and the keys, tags and block ids.
The Arrow folders are written with pyarrow directly; expected values are written out in each test."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from clip_cycles.benchmark_audit.formats.vismin import orientation, read_arrow_rows, read_solution, read_vismin

SAME = ("T0_I0 > T1_I0 & T1_I1 > T0_I1", "T0_I0 > T0_I1 & T1_I1 > T1_I0")
SWAPPED = ("T1_I0 > T0_I0 & T0_I1 > T1_I1", "T0_I1 > T0_I0 & T1_I0 > T1_I1")


def _rows(n: int, start: int = 0, category="object") -> list[dict]:
    return [
        {
            "image_0": {"bytes": f"a{i}".encode(), "path": None},
            "image_1": {"bytes": f"b{i}".encode(), "path": None},
            "text_0": f"one cat {i}",
            "text_1": f"two cats {i}",
            "id": str(i),
            "category": category,
        }
        for i in range(start, start + n)
    ]


def _shard(path: Path, rows: list[dict], stream: bool = True) -> None:
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    opener = pa.ipc.new_stream if stream else pa.ipc.new_file
    with pa.OSFile(str(path), "wb") as sink, opener(sink, table.schema) as writer:
        writer.write_table(table)


def _solution(path: Path, pairs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["idx", "Text", "Image", "category"])
        writer.writerows([i, text, image, "object"] for i, (text, image) in enumerate(pairs))


def _blocks(cs):
    return [
        (cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2], cs.cycle_tags[k])
        for k, (u1, u2, v1, v2) in enumerate(cs.cycles)
    ]


def test_orientation_reads_both_published_forms_and_nothing_else() -> None:
    assert orientation({"Text": SAME[0], "Image": SAME[1]}) is True
    assert orientation({"Text": " T0_I0>T1_I0 &\tT1_I1 >T0_I1 ", "Image": "T0_I0>T0_I1&T1_I1>T1_I0"}) is True
    assert orientation({"Text": SWAPPED[0], "Image": SWAPPED[1]}) is False
    assert orientation({"Text": SAME[0], "Image": SWAPPED[1]}) is None
    assert orientation({"Text": SWAPPED[0], "Image": SAME[1]}) is None
    assert orientation({"Text": SAME[1], "Image": SAME[0]}) is None
    assert orientation({"Text": SAME[0]}) is None and orientation({}) is None
    assert orientation({"Text": None, "Image": None}) is None


def test_the_solution_in_the_root_comes_before_solutions_and_columns_are_checked(tmp_path: Path) -> None:
    _solution(tmp_path / "solutions" / "sim_solution.csv", [SAME, SWAPPED])
    path, rows = read_solution(tmp_path)
    assert path == tmp_path / "solutions" / "sim_solution.csv" and rows == [True, False]
    _solution(tmp_path / "sim_solution.csv", [SWAPPED, ("x", "y"), SAME])
    path, rows = read_solution(tmp_path)
    assert path == tmp_path / "sim_solution.csv" and rows == [False, None, True]
    (tmp_path / "sim_solution.csv").write_text("idx,Text,category\n0,a,b\n")
    with pytest.raises(ValueError) as error:
        read_solution(tmp_path)
    assert (
        str(error.value)
        == f"{tmp_path / 'sim_solution.csv'}: expected columns idx, Text, Image, category; got ['Text', 'category', 'idx']"
    )
    (tmp_path / "sim_solution.csv").write_text("idx,Image,category\n0,a,b\n")
    with pytest.raises(ValueError, match="expected columns"):
        read_solution(tmp_path)
    (tmp_path / "sim_solution.csv").write_text("idx,Text,Image,category\n")
    assert read_solution(tmp_path) == (tmp_path / "sim_solution.csv", [])


def test_arrow_stream_and_file_formats_are_read_and_anything_else_is_named(tmp_path: Path) -> None:
    rows = _rows(2)
    _shard(tmp_path / "s.arrow", rows, stream=True)
    _shard(tmp_path / "f.arrow", rows, stream=False)
    assert read_arrow_rows(tmp_path / "s.arrow") == rows == read_arrow_rows(tmp_path / "f.arrow")
    (tmp_path / "bad.arrow").write_bytes(b"ARROW1 but not really")
    with pytest.raises(ValueError) as error:
        read_arrow_rows(tmp_path / "bad.arrow")
    assert str(error.value) == (
        f"{tmp_path / 'bad.arrow'}: not an Arrow shard (neither Arrow's stream nor its file format); "
        "expected save_to_disk's data-*.arrow"
    )


def test_two_splits_the_solution_covers_test_only_and_state_orders_the_shards(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data).mkdir()
    (data / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    # test: two shards, state.json lists the second file first; positions run across the shards in that order.
    _shard(data / "test" / "data-00001-of-00002.arrow", _rows(2, 0, category="counting"))
    _shard(data / "test" / "data-00000-of-00002.arrow", [*_rows(1, 2, category=""), *_rows(1, 3, category=None)])
    state = {"_data_files": [{"filename": "data-00001-of-00002.arrow"}, {"filename": "data-00000-of-00002.arrow"}]}
    (data / "test" / "state.json").write_text(json.dumps(state))
    _shard(data / "train" / "data-00000-of-00001.arrow", _rows(3, 10))  # no state.json: the glob
    _solution(tmp_path / "solutions" / "sim_solution.csv", [SAME, ("bad", "bad"), SWAPPED, SAME])
    train, test = read_vismin(tmp_path)
    assert (train.name, test.name) == ("train", "test")
    assert train.n_comparisons == 0 and train.skipped == {"no_solution_for_split": 3}
    assert test.skipped == {"solution_names_no_pairing": 1}
    first, second = "data-00001-of-00002", "data-00000-of-00002"
    assert _blocks(test) == [
        (f"test/{first} row 0/image_0", f"test/{first} row 0/image_1", "one cat 0", "two cats 0", ("category=counting",)),
        (f"test/{second} row 0/image_0", f"test/{second} row 0/image_1", "two cats 2", "one cat 2", ()),
        (f"test/{second} row 1/image_0", f"test/{second} row 1/image_1", "one cat 3", "two cats 3", ()),
    ]
    assert list(dict.fromkeys(test.item_ids)) == [f"{first}/0", f"{second}/0", f"{second}/1"]
    assert test.images[0].data == b"a0" and test.images[1].data == b"b0"


def test_a_single_split_of_any_name_is_covered_and_images_by_path_are_under_its_folder(tmp_path: Path) -> None:
    split = tmp_path / "validation"
    rows = _rows(2)
    rows[1]["image_0"], rows[1]["image_1"] = {"bytes": None, "path": "x.png"}, {"bytes": None, "path": "y.png"}
    _shard(split / "data-00000-of-00001.arrow", rows)  # no state.json: the split folder by its shards
    _solution(split / "sim_solution.csv", [SWAPPED, SAME])
    (cs,) = read_vismin(split)
    assert cs.name == "validation" and cs.skipped == {}
    assert _blocks(cs)[0][2:4] == ("two cats 0", "one cat 0")
    assert [(i.key, i.path) for i in cs.images[2:]] == [("x.png", split / "x.png"), ("y.png", split / "y.png")]
    # The same split as the data/ folder of a root.
    _shard(tmp_path / "r" / "data" / "data-00000-of-00001.arrow", rows)
    _solution(tmp_path / "r" / "sim_solution.csv", [SWAPPED, SAME])
    (cs,) = read_vismin(tmp_path / "r")
    assert cs.name == "data" and len(cs.cycles) == 2


def test_the_row_count_must_match_the_solution_of_the_covered_split(tmp_path: Path) -> None:
    _shard(tmp_path / "data-00000-of-00001.arrow", _rows(2))
    _solution(tmp_path / "sim_solution.csv", [SAME, SAME, SAME])
    with pytest.raises(ValueError) as error:
        read_vismin(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'sim_solution.csv'}: 3 solution rows for the 2 rows of split {tmp_path.name!r}; "
        "the solution matches the rows by position, so the two must be of one release"
    )


@pytest.mark.parametrize(
    ("listing", "state"),
    [
        ({"splits": "test"}, None),
        ({"splits": ["test", "../up"]}, None),
        ({"splits": ["test", 3]}, None),
        (["test"], None),
        (None, {"_data_files": [{"filename": "data-00000-of-00001.arrow"}, {"filename": "../x.arrow"}]}),
        (None, {"_data_files": [{"filename": "data-0-of-1.arrow"}]}),
        (None, {"_data_files": ["data-00000-of-00001.arrow"]}),
        (None, {"_data_files": {"filename": "data-00000-of-00001.arrow"}}),
        (None, ["data-00000-of-00001.arrow"]),
        (None, {"_data_files": [{"filename": 3}]}),
    ],
)
def test_malformed_listings_are_refused_naming_the_field(tmp_path: Path, listing, state) -> None:
    _solution(tmp_path / "sim_solution.csv", [SAME])
    if listing is not None:
        (tmp_path / "dataset_dict.json").write_text(json.dumps(listing))
        match = r"dataset_dict.json: field 'splits' must be a list of split folder names"
    else:
        _shard(tmp_path / "data-00000-of-00001.arrow", _rows(1))
        (tmp_path / "state.json").write_text(json.dumps(state))
        match = r"state.json: field '_data_files' must list \{filename: data-NNNNN-of-NNNNN.arrow\}"
    with pytest.raises(ValueError, match=match):
        read_vismin(tmp_path)


def test_a_split_listing_with_good_names_reads_those_folders(tmp_path: Path) -> None:
    (tmp_path / "dataset_dict.json").write_text(json.dumps({"splits": ["test.v1-x"]}))
    _shard(tmp_path / "test.v1-x" / "data-00000-of-00001.arrow", _rows(1))
    _solution(tmp_path / "sim_solution.csv", [SAME])
    (cs,) = read_vismin(tmp_path)
    assert cs.name == "test.v1-x" and len(cs.cycles) == 1


def test_no_folder_names_the_root_and_what_it_must_hold(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()  # a folder is no state file
    with pytest.raises(FileNotFoundError) as error:
        read_vismin(tmp_path)
    assert str(error.value).startswith(f"{tmp_path}: no VisMin Arrow folder; expected a datasets save_to_disk folder")
    _shard(tmp_path / "s" / "data-00000-of-00001.arrow", _rows(1))
    with pytest.raises(FileNotFoundError) as error:
        read_vismin(tmp_path / "s" / "data-00000-of-00001.arrow")  # a file is no root
    assert "no VisMin Arrow folder" in str(error.value)


def test_an_image_neither_named_nor_held_is_a_sentence_naming_row_and_field(tmp_path: Path) -> None:
    rows = _rows(1)
    rows[0]["image_1"] = {"bytes": None, "path": None}
    _shard(tmp_path / "data-00000-of-00001.arrow", rows)
    _solution(tmp_path / "sim_solution.csv", [SAME])
    with pytest.raises(ValueError) as error:
        read_vismin(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'data-00000-of-00001.arrow'}: {tmp_path.name}/data-00000-of-00001 row 0: field 'image_1' must name "
        "an image file or hold image bytes, got {'bytes': None, 'path': None}"
    )


def test_the_first_image_is_named_too(tmp_path: Path) -> None:
    rows = _rows(1)
    rows[0]["image_0"] = {"bytes": None, "path": None}
    _shard(tmp_path / "data-00000-of-00001.arrow", rows)
    _solution(tmp_path / "sim_solution.csv", [SAME])
    with pytest.raises(ValueError) as error:
        read_vismin(tmp_path)
    assert str(error.value).startswith(
        f"{tmp_path / 'data-00000-of-00001.arrow'}: {tmp_path.name}/data-00000-of-00001 row 0: field 'image_0'"
    )
