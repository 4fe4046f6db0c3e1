"""compare's rules with numbers worked by hand: which cycles enter, how sides align, the "disagree most" order,
each side's recorded CycleAcc, the overall mean over families, and swapping A and B."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
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
