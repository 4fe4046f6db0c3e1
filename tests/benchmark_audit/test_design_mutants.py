"""A benchmark subset as comparisons (benchmark_audit.design), rule by rule on hand-built designs (issue 56:
mutation-directed): crop boxes at their edges, the crop itself, signed degrees with rounding dust, restricting
comparisons and declared cycles, caption interning, empty subsets, the hard-negative and whole-cycle shapes, and
the greedy crossing pairing. Every expected value is written out here by hand."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clip_cycles.benchmark_audit.design import (
    ComparisonSetBuilder,
    CroppedImageItem,
    check_box,
    cycle_shape,
    empty_subset,
    hard_negative_shape,
    pair_crossing_comparisons,
    vertex_ids,
)
from clip_cycles.data.sources.images import ImageItem

A, B, C, D = (ImageItem(k, data=b"x") for k in "abcd")


def test_check_box_accepts_its_edges_and_refuses_one_past_with_a_sentence() -> None:
    for box in ((-40, -30, 120, 90), (0, 0, 1, 1), (-40.0, 0, 1, 1), (0, -30, 1, 1), (79, 59, 1, 1)):
        check_box(box, (40, 30), "img")  # x >= -width, y >= -height, x + w <= 2 width, y + h <= 2 height
    for box in ((-41, 0, 1, 1), (0, -31, 1, 1), (0, 0, 81, 1), (0, 0, 1, 61), (0, 0, 0, 1), (0, 0, 1, 0), (0, 0, -1, 1),
                (0, 0, 1, -1), (float("nan"), 0, 1, 1), (0, 0, float("inf"), 1), (0, float("-inf"), 1, 1),
                (0, 0, 1, float("nan"))):  # fmt: skip
        with pytest.raises(ValueError) as caught:
            check_box(box, (40, 30), "image 'k' at p")
        x, y, w, h = box
        assert str(caught.value) == (
            f"image 'k' at p: box x={x:g} y={y:g} w={w:g} h={h:g} does not fit its 40x30 image; fix the item's bbox_x, "
            "bbox_y, bbox_w, bbox_h or pass --skip-bad-images to count and skip it"
        ), box
    with pytest.raises(ValueError, match=r"box x=1e\+300 y=0.5 w=2 h=3 does not fit its 40x30 image"):
        check_box((1e300, 0.5, 2, 3), (40, 30), "i")


def _png(size: tuple[int, int]) -> bytes:
    pixels = np.arange(size[0] * size[1] * 3, dtype=np.uint8).reshape(size[1], size[0], 3)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def test_a_cropped_item_reads_its_box_as_png_and_names_an_undecodable_file(tmp_path: Path) -> None:
    source = _png((20, 10))
    item = CroppedImageItem("k", data=source, box=(2.0, 3.0, 5.0, 4.0))
    with Image.open(io.BytesIO(item.read_bytes())) as crop:
        assert crop.format == "PNG" and crop.size == (5, 4)
        expected = np.asarray(Image.open(io.BytesIO(source)).convert("RGB"))[3:7, 2:7]
        assert np.array_equal(np.asarray(crop), expected)
    with pytest.raises(ValueError, match=r"image 'k' at None: box x=30"):
        CroppedImageItem("k", data=source, box=(30.0, 0.0, 30.0, 1.0)).read_bytes()
    path = tmp_path / "bad.jpg"
    path.write_bytes(b"not an image at all")
    with pytest.raises(ValueError) as caught:
        CroppedImageItem("bad", path=path, box=(0.0, 0.0, 1.0, 1.0)).read_bytes()
    assert str(caught.value).startswith(f"image 'bad' at {path} cannot be decoded: ")
    assert "UnidentifiedImageError" not in str(caught.value)  # an OSError speaks for itself
    truncated = _png((20, 10))[:60]
    with pytest.raises(ValueError, match=r"image 'half' at None cannot be decoded: "):
        CroppedImageItem("half", data=truncated, box=(0.0, 0.0, 1.0, 1.0)).read_bytes()


def _hn(builder: ComparisonSetBuilder, cid: str, item: str, image: ImageItem, pos: str, neg: str, sign: float = 1.0) -> None:
    builder.add(cid, item, [image, image], [pos, neg], [sign, -sign])


def test_degrees_sum_duplicates_and_drop_rounding_dust() -> None:
    builder = ComparisonSetBuilder("s")
    builder.add("c0", "i0", [A, A, B], ["x", "x", "y"], [0.1 + 0.2, -0.3, 2.0])  # 0.1 + 0.2 - 0.3: dust
    builder.add("c1", "i1", [B, A], ["y", "z"], [1.0, 1.0])
    cs = builder.build()
    d_img, d_cap = cs.degree_matrices()
    assert d_img.shape == (2, 2) and d_cap.shape == (2, 3)
    assert d_img.toarray().tolist() == [[0.0, 2.0], [1.0, 1.0]]
    assert d_cap.toarray().tolist() == [[0.0, 2.0, 0.0], [0.0, 1.0, 1.0]]
    assert d_img.nnz == 3 and d_cap.nnz == 3  # the dust is gone from the stored entries, not only zero-valued
    builder = ComparisonSetBuilder("t")
    builder.add("c0", "i0", [A, A], ["x", "x"], [1e-12, 0.0])
    builder.add("c1", "i1", [A], ["y"], [2e-12])
    d_img, _ = builder.build().degree_matrices()
    assert d_img.toarray().tolist() == [[0.0], [2e-12]]  # exactly DEGREE_TOL is dust; twice it is kept


def test_restrict_renumbers_counts_and_keeps_declared_cycles_only_while_their_images_remain() -> None:
    builder = ComparisonSetBuilder("s", kind="blocks")
    builder.add("c0", "i0", [A, B], ["x", "y"], [1.0, -1.0], tags=["t0"])
    builder.add("c1", "i1", [C], ["z"], [1.0], tags=["t1"])
    builder.add("c2", "i2", [D, A], ["w", "x"], [1.0, -1.0], tags=["t2"])
    builder.add_cycle(A, B, "x", "y", tags=["k0"])
    builder.add_cycle(C, D, "z", "w", tags=["k1"])
    builder.skip("old", 2)
    builder.caption("X")  # a merged spelling
    cs = builder.build()
    assert cs.restrict(np.array([True, True, True]), "r") is cs
    kept = cs.restrict(np.array([True, False, True]), "gone")
    assert kept.comparison_ids == ["c0", "c2"] and kept.item_ids == ["i0", "i2"] and kept.tags == [("t0",), ("t2",)]
    assert kept.edge_comparison.tolist() == [0, 0, 1, 1]
    assert kept.edge_image.tolist() == [0, 1, 3, 0] and kept.edge_caption.tolist() == [0, 1, 3, 0]
    assert kept.edge_weight.tolist() == [1.0, -1.0, 1.0, -1.0] and kept.edge_length.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert kept.skipped == {"old": 2, "gone": 1} and cs.skipped == {"old": 2}
    assert kept.cycles.tolist() == [[0, 1, 0, 1]] and kept.cycle_tags == [("k0",)]  # C's only comparison is gone
    assert (kept.kind, kept.name, kept.caption_variants_merged, kept.images, kept.captions) == (
        "blocks", "s", 1, cs.images, cs.captions
    )  # fmt: skip
    again = kept.restrict([False, True], "gone")
    assert again.skipped == {"old": 2, "gone": 2} and again.comparison_ids == ["c2"] and again.edge_comparison.tolist() == [0, 0]
    assert again.cycles.tolist() == [] and again.cycle_tags == []
    assert again.restrict(np.array([False]), "x").cycles.shape == (0, 4)  # no cycle left: still an index
    untagged = ComparisonSetBuilder("u").build()
    assert untagged.n_comparisons == 0
    plain = ComparisonSetBuilder("p")
    plain.add("c0", "i0", [A], ["x"], [1.0])
    plain.add("c1", "i0", [B], ["y"], [1.0])
    built = plain.build()
    assert built.cycles is None and built.restrict([True, False], "r").cycles is None
    assert built.n_items == 1
    no_tags = built
    no_tags.cycles = np.array([[0, 1, 0, 1]])
    no_tags.cycle_tags = None
    assert no_tags.restrict([True, False], "r").cycle_tags == []
    assert no_tags.restrict(np.array([1, 1]), "r") is no_tags  # truthy weights keep


def test_the_builder_interns_images_and_captions_and_counts_merged_spellings() -> None:
    builder = ComparisonSetBuilder("s")
    assert builder.kind == "comparisons"
    assert builder.image(A) == 0 and builder.image(B) == 1 and builder.image(ImageItem("a", data=b"other")) == 0
    assert builder.caption("A dog ") == 0 and builder.caption("a  DOG") == 0 and builder.caption("A dog ") == 0
    assert builder.caption("a cat") == 1 and builder.captions == ["A dog ", "a cat"] and builder.caption_variants_merged == 1
    builder.skip("r")
    builder.skip("r", 3)
    builder.add("c0", "i0", [A, B], ["a dog", "a cat!"], [2, -1.5], tags=("x", "y"))
    cs = builder.build()
    assert cs.edge_weight.tolist() == [2.0, -1.5] and cs.edge_length.tolist() == [5.0, 6.0]
    assert cs.edge_caption.tolist() == [0, 2] and cs.tags == [("x", "y")] and cs.skipped == {"r": 4}
    assert cs.caption_variants_merged == 2 and cs.cycles is None and cs.cycle_tags is None
    assert cs.edge_comparison.dtype == np.int64 and cs.edge_image.dtype == np.int64 and cs.caption_lengths() is cs.edge_length


def test_an_empty_build_is_a_subset_with_its_reason() -> None:
    empty = ComparisonSetBuilder("e", kind="blocks").build()
    assert (empty.name, empty.kind, empty.unusable, empty.skipped) == ("e", "blocks", "empty: the subset holds no item", {})
    dropped = ComparisonSetBuilder("d")
    dropped.skip("z_reason", 2)
    dropped.skip("a_reason")
    built = dropped.build()
    assert built.unusable == "every item dropped (skipped: {'a_reason': 1, 'z_reason': 2})"
    assert built.skipped == {"z_reason": 2, "a_reason": 1}
    row = empty_subset("n", "why", skipped={"k": 1})
    assert (row.name, row.kind, row.unusable, row.skipped, row.n_comparisons, row.n_items) == (
        "n",
        "comparisons",
        "why",
        {"k": 1},
        0,
        0,
    )
    assert row.edge_weight.shape == (0,) and row.edge_length.shape == (0,) and row.edge_comparison.dtype == np.int64
    assert row.edge_comparison.shape == (0,) and row.edge_image.shape == (0,) and row.edge_caption.shape == (0,)
    assert row.tags == [] and row.edge_image.dtype == np.int64 and row.edge_caption.dtype == np.int64
    assert row.degree_matrices()[0].shape == (0, 0)
    assert row.cycles is None and row.images == [] and row.captions == []


def test_hard_negative_shape_reads_the_sign_and_refuses_other_shapes() -> None:
    builder = ComparisonSetBuilder("s")
    _hn(builder, "c0", "i0", A, "p", "n")  # (a, p) - (a, n)
    _hn(builder, "c1", "i1", B, "p", "n", sign=-2.0)  # -2 (b, p) + 2 (b, n): n is the positive
    builder.add("c2", "i2", [A, B], ["p", "n"], [1.0, -1.0])  # two images
    builder.add("c3", "i3", [A, A], ["p", "p"], [1.0, -1.0])  # one caption
    builder.add("c4", "i4", [A, A], ["p", "n"], [1.0, -0.5])  # unequal weights
    builder.add("c5", "i5", [A, A], ["p", "n"], [0.0, 0.0])  # zero weights
    builder.add("c6", "i6", [A, A, A], ["p", "n", "q"], [1.0, -1.0, 0.0])  # three edges
    builder.add("c7", "i7", [C], ["q"], [1.0])
    _hn(builder, "c8", "i8", C, "q", "p")
    cs = builder.build()
    p, n, q = 0, 1, 2
    assert hard_negative_shape(cs) == {0: (0, p, n), 1: (1, n, p), 8: (2, q, p)}


def test_cycle_shape_finds_whole_cycles_in_either_sign() -> None:
    builder = ComparisonSetBuilder("s")
    builder.add("c0", "i0", [A, A, B, B], ["x", "y", "x", "y"], [1.0, -1.0, -1.0, 1.0])
    builder.add("c1", "i1", [A, A, B, B], ["x", "y", "x", "y"], [-2.0, 2.0, 2.0, -2.0])  # the other orientation
    builder.add("c2", "i2", [A, A, B, B], ["x", "y", "x", "y"], [1.0, -1.0, -1.0, 2.0])  # not balanced
    builder.add("c3", "i3", [A, A, B, C], ["x", "y", "x", "y"], [1.0, -1.0, -1.0, 1.0])  # three images
    builder.add("c4", "i4", [A, A, B, B], ["x", "y", "x", "x"], [1.0, -1.0, -1.0, 1.0])  # a repeated cell
    builder.add("c5", "i5", [A, A, B], ["x", "y", "x"], [1.0, -1.0, -1.0])
    builder.add("c6", "i6", [A, A, B, B], ["x", "y", "x", "y"], [1.0, 1.0, -1.0, 1.0])  # (a, y) not -w
    builder.add("c7", "i7", [A, A, B, B], ["x", "y", "x", "y"], [1.0, -1.0, 1.0, 1.0])  # (b, x) not -w
    builder.add("c8", "i8", [A, A, B, B], ["x", "y", "x", "y"], [-1.0, 1.0, -1.0, -1.0])  # w < 0, (b, x) not -w
    builder.add("c9", "i9", [A, A, B, B], ["x", "y", "x", "y"], [-1.0, -1.0, 1.0, -1.0])  # w < 0, (a, y) not -w
    builder.add("c10", "i10", [B, B, C, C], ["y", "z", "y", "z"], [-1.0, 1.0, 1.0, -1.0])
    builder.add("c11", "i11", [A, A, B, B], ["x", "y", "x", "y"], [0.0, 0.0, 0.0, 0.0])
    assert cycle_shape(builder.build()) == {0: (0, 1, 0, 1), 1: (0, 1, 1, 0), 10: (1, 2, 2, 1)}


def test_crossing_hard_negatives_pair_greedily_in_comparison_order() -> None:
    builder = ComparisonSetBuilder("s")
    _hn(builder, "c0", "i0", A, "x", "y")
    _hn(builder, "c1", "i1", A, "y", "x")  # same image as c0: no cycle
    _hn(builder, "c2", "i2", B, "y", "x")  # pairs with c0 (the first waiting one on another image)
    _hn(builder, "c3", "i3", C, "x", "y")  # pairs with c1
    _hn(builder, "c4", "i4", D, "y", "x")  # nobody left waiting
    _hn(builder, "c5", "i5", D, "z", "w")  # no reversed pair at all
    builder.add("c6", "i6", [C, C, D, D], ["z", "w", "z", "w"], [1.0, -1.0, -1.0, 1.0])  # a whole cycle
    cs = builder.build()
    pairing = pair_crossing_comparisons(cs)
    x, y, z, w = 0, 1, 2, 3
    assert pairing.cycles.tolist() == [[2, 3, z, w], [0, 1, x, y], [0, 2, y, x]]
    assert pairing.comparisons.tolist() == [[6, 6], [0, 2], [1, 3]]
    assert pairing.declared is False and pairing.cycles.dtype == np.int64
    lone = ComparisonSetBuilder("l")
    _hn(lone, "c0", "i0", A, "x", "y")
    empty = pair_crossing_comparisons(lone.build())
    assert empty.cycles.shape == (0, 4) and empty.comparisons.shape == (0, 2)
    declared = ComparisonSetBuilder("d")
    _hn(declared, "c0", "i0", A, "x", "y")
    _hn(declared, "c1", "i1", B, "y", "x")
    declared.add_cycle(A, B, "x", "y")
    result = pair_crossing_comparisons(declared.build())
    assert result.declared is True and result.cycles.tolist() == [[0, 1, 0, 1]] and result.comparisons.shape == (0, 2)


def test_vertex_ids_list_every_edge_by_key_and_text() -> None:
    builder = ComparisonSetBuilder("s")
    builder.add("c0", "i0", [A, B], ["x", "Y"], [1.0, -0.5])
    builder.add("c1", "i1", [B], ["y"], [2.0])  # "y" is the vertex first spelled "Y"
    assert vertex_ids(builder.build()) == (["a", "b", "b"], ["x", "Y", "Y"], [1.0, -0.5, 2.0])
