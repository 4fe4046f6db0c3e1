"""Theorem 1 balance audits, marginal TV and predicate validity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.algebra.audits import (
    audit_cycles,
    cycle_balance,
    cycle_edges,
    evaluate_comparison,
    hard_negative_edges,
    marginal_tv,
    pair_measure_tv,
    predicate_validity,
    signed_degrees,
    winoground_comparisons,
)

ids = st.integers(min_value=0, max_value=6)


@st.composite
def complete_blocks(draw: st.DrawFn) -> list[tuple[int, int, str, str]]:
    n = draw(st.integers(min_value=1, max_value=12))
    blocks = []
    for _ in range(n):
        u1, u2 = draw(st.lists(ids, min_size=2, max_size=2, unique=True))
        v1, v2 = draw(st.lists(ids, min_size=2, max_size=2, unique=True))
        blocks.append((u1, u2, f"c{v1}", f"c{v2}"))
    return blocks


@settings(max_examples=80, deadline=None)
@given(complete_blocks())
def test_any_union_of_complete_blocks_is_balanced(blocks: list[tuple[int, int, str, str]]) -> None:
    report = cycle_balance(blocks)
    assert report.balanced
    assert report.witness is None
    assert all(d == 0 for d in report.image_degrees.values())
    assert all(d == 0 for d in report.caption_degrees.values())
    tv = marginal_tv(blocks)
    assert tv.image_tv == 0.0 and tv.caption_tv == 0.0


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=5), st.sampled_from(["a", "b"]), st.sampled_from(["c", "d"]))
def test_single_hard_negative_is_unbalanced_and_its_witness_achieves_the_value(image: int, positive: str, negative: str) -> None:
    edges = hard_negative_edges([(image, positive, negative)])
    report = signed_degrees(*edges)
    assert not report.balanced
    assert report.image_degrees == {image: 0.0}
    assert report.caption_degrees == {positive: 1.0, negative: -1.0}
    witness = report.witness
    assert witness is not None and witness.side == "caption"
    assert evaluate_comparison(witness.score, *edges) == witness.value
    assert abs(witness.value) == 1.0


def test_witness_on_a_random_unbalanced_comparison_achieves_reported_value() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 5, size=30).tolist()
    captions = rng.integers(0, 5, size=30).tolist()
    weights = rng.normal(size=30).tolist()
    report = signed_degrees(images, captions, weights)
    assert not report.balanced
    value = evaluate_comparison(report.witness.score, images, captions, weights)
    assert value == pytest.approx(report.witness.value, abs=1e-12)
    assert abs(value) == pytest.approx(report.max_abs_degree)


def test_winoground_directional_comparisons_are_unbalanced_but_a_pair_of_them_is_a_cycle() -> None:
    block = [(0, 1, "x", "y")]
    for which in ("text", "image"):
        first, second = winoground_comparisons(block, which)
        for single in (first, second):
            report = signed_degrees(*single)
            assert not report.balanced
            assert evaluate_comparison(report.witness.score, *single) == report.witness.value
        merged = [a + b for a, b in zip(first, second)]
        assert signed_degrees(*merged).balanced
    text_first = signed_degrees(*winoground_comparisons(block, "text")[0])
    assert text_first.image_degrees == {0: 0.0}  # decided by captions alone
    assert text_first.witness.side == "caption"


def test_cycle_edges_weights() -> None:
    images, captions, weights = cycle_edges([("u1", "u2", "v1", "v2")])
    assert list(zip(images, captions, weights)) == [
        ("u1", "v1", 1.0),
        ("u1", "v2", -1.0),
        ("u2", "v1", -1.0),
        ("u2", "v2", 1.0),
    ]


def test_tv_of_an_incomplete_design_is_positive() -> None:
    matched = [("a", "x"), ("b", "y")]
    swapped = [("a", "y"), ("c", "x")]
    report = pair_measure_tv(matched, swapped)
    assert report.image_tv == pytest.approx(0.5)
    assert report.caption_tv == 0.0


def test_predicate_validity_counts_and_names_offending_cycles() -> None:
    truth = {("a", "x"), ("b", "y"), ("c", "z"), ("d", "w"), ("c", "w")}
    cycles = [("a", "b", "x", "y"), ("c", "d", "z", "w"), ("a", "e", "x", "q")]
    report = predicate_validity(cycles, lambda u, v: (u, v) in truth, cycle_ids=["k0", "k1", "k2"])
    assert report.swap_violations == 1 and report.swap_violation_cycles == ["k1"]
    assert report.matched_violations == 1 and report.matched_violation_cycles == ["k2"]
    assert not report.valid
    full = audit_cycles(cycles[:1], lambda u, v: (u, v) in truth)
    assert full.passed
    assert full.to_dict()["matched_violations"] == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: signed_degrees([], [], []), "empty comparison"),
        (lambda: signed_degrees([1], [2, 3], [1.0]), "parallel sequences"),
        (lambda: signed_degrees([1, 2], [2, 3], [1.0, float("nan")]), "edge 1 has a non-finite weight"),
        (lambda: cycle_balance([]), "empty cycle set"),
        (lambda: marginal_tv([(1, 2, 3)]), "cycle 0 must be"),
    ],
)
def test_bad_audit_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_swaps_must_be_refuted_not_merely_unsatisfied() -> None:
    truth = {("a", "x"), ("b", "y")}
    undecided = {("a", "y")}  # e.g. a sub-margin relation: not true, yet not clearly false
    cycles = [("a", "b", "x", "y")]

    def holds(u, v):
        return (u, v) in truth

    def refutes(u, v):
        return (u, v) not in truth and (u, v) not in undecided

    loose = predicate_validity(cycles, holds)  # without a refutation test: "not true" passes
    assert loose.valid
    strict = predicate_validity(cycles, holds, refutes=refutes, cycle_ids=["k0"])
    assert strict.swap_violations == 1 and strict.swap_violation_cycles == ["k0"] and not strict.valid
    report = audit_cycles(cycles, holds, refutes=refutes)
    # The gate fails; TV and balance are identities of the (complete) block and still hold.
    assert not report.passed and report.identities_hold
    assert report.to_dict()["identities_hold"] is True and report.to_dict()["swap_violations"] == 1
