"""BiVLC's reader by hand (issue 56, mutation-directed): shards of one split merged, image keys from the row's
place, images by name under images/ or beside the file, type and subtype tags, root and data/, the refusal.
Expected values are written out in each test."""

from __future__ import annotations

from pathlib import Path

import pytest
from format_subsets import block_ids, blocks

from clip_cycles.benchmark_audit.formats.bivlc import read_bivlc, split_name


def _write(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({key: [row.get(key) for row in rows] for key in rows[0]}), path)
    return path


def _row(i: int, **extra) -> dict:
    return {
        "image": {"bytes": f"p{i}".encode(), "path": None},
        "caption": f"a dog bites a man {i}",
        "negative_caption": f"a man bites a dog {i}",
        "negative_image": {"bytes": f"n{i}".encode(), "path": None},
        **extra,
    }


def test_split_names_drop_only_the_hub_shard_suffix() -> None:
    assert split_name(Path("test-00000-of-00002.parquet")) == "test"
    assert split_name(Path("valid-00001-of-00010.parquet")) == "valid"
    assert split_name(Path("test-0-of-2.parquet")) == "test-0-of-2"
    assert split_name(Path("test-00000-of-00002-x.parquet")) == "test-00000-of-00002-x"


def test_shards_of_one_split_keys_tags_and_ids(tmp_path: Path) -> None:
    _write(
        tmp_path / "data" / "test-00000-of-00002.parquet",
        [_row(0, type="replace", subtype="obj"), _row(1, type="", subtype="rel")],
    )
    _write(tmp_path / "data" / "test-00001-of-00002.parquet", [_row(2, type=None, subtype=None)])
    _write(tmp_path / "data" / "train-00000-of-00001.parquet", [_row(3, type="swap", subtype="")])
    test, train = read_bivlc(tmp_path)
    assert (test.name, train.name) == ("test", "train")
    a, b = "test-00000-of-00002", "test-00001-of-00002"
    assert blocks(test) == [
        (
            f"{a} row 0/image",
            f"{a} row 0/negative_image",
            "a dog bites a man 0",
            "a man bites a dog 0",
            ("type=replace", "subtype=obj"),
        ),
        (f"{a} row 1/image", f"{a} row 1/negative_image", "a dog bites a man 1", "a man bites a dog 1", ("subtype=rel",)),
        (f"{b} row 0/image", f"{b} row 0/negative_image", "a dog bites a man 2", "a man bites a dog 2", ()),
    ]
    assert block_ids(test) == [f"{a}/0", f"{a}/1", f"{b}/0"] and test.images[0].data == b"p0" and test.images[1].data == b"n0"
    assert blocks(train)[0][4] == ("type=swap",)


def test_images_by_name_root_files_first_and_the_refusal(tmp_path: Path) -> None:
    rows = [_row(0, image="x.png", negative_image={"bytes": None, "path": "y.png"})]
    _write(tmp_path / "test.parquet", rows)
    _write(tmp_path / "data" / "other.parquet", [_row(5)])  # root files come first: data/ is not read
    (tmp_path / "images").mkdir()
    (cs,) = read_bivlc(tmp_path)
    assert cs.name == "test" and [(i.key, i.path) for i in cs.images] == [
        ("x.png", tmp_path / "images" / "x.png"),
        ("y.png", tmp_path / "images" / "y.png"),
    ]
    (cs,) = read_bivlc(tmp_path / "test.parquet")  # a file root: beside the file
    assert [i.path for i in cs.images] == [tmp_path / "x.png", tmp_path / "y.png"]
    with pytest.raises(FileNotFoundError) as error:
        read_bivlc(tmp_path / "images")
    assert str(error.value) == (
        f"{tmp_path / 'images'}: no BiVLC file; expected BiVLC Parquet files (the hub's data/test-*.parquet) with columns "
        "image, caption, negative_caption, negative_image, images as {bytes, path}; in the root or data/"
    )


def test_an_image_neither_named_nor_held_is_a_sentence_naming_row_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "test-00000-of-00001.parquet", [_row(0, image="x.png", negative_image="")])
    with pytest.raises(ValueError) as error:
        read_bivlc(tmp_path)
    assert str(error.value) == (
        f"{path}: test-00000-of-00001 row 0: field 'negative_image' must name an image file or hold image bytes, got ''"
    )


def test_the_first_image_is_named_too(tmp_path: Path) -> None:
    path = _write(tmp_path / "test.parquet", [_row(0, image="", negative_image="y.png")])
    with pytest.raises(ValueError) as error:
        read_bivlc(tmp_path)
    assert str(error.value) == f"{path}: test row 0: field 'image' must name an image file or hold image bytes, got ''"
