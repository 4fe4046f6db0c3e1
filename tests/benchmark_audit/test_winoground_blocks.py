"""Winoground-style blocks: a block is dropped as degenerate under the same caption identity the vertices use."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_formats import write_winoground

from clip_cycles.benchmark_audit import load_benchmark
from clip_cycles.benchmark_audit.adapters import CAPTIONS_EQUAL_UNDER_KEY, block_subset
from clip_cycles.data.sources.images import ImageItem


def _item(key: str) -> ImageItem:
    return ImageItem(key=key, path=Path(f"/nowhere/{key}.png"))


def test_captions_equal_up_to_case_and_whitespace_drop_the_block_and_are_counted() -> None:
    blocks = [
        ("b0", _item("u0"), _item("u1"), "a dog on a mat", "a mat on a dog", ["t"]),
        ("b1", _item("u2"), _item("u3"), "A Cat  sits", "a cat sits ", ["t"]),  # one caption vertex
        ("b2", _item("u4"), _item("u5"), "same", "same", ["t"]),  # identical strings: the older reason
        ("b3", _item("u6"), _item("u6"), "x y", "y x", ["t"]),  # one image
    ]
    subset = block_subset("wino", Path("table.jsonl"), blocks)
    assert subset.skipped == {"block_with_repeated_image_or_caption": 2, CAPTIONS_EQUAL_UNDER_KEY: 1}
    # Only b0 is left: 4 comparisons, one declared cycle whose two captions are two vertices.
    assert sorted(set(subset.item_ids)) == ["b0"] and subset.n_comparisons == 4
    assert subset.cycles is not None and subset.cycles.tolist() == [[0, 1, 0, 1]]
    assert subset.captions == ["a dog on a mat", "a mat on a dog"]
    for u1, u2, v1, v2 in subset.cycles.tolist():
        assert u1 != u2 and v1 != v2


def test_a_case_only_block_in_a_file_is_dropped_and_named(tmp_path: Path) -> None:
    rows = write_winoground(tmp_path)
    table = tmp_path / "examples.jsonl"
    edited = [dict(r) for r in rows]
    edited[1]["caption_1"] = str(edited[1]["caption_0"]).upper()
    table.write_text("".join(json.dumps(r) + "\n" for r in edited))
    (subset,) = load_benchmark("winoground", tmp_path)
    assert subset.skipped == {CAPTIONS_EQUAL_UNDER_KEY: 1}
    assert subset.cycles is not None and len(subset.cycles) == len(rows) - 1
    assert all(v1 != v2 for _, _, v1, v2 in subset.cycles.tolist())
