"""compare's rules with numbers worked by hand: which cycles enter, how sides align, the "disagree most" order,
each side's recorded CycleAcc, the overall mean over families, and swapping A and B."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dense_intervals import dense_interval, dense_variance_and_df
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.evaluation.compare import N_DISAGREEMENTS, compare_family, compare_samples, item_mismatch


def _line(task: str, seed: int, cycle: str, credit: float, delta: float = 0.0, images: tuple[str, str] | None = None) -> dict:
    first, second = images or (f"{cycle}-u", f"{cycle}-w")
    return {"task": task, "seed": seed, "split": "test", "cycle_id": cycle, "image_0": first, "image_1": second,
            "caption_0": f"{cycle} one", "caption_1": f"{cycle} two", "s11": delta, "s12": 0.0, "s21": 0.0,
            "s22": 0.0, "delta": delta, "credit": credit}  # fmt: skip


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _family(lines: list[dict]) -> dict:
    return {(line["seed"], line["cycle_id"]): line for line in lines}


def test_a_cycle_only_one_side_holds_refuses_the_comparison(tmp_path: Path) -> None:
    common = [_line("cycles/f", 0, f"c{i}", 1.0) for i in range(4)]
    extra = _line("cycles/f", 0, "c9", 0.0)
    for a_lines, b_lines, counts in ((common + [extra], common, "1 only in A, 0 only in B"),
                                     (common, [extra] + common, "0 only in A, 1 only in B")):  # fmt: skip
        a, b = _write(tmp_path / "a.jsonl", a_lines), _write(tmp_path / "b.jsonl", b_lines)
        with pytest.raises(ValueError, match=f"the cycle sets differ \\({counts}; e.g. seed 0 cycle c9\\)"):
            compare_samples(a, b)
        assert counts in (item_mismatch("cycles/f", _family(a_lines), _family(b_lines)) or "")
    # The same cycle id on another seed is another cycle.
    other_seed = [_line("cycles/f", 1, "c0", 1.0)] + common[1:]
    assert "1 only in A, 1 only in B" in (item_mismatch("cycles/f", _family(common), _family(other_seed)) or "")
    # Same keys, another image: not the same item.
    moved = [_line("cycles/f", 0, "c0", 1.0, images=("x", "y"))] + common[1:]
    assert "cycle c0 has image_0 'c0-u' in A and 'x' in B" in (item_mismatch("cycles/f", _family(common), _family(moved)) or "")
    assert item_mismatch("cycles/f", _family(common), _family(list(reversed(common)))) is None


def test_sides_are_aligned_by_cycle_not_by_file_order() -> None:
    credits_a = {"c0": 1.0, "c1": 0.0, "c2": 0.5, "c3": 1.0}
    credits_b = {"c0": 1.0, "c1": 1.0, "c2": 0.5, "c3": 0.0}
    a = _family([_line("cycles/f", 0, c, v) for c, v in credits_a.items()])
    b = _family([_line("cycles/f", 0, c, v) for c, v in reversed(credits_b.items())])
    out = compare_family(a, b)
    # By hand: per-cycle differences 0, -1, 0, +1 -> mean 0; two cycles disagree.
    assert out["diff"] == 0.0 and out["n_disagree"] == 2 and out["n_cycles"] == 4 and out["n_images"] == 8
    assert (out["acc_a"], out["acc_b"]) == (0.625, 0.625)
    assert sorted(out["disagree_most"]) == ["0/c1", "0/c3"]


def test_disagree_most_order_by_hand() -> None:
    # (cycle, credit A, credit B, delta A, delta B): |credit gap| first, then |delta gap|, then the id.
    rows = [
        ("c0", 1.0, 0.5, 0.3, 0.0),  # gap 0.5, delta gap 0.3
        ("c1", 1.0, 0.0, 0.2, -0.1),  # gap 1, delta gap 0.3
        ("c2", 0.0, 1.0, -0.5, 0.5),  # gap 1, delta gap 1.0
        ("c3", 0.5, 0.5, 0.0, 0.4),  # agrees: never listed
        ("c4", 1.0, 0.0, 0.1, -0.2),  # gap 1, delta gap 0.3 (ties c1: the id decides)
        ("c5", 0.5, 0.0, 0.0, -0.9),  # gap 0.5, delta gap 0.9
    ]
    a = _family([_line("cycles/f", 0, c, x, dx) for c, x, _, dx, _ in rows])
    b = _family([_line("cycles/f", 0, c, y, dy) for c, _, y, _, dy in rows])
    out = compare_family(a, b)
    assert out["disagree_most"] == ["0/c2", "0/c1", "0/c4", "0/c5", "0/c0"]
    assert out["n_disagree"] == 5


def test_disagree_most_keeps_the_largest_gaps_when_cut() -> None:
    n = N_DISAGREEMENTS + 5
    # Cycle i disagrees with delta gap i / 100: the last N_DISAGREEMENTS ids are the largest.
    a = _family([_line("cycles/f", 0, f"c{i:02d}", 1.0, i / 100) for i in range(n)])
    b = _family([_line("cycles/f", 0, f"c{i:02d}", 0.0, 0.0) for i in range(n)])
    out = compare_family(a, b)
    assert out["disagree_most"] == [f"0/c{i:02d}" for i in range(n - 1, n - 1 - N_DISAGREEMENTS, -1)]
    assert out["n_disagree"] == n


def test_each_sides_cycle_acc_is_the_mean_over_seeds_and_overall_the_mean_over_families(tmp_path: Path) -> None:
    # Family f: seed 0 has 3 cycles, seed 1 one. Family g: 2 cycles. Images are shared across families.
    f_a = [("cycles/f", 0, "c0", 1.0), ("cycles/f", 0, "c1", 1.0), ("cycles/f", 0, "c2", 0.0), ("cycles/f", 1, "c0", 0.0)]
    f_b = [("cycles/f", 0, "c0", 0.0), ("cycles/f", 0, "c1", 1.0), ("cycles/f", 0, "c2", 0.0), ("cycles/f", 1, "c0", 0.0)]
    g_a = [("cycles/g", 0, "d0", 1.0), ("cycles/g", 0, "d1", 1.0)]
    g_b = [("cycles/g", 0, "d0", 0.0), ("cycles/g", 0, "d1", 0.0)]
    images = [("i0", "i1"), ("i1", "i2"), ("i2", "i3"), ("i3", "i0")]
    a = [_line(t, s, c, v, images=images[k % 4]) for k, (t, s, c, v) in enumerate(f_a + g_a)]
    b = [_line(t, s, c, v, images=images[k % 4]) for k, (t, s, c, v) in enumerate(f_b + g_b)]
    out = compare_samples(_write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b))
    f, g = out["families"]["cycles/f"], out["families"]["cycles/g"]
    assert f["cycle_acc_a"] == pytest.approx((2 / 3 + 0) / 2) and f["cycle_acc_b"] == pytest.approx((1 / 3 + 0) / 2)
    assert f["acc_a"] == pytest.approx(2 / 4) and f["acc_b"] == pytest.approx(1 / 4)  # pooled over seeds
    assert f["diff"] == pytest.approx(0.25) and g["diff"] == pytest.approx(1.0)
    overall = out["overall"]
    assert overall["diff"] == pytest.approx((0.25 + 1.0) / 2)  # each family weighs the same, not each cycle (5/6)
    assert overall["n_families"] == 2 and overall["n_cycles"] == 6 and overall["n_images"] == 4


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_swapping_a_and_b_negates_every_difference_and_swaps_the_bounds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    pairs = [tuple(f"i{x}" for x in rng.permutation(15)[:2]) for _ in range(n)]
    lines_a = [_line("cycles/f", int(i % 2), f"c{i}", float(rng.choice([0.0, 0.5, 1.0])), images=pairs[i]) for i in range(n)]
    lines_b = [{**line, "credit": float(rng.choice([0.0, 0.5, 1.0]))} for line in lines_a]
    a, b = _family(lines_a), _family(lines_b)
    ab, ba = compare_family(a, b), compare_family(b, a)
    assert ba["diff"] == pytest.approx(-ab["diff"], abs=1e-12)
    assert (ba["ci_low"], ba["ci_high"]) == pytest.approx((-ab["ci_high"], -ab["ci_low"]), abs=1e-12)
    assert (ba["cycle_acc_a"], ba["cycle_acc_b"]) == (ab["cycle_acc_b"], ab["cycle_acc_a"])
    assert ba["n_disagree"] == ab["n_disagree"] and ba["disagree_most"] == ab["disagree_most"]
    expected = float(np.mean([x["credit"] - y["credit"] for x, y in zip(lines_a, lines_b)]))
    assert ab["diff"] == pytest.approx(expected, abs=1e-12)


def _two_families(seed: int = 0) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    lines_a, lines_b = [], []
    for task, n in (("cycles/f", 34), ("cycles/g", 21)):
        for i in range(n):
            pair = tuple(f"i{x}" for x in rng.permutation(14)[:2])
            line = _line(task, int(i % 2), f"c{i}", float(rng.choice([0.0, 0.5, 1.0])), float(rng.normal()), images=pair)
            lines_a.append(line)
            lines_b.append({**line, "credit": float(rng.choice([0.0, 0.5, 1.0])), "delta": float(rng.normal())})
    return lines_a, lines_b


def test_the_comparison_record_field_by_field(tmp_path: Path) -> None:
    lines_a, lines_b = _two_families()
    a, b = _write(tmp_path / "a.jsonl", lines_a), _write(tmp_path / "b.jsonl", lines_b)
    out = compare_samples(a, b, n_resamples=50, level=0.9, seed=3)
    assert set(out) == {"a", "b", "statistic", "min_cycles", "min_images", "adjustment", "families", "overall"}
    assert (out["a"], out["b"], out["min_cycles"], out["min_images"], out["adjustment"]) == (str(a), str(b), 30, 20, "holm")
    assert out["statistic"] == "CycleAcc(A) - CycleAcc(B), every seed's cycles pooled"
    for task in ("cycles/f", "cycles/g"):
        fam = out["families"][task]
        mine = [x for x in lines_a if x["task"] == task]
        theirs = [x for x in lines_b if x["task"] == task]
        diff = np.array([x["credit"] - y["credit"] for x, y in zip(mine, theirs)])
        images = [(x["image_0"], x["image_1"]) for x in mine]
        estimate, low, high = dense_interval(diff, images, 0.9)
        variance, df = dense_variance_and_df(diff, images)
        assert (fam["diff"], fam["ci_low"], fam["ci_high"]) == pytest.approx((estimate, low, high), abs=1e-7)
        assert (fam["se"], fam["df"]) == pytest.approx((np.sqrt(variance), df), rel=1e-9)
        assert (fam["level"], fam["n_resamples"], fam["seed"], fam["unit"]) == (0.9, 0, 0, "images")
        assert fam["method"] == fam["interval_method"] == "two-way image-cluster robust, t (Bell-McCaffrey df)"
        assert 0.0 <= fam["p_value"] <= 1.0 and fam["adjustment"] == "holm"
        assert fam["verdict"] == fam["adjusted_verdict"] == "too few comparisons"  # 14 images < 20
    overall = out["overall"]
    diffs = [x["credit"] - y["credit"] for x, y in zip(lines_a, lines_b)]
    images = [(x["image_0"], x["image_1"]) for x in lines_a]
    groups = [x["task"] for x in lines_a]
    sizes = {t: groups.count(t) for t in set(groups)}
    weights = [1.0 / (2 * sizes[t]) for t in groups]
    estimate, low, high = dense_interval(diffs, images, 0.9, weights, groups)
    variance, df = dense_variance_and_df(diffs, images, weights, groups)
    assert (overall["diff"], overall["ci_low"], overall["ci_high"]) == pytest.approx((estimate, low, high), abs=1e-7)
    assert (overall["se"], overall["df"]) == pytest.approx((np.sqrt(variance), df), rel=1e-9)
    assert (overall["level"], overall["n_families"], overall["n_cycles"], overall["n_images"]) == (0.9, 2, 55, 14)
    assert overall["interval_method"] == "two-way image-cluster robust, t (Bell-McCaffrey df), joint over families"
    assert overall["unit"] == "images"


def test_refusals_name_what_differs(tmp_path: Path) -> None:
    lines_a, lines_b = _two_families(1)
    a = _write(tmp_path / "a.jsonl", lines_a)
    b = _write(tmp_path / "b.jsonl", [x for x in lines_b if x["task"] == "cycles/f"] + [_line("cycles/h", 0, "c0", 1.0)])
    message = (
        f"{a} and {b} hold different tasks (only in A: ['cycles/g'], only in B: ['cycles/h']); "
        "evaluate both models on the same tasks"
    )
    with pytest.raises(ValueError) as caught:
        compare_samples(a, b)
    assert str(caught.value) == message
    # Another image on seed 1: named by seed, cycle and field.
    moved = [
        {**x, "image_1": "elsewhere"} if (x["seed"], x["cycle_id"], x["task"]) == (1, "c3", "cycles/f") else x for x in lines_b
    ]
    b = _write(tmp_path / "b.jsonl", moved)
    with pytest.raises(ValueError, match=rf"^{a} and {b} are not the same cycles: cycles/f: seed 1 cycle c3 has image_1 "):
        compare_samples(a, b)


def test_item_set_digests_decide_only_when_both_sides_carry_them() -> None:
    one, two = "1" * 64, "2" * 64
    plain = _line("cycles/f", 0, "c0", 1.0)
    a, b = _family([{**plain, "items_sha256": one}]), _family([{**plain, "items_sha256": two}])
    assert item_mismatch("cycles/f", a, b) == f"cycles/f: the item sets differ (items_sha256 ['{one}'] vs ['{two}'])"
    assert item_mismatch("cycles/f", a, _family([plain])) is None  # B carries none
    assert item_mismatch("cycles/f", _family([plain]), b) is None  # A carries none
    assert item_mismatch("cycles/f", a, _family([{**plain, "items_sha256": one, "credit": 0.0}])) is None


def test_a_missing_delta_counts_as_zero_in_the_disagreement_order() -> None:
    a = _family([_line("cycles/f", 0, "c0", 1.0, 0.4), _line("cycles/f", 0, "c1", 1.0, 0.2)])
    b = _family([_line("cycles/f", 0, "c0", 0.0, 0.4), _line("cycles/f", 0, "c1", 0.0, 0.2)])
    for side in (a, b):
        for line in side.values():
            del line["delta"]
    a[0, "c1"]["delta"] = 0.5  # c1: |0.5 - 0| beats c0's |0 - 0|
    assert compare_family(a, b)["disagree_most"] == ["0/c1", "0/c0"]
