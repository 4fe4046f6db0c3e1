"""ColorSwap's reader by hand (issue 56, mutation-directed): which table is read (Parquet, then JSON lines,
then JSON; root before data/), block ids from ``id`` or the row number, tags, images under images/.
Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import block_ids, blocks

from clip_cycles.benchmark_audit.formats.colorswap import read_colorswap


def _row(i: int, **extra) -> dict:
    return {"image_1": f"{i}a.png", "image_2": f"{i}b.png", "caption_1": f"a red cup {i}", "caption_2": f"a cup red {i}", **extra}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_blocks_ids_tags_and_images(tmp_path: Path) -> None:
    rows = [
        _row(0, id=7, image_source="midjourney", caption_source="human"),
        _row(1, image_source="", caption_source=None),
        _row(2, caption_source="gpt"),
    ]
    _jsonl(tmp_path / "data" / "test.jsonl", rows)
    (tmp_path / "data" / "images").mkdir()
    (cs,) = read_colorswap(tmp_path)
    assert cs.name == "colorswap" and block_ids(cs) == ["7", "1", "2"]
    assert blocks(cs) == [
        ("0a.png", "0b.png", "a red cup 0", "a cup red 0", ("image_source=midjourney", "caption_source=human")),
        ("1a.png", "1b.png", "a red cup 1", "a cup red 1", ()),
        ("2a.png", "2b.png", "a red cup 2", "a cup red 2", ("caption_source=gpt",)),
    ]
    assert cs.images[0].path == tmp_path / "data" / "images" / "0a.png"


def test_the_table_chosen_and_images_under_the_root(tmp_path: Path) -> None:
    _jsonl(tmp_path / "data" / "a.jsonl", [_row(0)])
    _jsonl(tmp_path / "z.jsonl", [_row(1)])
    (tmp_path / "b.json").write_text(json.dumps([_row(2)]))
    (tmp_path / "data" / "images").mkdir()
    (cs,) = read_colorswap(tmp_path)  # the root's JSON lines before its JSON, the root before data/
    assert blocks(cs)[0][2] == "a red cup 1" and cs.images[0].path == tmp_path / "1a.png"
    (tmp_path / "images").mkdir()
    (cs,) = read_colorswap(tmp_path)
    assert cs.images[0].path == tmp_path / "images" / "1a.png"
    (tmp_path / "z.jsonl").unlink()
    (cs,) = read_colorswap(tmp_path)
    assert blocks(cs)[0][2] == "a red cup 2"
    (tmp_path / "b.json").unlink()
    (cs,) = read_colorswap(tmp_path)
    assert blocks(cs)[0][2] == "a red cup 0" and cs.images[0].path == tmp_path / "data" / "images" / "0a.png"
    (cs,) = read_colorswap(tmp_path / "data" / "a.jsonl")  # a file root
    assert cs.images[0].path == tmp_path / "data" / "images" / "0a.png"


def test_parquet_comes_first_and_no_table_is_named(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    _jsonl(tmp_path / "a.jsonl", [_row(0)])
    pq.write_table(pa.table({k: [v] for k, v in _row(9).items()}), tmp_path / "z.parquet")
    (cs,) = read_colorswap(tmp_path)
    assert blocks(cs)[0][2] == "a red cup 9"
    with pytest.raises(FileNotFoundError) as error:
        read_colorswap(tmp_path / "missing")
    assert str(error.value) == (
        f"{tmp_path / 'missing'}: no ColorSwap table; expected a ColorSwap table (.jsonl, .json or .parquet with image_1, "
        "image_2, caption_1, caption_2) in the root or data/; images optional (images/)"
    )
    _jsonl(tmp_path / "a.jsonl", [{**_row(0), "caption_2": ""}])
    (tmp_path / "z.parquet").unlink()
    with pytest.raises(ValueError, match=r"a.jsonl: row 0 \(id 0\): field 'caption_2'"):
        read_colorswap(tmp_path)


def test_images_under_the_root_when_the_table_is_in_data(tmp_path: Path) -> None:
    _jsonl(tmp_path / "data" / "t.jsonl", [_row(0)])
    (tmp_path / "images").mkdir()
    (cs,) = read_colorswap(tmp_path)
    assert cs.images[0].path == tmp_path / "images" / "0a.png"


def test_held_images_are_keyed_by_row_and_field_and_bad_ones_are_named(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {**_row(0, id="c7"), "image_1": {"bytes": b"one", "path": "1.png"}, "image_2": {"bytes": b"two", "path": None}}
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "t.parquet")
    (cs,) = read_colorswap(tmp_path)
    assert [(i.key, i.data) for i in cs.images] == [("row 0 (id c7)/image_1:1.png", b"one"), ("row 0 (id c7)/image_2:", b"two")]
    for field in ("image_1", "image_2"):
        path = _jsonl(tmp_path / "bad" / "t.jsonl", [_row(0), {**_row(1), field: ""}])
        with pytest.raises(ValueError) as error:
            read_colorswap(tmp_path / "bad")
        assert str(error.value) == f"{path}: row 1 (id 1): field {field!r} must name an image file or hold image bytes, got ''"
