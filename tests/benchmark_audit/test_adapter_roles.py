"""Adapter roles checked by hand: which caption is each comparison's positive (Cola, whose two pairs cross, and
Winoground), and the word-frequency rule counting only the subset's OTHER captions (its documented rule)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from benchmark_formats import write_winoground
from benchmark_formats_published import write_cola
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.benchmark_audit import load_benchmark
from clip_cycles.benchmark_audit.audit import word_frequency_scores
from clip_cycles.benchmark_audit.design import ComparisonSet


def _totals(cs: ComparisonSet, true_pairs: set[tuple[str, str]]) -> np.ndarray:
    """T_c of the oracle score s(u, v) = 1 on a true (image, caption) pair, else 0, per comparison."""
    totals = np.zeros(cs.n_comparisons)
    for c, u, v, w in zip(cs.edge_comparison, cs.edge_image, cs.edge_caption, cs.edge_weight):
        totals[c] += w * float((cs.images[u].key, cs.captions[v]) in true_pairs)
    return totals


def test_cola_caption_1_is_true_of_image_1_and_every_comparison_prefers_it(tmp_path: Path) -> None:
    entries = write_cola(tmp_path)["COLA_multiobjects_matching_benchmark"]
    (cs,) = load_benchmark("cola", tmp_path)
    true_pairs = {(image_1, caption_1) for image_1, _, caption_1, _ in entries}
    true_pairs |= {(image_2, caption_2) for _, image_2, _, caption_2 in entries}
    # Four comparisons an entry: each gains exactly 1 from the oracle (positive true, negative false).
    assert cs.n_comparisons == 4 * len(entries)
    np.testing.assert_array_equal(_totals(cs, true_pairs), np.ones(cs.n_comparisons))
    # The swapped reading (caption_1 true of image_2) loses every comparison.
    crossed = {(image_2, caption_1) for _, image_2, caption_1, _ in entries} | {
        (image_1, caption_2) for image_1, _, _, caption_2 in entries
    }
    np.testing.assert_array_equal(_totals(cs, crossed), -np.ones(cs.n_comparisons))
    # The declared cycles are (image_1, image_2, caption_1, caption_2) of each entry, in file order.
    assert cs.cycles is not None
    got = [(cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2]) for u1, u2, v1, v2 in cs.cycles.tolist()]
    assert got == [tuple(e) for e in entries]


def test_winoground_caption_0_is_true_of_image_0(tmp_path: Path) -> None:
    rows = write_winoground(tmp_path)
    (cs,) = load_benchmark("winoground", tmp_path)
    # Image keys are the files found under images/ (``ex_0_img_0`` -> ``ex_0_img_0.png``).
    true_pairs = {(f"{r['image_0']}.png", r["caption_0"]) for r in rows} | {(f"{r['image_1']}.png", r["caption_1"]) for r in rows}
    np.testing.assert_array_equal(_totals(cs, true_pairs), np.ones(cs.n_comparisons))


def test_word_frequency_by_hand() -> None:
    captions = ["a dog runs", "a cat runs", "the dog", "A DOG"]
    # Other captions holding each word: a: 2 (cat runs, DOG), dog: 2, runs: 1, cat: 0, the: 0.
    expected = [
        (math.log1p(2) + math.log1p(2) + math.log1p(1)) / 3,
        (math.log1p(2) + math.log1p(0) + math.log1p(1)) / 3,
        (math.log1p(0) + math.log1p(2)) / 2,
        (math.log1p(2) + math.log1p(2)) / 2,
    ]
    np.testing.assert_allclose(word_frequency_scores(captions), expected, rtol=0, atol=1e-15)
    # A caption's own repeated word counts its occurrences, never itself as another caption.
    np.testing.assert_allclose(word_frequency_scores(["dog dog", "dog"]), [math.log1p(1), math.log1p(1)], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(word_frequency_scores(["alone", "words"]), [0.0, 0.0])
    np.testing.assert_array_equal(word_frequency_scores(["...", "dog"]), [0.0, 0.0])


words = st.lists(st.sampled_from(["a", "dog", "cat", "red", "on", "mat"]), min_size=0, max_size=5).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(words, min_size=1, max_size=7))
def test_word_frequency_counts_only_other_captions(captions: list[str]) -> None:
    bags = [re.findall(r"\w+", text.lower()) for text in captions]
    expected = []
    for i, bag in enumerate(bags):
        others = [sum(word in bags[j] for j in range(len(bags)) if j != i) for word in bag]
        expected.append(sum(math.log1p(n) for n in others) / len(bag) if bag else 0.0)
    np.testing.assert_allclose(word_frequency_scores(captions), expected, rtol=0, atol=1e-12)
