"""The exact ceilings of blind text rules (``ceilings.py``) on hand-built designs, comparison by comparison.

Each expected forced tie is worked out here by summing the comparison's edge weights per
(image, view) in a plain dict; the ceilings are ``1 - forced / (2 n)`` from those counts.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from clip_cycles.benchmark_audit.ceilings import (
    NORMALISATION,
    bag_of_words,
    forced_ties,
    forced_ties_by_edge,
    length_forced_ties,
    subset_ceilings,
)
from clip_cycles.benchmark_audit.design import ComparisonSetBuilder
from clip_cycles.data.sources.images import ImageItem

#: (comparison, [(image, caption, weight), ...]); the comment says which views force a tie.
DESIGN = [
    ("c0", [("a", "a dog on grass", 1.0), ("a", "grass on a dog", -1.0)]),  # bag and length
    ("c1", [("a", "a red car", 1.0), ("a", "a blue car", -1.0)]),  # none
    ("c2", [("a", "a cat", 1.0), ("a", "a cow", -1.0)]),  # length only
    ("c3", [("a", "x y", 1.0), ("b", "y x", -1.0)]),  # none: two images
    ("c4", [("a", "p q", 2.0), ("a", "q p", -1.0)]),  # none: weights do not cancel
    ("c5", [("b", "one two", 1.0), ("b", "TWO, one!", -1.0), ("a", "z", 0.5), ("a", "z", -0.5)]),  # bag only
    ("c6", [("a", "x", 1.0), ("b", "x", -1.0)]),  # caption only
    ("c7", [("a", "m n", 1.0), ("a", "n m", -(1.0 - 1e-13))]),  # bag and length: dust under the tolerance
]


def _design(rows=DESIGN):
    builder = ComparisonSetBuilder("hand")
    for cid, edges in rows:
        images, captions, weights = zip(*edges)
        builder.add(cid, cid, [ImageItem(f"{i}.png") for i in images], list(captions), list(weights))
    return builder.build()


def _words(text: str) -> tuple:
    # A second tokeniser: letters, digits and underscores, built by hand.
    words, current = defaultdict(int), ""
    for ch in text.lower() + " ":
        if ch.isalnum() or ch == "_":
            current += ch
        elif current:
            words[current] += 1
            current = ""
    return tuple(sorted(words.items()))


def _expected(rows, view) -> list[bool]:
    out = []
    for _, edges in rows:
        totals: dict = defaultdict(float)
        for image, caption, weight in edges:
            totals[(image, view(caption))] += weight
        out.append(all(abs(t) <= 1e-12 for t in totals.values()))
    return out


def test_bag_of_words_is_lowercase_word_counts_sorted() -> None:
    assert bag_of_words("A dog, a DOG!") == (("a", 2), ("dog", 2))
    assert bag_of_words("zeta under_score 42 alpha-beta") == (
        ("42", 1),
        ("alpha", 1),
        ("beta", 1),
        ("under_score", 1),
        ("zeta", 1),
    )
    assert bag_of_words("  ...  ") == ()
    for text in ("Two dogs; two CATS.", "a_b c-d e'f", "x"):
        assert bag_of_words(text) == _words(text)


def test_forced_ties_per_view_match_a_dict_of_edge_sums() -> None:
    cs = _design()
    bag = forced_ties(cs, bag_of_words)
    length = length_forced_ties(cs)
    assert bag.tolist() == _expected(DESIGN, _words)
    assert length.tolist() == _expected(DESIGN, len)
    # Pinned by hand as well, so a wrong helper above cannot hide a wrong answer.
    assert bag.tolist() == [True, False, False, False, False, True, False, True]
    assert length.tolist() == [True, False, True, False, False, False, False, True]
    # The caption itself as view: c6 cancels only across two images, so never by (image, view).
    assert forced_ties(cs, lambda text: text).tolist() == [False] * 8


def test_keys_never_collide_across_many_images_views_and_comparisons() -> None:
    # Many images and views: any packing of (comparison, image, view) into one key that collides
    # would merge two groups and cancel weights that do not cancel.
    rng = np.random.default_rng(3)
    rows = []
    for c in range(12):
        edges = []
        for _ in range(int(rng.integers(2, 6))):
            image, caption = f"i{int(rng.integers(0, 7))}", f"w{int(rng.integers(0, 9))}"
            edges.append((image, caption, 1.0))
            if rng.random() < 0.6:
                edges.append((image, caption[::-1] if rng.random() < 0.3 else caption, -1.0))
            else:
                edges.append((f"i{int(rng.integers(0, 7))}", f"w{int(rng.integers(0, 9))}", -1.0))
        rows.append((f"c{c}", edges))
    cs = _design(rows)
    assert forced_ties(cs, lambda text: text).tolist() == _expected(rows, lambda text: text)
    assert forced_ties(cs, len).tolist() == _expected(rows, len)
    # Per-edge view ids given directly: view = the caption vertex.
    assert forced_ties_by_edge(cs, cs.edge_caption.copy()).tolist() == _expected(rows, lambda text: text.lower())


def test_key_packing_with_the_largest_view_id_last() -> None:
    # Two comparisons, two images, three views: (c0, image 1, view 0) and (c1, image 0, view 2) must stay apart.
    builder = ComparisonSetBuilder("pack")
    builder.add("c0", "c0", [ImageItem("a.png"), ImageItem("b.png")], ["p", "q"], [1.0, -1.0])
    builder.add("c1", "c1", [ImageItem("a.png"), ImageItem("b.png")], ["r", "r"], [1.0, -1.0])
    cs = builder.build()
    for views in ([0, 1, 2, 2], [2, 2, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1]):
        edge_view = np.array(views, dtype=np.int64)
        want = []
        for c in range(2):
            totals: dict = defaultdict(float)
            for e in np.flatnonzero(cs.edge_comparison == c):
                totals[(int(cs.edge_image[e]), views[e])] += cs.edge_weight[e]
            want.append(all(abs(t) <= 1e-12 for t in totals.values()))
        assert forced_ties_by_edge(cs, edge_view).tolist() == want, views
    # Same view on the same image cancels; the mask's length is the number of comparisons.
    one = ComparisonSetBuilder("one")
    one.add("c0", "c0", [ImageItem("a.png")] * 2, ["p", "q"], [1.0, -1.0])
    one.add("c1", "c1", [ImageItem("a.png")] * 2, ["p", "q"], [1.0, -1.0])
    cs1 = one.build()
    assert forced_ties_by_edge(cs1, np.array([4, 4, 4, 5])).tolist() == [True, False]


def test_length_reads_each_spelling_as_published() -> None:
    # "A dog" and "a  dog" are one caption vertex, but their lengths differ (5 and 6): no forced length tie.
    builder = ComparisonSetBuilder("spell")
    builder.add("c0", "c0", [ImageItem("a.png")] * 2, ["A dog", "a  dog"], [1.0, -1.0])
    builder.add("c1", "c1", [ImageItem("a.png")] * 2, ["abc", "xyz"], [1.0, -1.0])
    cs = builder.build()
    assert length_forced_ties(cs).tolist() == [False, True]


def test_subset_ceilings_counts_shares_and_floor_rule() -> None:
    cs = _design()
    n = len(DESIGN)
    bag, length = 3, 3  # c0, c5, c7 and c0, c2, c7
    # Caption only: every caption's signed degree zero in the comparison (c6 only; c5's z cancels but not one two).
    caption_only = 1
    metrics = {"shortest_caption_acc": 0.25, "longest_caption_acc": 0.625}
    out = subset_ceilings(cs, metrics)
    assert out["normalisation"] == NORMALISATION and out["normalisation"] is not NORMALISATION
    for name, count in (("bag_of_words", bag), ("length", length), ("caption_only", caption_only)):
        assert out[f"{name}_forced_ties"] == count, name
        assert out[f"{name}_forced_share"] == pytest.approx(count / n, abs=1e-15), name
        assert out[f"{name}_ceiling"] == pytest.approx(1 - count / (2 * n), abs=1e-15), name
    assert out["length_floor"] == 0.625 and out["length_floor_rule"] == "longest_caption"
    shorter = subset_ceilings(cs, {"shortest_caption_acc": 0.75, "longest_caption_acc": 0.5})
    assert shorter["length_floor"] == 0.75 and shorter["length_floor_rule"] == "shortest_caption"
    tie = subset_ceilings(cs, {"shortest_caption_acc": 0.5, "longest_caption_acc": 0.5})
    assert tie["length_floor"] == 0.5 and tie["length_floor_rule"] == "shortest_caption"
    assert set(out) == {
        "normalisation",
        "length_floor",
        "length_floor_rule",
        *(f"{v}_{k}" for v in ("bag_of_words", "length", "caption_only") for k in ("forced_ties", "forced_share", "ceiling")),
    }


def test_caption_only_needs_every_caption_degree_zero() -> None:
    builder = ComparisonSetBuilder("cap")
    builder.add("c0", "c0", [ImageItem("a.png"), ImageItem("b.png")], ["x", "x"], [1.0, -1.0])  # forced
    builder.add("c1", "c1", [ImageItem("a.png"), ImageItem("b.png")], ["x", "y"], [1.0, -1.0])  # open
    builder.add("c2", "c2", [ImageItem("a.png")] * 4, ["x", "y", "y", "x"], [1.0, 1.0, -1.0, -1.0])  # forced
    cs = builder.build()
    out = subset_ceilings(cs, {"shortest_caption_acc": 0.0, "longest_caption_acc": 0.0})
    assert out["caption_only_forced_ties"] == 2
    assert out["caption_only_ceiling"] == pytest.approx(1 - 2 / 6, abs=1e-15)


def test_tolerance_edge_and_a_comparison_without_edges() -> None:
    # A lone edge of weight exactly DEGREE_TOL (1e-12) is rounding dust: forced, as degree_matrices zeroes it.
    builder = ComparisonSetBuilder("dust")
    builder.add("c0", "c0", [ImageItem("a.png")], ["p"], [1e-12])
    builder.add("c1", "c1", [ImageItem("a.png")], ["p"], [2e-12])
    cs = builder.build()
    assert forced_ties_by_edge(cs, np.zeros(2, dtype=np.int64)).tolist() == [True, False]
    # No edge at all: nothing stays open, and no view id is read.
    empty = ComparisonSetBuilder("edgeless")
    empty.add("c0", "c0", [], [], [])
    cs0 = empty.build()
    assert forced_ties_by_edge(cs0, np.zeros(0, dtype=np.int64)).tolist() == [True]
