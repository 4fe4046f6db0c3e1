"""The audits' JSON reports, field by field, against values worked out by hand."""

from __future__ import annotations

import pytest

from clip_cycles.algebra.audits import (
    audit_cycles,
    cycle_balance,
    hard_negative_edges,
    pair_measure_tv,
    predicate_validity,
    signed_degrees,
    winoground_comparisons,
)


def test_balance_report_of_an_unbalanced_comparison():
    # Edges: (a, x, +1), (a, y, -1), (b, x, +2). Degrees: a 0, b 2; x 3, y -1. Witness: caption x (|3| largest).
    report = signed_degrees(["a", "a", "b"], ["x", "y", "x"], [1.0, -1.0, 2.0]).to_dict()
    assert report == {
        "balanced": False,
        "n_edges": 3,
        "n_images": 2,
        "n_captions": 2,
        "max_abs_degree": 3.0,
        "unbalanced_images": {"b": 2.0},
        "unbalanced_captions": {"x": 3.0, "y": -1.0},
        "witness": {"side": "caption", "vertex": "x", "value": 3.0},
    }


def test_balance_report_of_cycles_and_of_hard_negatives():
    balanced = cycle_balance([(1, 2, "p", "q"), (2, 3, "q", "r")]).to_dict()
    assert balanced == {"balanced": True, "n_edges": 8, "n_images": 3, "n_captions": 3, "max_abs_degree": 0.0,
                        "unbalanced_images": {}, "unbalanced_captions": {}, "witness": None}  # fmt: skip
    # Hard negatives (u, v+, v-): images cancel, captions do not; the witness is the first largest caption.
    report = signed_degrees(*hard_negative_edges([("u", "pos", "neg"), ("w", "pos", "other")])).to_dict()
    assert report["unbalanced_images"] == {}
    assert report["unbalanced_captions"] == {"pos": 2.0, "neg": -1.0, "other": -1.0}
    assert report["witness"] == {"side": "caption", "vertex": "pos", "value": 2.0}
    assert report["n_edges"] == 4 and report["max_abs_degree"] == 2.0


def test_winoground_comparisons_are_single_directions():
    text = winoground_comparisons([(1, 2, "p", "q")], "text")
    assert text == [([1, 1], ["p", "q"], [1.0, -1.0]), ([2, 2], ["q", "p"], [1.0, -1.0])]
    image = winoground_comparisons([(1, 2, "p", "q")], "image")
    assert image == [([1, 2], ["p", "p"], [1.0, -1.0]), ([2, 1], ["q", "q"], [1.0, -1.0])]
    # Each single comparison is unbalanced on the caption side it varies: a text-only score decides it.
    assert not signed_degrees(*text[0]).balanced and signed_degrees(*text[0]).witness.side == "caption"
    with pytest.raises(ValueError, match="which must be 'text' or 'image'"):
        winoground_comparisons([(1, 2, "p", "q")], "both")


def test_pair_measure_tv_by_hand():
    # Images: matched {a: 2}, swapped {a: 1, b: 1} -> TV 1/2. Captions: matched {x: 1, y: 1}, swapped {x: 2} -> 1/2.
    report = pair_measure_tv([("a", "x"), ("a", "y")], [("a", "x"), ("b", "x")])
    assert report.to_dict() == {"image_tv": 0.5, "caption_tv": 0.5, "n_cycles": 1}
    assert not report.balanced
    three = pair_measure_tv([("a", "x")] * 3, [("a", "x"), ("b", "x"), ("c", "x")])
    assert three.image_tv == pytest.approx(2 / 3) and three.caption_tv == 0.0 and three.n_cycles == 1
    with pytest.raises(ValueError, match="need matched and swapped pairs, got 0 matched and 1 swapped"):
        pair_measure_tv([], [("a", "x")])


def test_validity_and_cycle_audit_reports_by_hand():
    truth = {("1", "p"), ("2", "q"), ("3", "r"), ("4", "s"), ("3", "s")}  # (3, s) makes a swap of cycle c2 true
    cycles = [("1", "2", "p", "q"), ("3", "4", "r", "s"), ("5", "6", "t", "u")]  # c3: neither matched pair holds
    validity = predicate_validity(cycles, lambda u, v: (u, v) in truth, ["c1", "c2", "c3"])
    assert validity.to_dict() == {"n_cycles": 3, "matched_violations": 2, "swap_violations": 1,
                                  "matched_violation_cycles": ["c3"], "swap_violation_cycles": ["c2"]}  # fmt: skip
    assert not validity.valid
    # With an explicit refutation, a swap that is merely not true still counts unless refuted.
    refuted = predicate_validity(cycles[:1], lambda u, v: (u, v) in truth, None, refutes=lambda u, v: v == "q")
    assert refuted.to_dict()["swap_violations"] == 1 and refuted.swap_violation_cycles == [0]
    with pytest.raises(ValueError, match="2 cycle ids for 3 cycles"):
        predicate_validity(cycles, lambda u, v: True, ["a", "b"])

    report = audit_cycles(cycles, lambda u, v: (u, v) in truth, ["c1", "c2", "c3"])
    as_dict = report.to_dict()
    assert as_dict["passed"] is False and report.passed is False
    assert as_dict["matched_violations"] == 2 and as_dict["swap_violations"] == 1
    assert as_dict["image_tv"] == 0.0 and as_dict["caption_tv"] == 0.0 and as_dict["balanced"] is True
    assert as_dict["identities_hold"] is True
    assert as_dict["validity"] == validity.to_dict()
    assert as_dict["balance"]["n_edges"] == 12 and as_dict["balance"]["witness"] is None
    clean = audit_cycles(cycles[:1], lambda u, v: (u, v) in truth).to_dict()
    assert clean["passed"] is True and clean["matched_violations"] == 0 and clean["swap_violations"] == 0
    no_predicate = audit_cycles(cycles).to_dict()
    assert no_predicate["passed"] is True and no_predicate["validity"] is None
    assert no_predicate["matched_violations"] is None and no_predicate["swap_violations"] is None


