"""EqBen's reader by hand (issue 56, mutation-directed): caption_i with image_i, the source tag from the
image path's first folder, sample numbers as ids, images/ or the root, the refusals.
Expected values are written out in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from format_subsets import block_ids, blocks

from clip_cycles.benchmark_audit.formats.eqben import read_eqben


def _sample(image0: str, image1: str, n: int) -> dict:
    return {"image0": image0, "caption0": f"a man left of a car {n}", "image1": image1, "caption1": f"a car left of a man {n}"}


def test_blocks_sources_and_ids(tmp_path: Path) -> None:
    samples = [_sample("eqbenag/x/1.png", "eqbenag/x/2.png", 0), _sample("3.png", "eqbensd/4.png", 1)]
    (tmp_path / "ann_json_finegrained_random.json").write_text(json.dumps(samples))
    (tmp_path / "images").mkdir()
    (cs,) = read_eqben(tmp_path)
    assert cs.name == "ann_json_finegrained_random" and block_ids(cs) == ["0", "1"]
    assert blocks(cs) == [
        ("eqbenag/x/1.png", "eqbenag/x/2.png", "a man left of a car 0", "a car left of a man 0", ("source=eqbenag",)),
        ("3.png", "eqbensd/4.png", "a man left of a car 1", "a car left of a man 1", ()),
    ]
    assert cs.images[0].path == tmp_path / "images" / "eqbenag" / "x" / "1.png"
    (cs,) = read_eqben(tmp_path / "ann_json_finegrained_random.json")
    assert cs.images[2].path == tmp_path / "images" / "3.png"


def test_files_in_order_without_images_and_the_refusals(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps([_sample("5.png", "6.png", 0)]))
    (tmp_path / "a.json").write_text(json.dumps([_sample("7.png", "8.png", 0)]))
    a, b = read_eqben(tmp_path)
    assert (a.name, b.name) == ("a", "b") and a.images[0].path == tmp_path / "7.png"
    (tmp_path / "a.json").write_text(
        json.dumps([_sample("7.png", "8.png", 0), {**_sample("7.png", "8.png", 1), "caption1": " "}])
    )
    with pytest.raises(ValueError, match=r"a.json: sample 1: field 'caption1'"):
        read_eqben(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        read_eqben(tmp_path / "none")
    assert str(error.value) == (
        f"{tmp_path / 'none'}: no EqBen file; expected EqBen annotation JSON files (lists of image0, caption0, image1, "
        "caption1) in the root; images optional (images/)"
    )