def test_violations_add_up_over_cycles_and_refutation_sees_both_swaps():
    from clip_cycles.algebra.audits import DEGREE_TOL

    cycles = [(1, 2, "p", "q"), (3, 4, "r", "s")]
    truth = {(2, "q"), (3, "r")}  # (1, p) and (4, s) fail: one matched violation in each cycle
    refuted = {(2, "p"), (4, "r")}  # (1, q) and (3, s) are not refuted: one swap violation in each cycle
    report = predicate_validity(cycles, lambda u, v: (u, v) in truth, ["a", "b"], refutes=lambda u, v: (u, v) in refuted)
    assert report.to_dict() == {"n_cycles": 2, "matched_violations": 2, "swap_violations": 2,
                                "matched_violation_cycles": ["a", "b"], "swap_violation_cycles": ["a", "b"]}  # fmt: skip
    # A degree of exactly the tolerance counts as zero; among equal degrees the first vertex is the witness.
    at_tol = signed_degrees(["a"], ["x"], [DEGREE_TOL])
    assert at_tol.balanced and at_tol.to_dict()["unbalanced_images"] == {} and at_tol.to_dict()["unbalanced_captions"] == {}
    assert signed_degrees(["a"], ["x"], [1.0]).witness.side == "image"
    with pytest.raises(ValueError, match="^empty comparison: no edges to audit$"):
        signed_degrees([], [], [])
    with pytest.raises(ValueError, match="^empty cycle set: nothing to audit$"):
        cycle_balance([])


def test_each_half_of_the_identities_and_of_the_tv_balance_flips_alone():
    """identities_hold needs both TV 0 and balance; MarginalReport.balanced needs both TVs 0 (crafted reports)."""
    from clip_cycles.algebra.audits import CycleAuditReport

    blocks = [(1, 2, "p", "q")]
    complete_tv, complete_balance = audit_cycles(blocks).marginals, cycle_balance(blocks)
    # Images: matched {a: 1, b: 1}, swapped {a: 2} -> TV 1/2; captions x, y on both sides -> 0.
    image_only = pair_measure_tv([("a", "x"), ("b", "y")], [("a", "y"), ("a", "x")])
    assert (image_only.image_tv, image_only.caption_tv, image_only.balanced) == (0.5, 0.0, False)
    # Captions: matched {x: 2}, swapped {x: 1, y: 1} -> 1/2; images the same on both sides.
    caption_only = pair_measure_tv([("a", "x"), ("b", "x")], [("a", "x"), ("b", "y")])
    assert (caption_only.image_tv, caption_only.caption_tv, caption_only.balanced) == (0.0, 0.5, False)
    unbalanced = signed_degrees(*hard_negative_edges([("u", "pos", "neg")]))
    assert CycleAuditReport(None, complete_tv, complete_balance).identities_hold
    assert not CycleAuditReport(None, image_only, complete_balance).identities_hold
    assert not CycleAuditReport(None, complete_tv, unbalanced).identities_hold
    assert CycleAuditReport(None, image_only, unbalanced).to_dict()["identities_hold"] is False
    # Identities are not part of the gate: without a validity report it passes whatever TV and balance say.
    assert CycleAuditReport(None, image_only, unbalanced).passed


def test_tv_counts_cycles_from_the_shorter_side_and_refuses_either_empty_side():
    # 4 matched and 6 swapped pairs: 2 complete cycles' worth (the shorter side, halved).
    report = pair_measure_tv([("a", "x")] * 4, [("a", "x")] * 6)
    assert report.n_cycles == 2 and isinstance(report.n_cycles, int)
    assert pair_measure_tv([("a", "x")] * 7, [("a", "x")] * 5).n_cycles == 2
    for matched, swapped in (([], [("a", "x")]), ([("a", "x")], []), ([], [])):
        with pytest.raises(
            ValueError, match=rf"^need matched and swapped pairs, got {len(matched)} matched and {len(swapped)} swapped$"
        ):
            pair_measure_tv(matched, swapped)


def test_audit_input_errors_are_whole_sentences():
    with pytest.raises(ValueError, match=r"^edges need parallel sequences: 1 image ids, 2 caption ids, 1 weights$"):
        signed_degrees([1], [2, 3], [1.0])
    with pytest.raises(ValueError, match=r"^edges need parallel sequences: 2 image ids, 2 caption ids, 1 weights$"):
        signed_degrees([1, 2], [2, 3], [1.0])
    with pytest.raises(ValueError, match=r"^edge 1 has a non-finite weight .*inf"):
        signed_degrees([1, 2], [2, 3], [1.0, float("inf")])
    with pytest.raises(ValueError, match=r"^cycle 1 must be \(u1, u2, v1, v2\), got 5 fields$"):
        cycle_balance([(1, 2, "p", "q"), (1, 2, "p", "q", "r")])
